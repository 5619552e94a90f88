/* bench/engine_bench.c: the engine's own overhead. Prints one JSON object:
 *  - ns per element through range -> map(identity) -> batch(256), and the same work as a plain C loop;
 *  - ns per element handed through a parallel map (identity, parallelism 2) and through a prefetch;
 *  - RSS after 1M and after 10M elements of a pipeline with parallel map, shuffle and prefetch.
 * Usage: engine_bench [N]   (N elements per timing run, default 5,000,000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6)) kb = atol(line + 6);
  if (f) fclose(f);
  return kb;
}

/* Runs a spec to the end; returns seconds, and the number of input elements (sum of leading dims) in *n. */
static long g_rss_end; /* RSS at the last element of the latest run_spec, before anything is freed */
static double run_spec(const char *json, int64_t *n, long *rss_mid, int64_t mid_at) {
  sl_pipeline *p;
  if (sl_pipeline_from_json(&p, json, strlen(json), "bench")) {
    fprintf(stderr, "engine_bench: %s\n", sl_error_last());
    exit(1);
  }
  sl_iter *it;
  if (sl_pipeline_iter(&it, p)) {
    fprintf(stderr, "engine_bench: %s\n", sl_error_last());
    exit(1);
  }
  sl_elem e;
  sl_elem_init(&e);
  int64_t k = 0;
  double t0 = now();
  int rc;
  while ((rc = sl_iter_next(&e, it)) == 0) {
    k += e.c[0].rank ? e.c[0].shape[0] : 1;
    sl_elem_clear(&e);
    if (rss_mid && k >= mid_at && *rss_mid < 0) *rss_mid = rss_kb();
  }
  double t = now() - t0;
  g_rss_end = rss_kb();
  if (rc != SL_END) {
    fprintf(stderr, "engine_bench: %s\n", sl_error_last());
    exit(1);
  }
  sl_iter_free(it);
  sl_pipeline_free(p);
  *n = k;
  return t;
}

/* The same work without the engine: produce int64 values and copy them into batches of 256. */
static double direct_loop(int64_t n) {
  int64_t *batch = malloc(256 * sizeof *batch);
  volatile int64_t sink = 0;
  double t0 = now();
  int64_t fill = 0;
  for (int64_t i = 0; i < n; i++) {
    batch[fill++] = i;
    if (fill == 256) {
      int64_t *out = malloc(256 * sizeof *out); /* a batch is a new tensor, as in the engine */
      memcpy(out, batch, 256 * sizeof *out);
      sink += out[255];
      free(out);
      fill = 0;
    }
  }
  double t = now() - t0;
  free(batch);
  (void)sink;
  return t;
}

static double median3(double a, double b, double c) {
  return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

int main(int argc, char **argv) {
  int64_t N = argc > 1 ? atoll(argv[1]) : 5000000;
  char spec[1024];
  int64_t n;
  double direct[3], sync[3], pmap[3], smap[3], pf[3];
  for (int r = 0; r < 3; r++) { /* alternate the configurations, keep medians */
    direct[r] = direct_loop(N) / (double)N * 1e9;
    snprintf(spec, sizeof spec, "{\"ops\": [{\"op\": \"range\", \"stop\": %lld}, {\"op\": \"map\", \"fn\": "
             "\"identity\"}, {\"op\": \"batch\", \"size\": 256}]}", (long long)N);
    sync[r] = run_spec(spec, &n, NULL, 0) / (double)n * 1e9;
    snprintf(spec, sizeof spec, "{\"ops\": [{\"op\": \"range\", \"stop\": %lld}, {\"op\": \"map\", \"fn\": "
             "\"identity\"}]}", (long long)(N / 5));
    smap[r] = run_spec(spec, &n, NULL, 0) / (double)n * 1e9;
    snprintf(spec, sizeof spec, "{\"ops\": [{\"op\": \"range\", \"stop\": %lld}, {\"op\": \"map\", \"fn\": "
             "\"identity\", \"parallelism\": 2, \"buffer\": 64}]}", (long long)(N / 5));
    pmap[r] = run_spec(spec, &n, NULL, 0) / (double)n * 1e9;
    snprintf(spec, sizeof spec, "{\"ops\": [{\"op\": \"range\", \"stop\": %lld}, {\"op\": \"prefetch\", \"buffer\": "
             "64}]}", (long long)(N / 5));
    pf[r] = run_spec(spec, &n, NULL, 0) / (double)n * 1e9;
  }
  long rss1 = -1;
  int64_t R = argc > 2 ? atoll(argv[2]) : 10000000;
  snprintf(spec, sizeof spec, "{\"ops\": [{\"op\": \"range\", \"stop\": %lld}, {\"op\": \"map\", \"fn\": "
           "\"identity\", \"parallelism\": 2}, {\"op\": \"shuffle\", \"buffer\": 10000}, {\"op\": \"batch\", "
           "\"size\": 256}, {\"op\": \"prefetch\", \"buffer\": 4}]}", (long long)R);
  double tr = run_spec(spec, &n, &rss1, R / 10);
  long rss10 = g_rss_end;
  double sm = median3(smap[0], smap[1], smap[2]), pm = median3(pmap[0], pmap[1], pmap[2]);
  printf("{\"elements\": %lld, \"direct_ns\": %.1f, \"sync_chain_ns\": %.1f, \"sync_map_ns\": %.1f, "
         "\"parallel_map_ns\": %.1f, \"parallel_handoff_ns\": %.1f, \"prefetch_ns\": %.1f, \"rss_1m_kb\": %ld, "
         "\"rss_10m_kb\": %ld, \"rss_run_seconds\": %.2f}\n",
         (long long)N, median3(direct[0], direct[1], direct[2]), median3(sync[0], sync[1], sync[2]), sm, pm, pm - sm,
         median3(pf[0], pf[1], pf[2]), rss1, rss10, tr);
  return 0;
}
