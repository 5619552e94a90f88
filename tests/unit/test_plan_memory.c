/* test_plan_memory.c: a tuned pipeline never exceeds its memory budget: the planner shrinks buffers and workers to
 * fit, and the planned pipeline's peak resident memory, measured in a child process, stays within the budget.
 * SL_TEST_TIMEOUT(120) */
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/* blob: replaces the element with `bytes` bytes of written (resident) memory. */
static int blob_init(void **state, const sl_args *a, void *payload) {
  int64_t *n = malloc(sizeof *n);
  if (!n) return SL_ENOMEM;
  int rc = sl_args_int(n, a, "bytes", 1 << 20);
  if (rc) {
    free(n);
    return rc;
  }
  *state = n;
  return 0;
}
static int blob_call(void *state, sl_elem *e, sl_fn_call *call) {
  int64_t shape[1] = {*(int64_t *)state};
  void *d = NULL;
  int rc = sl_elem_new_tensor(e, "blob", SL_UINT8, 1, shape, &d);
  if (!rc) memset(d, (int)(call->index & 0xff), (size_t)shape[0]);
  return rc;
}
static void blob_free(void *state) { free(state); }

static long rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &res) != 2) res = 0;
    fclose(f);
  }
  return res * sysconf(_SC_PAGESIZE);
}

#define MB 1000000

/* Sanitizers keep freed memory in quarantine and map shadow memory: resident size says nothing there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_MEANINGFUL 0
#else
#define RSS_MEANINGFUL 1
#endif

static void test_memory_budget(void **st) {
  sl_fn_def def = {SL_FN_DEF_VERSION, 0, blob_init, blob_call, blob_free};
  assert_int_equal(sl_fn_register("test_blob", &def, NULL), 0);
  sl_pipeline *p = tu_pipeline("{\"name\": \"mem\", \"ops\": [{\"op\": \"range\", \"stop\": 100000}, {\"op\": \"map\", "
                               "\"fn\": \"test_blob\", \"args\": {\"bytes\": 1000000}}, {\"op\": \"map\", \"fn\": "
                               "\"spin\", \"args\": {\"us\": 2000}}]}");
  sl_machine m;
  sl_machine_probe(&m, NULL, 0);
  m.cores = 4;
  sl_trace_opts to = SL_TRACE_OPTS_INIT;
  to.take = 30;
  to.seconds = 30;
  to.machine = &m;
  sl_trace *t = NULL;
  assert_int_equal(sl_trace_run(&t, p, &to), 0);
  /* Unconstrained, 4 cores want 4 workers on the 2 ms stage and deeper buffers of 1 MB elements. */
  sl_plan_opts po = SL_PLAN_OPTS_INIT;
  sl_plan *free_plan = NULL, *tight = NULL;
  assert_int_equal(sl_plan_solve(&free_plan, t, &po), 0);
  assert_true(sl_plan_memory(free_plan) > 8 * MB);
  const int64_t budget = 6 * MB;
  po.memory = budget;
  assert_int_equal(sl_plan_solve(&tight, t, &po), 0);
  assert_true(sl_plan_memory(tight) <= budget);
  assert_true(sl_plan_parallelism(tight, 2) >= 1);
  char *spec = NULL;
  assert_int_equal(sl_plan_spec_json(&spec, tight), 0);
  sl_plan_free(free_plan);
  sl_plan_free(tight);
  sl_trace_free(t);
  sl_pipeline_free(p);

  /* Run the planned spec in a child and watch its resident memory. Large buffers are mmapped (fixed threshold),
   * so freed elements leave the resident set. */
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    sl_pipeline *q = NULL;
    if (sl_pipeline_from_json(&q, spec, strlen(spec), "tight")) _exit(3);
    sl_iter *it = NULL;
    long base = rss_bytes(), peak = base;
    if (sl_pipeline_iter(&it, q)) _exit(4);
    sl_elem e;
    sl_elem_init(&e);
    for (int i = 0; i < 60; i++) {
      if (sl_iter_next(&e, it)) _exit(5);
      long r = rss_bytes();
      if (r > peak) peak = r;
      sl_elem_clear(&e);
      r = rss_bytes();
      if (r > peak) peak = r;
    }
    sl_iter_free(it);
    sl_pipeline_free(q);
    fprintf(stderr, "planned pipeline: resident growth %.1f MB, budget %.1f MB\n", (double)(peak - base) / MB,
            (double)budget / MB);
    _exit(!RSS_MEANINGFUL || peak - base <= budget ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  sl_free(spec);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_memory_budget)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
