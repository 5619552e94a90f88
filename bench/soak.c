/* bench/soak.c: long-run checks. (1) A pipeline with parallel map, shuffle and prefetch over N elements (default
 * 50 million): RSS is sampled after warm-up (10% of N) and then every 5%; the run passes when every sample stays
 * within 5% of the warm-up value. (2) C start/stop cycles (default 1000) of a threaded pipeline: thread count and
 * RSS must come back to where they started. Prints a JSON summary; exit 1 on failure.
 * Usage: soak [N] [C] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice.h"

static long status_field(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  size_t kl = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, key, kl)) v = atol(line + kl);
  if (f) fclose(f);
  return v;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static sl_pipeline *build(const char *js) {
  sl_pipeline *p;
  if (sl_pipeline_from_json(&p, js, strlen(js), "soak")) {
    fprintf(stderr, "soak: %s\n", sl_error_last());
    exit(2);
  }
  return p;
}

int main(int argc, char **argv) {
  long long N = argc > 1 ? atoll(argv[1]) : 50000000LL;
  int C = argc > 2 ? atoi(argv[2]) : 1000;
  char js[1024];
  snprintf(js, sizeof js, "{\"seed\": 1, \"ops\": [{\"op\": \"range\", \"stop\": %lld}, {\"op\": \"map\", \"fn\": "
           "\"identity\", \"parallelism\": 2}, {\"op\": \"shuffle\", \"buffer\": 10000}, {\"op\": \"prefetch\", "
           "\"buffer\": 64}]}", N);
  sl_pipeline *p = build(js);
  sl_iter *it;
  if (sl_pipeline_iter(&it, p)) return 2;
  sl_elem e;
  sl_elem_init(&e);
  long long n = 0, step = N / 20 > 0 ? N / 20 : 1, warm = N / 10;
  long base = -1, worst = 0;
  int samples = 0;
  double t0 = now();
  int rc;
  while ((rc = sl_iter_next(&e, it)) == 0) {
    sl_elem_clear(&e);
    n++;
    if (n == warm) base = status_field("VmRSS:");
    else if (n > warm && (n - warm) % step == 0) {
      long r = status_field("VmRSS:");
      long d = labs(r - base);
      if (d > worst) worst = d;
      samples++;
    }
  }
  double secs = now() - t0;
  sl_iter_free(it);
  sl_pipeline_free(p);
  if (rc != SL_END) {
    fprintf(stderr, "soak: %s\n", sl_error_last());
    return 2;
  }
  double drift = base > 0 ? 100.0 * (double)worst / (double)base : 0;

  /* start/stop cycles */
  p = build("{\"ops\": [{\"op\": \"range\"}, {\"op\": \"interleave\", \"cycle_length\": 2, \"parallelism\": 2, "
            "\"source\": [{\"op\": \"repeat\", \"count\": 3}]}, {\"op\": \"map\", \"fn\": \"identity\", "
            "\"parallelism\": 2}, {\"op\": \"prefetch\", \"buffer\": 4}]}");
  long th0 = status_field("Threads:"), rss0 = -1;
  for (int c = 0; c < C; c++) {
    if (sl_pipeline_iter(&it, p)) return 2;
    for (int k = 0; k < 1 + c % 50; k++) {
      if (sl_iter_next(&e, it)) return 2;
      sl_elem_clear(&e);
    }
    sl_iter_free(it);
    if (c == C / 10) rss0 = status_field("VmRSS:");
  }
  long th1 = status_field("Threads:"), rss1 = status_field("VmRSS:");
  sl_pipeline_free(p);
  /* Under sanitizers RSS measures their quarantine and shadow memory, not ours: SOAK_IGNORE_RSS=1 checks threads
   * only (leaks are the sanitizer's own report). */
  bool check_rss = !getenv("SOAK_IGNORE_RSS");
  bool ok = (!check_rss || (drift <= 5.0 && rss1 - rss0 < rss0 / 20 + 512)) && th1 == th0;
  printf("{\"elements\": %lld, \"seconds\": %.1f, \"rss_warm_kb\": %ld, \"rss_worst_drift_kb\": %ld, "
         "\"rss_drift_pct\": %.2f, \"samples\": %d, \"cycles\": %d, \"threads_before\": %ld, \"threads_after\": %ld, "
         "\"cycle_rss_kb\": [%ld, %ld], \"ok\": %s}\n",
         n, secs, base, worst, drift, samples, C, th0, th1, rss0, rss1, ok ? "true" : "false");
  return ok ? 0 : 1;
}
