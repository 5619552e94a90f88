/* bench/runq_cost.c: what one read of a thread's run-queue delay costs (sl__runq_ns: a pread of
 * /proc/thread-self/schedstat on a descriptor kept per thread), beside the clock reads a sampled call already makes
 * (the thread CPU clock, the monotonic clock). A sampled call that reads the CPU clock makes two such reads.
 * Medians of 21 rounds of N reads each, in thread CPU and wall ns per read; prints one JSON object.
 * Usage: runq_cost [N]   (default 20000) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ops/op_async_int.h"

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

enum { ROUNDS = 21 };

/* Median ns per call of `f` over ROUNDS rounds of n calls: wall and thread CPU. */
static void cost(uint64_t (*f)(void), long n, double *wall, double *cpu) {
  double w[ROUNDS], c[ROUNDS];
  volatile uint64_t sink = 0;
  for (int r = 0; r < ROUNDS; r++) {
    uint64_t w0 = sl__now_ns(), c0 = sl__cpu_ns();
    for (long i = 0; i < n; i++) sink += f();
    c[r] = (double)(sl__cpu_ns() - c0) / (double)n;
    w[r] = (double)(sl__now_ns() - w0) / (double)n;
  }
  (void)sink;
  qsort(w, ROUNDS, sizeof w[0], cmp_double);
  qsort(c, ROUNDS, sizeof c[0], cmp_double);
  *wall = w[ROUNDS / 2];
  *cpu = c[ROUNDS / 2];
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 20000;
  if (n < 1) n = 1;
  if (sl__runq_ns() == SL__RUNQ_NONE) {
    printf("{\"runq_available\": false}\n");
    return 0;
  }
  double rw, rc, cw, cc, mw, mc;
  cost(sl__runq_ns, n, &rw, &rc);
  cost(sl__cpu_ns, n, &cw, &cc);
  cost(sl__now_ns, n, &mw, &mc);
  printf("{\"runq_available\": true, \"reads\": %ld, \"runq_read_ns\": {\"wall\": %.0f, \"cpu\": %.0f}, "
         "\"cpu_clock_ns\": {\"wall\": %.0f, \"cpu\": %.0f}, \"mono_clock_ns\": {\"wall\": %.1f, \"cpu\": %.1f}}\n",
         n, rw, rc, cw, cc, mw, mc);
  return 0;
}
