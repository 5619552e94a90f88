/* trace/trace_handoff.c: the hand-off probe. Measures, once per process, what the engine's thread boundaries cost
 * per element on this machine now (beside the machine probe in trace_machine.c); the planner's model charges it
 * for every thread boundary a plan adds. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "trace/trace_int.h"

static double proc_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Process CPU seconds per element of `n` elements of `spec` (-1 on failure). */
static double cpu_per_element(const char *spec, int n) {
  sl_pipeline *p = NULL;
  sl_iter *it = NULL;
  if (sl_pipeline_from_json(&p, spec, strlen(spec), "<hand-off probe>") || sl_pipeline_iter(&it, p)) {
    sl_pipeline_free(p);
    return -1;
  }
  sl_elem e;
  sl_elem_init(&e);
  double c0 = proc_cpu_s(), r = -1;
  int k = 0;
  for (; k < n && sl_iter_next(&e, it) == 0; k++) sl_elem_clear(&e);
  if (k == n) r = (proc_cpu_s() - c0) / n;
  sl_iter_free(it);
  sl_pipeline_free(p);
  return r;
}

/* Per-boundary hand-off cost of elements whose function spins `us` microseconds: the same work run sync, then
 * through a parallel map and a prefetch (two thread boundaries); the difference in process CPU per element,
 * halved. */
static double probe_handoff(int us, int n, int buffer) {
  char sync[160], async[256];
  snprintf(sync, sizeof sync, "{\"ops\": [{\"op\": \"range\"}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": "
           "{\"us\": %d}}]}", us);
  snprintf(async, sizeof async, "{\"ops\": [{\"op\": \"range\"}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": "
           "{\"us\": %d}, \"parallelism\": 2, \"buffer\": %d}, {\"op\": \"prefetch\", \"buffer\": %d}]}", us, buffer,
           buffer);
  double a = cpu_per_element(sync, n), b = cpu_per_element(async, n);
  return a >= 0 && b >= 0 && b > a ? (b - a) / 2 : 0;
}

/* The engine's own hand-off costs on this machine, now, for expensive elements (handed over one at a time) and
 * cheap ones (handed over in chunks). About 0.1 s, once per process. Measured rather than assumed because they
 * move with the machine and its load (wake-ups and context switches cost several times more on a busy VM). */
static double g_h_exp = -1, g_h_cheap = -1;
static pthread_once_t g_handoff_once = PTHREAD_ONCE_INIT;

static void measure_handoff(void) {
  g_h_exp = probe_handoff(30, 1000, SL__HANDOFF_RUN_BUFFER); /* the ring the planner gives a parallel map */
  g_h_cheap = probe_handoff(1, 10000, SL__HANDOFF_CHEAP_BUFFER); /* the buffers the planner gives cheap elements */
  sl_error_clear();
}

void sl__trace_handoff_costs(double *expensive, double *cheap) {
  pthread_once(&g_handoff_once, measure_handoff);
  *expensive = g_h_exp;
  *cheap = g_h_cheap;
}

