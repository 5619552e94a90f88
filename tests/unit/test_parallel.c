/* test_parallel.c: the threaded ops (parallel map, parallel interleave, prefetch): order, determinism with a seed
 * whatever the parallelism, errors at the right element, cancellation, clean shutdown, and a random-spec stress.
 * SL_TEST_THREADED SL_TEST_TIMEOUT(300) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"


static int rand_call(void *st, sl_elem *e, sl_fn_call *call) {
  sl_rng r;
  sl_rng_seed(&r, call->seed);
  return sl_elem_set_i64(e, "r", (int64_t)(sl_rng_u64(&r) % 1000000007));
}
static int fail_at_call(void *st, sl_elem *e, sl_fn_call *call) {
  int64_t v;
  sl_comp_get_i64(sl_elem_get(e, "value"), &v);
  if (v == 37) return sl_error_set(SL_EINVAL, "bad value %lld", (long long)v);
  return 0;
}
/* Sleeps a pseudo-random 0-200 us so parallel workers finish out of order. */
static int jitter_call(void *st, sl_elem *e, sl_fn_call *call) {
  usleep((useconds_t)(call->seed % 200));
  return 0;
}

static int setup(void **s) {
  sl_fn_def r = {SL_FN_DEF_VERSION, SL_FN_RANDOM, NULL, rand_call, NULL};
  sl_fn_def f = {SL_FN_DEF_VERSION, 0, NULL, fail_at_call, NULL};
  sl_fn_def j = {SL_FN_DEF_VERSION, 0, NULL, jitter_call, NULL};
  assert_int_equal(sl_fn_register("t_rand", &r, NULL), 0);
  assert_int_equal(sl_fn_register("t_fail37", &f, NULL), 0);
  assert_int_equal(sl_fn_register("t_jitter", &j, NULL), 0);
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
  while ((rc = sl_iter_next(it, &e)) == 0) sl_elem_clear(&e);
  assert_int_equal(rc, SL_EINVAL);
  assert_int_equal(sl_iter_next(it, &e), SL_EINVAL);
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

typedef struct {
  sl_iter *it;
} cancel_arg;
static void *canceller(void *a) {
  usleep(20000);
  sl_iter_cancel(((cancel_arg *)a)->it);
  return NULL;
}

static void test_cancel_from_another_thread(void **s) {
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\"}, {\"op\": \"map\", \"fn\": \"sleep_io\", \"args\": {\"us\": 1000}, "
                     "\"parallelism\": 2}, {\"op\": \"prefetch\", \"buffer\": 4}]}");
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  cancel_arg a = {it};
  pthread_t t;
  pthread_create(&t, NULL, canceller, &a);
  sl_elem e;
  sl_elem_init(&e);
  int rc;
  int64_t n = 0;
  while ((rc = sl_iter_next(it, &e)) == 0) {
    sl_elem_clear(&e);
    n++;
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
      assert_int_equal(sl_iter_next(it, &e), 0);
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
  assert_int_equal(sl_pipeline_op_stats(p, 1, &st), 0);
  assert_int_equal(st.elements_out, 1000);
  assert_int_equal(st.elements_in, 1000);
  assert_true(st.async);
  /* 1000 x 20 us of spin = 0.02 s of CPU; sampling makes it an estimate, but not a wild one */
  assert_true(st.cpu_seconds > 0.01 && st.cpu_seconds < 0.2);
  assert_int_equal(sl_pipeline_op_stats(p, 3, &st), 0);
  assert_int_equal(st.elements_out, 100);
  sl_pipeline_reset_stats(p);
  assert_int_equal(sl_pipeline_op_stats(p, 1, &st), 0);
  assert_int_equal(st.elements_out, 0);
  assert_int_equal(sl_pipeline_op_stats(p, 9, &st), SL_EINVAL);
  sl_pipeline_free(p);
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
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
