/* test_prov_faults.c: the store under concurrent writers and crashes, on SQLite and PostgreSQL: eight processes
 * recording 1,000 executions each at once (each with two events and three properties, one transaction each:
 * all 8,000 must be present), and a writer killed with SIGKILL in the middle of a transaction (the store opens
 * consistent and the transaction is absent). Prints executions recorded per second (BENCHMARKS.md).
 * SL_TEST_TIMEOUT(240) */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "prov/store/db_int.h"
#include "test_prov_common.h"

static tp_backend LITE = {"sqlite", "", NULL}, PG = {"postgresql", "", NULL};

#define NPROC 8
#define NEXEC 1000

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t scalar(const char *uri, const char *sql) {
  sl__pdb *db;
  assert_int_equal(sl__pdb_open(&db, uri, false), 0);
  sl__pstmt *st;
  assert_int_equal(sl__pdb_prepare(db, &st, sql), 0);
  assert_int_equal(sl__pstmt_step(st), 1);
  int64_t v = sl__pstmt_i64(st, 0);
  sl__pstmt_free(st);
  sl__pdb_close(db);
  return v;
}

/* One writer process: NEXEC transactions of execution + 2 events + 3 properties. Exit code 0 on success. */
static int writer(const char *uri, int w, int64_t ta, int64_t te, int64_t ctx) {
  sl_prov *p;
  if (sl_prov_open(&p, uri, 0)) {
    fprintf(stderr, "writer %d: %s\n", w, sl_error_last());
    return 1;
  }
  for (int i = 0; i < NEXEC; i++) {
    int64_t a1, a2, e;
    int rc = sl_prov_begin(p);
    if (!rc) rc = sl_prov_put_execution(&e, p, te, NULL, SL_PROV_E_COMPLETE, 1000 + i, 2000 + i);
    if (!rc) rc = sl_prov_put_artifact(&a1, p, ta, "in", NULL, SL_PROV_A_LIVE, 1000 + i);
    if (!rc) rc = sl_prov_put_artifact(&a2, p, ta, "out", NULL, SL_PROV_A_LIVE, 2000 + i);
    sl_prov_step path[2] = {{"examples", 0}, {NULL, 0}};
    if (!rc) rc = sl_prov_put_event(NULL, p, a1, e, SL_PROV_EV_INPUT, 1000 + i, path, 2);
    if (!rc) rc = sl_prov_put_event(NULL, p, a2, e, SL_PROV_EV_OUTPUT, 2000 + i, path, 2);
    sl_prov_value v1 = sl_prov_double(1.5 * i), v2 = sl_prov_int(w), v3 = sl_prov_string("writer");
    if (!rc) rc = sl_prov_set_property(p, SL_PROV_EXECUTION, e, "cpu_seconds", true, &v1);
    if (!rc) rc = sl_prov_set_property(p, SL_PROV_EXECUTION, e, "worker", true, &v2);
    if (!rc) rc = sl_prov_set_property(p, SL_PROV_EXECUTION, e, "who", true, &v3);
    if (!rc) rc = sl_prov_associate(p, ctx, e);
    if (!rc) rc = sl_prov_commit(p);
    if (rc) {
      fprintf(stderr, "writer %d at %d: %s\n", w, i, sl_error_last());
      sl_prov_rollback(p);
      sl_prov_close(p);
      return 1;
    }
  }
  sl_prov_close(p);
  return 0;
}

static void eight_processes_record_8000_executions(void **state) {
  tp_backend *B = *(tp_backend **)state;
  if (!tp_fresh(B, "conc")) skip();
  sl_prov *p = tp_open(B);
  int64_t ta, te, tc, ctx;
  assert_int_equal(sl_prov_put_type(&ta, p, SL_PROV_ARTIFACT, "Examples", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&te, p, SL_PROV_EXECUTION, "Step", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&tc, p, SL_PROV_CONTEXT, "pipeline", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_context(&ctx, p, tc, "concurrent", 1), 0);
  sl_prov_close(p);
  double t0 = now_s();
  pid_t kids[NPROC];
  for (int w = 0; w < NPROC; w++) {
    fflush(NULL);
    kids[w] = fork();
    assert_true(kids[w] >= 0);
    if (kids[w] == 0) _exit(writer(B->uri, w, ta, te, ctx));
  }
  int failed = 0;
  for (int w = 0; w < NPROC; w++) {
    int st;
    waitpid(kids[w], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed++;
  }
  double el = now_s() - t0;
  assert_int_equal(failed, 0);
  assert_int_equal(scalar(B->uri, "SELECT count(*) FROM Execution"), NPROC * NEXEC);
  assert_int_equal(scalar(B->uri, "SELECT count(*) FROM Event"), 2 * NPROC * NEXEC);
  assert_int_equal(scalar(B->uri, "SELECT count(*) FROM EventPath"), 4 * NPROC * NEXEC);
  assert_int_equal(scalar(B->uri, "SELECT count(*) FROM ExecutionProperty"), 3 * NPROC * NEXEC);
  assert_int_equal(scalar(B->uri, "SELECT count(*) FROM Association"), NPROC * NEXEC);
  assert_int_equal(scalar(B->uri, "SELECT count(DISTINCT int_value) FROM ExecutionProperty WHERE name = 'worker'"),
                   NPROC);
  printf("# %s: %d processes x %d executions (2 events, 3 properties, 1 transaction each): %.2f s, %.0f "
         "executions/s\n",
         B->name, NPROC, NEXEC, el, NPROC * NEXEC / el);
  /* One process alone, for the single-writer figure. */
  t0 = now_s();
  assert_int_equal(writer(B->uri, 99, ta, te, ctx), 0);
  el = now_s() - t0;
  printf("# %s: 1 process x %d executions: %.2f s, %.0f executions/s\n", B->name, NEXEC, el, NEXEC / el);
  tp_done(B);
}

static void writer_killed_mid_transaction_leaves_it_absent(void **state) {
  tp_backend *B = *(tp_backend **)state;
  if (!tp_fresh(B, "kill")) skip();
  sl_prov *p = tp_open(B);
  int64_t te, e;
  assert_int_equal(sl_prov_put_type(&te, p, SL_PROV_EXECUTION, "Step", NULL, 0, NULL), 0);
  for (int i = 0; i < 5; i++) assert_int_equal(sl_prov_put_execution(&e, p, te, NULL, 3, 1, 1), 0);
  sl_prov_close(p);
  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  fflush(NULL);
  pid_t kid = fork();
  assert_true(kid >= 0);
  if (kid == 0) {
    close(pipefd[0]);
    sl_prov *q;
    if (sl_prov_open(&q, B->uri, 0)) _exit(1);
    if (sl_prov_begin(q)) _exit(1);
    for (int i = 0; i < 2000; i++) {
      int64_t id;
      if (sl_prov_put_execution(&id, q, te, NULL, 2, 1, 1)) _exit(1);
      sl_prov_value v = sl_prov_int(i);
      if (sl_prov_set_property(q, SL_PROV_EXECUTION, id, "i", true, &v)) _exit(1);
    }
    /* Half-way through: tell the parent, then keep writing until killed. */
    if (write(pipefd[1], "x", 1) != 1) _exit(1);
    for (;;) {
      int64_t id;
      if (sl_prov_put_execution(&id, q, te, NULL, 2, 1, 1)) _exit(1);
    }
  }
  close(pipefd[1]);
  char c;
  assert_int_equal(read(pipefd[0], &c, 1), 1);
  close(pipefd[0]);
  kill(kid, SIGKILL);
  int st;
  waitpid(kid, &st, 0);
  assert_true(WIFSIGNALED(st));
  /* The server notices the dead connection and rolls back; SQLite's WAL never committed the frames. */
  /* Uncommitted rows are invisible at once: the server rolls back the dead session, SQLite never committed
   * the WAL frames (a reader ignores them and the next writer recovers). */
  assert_int_equal(sl_prov_open(&p, B->uri, 0), 0);
  sl_prov_list *l;
  assert_int_equal(sl_prov_find(&l, p, SL_PROV_EXECUTION, NULL), 0);
  int64_t n = (int64_t)l->n;
  sl_prov_list_free(l);
  /* The store stays writable. */
  assert_int_equal(sl_prov_put_execution(&e, p, te, NULL, 3, 1, 1), 0);
  sl_prov_close(p);
  assert_int_equal(n, 5);
  assert_int_equal(scalar(B->uri, "SELECT count(*) FROM Execution"), 6);
  assert_int_equal(scalar(B->uri, "SELECT count(*) FROM ExecutionProperty"), 0);
  if (!strcmp(B->name, "sqlite")) {
    sl__pdb *db;
    assert_int_equal(sl__pdb_open(&db, B->uri, false), 0);
    sl__pstmt *s;
    assert_int_equal(sl__pdb_prepare(db, &s, "PRAGMA integrity_check"), 0);
    assert_int_equal(sl__pstmt_step(s), 1);
    assert_string_equal(sl__pstmt_text(s, 0), "ok");
    sl__pstmt_free(s);
    sl__pdb_close(db);
  }
  tp_done(B);
}

#define BOTH(f) {#f "/sqlite", f, NULL, NULL, &LITE}, {#f "/postgresql", f, NULL, NULL, &PG}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH(eight_processes_record_8000_executions),
      BOTH(writer_killed_mid_transaction_leaves_it_absent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
