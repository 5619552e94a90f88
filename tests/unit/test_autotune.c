/* test_autotune.c: the tf.data-AUTOTUNE-equivalent baseline: HILL_CLIMB on given counters (known answers worked out
 * by hand from tf.data's model), the RAM budget, and the online tuner changing a running pipeline's knobs.
 * SL_TEST_THREADED */
#include <string.h>

#include "testutil.h"

#define SPEC                                                                                                     \
  "{\"name\": \"at\", \"ops\": [{\"op\": \"range\", \"stop\": 1000000}, {\"op\": \"map\", \"fn\": \"spin\", "    \
  "\"args\": {\"us\": 40}, \"parallelism\": \"autotune\"}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": " \
  "400}, \"parallelism\": \"autotune\"}, {\"op\": \"prefetch\", \"buffer\": \"autotune\"}]}"

static void fake_stats(sl_pipeline *p, sl_op_stats *st, double bytes) {
  const double us[] = {0.1, 40, 400, 0.1};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(sl_pipeline_op_stats(&st[i], p, i), 0);
    st[i].elements_out = 10000;
    st[i].cpu_seconds = 10000 * us[i] * 1e-6;
    st[i].bytes_out = (uint64_t)(10000 * bytes);
  }
}

/* Worked by hand: output time = 400/p_heavy + 40/p_light (us); the climb adds to the heavy map while that gains
 * most (up to p = 4, the CPU budget), then to the light map (processing time / 4 is only approached). */
static void test_hill_climb(void **st) {
  sl_pipeline *p = tu_pipeline(SPEC);
  sl_op_stats s[4];
  fake_stats(p, s, 8);
  sl_autotune_opts o = SL_AUTOTUNE_OPTS_INIT;
  o.cpu_budget = 4;
  o.ram_budget = 1 << 30;
  int64_t par[4], buf[4];
  assert_int_equal(sl_autotune_solve(par, buf, p, s, &o), 0);
  assert_int_equal(par[2], 4);
  assert_true(par[1] >= 2);
  assert_int_equal(par[0], 1);
  /* A consumer that never waits on its own work gains nothing from a deeper root buffer in tf.data's model. */
  assert_int_equal(buf[3], 1);
  sl_pipeline_free(p);
}

/* The RAM budget stops the climb: 1 MB elements and 2.5 MB allow two in flight at the heavy map. */
static void test_ram_budget(void **st) {
  sl_pipeline *p = tu_pipeline(SPEC);
  sl_op_stats s[4];
  fake_stats(p, s, 1e6);
  sl_autotune_opts o = SL_AUTOTUNE_OPTS_INIT;
  o.cpu_budget = 8;
  o.ram_budget = 2500000 + 2000000; /* the light map and the prefetch hold one each */
  int64_t par[4], buf[4];
  assert_int_equal(sl_autotune_solve(par, buf, p, s, &o), 0);
  assert_true(par[2] <= 2);
  double held = (double)(par[1] + par[2] + buf[3]) * 1e6;
  assert_true(held <= (double)o.ram_budget);
  sl_pipeline_free(p);
}

/* Online: the tuner re-optimises while the pipeline runs and gives the heavy map more than one worker. */
static void test_online(void **st) {
  sl_pipeline *p = tu_pipeline(SPEC);
  sl_autotune_opts o = SL_AUTOTUNE_OPTS_INIT;
  o.cpu_budget = 4;
  o.first_period = 0.005;
  o.max_period = 0.02;
  sl_autotuner *a = NULL;
  assert_int_equal(sl_autotune_start(&a, p, &o), 0);
  sl_iter *it = NULL;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  /* Pull until the tuner has made 3 rounds: how many elements that takes depends on how the machine schedules the
   * tuner's thread, so it is not bounded here (ctest's timeout is); then a few more under the tuned knobs. */
  while (sl_autotune_rounds(a) < 3) {
    assert_int_equal(sl_iter_next(&e, it), 0);
    sl_elem_clear(&e);
  }
  for (int i = 0; i < 50; i++) {
    assert_int_equal(sl_iter_next(&e, it), 0);
    sl_elem_clear(&e);
  }
  sl_autotune_stop(a);
  sl_iter_free(it);
  sl_op_stats s;
  assert_int_equal(sl_pipeline_op_stats(&s, p, 2), 0);
  assert_true(s.parallelism >= 2);
  sl_pipeline_free(p);
  sl_autotune_stop(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hill_climb),
      cmocka_unit_test(test_ram_budget),
      cmocka_unit_test(test_online),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
