/* test_plan_fault.c: allocation failures while reading a trace, solving, rewriting and reporting surface as errors
 * (never a crash or a leak): an allocator that fails the Nth call, for every N until the whole path succeeds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* One trace document, made by a real run with the default allocator. */
static char *make_trace(void) {
  sl_pipeline *p = tu_pipeline("{\"name\": \"f\", \"ops\": [{\"op\": \"range\", \"stop\": 200}, {\"op\": \"map\", "
                               "\"fn\": \"spin\", \"args\": {\"us\": 20}}, {\"op\": \"map\", \"fn\": \"spin\", "
                               "\"args\": {\"us\": 80}}, {\"op\": \"batch\", \"size\": 4}, {\"op\": \"repeat\"}]}");
  sl_machine m;
  sl_machine_probe(&m, NULL, 0);
  sl_trace_opts to = SL_TRACE_OPTS_INIT;
  to.take = 40;
  to.machine = &m;
  sl_trace *t = NULL;
  assert_int_equal(sl_trace_run(&t, p, &to), 0);
  char *s = NULL;
  assert_int_equal(sl_trace_to_json(&s, t), 0);
  char *copy = strdup(s);
  sl_free(s);
  sl_trace_free(t);
  sl_pipeline_free(p);
  return copy;
}

/* Every step; returns the first error code (0 when all succeed). */
static int all_steps(const char *doc) {
  sl_trace *t = NULL;
  sl_plan *pl = NULL;
  char *spec = NULL, *rep = NULL, *js = NULL;
  sl_plan_opts o = SL_PLAN_OPTS_INIT;
  o.cores = 2;
  o.handoff = SL_PLAN_HANDOFF_NONE;
  int rc = sl_trace_from_json(&t, doc, strlen(doc), "fault");
  if (!rc) rc = sl_plan_solve(&pl, t, &o);
  if (!rc) rc = sl_plan_spec_json(&spec, pl);
  if (!rc) rc = sl_plan_report(&rep, pl, false);
  if (!rc) rc = sl_plan_report(&js, pl, true);
  if (!rc) {
    sl_free(rep);
    rep = NULL;
    rc = sl_trace_to_json(&rep, t);
  }
  sl_free(spec);
  sl_free(rep);
  sl_free(js);
  sl_plan_free(pl);
  sl_trace_free(t);
  return rc;
}

static void test_allocation_failures(void **st) {
  char *doc = make_trace();
  tu_faultsim_install();
  int failures = 0;
  for (long n = 0; n < 100000; n++) {
    tu_faultsim_fail(n, true);
    int rc = all_steps(doc);
    tu_faultsim_reset();
    if (rc == 0) break;
    assert_true(rc < 0);
    failures++;
  }
  tu_faultsim_uninstall();
  assert_true(failures > 10); /* the path allocates; every failure point was visited */
  free(doc);
}

/* The optimizer's whole loop (trace, sequential variant, solve, rewrite, measured run, re-solve) on a pipeline that
 * ends within milliseconds. Failure points are visited one by one at first, then at a growing stride (the runs'
 * allocation counts depend on timing, so the sweep is bounded by attempts, not by a fixed count). */
static void test_optimize_allocation_failures(void **st) {
  sl_machine m;
  sl_machine_probe(&m, NULL, 0);
  const char *js = "{\"name\": \"fo\", \"ops\": [{\"op\": \"range\", \"stop\": 64}, {\"op\": \"map\", \"fn\": "
                   "\"spin\", \"args\": {\"us\": 5}, \"parallelism\": 2}, {\"op\": \"batch\", \"size\": 8}]}";
  tu_faultsim_install();
  int failures = 0, ok = 0;
  for (long n = 0; n < 100000 && !ok; n += 1 + n / 40) {
    tu_faultsim_fail(n, true);
    sl_pipeline *p = NULL;
    sl_plan *pl = NULL;
    sl_optimize_opts oo = SL_OPTIMIZE_OPTS_INIT;
    oo.plan.knobs = SL_PLAN_KNOBS_ALL;
    oo.plan.handoff = 1e-6;
    oo.trace_seconds = 0.05;
    oo.measure_seconds = 0.05;
    oo.machine = &m;
    int rc = sl_pipeline_from_json(&p, js, strlen(js), "fault");
    if (!rc) rc = sl_optimize(&pl, p, &oo);
    tu_faultsim_reset();
    sl_plan_free(pl);
    sl_pipeline_free(p);
    if (rc == 0) ok = 1;
    else failures++;
    if (rc) assert_true(rc < 0);
  }
  tu_faultsim_uninstall();
  assert_true(ok);
  assert_true(failures > 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_allocation_failures),
                                     cmocka_unit_test(test_optimize_allocation_failures)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
