/* test_parallel.c: the threaded ops (parallel map, parallel interleave, prefetch): order, determinism with a seed
 * whatever the parallelism, errors at the right element, cancellation, clean shutdown, and a random-spec stress.
 * SL_TEST_THREADED SL_TEST_TIMEOUT(300) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ops/op_async_int.h" /* the hand-off helpers; the knobs in force (active_par, active_buf), which a live tuner changes */
#include "testutil.h"


static int rand_call(void *st, sl_elem *e, sl_fn_call *call) {
  sl_rng r;
  sl_rng_seed(&r, call->seed);
  return sl_elem_set_i64(e, "r", (int64_t)(sl_rng_u64(&r) % 1000000007));
}
static int fail_at_call(void *st, sl_elem *e, sl_fn_call *call) {
  int64_t v;
  sl_comp_get_i64(&v, sl_elem_get(e, "value"));
  if (v == 37) return sl_error_set(SL_EINVAL, "bad value %lld", (long long)v);
  return 0;
}
/* Sleeps a pseudo-random 0-200 us so parallel workers finish out of order. */
static int jitter_call(void *st, sl_elem *e, sl_fn_call *call) {
  usleep((useconds_t)(call->seed % 200));
  return 0;
}

/* Drops the elements whose value is 3 mod 7 (as parse_csv's on_error "skip" drops bad lines). */
static int drop_call(void *st, sl_elem *e, sl_fn_call *call) {
  int64_t v;
  sl_comp_get_i64(&v, sl_elem_get(e, "value"));
  if (v % 7 == 3) call->keep = false;
  return 0;
}
/* Fails on the elements whose value is 3 mod 7 (for on_error "skip"). */
static int failmod_call(void *st, sl_elem *e, sl_fn_call *call) {
  int64_t v;
  sl_comp_get_i64(&v, sl_elem_get(e, "value"));
  if (v % 7 == 3) return sl_error_set(SL_EINVAL, "bad value %lld", (long long)v);
  return 0;
}
/* Fails on the element at input position "at" (per nested chain inside an interleave). */
static int failat_init(void **st, const sl_args *a, void *payload) {
  int64_t *at = malloc(sizeof *at);
  if (!at) return SL_ENOMEM;
  sl_args_int(at, a, "at", 0);
  *st = at;
  return 0;
}
static int failat_call(void *st, sl_elem *e, sl_fn_call *call) {
  if ((int64_t)call->index == *(int64_t *)st) return sl_error_set(SL_EINVAL, "bad element %llu", (unsigned long long)call->index);
  return 0;
}

static int setup(void **s) {
  sl_fn_def r = {SL_FN_DEF_VERSION, SL_FN_RANDOM, NULL, rand_call, NULL};
  sl_fn_def f = {SL_FN_DEF_VERSION, 0, NULL, fail_at_call, NULL};
  sl_fn_def j = {SL_FN_DEF_VERSION, 0, NULL, jitter_call, NULL};
  assert_int_equal(sl_fn_register("t_rand", &r, NULL), 0);
  assert_int_equal(sl_fn_register("t_fail37", &f, NULL), 0);
  assert_int_equal(sl_fn_register("t_jitter", &j, NULL), 0);
  sl_fn_def d = {SL_FN_DEF_VERSION, 0, NULL, drop_call, NULL};
  sl_fn_def fa = {SL_FN_DEF_VERSION, 0, failat_init, failat_call, free};
  assert_int_equal(sl_fn_register("t_drop", &d, NULL), 0);
  assert_int_equal(sl_fn_register("t_failat", &fa, NULL), 0);
  sl_fn_def fm = {SL_FN_DEF_VERSION, 0, NULL, failmod_call, NULL};
  assert_int_equal(sl_fn_register("t_failmod", &fm, NULL), 0);
  return 0;
}

static void test_parallel_map_keeps_order_and_seeds(void **s) {
  int64_t base[300], got[300], rv[300], rv1[300];
  for (int par = 1; par <= 4; par++) {
    sl_pipeline *p = tu_pipelinef("{\"seed\": 9, \"ops\": [{\"op\": \"range\", \"stop\": 300}, {\"op\": \"map\", \"fn\": "
                       "\"t_jitter\", \"parallelism\": %d}, {\"op\": \"map\", \"fn\": \"t_rand\", \"parallelism\": %d, "
                       "\"buffer\": %d}]}", par, par, par * 2);
    assert_int_equal(tu_collect_i64(p, "value", got, 300), 300);
    assert_int_equal(tu_collect_i64(p, "r", rv, 300), 300);
    for (int i = 0; i < 300; i++) assert_int_equal(got[i], i);
    if (par == 1) memcpy(rv1, rv, sizeof rv);
    else assert_memory_equal(rv1, rv, sizeof rv); /* same randomness whatever the parallelism */
    sl_pipeline_free(p);
  }
  (void)base;
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static void test_unordered_map_loses_nothing(void **s) {
  int64_t got[500];
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 500}, {\"op\": \"map\", \"fn\": \"t_jitter\", "
                     "\"parallelism\": 3, \"deterministic\": false}]}");
  assert_int_equal(tu_collect_i64(p, "value", got, 500), 500);
  qsort(got, 500, sizeof got[0], cmp64);
  for (int i = 0; i < 500; i++) assert_int_equal(got[i], i);
  sl_pipeline_free(p);
}

static void test_parallel_map_error_at_the_right_element(void **s) {
  for (int par = 2; par <= 4; par++) {
    /* small buffer: workers are blocked on a full buffer when the error happens */
    sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 1000}, {\"op\": \"map\", \"fn\": \"t_fail37\", "
                       "\"parallelism\": %d, \"buffer\": %d}, {\"op\": \"prefetch\", \"buffer\": 2}]}", par, par);
    assert_int_equal(tu_count(p, SL_EINVAL), 37);
    assert_non_null(strstr(sl_error_last(), "element 37"));
    assert_non_null(strstr(sl_error_last(), "ops[1]"));
    sl_pipeline_free(p);
  }
}

static void test_errors_are_sticky(void **s) {
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 100}, {\"op\": \"map\", \"fn\": \"t_fail37\", "
                     "\"parallelism\": 2}]}");
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  int rc;
  while ((rc = sl_iter_next(&e, it)) == 0) sl_elem_clear(&e);
  assert_int_equal(rc, SL_EINVAL);
  assert_int_equal(sl_iter_next(&e, it), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "element 37"));
  sl_iter_free(it);
  sl_pipeline_free(p);
}

static void test_parallel_interleave_matches_sequential(void **s) {
  int64_t seq[400], par[400];
  const char *spec = "{\"ops\": [{\"op\": \"range\", \"stop\": 20}, {\"op\": \"interleave\", \"cycle_length\": 4, "
                     "\"block_length\": 3, \"parallelism\": %d, \"source\": [{\"op\": \"repeat\", \"count\": 20}, "
                     "{\"op\": \"map\", \"fn\": \"t_jitter\"}]}]}";
  sl_pipeline *p = tu_pipelinef(spec, 1);
  assert_int_equal(tu_collect_i64(p, "value", seq, 400), 400);
  sl_pipeline_free(p);
  for (int k = 2; k <= 4; k++) {
    p = tu_pipelinef(spec, k);
    assert_int_equal(tu_collect_i64(p, "value", par, 400), 400);
    assert_memory_equal(seq, par, sizeof seq);
    sl_pipeline_free(p);
  }
  p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 20}, {\"op\": \"interleave\", \"cycle_length\": 4, \"parallelism\": "
        "3, \"deterministic\": false, \"source\": [{\"op\": \"repeat\", \"count\": 20}, {\"op\": \"map\", \"fn\": "
        "\"t_jitter\"}]}]}");
  assert_int_equal(tu_collect_i64(p, "value", par, 400), 400);
  qsort(par, 400, sizeof par[0], cmp64);
  for (int i = 0; i < 400; i++) assert_int_equal(par[i], i / 20);
  sl_pipeline_free(p);
}

static void test_nested_error_surfaces(void **s) {
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"start\": 30, \"stop\": 40}, {\"op\": \"interleave\", "
                     "\"cycle_length\": 3, \"parallelism\": 2, \"source\": [{\"op\": \"map\", \"fn\": \"t_fail37\"}]}]}");
  assert_int_equal(tu_count(p, SL_EINVAL), 7);
  assert_non_null(strstr(sl_error_last(), "ops[1].source[0]"));
  sl_pipeline_free(p);
}

/* The consumer counts the elements it has seen (seen); the cancelling thread waits for the first one, so that the
 * cancel falls mid-stream whatever the load (a fixed delay from the start may come before any element). */
typedef struct {
  sl_iter *it;
  atomic_llong seen;
} cancel_arg;
static void *canceller(void *a) {
  cancel_arg *c = a;
  while (atomic_load(&c->seen) == 0) usleep(200);
  usleep(20000);
  sl_iter_cancel(c->it);
  return NULL;
}

static void test_cancel_from_another_thread(void **s) {
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\"}, {\"op\": \"map\", \"fn\": \"sleep_io\", \"args\": {\"us\": 1000}, "
                     "\"parallelism\": 2}, {\"op\": \"prefetch\", \"buffer\": 4}]}");
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  cancel_arg a = {it, 0};
  pthread_t t;
  pthread_create(&t, NULL, canceller, &a);
  sl_elem e;
  sl_elem_init(&e);
  int rc;
  int64_t n = 0;
  while ((rc = sl_iter_next(&e, it)) == 0) {
    sl_elem_clear(&e);
    atomic_store(&a.seen, ++n);
  }
  pthread_join(t, NULL);
  assert_int_equal(rc, SL_ECANCELED);
  assert_true(n > 0);
  sl_iter_free(it);
  sl_pipeline_free(p);
}

static void test_early_free_joins_everything(void **s) {
  /* 200 runs stopped after a few elements with every async op busy: no leak, no hang (sanitizers check) */
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\"}, {\"op\": \"interleave\", \"cycle_length\": 3, \"parallelism\": "
                     "2, \"source\": [{\"op\": \"repeat\", \"count\": 5}]}, {\"op\": \"map\", \"fn\": \"t_rand\", "
                     "\"parallelism\": 3}, {\"op\": \"prefetch\", \"buffer\": 3}, {\"op\": \"shuffle\", \"buffer\": 8}]}");
  for (int i = 0; i < 200; i++) {
    sl_iter *it;
    assert_int_equal(sl_pipeline_iter(&it, p), 0);
    sl_elem e;
    sl_elem_init(&e);
    for (int k = 0; k < i % 7; k++) {
      assert_int_equal(sl_iter_next(&e, it), 0);
      sl_elem_clear(&e);
    }
    sl_iter_free(it);
  }
  sl_pipeline_free(p);
}

/* Random specs with random knobs: the count must match the same spec run with every parallelism at 1. */
static void test_random_spec_stress(void **s) {
  uint64_t seed = 12345;
  sl_rng r;
  sl_rng_seed(&r, seed);
  for (int round = 0; round < 40; round++) {
    int n = 50 + (int)(sl_rng_u64(&r) % 300);
    int p1 = 1 + (int)(sl_rng_u64(&r) % 4), p2 = 1 + (int)(sl_rng_u64(&r) % 3), b = 1 + (int)(sl_rng_u64(&r) % 9);
    int cyc = 1 + (int)(sl_rng_u64(&r) % 4), rep = 1 + (int)(sl_rng_u64(&r) % 3), pf = 1 + (int)(sl_rng_u64(&r) % 4);
    bool det = sl_rng_u64(&r) % 4 != 0, drop = sl_rng_u64(&r) % 2;
    const char *fmt = "{\"seed\": %d, \"ops\": [{\"op\": \"range\", \"stop\": %d}, {\"op\": \"interleave\", "
                      "\"cycle_length\": %d, \"parallelism\": %d, \"source\": [{\"op\": \"repeat\", \"count\": %d}]}, "
                      "{\"op\": \"map\", \"fn\": \"t_rand\", \"parallelism\": %d, \"deterministic\": %s}, "
                      "{\"op\": \"shuffle\", \"buffer\": %d}, {\"op\": \"batch\", \"size\": %d, \"drop_remainder\": %s},"
                      " {\"op\": \"prefetch\", \"buffer\": %d}]}";
    sl_pipeline *a = tu_pipelinef(fmt, round, n, cyc, p2 > cyc ? cyc : p2, rep, p1, det ? "true" : "false", b * 3, b,
                       drop ? "true" : "false", pf);
    sl_pipeline *z = tu_pipelinef(fmt, round, n, cyc, 1, rep, 1, "true", b * 3, b, drop ? "true" : "false", pf);
    int64_t want = drop ? (int64_t)(n * rep) / b : ((int64_t)(n * rep) + b - 1) / b;
    assert_int_equal(tu_count(a, 0), want);
    assert_int_equal(tu_count(z, 0), want);
    sl_pipeline_free(a);
    sl_pipeline_free(z);
  }
}

static void test_stats_count_elements(void **s) {
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 1000}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": "
                     "{\"us\": 20}, \"parallelism\": 2}, {\"op\": \"batch\", \"size\": 10}, {\"op\": \"prefetch\"}]}");
  assert_int_equal(tu_count(p, 0), 100);
  sl_op_stats st;
  assert_int_equal(sl_pipeline_op_stats(&st, p, 1), 0);
  assert_int_equal(st.elements_out, 1000);
  assert_int_equal(st.elements_in, 1000);
  assert_true(st.async);
  /* 1000 x 20 us of spin = 0.02 s of CPU, estimated from sampled calls: that the map's work is counted is what the
   * mechanism guarantees (an iterator's first call is timed); the estimate's accuracy is bench/trace_cost's. */
  assert_true(st.cpu_seconds > 0);
  assert_int_equal(sl_pipeline_op_stats(&st, p, 3), 0);
  assert_int_equal(st.elements_out, 100);
  sl_pipeline_reset_stats(p);
  assert_int_equal(sl_pipeline_op_stats(&st, p, 1), 0);
  assert_int_equal(st.elements_out, 0);
  assert_int_equal(sl_pipeline_op_stats(&st, p, 9), SL_EINVAL);
  sl_pipeline_free(p);
}

/* ---- hand-off of cheap elements: runs of elements move between threads together ---- */

/* Runs p to its end or first error, collecting "value" (up to max); a slow consumer sleeps `pause_us` after every
 * `every`-th element. Returns the count; *rc gets the final code. */
static int64_t drain(sl_pipeline *p, int64_t *out, int64_t max, int every, int pause_us, int *rc) {
  sl_iter *it = NULL;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  int64_t n = 0;
  while ((*rc = sl_iter_next(&e, it)) == 0) {
    assert_true(n < max);
    assert_int_equal(sl_comp_get_i64(&out[n], sl_elem_get(&e, "value")), 0);
    sl_elem_clear(&e);
    if (++n % (every ? every : 1) == 0 && every) usleep((useconds_t)pause_us);
  }
  sl_iter_free(it);
  return n;
}

/* Runs the spec (a format with one %d: the parallelism) sequentially and in parallel with several consumer
 * speeds: the same elements in the same order, the same error after them; or, when `ordered` is false (and the
 * spec has no error: unordered, an error may overtake the elements before it), the same elements in any order. */
static void expect_same_as_sequential(const char *fmt, int par, bool ordered, int64_t max) {
  int64_t *want = malloc((size_t)max * sizeof *want), *got = malloc((size_t)max * sizeof *got);
  assert_true(want && got);
  int rc1, rc2;
  sl_pipeline *p = tu_pipelinef(fmt, 1);
  int64_t n1 = drain(p, want, max, 0, 0, &rc1);
  sl_pipeline_free(p);
  assert_true(ordered || rc1 == SL_END);
  static const int speeds[][2] = {{0, 0}, {97, 300}, {5, 50}}; /* fast, bursty, slow consumer */
  for (int v = 0; v < 3; v++) {
    p = tu_pipelinef(fmt, par);
    int64_t n2 = drain(p, got, max, speeds[v][0], speeds[v][1], &rc2);
    sl_pipeline_free(p);
    if (n2 != n1 || rc2 != rc1)
      fprintf(stderr, "consumer speed %d: %lld elements then %d, sequential %lld then %d: %s\n", v, (long long)n2,
              rc2, (long long)n1, rc1, fmt);
    assert_int_equal(n2, n1);
    assert_int_equal(rc2, rc1);
    if (!ordered) {
      qsort(want, (size_t)n1, sizeof *want, cmp64);
      qsort(got, (size_t)n2, sizeof *got, cmp64);
    }
    assert_memory_equal(want, got, (size_t)n1 * sizeof *want);
  }
  free(want);
  free(got);
}

static void test_cheap_map_handoff_order_drops_and_counts(void **s) {
  static const int bufs[] = {1, 2, 5, 16, 64};
  for (int par = 2; par <= 3; par++)
    for (int b = 0; b < 5; b++)
      for (int det = 0; det <= 1; det++) {
        const char *fmt = "{\"ops\": [{\"op\": \"range\", \"stop\": 4000}, {\"op\": \"map\", \"fn\": \"t_drop\", "
                          "\"parallelism\": %d, \"buffer\": %d, \"deterministic\": %s}]}";
        sl_pipeline *p = tu_pipelinef(fmt, par, bufs[b] < par ? par : bufs[b], det ? "true" : "false");
        int64_t got[4000];
        int rc;
        int64_t n = drain(p, got, 4000, b == 2 ? 50 : 0, 200, &rc);
        assert_int_equal(rc, SL_END);
        assert_int_equal(n, 4000 - 4000 / 7); /* 571 values are 3 mod 7 below 4000 */
        if (!det) qsort(got, (size_t)n, sizeof got[0], cmp64);
        for (int64_t i = 0, v = 0; i < n; i++, v++) {
          if (v % 7 == 3) v++;
          assert_int_equal(got[i], v);
        }
        sl_op_stats st;
        assert_int_equal(sl_pipeline_op_stats(&st, p, 1), 0);
        assert_int_equal(st.elements_in, 4000);
        assert_int_equal(st.elements_out, n);
        assert_int_equal(st.skipped, 4000 / 7);
        assert_true(st.buffer_occupancy >= 0 && st.buffer_occupancy <= (double)(bufs[b] < par ? par : bufs[b]));
        sl_pipeline_free(p);
      }
}

/* on_error "skip": the elements the function fails on are dropped and counted (as skipped, and as errors
 * skipped), sequential or parallel, ordered or not, whatever the buffer; the rest keep their order. */
static void test_map_on_error_skip(void **s) {
  static const int bufs[] = {1, 2, 5, 64};
  for (int par = 1; par <= 3; par++)
    for (int b = 0; b < 4; b++)
      for (int det = 0; det <= 1; det++) {
        if (par == 1 && (b || !det)) continue;
        const char *fmt = "{\"ops\": [{\"op\": \"range\", \"stop\": 3000}, {\"op\": \"map\", \"fn\": \"t_failmod\", "
                          "\"on_error\": \"skip\", \"parallelism\": %d, \"buffer\": %d, \"deterministic\": %s}]}";
        sl_pipeline *p = tu_pipelinef(fmt, par, bufs[b] < par ? par : bufs[b], det ? "true" : "false");
        static int64_t got[3000];
        int rc;
        int64_t n = drain(p, got, 3000, b == 2 ? 50 : 0, 200, &rc);
        assert_int_equal(rc, SL_END);
        assert_int_equal(n, 3000 - 3000 / 7 - 1); /* 429 values below 3000 are 3 mod 7 */
        if (!det) qsort(got, (size_t)n, sizeof got[0], cmp64);
        for (int64_t i = 0, v = 0; i < n; i++, v++) {
          if (v % 7 == 3) v++;
          assert_int_equal(got[i], v);
        }
        sl_op_stats st;
        assert_int_equal(sl_pipeline_op_stats(&st, p, 1), 0);
        assert_int_equal(st.elements_in, 3000);
        assert_int_equal(st.skipped, 3000 - n);
        assert_int_equal(st.errors_skipped, 3000 - n);
        sl_pipeline_free(p);
      }
  /* The default stays "error": the first bad element stops the run, naming it. */
  for (int par = 1; par <= 2; par++) {
    sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 100}, {\"op\": \"map\", \"fn\": "
                                  "\"t_failmod\", \"parallelism\": %d}]}", par);
    static int64_t got[100];
    int rc;
    assert_int_equal(drain(p, got, 100, 0, 0, &rc), 3);
    assert_int_equal(rc, SL_EINVAL);
    assert_non_null(strstr(sl_error_last(), "element 3"));
    sl_pipeline_free(p);
  }
  /* Only "error" and "skip" are understood, and only on map. */
  sl_pipeline *p = NULL;
  const char *bad = "{\"ops\": [{\"op\": \"range\"}, {\"op\": \"map\", \"fn\": \"t_failmod\", \"on_error\": \"ignore\"}]}";
  assert_int_equal(sl_pipeline_from_json(&p, bad, strlen(bad), NULL), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "ops[1].on_error"));
  bad = "{\"ops\": [{\"op\": \"range\"}, {\"op\": \"filter\", \"fn\": \"length\", \"on_error\": \"skip\"}]}";
  assert_int_equal(sl_pipeline_from_json(&p, bad, strlen(bad), NULL), SL_EINVAL);
}

/* A component name no earlier op makes is a spec error under on_error "skip" too: at build time where the element's
 * structure is known, else (behind a function registered at run time) at the first element, never skipped. */
static void test_on_error_skip_keeps_spec_errors(void **s) {
  sl_pipeline *p = NULL;
  const char *known = "{\"ops\": [{\"op\": \"range\", \"stop\": 50}, {\"op\": \"map\", \"fn\": \"log1p\", "
                      "\"on_error\": \"skip\", \"args\": {\"component\": \"valu\"}}]}";
  assert_int_equal(sl_pipeline_from_json(&p, known, strlen(known), NULL), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "'valu'"));
  for (int par = 1; par <= 2; par++) {
    p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 50}, {\"op\": \"map\", \"fn\": \"t_jitter\"}, "
                     "{\"op\": \"map\", \"fn\": \"log1p\", \"on_error\": \"skip\", \"parallelism\": %d, "
                     "\"args\": {\"component\": \"valu\"}}]}", par);
    static int64_t got[50];
    int rc;
    assert_int_equal(drain(p, got, 50, 0, 0, &rc), 0);
    assert_int_equal(rc, SL_ENOTFOUND);
    assert_non_null(strstr(sl_error_last(), "no component 'valu'"));
    sl_op_stats st;
    assert_int_equal(sl_pipeline_op_stats(&st, p, 2), 0);
    assert_int_equal(st.errors_skipped, 0);
    sl_pipeline_free(p);
  }
}

/* The reasons of the skips: one per message once its numbers are '#', with its count and its first and latest
 * messages in full (one worker: the first noted is the first in order, the latest the last). */
static void test_skip_reasons(void **s) {
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 3000}, {\"op\": \"map\", \"fn\": "
                                "\"t_failmod\", \"on_error\": \"skip\", \"parallelism\": %d}]}", 1);
  static int64_t got[3000];
  int rc;
  char *text = NULL;
  assert_int_equal(sl_pipeline_op_skips(&text, p, 1), 0);
  assert_string_equal(text, "[]");
  sl_free(text);
  drain(p, got, 3000, 0, 0, &rc);
  assert_int_equal(rc, SL_END);
  assert_int_equal(sl_pipeline_op_skips(&text, p, 1), 0);
  assert_string_equal(text, "[{\"reason\":\"ops[#] (map t_failmod), element #: bad value #\",\"count\":429,"
                            "\"first\":\"ops[1] (map t_failmod), element 3: bad value 3\","
                            "\"last\":\"ops[1] (map t_failmod), element 2999: bad value 2999\"}]");
  sl_free(text);
  assert_int_equal(sl_pipeline_op_skips(&text, p, 2), SL_EINVAL);
  sl_pipeline_free(p);
}

static void test_cheap_errors_arrive_in_order(void **s) {
  /* parallel maps with drops before an error, then a prefetch: the error comes after exactly the elements before
   * it, whatever the consumer's speed */
  expect_same_as_sequential("{\"ops\": [{\"op\": \"range\", \"stop\": 6000}, {\"op\": \"map\", \"fn\": \"t_drop\", "
                            "\"parallelism\": %1$d, \"buffer\": 64}, {\"op\": \"map\", \"fn\": \"t_failat\", \"args\": "
                            "{\"at\": 2500}, \"parallelism\": %1$d}, {\"op\": \"prefetch\", \"buffer\": 64}]}", 2, true, 6000);
  /* unordered: the error may overtake elements before it, but nothing is lost twice or made up */
  sl_pipeline *p = tu_pipeline("{\"ops\": [{\"op\": \"range\", \"stop\": 6000}, {\"op\": \"map\", \"fn\": \"t_failat\", "
                               "\"args\": {\"at\": 2500}, \"parallelism\": 3, \"buffer\": 32, \"deterministic\": false}]}");
  static int64_t got[6000];
  int rc;
  int64_t n = drain(p, got, 6000, 0, 0, &rc);
  assert_int_equal(rc, SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "bad element 2500"));
  qsort(got, (size_t)n, sizeof got[0], cmp64);
  for (int64_t i = 0; i < n; i++) {
    assert_true(got[i] != 2500 && got[i] >= 0 && got[i] < 6000);
    if (i) assert_true(got[i] > got[i - 1]);
  }
  sl_pipeline_free(p);
  /* an error in the input of a parallel map (pulled on the workers) */
  expect_same_as_sequential("{\"ops\": [{\"op\": \"range\", \"stop\": 6000}, {\"op\": \"map\", \"fn\": \"t_failat\", "
                            "\"args\": {\"at\": 3001}}, {\"op\": \"map\", \"fn\": \"t_drop\", \"parallelism\": %d, "
                            "\"buffer\": 16}]}", 2, true, 6000);
  /* prefetch alone: its producer makes cheap elements in chunks */
  expect_same_as_sequential("{\"ops\": [{\"op\": \"range\", \"stop\": 6000}, {\"op\": \"map\", \"fn\": \"t_failat\", "
                            "\"args\": {\"at\": 4321}}, {\"op\": \"prefetch\", "
                            "\"buffer\": %d}]}", 40, true, 6000);
}

static void test_cheap_interleave_handoff(void **s) {
  /* cheap nested elements, several block lengths and buffers, the order of the sequential interleave; one nested
   * chain fails in the middle */
  static const char *const fmts[] = {
      "{\"ops\": [{\"op\": \"range\", \"stop\": 7}, {\"op\": \"interleave\", \"cycle_length\": 3, \"block_length\": 2, "
      "\"parallelism\": %d, \"buffer\": 8, \"source\": [{\"op\": \"repeat\", \"count\": 300}, {\"op\": \"map\", \"fn\": "
      "\"t_rand\"}]}]}",
      "{\"ops\": [{\"op\": \"range\", \"stop\": 5}, {\"op\": \"interleave\", \"cycle_length\": 2, \"parallelism\": %d, "
      "\"source\": [{\"op\": \"repeat\", \"count\": 500}]}]}",
      "{\"ops\": [{\"op\": \"range\", \"stop\": 6}, {\"op\": \"interleave\", \"cycle_length\": 4, \"block_length\": 3, "
      "\"parallelism\": %d, \"buffer\": 33, \"source\": [{\"op\": \"repeat\", \"count\": 400}, {\"op\": \"map\", "
      "\"fn\": \"t_failat\", \"args\": {\"at\": 250}}]}]}",
      "{\"ops\": [{\"op\": \"range\", \"stop\": 6}, {\"op\": \"interleave\", \"cycle_length\": 3, \"parallelism\": %d, "
      "\"buffer\": 1, \"source\": [{\"op\": \"repeat\", \"count\": 200}, {\"op\": \"map\", \"fn\": \"t_drop\"}]}]}",
  };
  for (int f = 0; f < 4; f++) expect_same_as_sequential(fmts[f], 2 + f % 2, true, 3000);
  expect_same_as_sequential("{\"ops\": [{\"op\": \"range\", \"stop\": 9}, {\"op\": \"interleave\", \"cycle_length\": 4, "
                            "\"parallelism\": %d, \"buffer\": 6, \"deterministic\": false, \"source\": [{\"op\": \"repeat\", "
                            "\"count\": 300}]}]}", 3, false, 3000);
}

/* With cheap nested elements and little room per slot, the consumer makes elements itself rather than wake a
 * worker and wait: the interleave's own time leaves out that share of its source's time. */
static void test_interleave_own_time_excludes_its_source(void **s) {
  /* Elements of 2 ms of spin: nearly every call is timed (the sampling stride is 1 for calls this long; a chain's
   * first call may not be), and spin burns thread CPU, so the source's CPU is close to 40 x 2 ms whatever else the
   * machine runs (at least half of it is asserted), while the interleave's own
   * work is a hand-off per element (microseconds, even under sanitizers): an interleave charged with its source's
   * time would show at least as much as the source. No threshold here depends on machine load. */
  sl_pipeline *p = tu_pipeline("{\"ops\": [{\"op\": \"range\", \"stop\": 4}, {\"op\": \"interleave\", \"cycle_length\": 2, "
                               "\"parallelism\": 2, \"source\": [{\"op\": \"repeat\", \"count\": 10}, {\"op\": \"map\", "
                               "\"fn\": \"spin\", \"args\": {\"us\": 2000}}]}]}");
  assert_int_equal(tu_count(p, 0), 40);
  sl_op_stats il, fn;
  assert_int_equal(sl_pipeline_op_stats(&il, p, 1), 0);
  assert_int_equal(sl_pipeline_op_stats(&fn, p, 3), 0);
  assert_string_equal(il.op, "interleave");
  assert_string_equal(fn.label, "spin");
  assert_int_equal(fn.elements_out, 40);
  if (getenv("SL_TEST_VERBOSE")) fprintf(stderr, "interleave %.6f s, source %.6f s\n", il.cpu_seconds, fn.cpu_seconds);
  assert_true(fn.cpu_seconds >= 40 * 2e-3 / 2);
  assert_true(il.cpu_seconds < fn.cpu_seconds / 2);
  sl_pipeline_free(p);
}

/* Cancels from another thread while cheap elements stream through every async op; what came before is in order. */
/* Cancels the iterator a few milliseconds after its consumer has seen an element: mid-stream on any load (a
 * fixed 5 ms from the start was, under ASan beside other tests, sometimes before the first element). */
static void *cancel_soon(void *a) {
  cancel_arg *c = a;
  while (atomic_load(&c->seen) == 0) usleep(200);
  usleep(5000);
  sl_iter_cancel(c->it);
  return NULL;
}
static void test_cheap_cancel_mid_stream(void **s) {
  sl_pipeline *p = tu_pipeline("{\"ops\": [{\"op\": \"range\"}, {\"op\": \"interleave\", \"cycle_length\": 2, \"parallelism\": "
                               "2, \"buffer\": 16, \"source\": [{\"op\": \"repeat\", \"count\": 3}]}, {\"op\": \"map\", "
                               "\"fn\": \"identity\", \"parallelism\": 2, \"buffer\": 64}, {\"op\": \"prefetch\", \"buffer\": 64}]}");
  for (int slow = 0; slow <= 1; slow++) {
    sl_iter *it;
    assert_int_equal(sl_pipeline_iter(&it, p), 0);
    pthread_t t;
    cancel_arg ca = {it, 0};
    pthread_create(&t, NULL, cancel_soon, &ca);
    sl_elem e;
    sl_elem_init(&e);
    int rc;
    int64_t n = 0, v;
    while ((rc = sl_iter_next(&e, it)) == 0) {
      sl_comp_get_i64(&v, sl_elem_get(&e, "value"));
      assert_int_equal(v, n / 6 * 2 + (n % 2)); /* each pair of inputs gives 3 + 3 elements, alternating */
      sl_elem_clear(&e);
      atomic_store(&ca.seen, ++n);
      if (slow && n % 100 == 0) usleep(1000);
    }
    pthread_join(t, NULL);
    assert_int_equal(rc, SL_ECANCELED);
    assert_true(n > 0);
    assert_int_equal(sl_iter_next(&e, it), SL_ECANCELED);
    sl_iter_free(it);
  }
  sl_pipeline_free(p);
}

/* A tuner changes the knobs in force during the run (workers parked and unparked, the prefetch depth changed):
 * nothing is lost, reordered or stuck. */
typedef struct {
  sl_pipeline *p;
  atomic_bool done;
} toggle_arg;
static void *toggler(void *a) {
  toggle_arg *t = a;
  for (int i = 0; !atomic_load(&t->done); i++) {
    atomic_store(&sl__pipeline_op(t->p, 1)->active_par, i % 3 == 0 ? 1 : 3);
    atomic_store(&sl__pipeline_op(t->p, 2)->active_buf, i % 2 ? 1 : 48);
    usleep(300);
  }
  return NULL;
}
static void test_cheap_handoff_under_live_knob_changes(void **s) {
  sl_pipeline *p = tu_pipeline("{\"ops\": [{\"op\": \"range\", \"stop\": 30000}, {\"op\": \"map\", \"fn\": \"t_drop\", "
                               "\"parallelism\": \"autotune\", \"buffer\": 24}, {\"op\": \"prefetch\", \"buffer\": \"autotune\"}]}");
  toggle_arg t = {p, false};
  pthread_t th;
  pthread_create(&th, NULL, toggler, &t);
  static int64_t got[30000];
  int rc;
  int64_t n = drain(p, got, 30000, 1000, 500, &rc);
  atomic_store(&t.done, true);
  pthread_join(th, NULL);
  assert_int_equal(rc, SL_END);
  assert_int_equal(n, 30000 - 30000 / 7 - (30000 % 7 > 3));
  for (int64_t i = 0, v = 0; i < n; i++, v++) {
    if (v % 7 == 3) v++;
    assert_int_equal(got[i], v);
  }
  sl_pipeline_free(p);
}

/* The same for an "autotune" interleave: at parallelism 1 its consumer pulls from the open chains itself (no
 * workers, no buffers), and it hands the chains back to the workers whenever the parallelism rises again, at any
 * moment in a chain or a block: the elements and their order are the sequential interleave's. */
static void test_interleave_under_live_knob_changes(void **s) {
  const char *fmt = "{\"ops\": [{\"op\": \"range\", \"stop\": 30}, {\"op\": \"interleave\", \"cycle_length\": 3, "
                    "\"block_length\": 2, \"parallelism\": %s, \"source\": [{\"op\": \"repeat\", \"count\": 700}]}, "
                    "{\"op\": \"prefetch\", \"buffer\": %s}]}";
  static int64_t want[21000], got[21000];
  sl_pipeline *ref = tu_pipelinef(fmt, "1", "1");
  assert_int_equal(tu_collect_i64(ref, "value", want, 21000), 21000);
  sl_pipeline_free(ref);
  sl_pipeline *p = tu_pipelinef(fmt, "\"autotune\"", "\"autotune\"");
  toggle_arg t = {p, false};
  pthread_t th;
  pthread_create(&th, NULL, toggler, &t);
  int rc;
  int64_t n = drain(p, got, 21000, 997, 200, &rc);
  atomic_store(&t.done, true);
  pthread_join(th, NULL);
  assert_int_equal(rc, SL_END);
  assert_int_equal(n, 21000);
  assert_memory_equal(want, got, sizeof want);
  sl_pipeline_free(p);
}

/* Expensive elements are handed over one by one as soon as each is made, not held back to fill a chunk. Asserted
 * without a clock: the producer's policy (a chunk of 1 for an expensive element), and, end to end, that the
 * consumer has its first element while the producer is still far from done (held back for a chunk, it would get
 * it only when all 8 were made; 7 more take 210 ms, far beyond a wake-up's delay even on a loaded machine). */
static void test_expensive_elements_are_not_batched(void **s) {
  uint64_t mean = 0;
  assert_int_equal(sl__handoff_chunk(&mean, 30000000, 1), 1);
  mean = 0;
  assert_int_equal(sl__handoff_chunk(&mean, 1000 * SL__HANDOFF_MAX, SL__HANDOFF_MAX), SL__HANDOFF_MAX);
  static const struct { const char *spec; int fn; } cases[] = {
      {"{\"ops\": [{\"op\": \"range\", \"stop\": 8}, {\"op\": \"map\", \"fn\": \"sleep_io\", \"args\": {\"us\": 30000}}, "
       "{\"op\": \"prefetch\", \"buffer\": 64}]}", 1},
      {"{\"ops\": [{\"op\": \"range\", \"stop\": 8}, {\"op\": \"map\", \"fn\": \"sleep_io\", \"args\": {\"us\": 30000}, "
       "\"parallelism\": 2, \"buffer\": 64}]}", 1},
      {"{\"ops\": [{\"op\": \"range\", \"stop\": 1}, {\"op\": \"interleave\", \"cycle_length\": 2, \"parallelism\": 2, "
       "\"buffer\": 16, \"source\": [{\"op\": \"repeat\", \"count\": 8}, {\"op\": \"map\", \"fn\": \"sleep_io\", \"args\": "
       "{\"us\": 30000}}]}]}", 3},
      {"{\"ops\": [{\"op\": \"range\", \"stop\": 2}, {\"op\": \"interleave\", \"cycle_length\": 2, \"parallelism\": 2, "
       "\"buffer\": 16, \"source\": [{\"op\": \"repeat\", \"count\": 4}, {\"op\": \"map\", \"fn\": \"sleep_io\", \"args\": "
       "{\"us\": 30000}}]}]}", 3},
  };
  for (int k = 0; k < 4; k++) {
    sl_pipeline *p = tu_pipeline(cases[k].spec);
    sl_iter *it;
    assert_int_equal(sl_pipeline_iter(&it, p), 0);
    sl_elem e;
    sl_elem_init(&e);
    for (int i = 0; i < 8; i++) {
      assert_int_equal(sl_iter_next(&e, it), 0);
      sl_elem_clear(&e);
      if (i == 0) {
        sl_op_stats st;
        assert_int_equal(sl_pipeline_op_stats(&st, p, cases[k].fn), 0);
        assert_string_equal(st.label, "sleep_io");
        if (st.elements_out >= 8) fprintf(stderr, "case %d: first element after %llu were made\n", k,
                                          (unsigned long long)st.elements_out);
        assert_true(st.elements_out < 8);
      }
    }
    sl_iter_free(it);
    sl_pipeline_free(p);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parallel_map_keeps_order_and_seeds),
      cmocka_unit_test(test_unordered_map_loses_nothing),
      cmocka_unit_test(test_parallel_map_error_at_the_right_element),
      cmocka_unit_test(test_errors_are_sticky),
      cmocka_unit_test(test_parallel_interleave_matches_sequential),
      cmocka_unit_test(test_nested_error_surfaces),
      cmocka_unit_test(test_cancel_from_another_thread),
      cmocka_unit_test(test_early_free_joins_everything),
      cmocka_unit_test(test_random_spec_stress),
      cmocka_unit_test(test_stats_count_elements),
      cmocka_unit_test(test_cheap_map_handoff_order_drops_and_counts),
      cmocka_unit_test(test_cheap_errors_arrive_in_order),
      cmocka_unit_test(test_cheap_interleave_handoff),
      cmocka_unit_test(test_interleave_own_time_excludes_its_source),
      cmocka_unit_test(test_cheap_cancel_mid_stream),
      cmocka_unit_test(test_map_on_error_skip),
      cmocka_unit_test(test_on_error_skip_keeps_spec_errors),
      cmocka_unit_test(test_skip_reasons),
      cmocka_unit_test(test_cheap_handoff_under_live_knob_changes),
      cmocka_unit_test(test_interleave_under_live_knob_changes),
      cmocka_unit_test(test_expensive_elements_are_not_batched),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
