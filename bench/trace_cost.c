/* bench/trace_cost.c: what sampled timing (the tracer's clocks) costs a synchronous pipeline, measured so that a
 * noisy machine cancels out. Two instances of SPEC run in this one thread, one timed as always and one with its
 * samplers off (the untraced twin, like SL_NO_TIMING); they take turns in short slices (ABBA order), and each
 * slice's thread CPU time is charged to its instance. Drifts in machine speed (other tenants, frequency) hit
 * both alike, which separate runs seconds apart do not. SPEC must be synchronous (no worker threads): only the
 * calling thread's CPU is counted. Prints one JSON object.
 * Usage: trace_cost SPEC [SECONDS] [SLICE_MS]   (defaults 6 s of slices, 20 ms each) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/pipeline_int.h"
#include "sluice.h"

static double clk(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

typedef struct {
  sl_pipeline *p;
  sl_iter *it;
  double cpu;   /* thread CPU seconds in its slices */
  long long n;  /* elements taken in its slices */
} twin;

static int open_twin(twin *t, const char *path, bool timed) {
  if (sl_pipeline_from_file(&t->p, path)) return 1;
  sl__pipeline_set_no_timing(t->p, !timed);
  return sl_pipeline_iter(&t->it, t->p);
}

/* Takes elements from t for about `ms` milliseconds of thread CPU (at least one element) when *count is 0, else
 * exactly *count elements; sets *count to the number taken. */
static int slice(twin *t, double ms, long long *count, sl_elem *e) {
  double c0 = clk(CLOCK_THREAD_CPUTIME_ID), c = c0;
  long long k = 0;
  while (*count ? k < *count : c - c0 < ms * 1e-3) {
    int rc = sl_iter_next(e, t->it);
    if (rc) return rc;
    sl_elem_clear(e);
    k++;
    if (!*count) c = clk(CLOCK_THREAD_CPUTIME_ID);
  }
  t->cpu += clk(CLOCK_THREAD_CPUTIME_ID) - c0;
  t->n += k;
  *count = k;
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help")) {
    fprintf(stderr, "usage: trace_cost SPEC [SECONDS] [SLICE_MS]\n");
    return 2;
  }
  double secs = argc > 2 ? atof(argv[2]) : 6.0, ms = argc > 3 ? atof(argv[3]) : 20.0;
  if (!(secs > 0) || !(ms > 0)) {
    fprintf(stderr, "trace_cost: SECONDS and SLICE_MS must be > 0\n");
    return 2;
  }
  twin a = {0}, b = {0};
  int slices = 0, np = 0, cap = 1024;
  double *ratio = malloc((size_t)cap * sizeof *ratio); /* per pair: traced CPU / untraced CPU, same elements */
  sl_elem e;
  sl_elem_init(&e);
  int rc = 0;
  if (!ratio) {
    fprintf(stderr, "trace_cost: out of memory\n");
    rc = SL_ENOMEM;
  } else if (open_twin(&a, argv[1], true) || open_twin(&b, argv[1], false)) {
    rc = SL_EINVAL; /* reported below with the library's message */
  }
  /* Warm-up: fill both instances' buffers (shuffle, caches of files) before anything is counted. */
  for (int i = 0; i < 2 && !rc; i++) {
    long long k = 0;
    if (!(rc = slice(&a, 250, &k, &e))) rc = slice(&b, 250, &k, &e);
  }
  a.cpu = b.cpu = 0;
  a.n = b.n = 0;
  for (double t0 = clk(CLOCK_MONOTONIC); !rc && clk(CLOCK_MONOTONIC) - t0 < secs; slices += 2) {
    /* A B B A A B ...: the second of a pair takes as many elements as the first, so both twins make the same
     * elements (same spec, same seed) in step. */
    twin *first = slices % 4 ? &b : &a, *second = slices % 4 ? &a : &b;
    long long k = 0;
    double ca = a.cpu, cb = b.cpu;
    rc = slice(first, ms, &k, &e);
    if (!rc) rc = slice(second, ms, &k, &e);
    if (!rc && b.cpu > cb) {
      if (np == cap) {
        double *r = realloc(ratio, (size_t)(cap *= 2) * sizeof *ratio);
        if (!r) {
          fprintf(stderr, "trace_cost: out of memory\n");
          rc = SL_ENOMEM;
          break;
        }
        ratio = r;
      }
      ratio[np++] = (a.cpu - ca) / (b.cpu - cb);
    }
  }
  if (np) qsort(ratio, (size_t)np, sizeof *ratio, cmp_double);
  if (rc && rc != SL_END && rc != SL_ENOMEM) fprintf(stderr, "trace_cost: %s\n", sl_error_last()); /* names the spec */
  if (rc == 0 || rc == SL_END) {
    double ta = a.n ? a.cpu / (double)a.n : 0, tb = b.n ? b.cpu / (double)b.n : 0;
    /* The median pair is the figure (a pair a preemption or a neighbour's burst hit is an outlier); the quartiles
     * show the spread; the totals' ratio is given too. */
    double med = np ? ratio[np / 2] - 1 : 0, q1 = np ? ratio[np / 4] - 1 : 0, q3 = np ? ratio[3 * np / 4] - 1 : 0;
    printf("{\"spec\": \"%s\", \"slices\": %d, \"traced_ns_per_element\": %.1f, \"untraced_ns_per_element\": %.1f, "
           "\"cost\": %.5f, \"cost_q1\": %.5f, \"cost_q3\": %.5f, \"cost_of_totals\": %.5f, \"ended\": %s}\n",
           argv[1], slices, ta * 1e9, tb * 1e9, med, q1, q3, tb > 0 ? ta / tb - 1 : 0, rc == SL_END ? "true" : "false");
  }
  sl_iter_free(a.it);
  sl_iter_free(b.it);
  sl_pipeline_free(a.p);
  sl_pipeline_free(b.p);
  free(ratio);
  return rc == 0 || rc == SL_END ? 0 : 1;
}
