/* state_bench.c: the costs of a run's saved position (issue 37) on a spec, printed as one JSON line:
 *   size      bytes of a state (median and largest over the states taken)
 *   take_ms   time to take one (sl_iter_state: the chain held still, refs written), median and largest
 *   first_ms  time from start to the first element, fresh (sl_pipeline_iter) and restored (sl_pipeline_iter_at from
 *             a state taken mid-epoch), medians over alternating trials
 *   rate      elements/s of whole epochs with no state taken and with one every EVERY elements, alternating runs
 *   held      bytes of the elements the state stands for (a shuffle's buffer and everything made ahead, as tf.data's
 *             checkpoint would hold them: computed from the elements' sizes at the cut, not measured from tf.data)
 * usage: state_bench SPEC [--cut N] [--every N] [--rounds R] (run from the directory the spec's globs are relative
 * to). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "sluice.h"

static double now(void) { return bench_clock(CLOCK_MONOTONIC); }
static void die(const char *what) {
  fprintf(stderr, "state_bench: %s: %s\n", what, sl_error_last());
  exit(1);
}

/* Pulls one element; returns its bytes (0 at the end). */
static size_t pull(sl_iter *it) {
  sl_elem e;
  sl_elem_init(&e);
  int rc = sl_iter_next(&e, it);
  if (rc < 0) die("next");
  if (rc) return 0;
  size_t b = sl_elem_bytes(&e);
  sl_elem_clear(&e);
  return b ? b : 1;
}

/* One whole epoch; a state taken every `every` elements (0: none). Returns elements/s. */
static double epoch_rate(sl_pipeline *p, long every, int epoch) {
  sl_pipeline_set_epoch(p, (uint64_t)epoch);
  sl_iter *it;
  if (sl_pipeline_iter(&it, p)) die("iter");
  if (every) sl_iter_keep_state(it);
  double t0 = now();
  long n = 0;
  while (pull(it)) {
    n++;
    if (every && n % every == 0) {
      void *buf;
      size_t len;
      if (sl_iter_state(it, &buf, &len)) die("state");
      sl_free(buf);
    }
  }
  double dt = now() - t0;
  sl_iter_free(it);
  return (double)n / dt;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: state_bench SPEC [--cut N] [--every N] [--rounds R]\n");
    return 2;
  }
  long cut = 10, every = 10;
  int rounds = 5;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--cut")) cut = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--every")) every = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
  }
  sl_pipeline *p;
  if (sl_pipeline_from_file(&p, argv[1])) die(argv[1]);
  /* States: one per element up to the cut (the first elements' states are the largest: buffers full). */
  double take[256], size[256], elem_bytes = 0;
  int nt = 0;
  void *state = NULL;
  size_t state_len = 0;
  sl_iter *it;
  sl_pipeline_set_epoch(p, 0);
  if (sl_pipeline_iter(&it, p)) die("iter");
  sl_iter_keep_state(it); /* as sluice run --save-state and sluice.torch.Dataset do */
  for (long k = 1; k <= cut; k++) {
    size_t b = pull(it);
    if (!b) break;
    elem_bytes = (double)b;
    void *buf;
    size_t len;
    double t0 = now();
    if (sl_iter_state(it, &buf, &len)) die("state");
    if (nt < 256) {
      take[nt] = (now() - t0) * 1e3;
      size[nt++] = (double)len;
    }
    sl_free(state);
    state = buf;
    state_len = len;
  }
  /* What the state stands for, held as bytes: the op's buffered bytes at the cut (the stats' held bytes). */
  double held = 0;
  for (int i = 0; i < sl_pipeline_op_count(p); i++) {
    sl_op_stats st;
    if (sl_pipeline_op_stats(&st, p, i) == 0) held += (double)st.bytes_held;
  }
  sl_iter_free(it);
  double fresh[64], restored[64];
  int nf = rounds < 64 ? rounds : 64;
  for (int r = 0; r < nf; r++) {
    sl_pipeline_set_epoch(p, 0);
    double t0 = now();
    if (sl_pipeline_iter(&it, p)) die("iter");
    pull(it);
    fresh[r] = (now() - t0) * 1e3;
    sl_iter_free(it);
    t0 = now();
    if (sl_pipeline_iter_at(&it, p, state, state_len)) die("iter_at");
    pull(it);
    restored[r] = (now() - t0) * 1e3;
    sl_iter_free(it);
  }
  double without[64], with[64];
  for (int r = 0; r < nf; r++) { /* alternating */
    without[r] = epoch_rate(p, 0, r);
    with[r] = epoch_rate(p, every, r);
  }
  double tmax = 0, smax = 0;
  for (int i = 0; i < nt; i++) {
    if (take[i] > tmax) tmax = take[i];
    if (size[i] > smax) smax = size[i];
  }
  printf("{\"states\": %d, \"size_median\": %.0f, \"size_max\": %.0f, \"take_ms_median\": %.4f, \"take_ms_max\": %.4f, "
         "\"first_ms_fresh\": %.2f, \"first_ms_restored\": %.2f, \"rate_without\": %.2f, \"rate_with\": %.2f, "
         "\"rate_with_min\": %.2f, \"rate_without_min\": %.2f, \"every\": %ld, \"rounds\": %d, \"held_bytes\": %.0f, "
         "\"element_bytes\": %.0f}\n",
         nt, bench_median(size, nt), smax, bench_median(take, nt), tmax, bench_median(fresh, nf), bench_median(restored, nf),
         bench_median(without, nf), bench_median(with, nf), with[0], without[0], every, nf, held, elem_bytes);
  sl_free(state);
  sl_pipeline_free(p);
  return 0;
}
