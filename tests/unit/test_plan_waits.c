/* test_plan_waits.c: the analyzer tells "waiting for a core" (runnable, CPU-bound, the machine CPU-saturated by
 * this process or others) from "waiting on I/O or sleep", on planted counters (known answers), on a real sleep_io
 * trace (blocked time) and on a spin stage sharing one CPU with a busy thread of the test's own (run-queue delay).
 * Asserts on the model's verdicts, the measured split and the report's words, never on speed. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "ops/op_async_int.h"
#include "ops/pipeline_int.h"
#include "plan/plan_int.h"
#include "trace/trace_int.h"
#include "testutil.h"

#define SPIN3                                                                                                     \
  "{\"name\": \"w\", \"ops\": [{\"op\": \"range\", \"stop\": 100000000}, {\"op\": \"map\", \"fn\": \"spin\", "   \
  "\"args\": {\"us\": 100}, \"parallelism\": 2}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 30}}, "    \
  "{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 50}, \"parallelism\": 2}]}"

/* Planted: op i spent us[i] of CPU and wall[i] x that of wall per element, 10000 elements, on 2 cores, with the
 * process busy `proc_cores` and other processes `other` cores; `runq` of the wall time beyond the CPU was run-queue
 * delay (-1: not measured, as in a trace made before it was). */
static sl_plan *planted_rq(const double *us, const double *wall, double proc_cores, double other, double runq,
                           char **report) {
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
    st[i].runq_seconds = runq < 0 ? -1 : runq * (st[i].wall_seconds - st[i].cpu_seconds);
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

static sl_plan *planted(const double *us, const double *wall, double proc_cores, double other, char **report) {
  return planted_rq(us, wall, proc_cores, other, -1, report);
}

static const double US[] = {0.1, 100, 30, 50};

/* Measured: the same wall times, all of the excess run-queue delay, on a machine not saturated as a whole (a
 * trace of one busy core): waiting for a core, not I/O, from the split alone. Then wall 5x CPU, all of the excess
 * blocked: I/O. */
static void test_measured_runq_is_not_io(void **st) {
  const double wall[] = {1, 2.5, 2.5, 2.5};
  char *r = NULL;
  sl_plan *P = planted_rq(US, wall, 0.3, 0, 1.0, &r);
  assert_false(P->saturated);
  for (int i = 1; i < 4; i++) {
    assert_int_equal(P->ops[i].waits, SL__WAIT_CORE);
    assert_true(P->ops[i].runq > 0);
    assert_true(P->ops[i].blocked < 0.01 * P->ops[i].c);
  }
  assert_null(strstr(r, "needs threads"));
  sl_free(r);
  sl_plan_free(P);
  const double wall5[] = {1, 5, 5, 5};
  P = planted_rq(US, wall5, 0.3, 0, 0.0, &r);
  for (int i = 1; i < 4; i++) {
    assert_int_equal(P->ops[i].waits, SL__WAIT_IO);
    assert_true(fabs(P->ops[i].blocked - 4 * P->ops[i].c) < 1e-3 * P->ops[i].c);
  }
  assert_non_null(strstr(r, "blocked"));
  sl_free(r);
  sl_plan_free(P);
}

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
 * wall time is hundreds of times its CPU, and the sleep is blocked time (a sleeping thread is not in the run
 * queue): I/O. */
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
  /* The split: a sleeping thread is not runnable, so the 2 ms sleep is blocked time whatever the load (every call
   * of a 2 ms op is sampled). The spin beside it is left out: a 20 us stage's own wall time is a sampled estimate
   * that one preemption can stretch; its verdict is tested on a known answer (test_spin_beside_busy_thread). */
  sl_op_stats s2;
  assert_int_equal(sl_trace_op(&s2, t, 2), 0);
  if (s2.runq_seconds >= 0) {
    assert_true(P->ops[2].runq >= 0);
    assert_true(P->ops[2].blocked > 1e-3);
    assert_true(P->ops[2].blocked > P->ops[2].c);
  }
  char *js = NULL;
  assert_int_equal(sl_plan_report(&js, P, true), 0);
  assert_non_null(strstr(js, "\"waits\": \"io\""));
  sl_free(js);
  sl_plan_free(P);
  sl_trace_free(t);
  sl_pipeline_free(p);
}

/* The online tuner's windows (sl__trace_from_counters: counters now less those at the window's start) carry each
 * op's run-queue delay as the difference, and unknown when either end did not measure it. */
static void test_window_carries_runq(void **st) {
  sl_pipeline *p = tu_pipeline(SPIN3);
  int n = sl_pipeline_op_count(p);
  sl_op_stats now[4], base[4];
  for (int i = 0; i < n; i++) {
    assert_int_equal(sl_pipeline_op_stats(&now[i], p, i), 0);
    base[i] = now[i];
    now[i].elements_out = 2000, base[i].elements_out = 1000;
    now[i].cpu_seconds = now[i].wall_seconds = 2, base[i].cpu_seconds = base[i].wall_seconds = 1;
    now[i].runq_seconds = 0.5, base[i].runq_seconds = 0.2;
  }
  base[2].runq_seconds = -1;
  sl_machine m;
  memset(&m, 0, sizeof m);
  m.cores = 2;
  sl_trace *t = NULL;
  assert_int_equal(sl__trace_from_counters(&t, sl__pipeline_spec(p), "window", &m, now, base, n, 1, 1, 0), 0);
  sl_op_stats s;
  assert_int_equal(sl_trace_op(&s, t, 1), 0);
  assert_true(fabs(s.runq_seconds - 0.3) < 1e-12);
  assert_int_equal(sl_trace_op(&s, t, 2), 0);
  assert_true(s.runq_seconds == -1);
  sl_trace_free(t);
  sl_pipeline_free(p);
}

/* Measured, blocked 1.5x its CPU: an I/O waiter on an idle machine, lock contention on a CPU-saturated one (a
 * preempted holder); a sleep far above the load factor stays a waiter there. */
static void test_saturated_blocked_is_contention(void **st) {
  const double wall[] = {1, 3, 1, 1};
  char *r = NULL;
  sl_plan *P = planted_rq(US, wall, 0.3, 0, 0.25, &r); /* a quarter of the excess run-queue delay */
  assert_false(P->saturated);
  assert_true(fabs(P->ops[1].blocked - 1.5 * P->ops[1].c) < 1e-3 * P->ops[1].c);
  assert_int_equal(P->ops[1].waits, SL__WAIT_IO);
  sl_free(r);
  sl_plan_free(P);
  P = planted_rq(US, wall, 0.3, 1.8, 0.25, &r);
  assert_true(P->saturated);
  assert_int_not_equal(P->ops[1].waits, SL__WAIT_IO);
  sl_free(r);
  sl_plan_free(P);
  const double sleepy[] = {1, 50, 1, 1};
  P = planted_rq(US, sleepy, 0.3, 1.8, 0.25, &r);
  assert_true(P->saturated);
  assert_int_equal(P->ops[1].waits, SL__WAIT_IO);
  sl_free(r);
  sl_plan_free(P);
}

static atomic_bool g_stop_busy;
static void *busy(void *arg) {
  (void)arg;
  volatile uint64_t x = 0;
  while (!atomic_load_explicit(&g_stop_busy, memory_order_relaxed)) x++;
  return NULL;
}

/* A spin stage on the consumer's thread and a busy thread of the test's own, both held to one CPU: whenever the
 * busy thread runs the spin waits in the run queue, so its run-queue delay is positive, and it is never called an
 * I/O waiter (it never blocks). The machine is given as 4 cores, so that the process (held to one) never kept
 * them busy: the measured split decides the verdict, whatever other processes do meanwhile. */
static void test_spin_beside_busy_thread(void **st) {
  if (sl__runq_ns() == SL__RUNQ_NONE) skip(); /* a kernel without schedstat */
  cpu_set_t was, one;
  assert_int_equal(sched_getaffinity(0, sizeof was, &was), 0);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &was)) cpu++;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0); /* threads started from here inherit it */
  atomic_store(&g_stop_busy, false);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, busy, NULL), 0);
  sl_pipeline *p = tu_pipeline("{\"name\": \"rq\", \"ops\": [{\"op\": \"range\", \"stop\": 100000000}, {\"op\": "
                               "\"map\", \"fn\": \"spin\", \"args\": {\"us\": 2000}}]}");
  sl_machine m;
  memset(&m, 0, sizeof m);
  m.cores = 4;
  m.cpus_online = 4;
  m.mem_available = 1 << 30;
  m.other_load = 0;
  sl_trace_opts to = SL_TRACE_OPTS_INIT;
  to.seconds = SL_TRACE_UNTIL_END;
  to.take = 40;
  to.machine = &m;
  sl_trace *t = NULL;
  int rc = sl_trace_run(&t, p, &to);
  atomic_store(&g_stop_busy, true);
  pthread_join(th, NULL);
  assert_int_equal(sched_setaffinity(0, sizeof was, &was), 0);
  assert_int_equal(rc, 0);
  sl_op_stats s1;
  assert_int_equal(sl_trace_op(&s1, t, 1), 0);
  assert_true(s1.runq_seconds > 0);
  assert_true(s1.runq_seconds <= s1.wall_seconds);
  sl_plan_opts po = SL_PLAN_OPTS_INIT;
  po.handoff = SL_PLAN_HANDOFF_NONE;
  sl_plan *P = NULL;
  assert_int_equal(sl_plan_solve(&P, t, &po), 0);
  assert_true(P->ops[1].runq > 0);
  assert_int_not_equal(P->ops[1].waits, SL__WAIT_IO);
  assert_true(P->ops[1].tt == P->ops[1].c); /* holds a thread for its CPU only */
  char *r = NULL;
  assert_int_equal(sl_plan_report(&r, P, false), 0);
  assert_null(strstr(r, "needs threads"));
  sl_free(r);
  sl_plan_free(P);
  sl_trace_free(t);
  sl_pipeline_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_saturated_waits_for_core), cmocka_unit_test(test_saturated_by_others_waits_for_core),
      cmocka_unit_test(test_idle_machine_waits_on_io), cmocka_unit_test(test_measured_runq_is_not_io),
      cmocka_unit_test(test_sleep_io_trace), cmocka_unit_test(test_spin_beside_busy_thread),
      cmocka_unit_test(test_window_carries_runq), cmocka_unit_test(test_saturated_blocked_is_contention)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
