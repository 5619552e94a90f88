/* test_plan_waits.c: the analyzer tells "waiting for a core" (runnable, CPU-bound, the machine CPU-saturated by
 * this process or others) from "waiting on I/O or sleep", on planted counters (known answers) and on a real
 * sleep_io trace. Asserts on the model's verdicts and the report's words, never on speed. */
#include <math.h>
#include <string.h>

#include "ops/pipeline_int.h"
#include "plan/plan_int.h"
#include "testutil.h"

#define SPIN3                                                                                                     \
  "{\"name\": \"w\", \"ops\": [{\"op\": \"range\", \"stop\": 100000000}, {\"op\": \"map\", \"fn\": \"spin\", "   \
  "\"args\": {\"us\": 100}, \"parallelism\": 2}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 30}}, "    \
  "{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 50}, \"parallelism\": 2}]}"

/* Planted: op i spent us[i] of CPU and wall[i] x that of wall per element, 10000 elements, on 2 cores, with the
 * process busy `proc_cores` and other processes `other` cores. */
static sl_plan *planted(const double *us, const double *wall, double proc_cores, double other, char **report) {
  sl_pipeline *p = tu_pipeline(SPIN3);
  int n = sl_pipeline_op_count(p);
  sl_op_stats st[4];
  double sum = 0;
  for (int i = 0; i < n; i++) {
    assert_int_equal(sl_pipeline_op_stats(&st[i], p, i), 0);
    st[i].elements_out = 10000;
    st[i].elements_in = i ? 10000 : 0;
    st[i].cpu_seconds = 10000 * us[i] * 1e-6;
    st[i].wall_seconds = st[i].cpu_seconds * wall[i];
    st[i].wait_seconds = 0;
    sum += st[i].cpu_seconds;
  }
  sl_machine m;
  memset(&m, 0, sizeof m);
  m.cores = 2;
  m.cpus_online = 2;
  m.mem_available = 1 << 30;
  m.other_load = other;
  sl_trace *t = NULL;
  assert_int_equal(sl__trace_from_counters(&t, sl__pipeline_spec(p), "planted", &m, st, NULL, n, sum / proc_cores, sum, 0),
                   0);
  sl_plan_opts o = SL_PLAN_OPTS_INIT;
  o.handoff = SL_PLAN_HANDOFF_NONE;
  sl_plan *pl = NULL;
  assert_int_equal(sl_plan_solve(&pl, t, &o), 0);
  assert_int_equal(sl_plan_report(report, pl, false), 0);
  sl_trace_free(t);
  sl_pipeline_free(p);
  return pl;
}

static const double US[] = {0.1, 100, 30, 50};

/* The process kept both cores busy; every op's wall time is 2.5x its CPU: runnable, waiting for a core. */
static void test_cpu_saturated_waits_for_core(void **st) {
  const double wall[] = {1, 2.5, 2.5, 2.5};
  char *r = NULL;
  sl_plan *P = planted(US, wall, 1.95, 0, &r);
  assert_true(P->saturated);
  for (int i = 1; i < 4; i++) assert_int_equal(P->ops[i].waits, SL__WAIT_CORE);
  assert_non_null(strstr(r, "Waiting for a core"));
  assert_null(strstr(r, "I/O or sleep"));
  assert_string_equal(sl_plan_limit(P), "cpu");
  sl_free(r);
  sl_plan_free(P);
}

/* The same wall times while other processes kept the machine busy: still cores, not I/O. */
static void test_saturated_by_others_waits_for_core(void **st) {
  const double wall[] = {1, 2.5, 2.5, 2.5};
  char *r = NULL;
  sl_plan *P = planted(US, wall, 0.3, 1.8, &r);
  assert_true(P->saturated);
  for (int i = 1; i < 4; i++) assert_int_equal(P->ops[i].waits, SL__WAIT_CORE);
  sl_free(r);
  sl_plan_free(P);
}

/* An idle machine and one op whose wall time is 20x its CPU: it waits on I/O or a sleep; the others did not wait. */
static void test_idle_machine_waits_on_io(void **st) {
  const double wall[] = {1, 1, 20, 1};
  char *r = NULL;
  sl_plan *P = planted(US, wall, 0.3, 0, &r);
  assert_false(P->saturated);
  assert_int_equal(P->ops[2].waits, SL__WAIT_IO);
  assert_int_equal(P->ops[1].waits, SL__WAIT_NONE);
  assert_int_equal(P->ops[3].waits, SL__WAIT_NONE);
  assert_non_null(strstr(r, "I/O"));
  assert_null(strstr(r, "Waiting for a core"));
  sl_free(r);
  sl_plan_free(P);
}

/* A real trace: sleep_io sleeps 2 ms per element and spends microseconds of CPU; however loaded the machine, its
 * wall time is hundreds of times its CPU: I/O, and the spins beside it are not I/O. */
static void test_sleep_io_trace(void **st) {
  sl_pipeline *p = tu_pipeline("{\"name\": \"sio\", \"ops\": [{\"op\": \"range\", \"stop\": 100000000}, {\"op\": "
                               "\"map\", \"fn\": \"spin\", \"args\": {\"us\": 20}}, {\"op\": \"map\", \"fn\": "
                               "\"sleep_io\", \"args\": {\"us\": 2000}}]}");
  sl_trace_opts to = SL_TRACE_OPTS_INIT;
  to.seconds = 0.4;
  to.no_disk_probe = true;
  sl_trace *t = NULL;
  assert_int_equal(sl_trace_run(&t, p, &to), 0);
  sl_plan *P = NULL;
  assert_int_equal(sl_plan_solve(&P, t, NULL), 0);
  assert_int_equal(P->ops[2].waits, SL__WAIT_IO);
  assert_int_not_equal(P->ops[1].waits, SL__WAIT_IO);
  char *js = NULL;
  assert_int_equal(sl_plan_report(&js, P, true), 0);
  assert_non_null(strstr(js, "\"waits\": \"io\""));
  sl_free(js);
  sl_plan_free(P);
  sl_trace_free(t);
  sl_pipeline_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_saturated_waits_for_core), cmocka_unit_test(test_saturated_by_others_waits_for_core),
      cmocka_unit_test(test_idle_machine_waits_on_io), cmocka_unit_test(test_sleep_io_trace)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
