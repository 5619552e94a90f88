/* test_prov_oom.c: fault injection: an allocator that fails its Nth call, for every N, under a scenario that
 * opens a store, writes every kind of record, queries, walks lineage, exports, records a run and builds graphlets,
 * waste and stats. Each failure must come back as SL_ENOMEM (nothing crashes, nothing leaks under ASan); with no
 * failure the scenario succeeds. SQLite's, libpq's and jansson's own allocations are not ours and not failed.
 * SL_TEST_TIMEOUT(300) */
#include "test_prov_common.h"

#define CK(x)                                                                                                         \
  do {                                                                                                                \
    int rc_ = (x);                                                                                                    \
    if (rc_) {                                                                                                        \
      rc = rc_;                                                                                                       \
      goto out;                                                                                                       \
    }                                                                                                                 \
  } while (0)

static int scenario(const char *uri, const char *datafile) {
  int rc = 0;
  sl_prov *p = NULL;
  sl_prov_list *l = NULL;
  char *js = NULL;
  sl_prov_graphlets *g = NULL;
  sl_prov_waste *w = NULL;
  sl_prov_stats *s = NULL;
  CK(sl_prov_open(&p, uri, SL_PROV_CREATE));
  int64_t ta, tm, tpm, tt, tpu, tc, tr, a, m, pm, e, pu, c, r;
  sl_prov_type_prop props[] = {{"span", SL_PROV_T_INT}};
  CK(sl_prov_put_type(&ta, p, SL_PROV_ARTIFACT, "Examples", props, 1, "mlmd.Dataset"));
  CK(sl_prov_put_type(&tm, p, SL_PROV_ARTIFACT, "Model", NULL, 0, "mlmd.Model"));
  CK(sl_prov_put_type(&tpm, p, SL_PROV_ARTIFACT, "PushedModel", NULL, 0, NULL));
  CK(sl_prov_put_type(&tt, p, SL_PROV_EXECUTION, "x.Trainer", NULL, 0, "mlmd.Train"));
  CK(sl_prov_put_type(&tpu, p, SL_PROV_EXECUTION, "x.Pusher", NULL, 0, NULL));
  CK(sl_prov_put_type(&tc, p, SL_PROV_CONTEXT, "pipeline", NULL, 0, NULL));
  CK(sl_prov_put_type(&tr, p, SL_PROV_CONTEXT, "pipeline_run", NULL, 0, NULL));
  CK(sl_prov_begin(p));
  CK(sl_prov_put_context(&c, p, tc, "pipe", 1000));
  CK(sl_prov_put_context(&r, p, tr, "pipe.r0", 1000));
  CK(sl_prov_set_parent_context(p, r, c));
  CK(sl_prov_put_artifact(&a, p, ta, "/data", "d", SL_PROV_A_LIVE, 1000));
  sl_prov_value v = sl_prov_int(3);
  CK(sl_prov_set_property(p, SL_PROV_ARTIFACT, a, "span", false, &v));
  CK(sl_prov_put_execution(&e, p, tt, NULL, SL_PROV_E_COMPLETE, 2000, 3000));
  v = sl_prov_double(5);
  CK(sl_prov_set_property(p, SL_PROV_EXECUTION, e, "cpu_seconds", true, &v));
  sl_prov_step path[2] = {{"examples", 0}, {NULL, 0}};
  CK(sl_prov_put_event(NULL, p, a, e, SL_PROV_EV_INPUT, 2000, path, 2));
  CK(sl_prov_put_artifact(&m, p, tm, "/model", NULL, SL_PROV_A_LIVE, 3000));
  CK(sl_prov_put_event(NULL, p, m, e, SL_PROV_EV_OUTPUT, 3000, path, 2));
  CK(sl_prov_put_execution(&pu, p, tpu, NULL, SL_PROV_E_COMPLETE, 3000, 4000));
  CK(sl_prov_put_event(NULL, p, m, pu, SL_PROV_EV_INPUT, 3000, path, 2));
  CK(sl_prov_put_artifact(&pm, p, tpm, "/pushed", NULL, SL_PROV_A_LIVE, 4000));
  CK(sl_prov_put_event(NULL, p, pm, pu, SL_PROV_EV_OUTPUT, 4000, path, 2));
  v = sl_prov_int(1);
  CK(sl_prov_set_property(p, SL_PROV_ARTIFACT, pm, "pushed", true, &v));
  CK(sl_prov_associate(p, c, e));
  CK(sl_prov_associate(p, r, e));
  CK(sl_prov_associate(p, c, pu));
  CK(sl_prov_associate(p, r, pu));
  CK(sl_prov_attribute(p, c, a));
  CK(sl_prov_commit(p));
  sl_prov_query q = {0};
  q.type_name = "Examples";
  CK(sl_prov_find(&l, p, SL_PROV_ARTIFACT, &q));
  sl_prov_list_free(l);
  l = NULL;
  CK(sl_prov_types(&l, p));
  sl_prov_list_free(l);
  l = NULL;
  CK(sl_prov_neighbours(&l, p, SL_PROV_EXECUTION, e));
  sl_prov_list_free(l);
  l = NULL;
  CK(sl_prov_lineage(&l, p, SL_PROV_ARTIFACT, pm, SL_PROV_BOTH, 0));
  CK(sl_prov_list_to_json(&js, l));
  sl_free(js);
  js = NULL;
  CK(sl_prov_export_json(&js, p));
  CK(sl_prov_graphlets_load(&g, p, NULL));
  CK(sl_prov_waste_compute(&w, g));
  CK(sl_prov_stats_compute(&s, g));
  sl_prov_close(p);
  p = NULL;
  const char *inputs[] = {datafile};
  sl_prov_run run = SL_PROV_RUN_INIT;
  run.pipeline = "pipe";
  run.inputs = inputs;
  run.ninputs = 1;
  CK(sl_prov_record_run(NULL, uri, &run));
out:
  if (p && rc) sl_prov_rollback(p);
  sl_prov_stats_free(s);
  sl_prov_waste_free(w);
  sl_prov_graphlets_free(g);
  sl_free(js);
  sl_prov_list_free(l);
  sl_prov_close(p);
  return rc;
}

static void every_allocation_failure_is_enomem(void **state) {
  (void)state;
  char *dir = tu_tmpdir("provoom");
  char *data = tu_write_file(dir, "data.bin", "abc", 3);
  char uri[1024];
  /* Count the allocations of a clean run. */
  snprintf(uri, sizeof uri, "%s/clean.sqlite", dir);
  tu_faultsim_install();
  int rc = scenario(uri, data);
  long total = tu_faultsim_count();
  tu_faultsim_uninstall();
  if (rc) fprintf(stderr, "clean run: %s\n", sl_error_last());
  assert_int_equal(rc, 0);
  assert_true(total > 20);
  long failures = 0;
  for (long n = 0; n < total; n++) {
    snprintf(uri, sizeof uri, "%s/oom-%ld.sqlite", dir, n);
    tu_faultsim_install();
    tu_faultsim_fail(n, true);
    rc = scenario(uri, data);
    tu_faultsim_uninstall();
    if (rc != 0 && rc != SL_ENOMEM) fail_msg("allocation %ld failed: got %s (%s)", n, sl_strerror(rc), sl_error_last());
    failures += rc == SL_ENOMEM;
    char side[1100];
    remove(uri);
    snprintf(side, sizeof side, "%s-wal", uri);
    remove(side);
    snprintf(side, sizeof side, "%s-shm", uri);
    remove(side);
  }
  printf("# %ld allocations in the scenario; %ld injected failures returned SL_ENOMEM\n", total, failures);
  assert_true(failures > 0);
  tu_rmtree(dir);
  free(dir);
  free(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(every_allocation_failure_is_enomem)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
