/* test_tune.c: the online tuner (sl_pipeline_tune): converging on a 4-stage spin pipeline with one heavy stage, and
 * reacting when a stage's cost changes mid-run (a function whose CPU cost the test sets). Asserts on the solves, the
 * knobs the model chose and the log's reasons, never on speed; the loops wait for the tuner's windows with a
 * generous safety deadline only (a loaded machine runs slowly, not wrongly). SL_TEST_THREADED SL_TEST_TIMEOUT(400) */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ops/pipeline_int.h"
#include "trace/trace_int.h"
#include "testutil.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t par_of(sl_pipeline *p, int i) {
  sl_op_stats s;
  assert_int_equal(sl_pipeline_op_stats(&s, p, i), 0);
  return s.parallelism;
}

static bool usable_cores_2(void) {
  sl_machine m;
  assert_int_equal(sl_machine_probe(&m, NULL, 0), 0);
  return m.cores >= 2;
}

/* Pulls elements until done(p, tuner) or the safety deadline (a loaded machine runs slowly, not wrongly). */
static bool run_until(sl_iter *it, sl_pipeline *p, sl_tuner *t, bool (*done)(sl_pipeline *, sl_tuner *, void *),
                      void *arg, double deadline) {
  double end = now_s() + deadline;
  sl_elem e;
  sl_elem_init(&e);
  while (now_s() < end) {
    for (int k = 0; k < 64; k++) {
      assert_int_equal(sl_iter_next(&e, it), 0);
      sl_elem_clear(&e);
    }
    if (done(p, t, arg)) return true;
  }
  return false;
}

static bool solved(sl_pipeline *p, sl_tuner *t, void *arg) { return sl_tuner_solves(t) >= 1; }

/* This process's CPU seconds so far. */
static double self_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool log_has(sl_tuner *t, const char *what) {
  char *log = NULL;
  assert_int_equal(sl_tuner_log(&log, t, false), 0);
  bool y = strstr(log, what) != NULL;
  sl_free(log);
  return y;
}

/* The sequential trial (plan_tune.c trial_step) is over: it was logged and the solve after it was made. Both tests
 * below keep workers after the first solve, so it is always made (within a few windows of that solve). */
static bool trial_over(sl_pipeline *p, sl_tuner *t, void *arg) {
  (void)arg;
  return log_has(t, "trial: ") && sl_tuner_solves(t) >= 2;
}

/* Whether the log's first solve set map i's parallelism to 1 (a line "ops[i] (map spin) parallelism N -> 1: first
 * solve"). */
static bool first_solve_to_one(const char *log, int i) {
  char op[64];
  snprintf(op, sizeof op, "ops[%d] (map spin) parallelism ", i);
  for (const char *l = strstr(log, op); l; l = strstr(l + 1, op)) {
    const char *nl = strchr(l, '\n'), *hit = strstr(l, " -> 1: first solve");
    if (hit && (!nl || hit < nl)) return true;
  }
  return false;
}

/* Keeps the pipeline running for `secs` more (whatever the tuner does meanwhile: observed, not timed). */
static void run_for(sl_iter *it, sl_pipeline *p, sl_tuner *t, double secs) {
  double end = now_s() + secs;
  sl_elem e;
  sl_elem_init(&e);
  while (now_s() < end) {
    assert_int_equal(sl_iter_next(&e, it), 0);
    sl_elem_clear(&e);
  }
}

#define SPIN4                                                                                                      \
  "{\"name\": \"spin4t\", \"ops\": [{\"op\": \"range\", \"stop\": 100000000}, "                                   \
  "{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 10}, \"parallelism\": \"autotune\"}, "                  \
  "{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 200}, \"parallelism\": \"autotune\"}, "                 \
  "{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 10}, \"parallelism\": \"autotune\"}, "                  \
  "{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 10}, \"parallelism\": \"autotune\"}, "                  \
  "{\"op\": \"prefetch\", \"buffer\": \"autotune\"}]}"

/* Every autotune map starts with a worker per core. The model gives the heavy stage the cores: the tuner never
 * takes its workers away (neither at its first solve nor in the windows after), and every change it logs names the
 * bottleneck and the predicted gain. */
static void test_converges_on_spin4(void **st) {
  sl_pipeline *p = tu_pipeline(SPIN4);
  int64_t heavy0 = par_of(p, 2);
  sl_tune_opts o = SL_TUNE_OPTS_INIT;
  o.interval = 0.5;
  sl_tuner *t = NULL;
  assert_int_equal(sl_pipeline_tune(&t, p, &o), 0);
  sl_iter *it = NULL;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl__load_snap l0, l1;
  double w0 = now_s(), s0 = self_cpu();
  sl__load_snap_take(&l0);
  bool ok = run_until(it, p, t, solved, NULL, 120);
  sl__load_snap_take(&l1);
  /* Cores other processes kept busy until the first solve (unknown: -1, asserted as a free machine): with most of
   * the machine taken (two CPU hogs on 2 cores), the model's costs are time-shared ones and its first solve once
   * lowered the heavy stage too. */
  double other, delay;
  sl__load_between(&other, &delay, &l0, &l1, now_s() - w0, self_cpu() - s0, (int)sysconf(_SC_NPROCESSORS_ONLN));
  /* The trial runs only when the first solve left some stage workers. Beside other load (one CPU hog on 2 cores) the
   * model, counting on the cores the others left, once put every stage at 1: nothing to try then, and the trial is
   * skipped for good (a drift solve gave the heavy stage its workers back 1.5 s later). */
  bool workers_left = false;
  if (ok) {
    char *flog = NULL;
    assert_int_equal(sl_tuner_log(&flog, t, false), 0);
    for (int i = 1; i <= 4; i++) workers_left |= heavy0 > 1 && !first_solve_to_one(flog, i);
    sl_free(flog);
  }
  bool over = ok && (workers_left ? run_until(it, p, t, trial_over, NULL, 120) : (run_for(it, p, t, 4 * o.interval), true));
  if (ok && !workers_left) printf("the first solve left no stage workers: no trial to wait for\n");
  run_for(it, p, t, 2 * o.interval);
  char *log = NULL, *js = NULL;
  assert_int_equal(sl_tuner_log(&log, t, false), 0);
  assert_int_equal(sl_tuner_log(&js, t, true), 0);
  printf("tuner log:\n%s", log);
  sl_iter_free(it);
  int64_t heavy = par_of(p, 2);
  sl_tuner_stop(t);
  assert_true(ok); /* the first window is always solved */
  assert_true(over);
  /* The first solve keeps the heavy stage's workers; the trial then runs it on one thread, and the figures decide:
   * reverted (workers measured faster, as on 2 free cores), the heavy stage has its workers again; kept (a loaded
   * machine), it stays at 1, unless the solve on its window predicts a gain from some workers (on probation); lost
   * and the knobs solved on its window, the heavy stage has workers again. Which one is the machine's doing:
   * printed. */
  bool reverted = strstr(log, "trial reverted") != NULL;
  bool seq_kept_solved = strstr(log, "for the knobs of the trial") != NULL;
  printf("trial: %s; heavy stage workers %lld (of %lld)\n",
         reverted                                  ? "reverted"
         : seq_kept_solved                         ? "kept, then solved on its window"
         : strstr(log, "solved on its window") ? "lost, solved on its window"
                                                   : "kept",
         (long long)heavy,
         (long long)heavy0);
  /* What holds on any load: the first solve (before the trial) leaves the heavy stage its workers, and a reverted
   * trial gives them back. Later solves are the model's on a loaded machine's windows: printed above. */
  const char *trial_at = strstr(log, "trial: ");
  if (!trial_at) trial_at = log + strlen(log); /* no trial: the first solve's lines are all before "it" */
  const char *lowered = strstr(log, "ops[2] (map spin) parallelism 2 -> 1: first solve");
  /* Only when that window's costs named the heavy stage: under heavy load (a bench and CI on 2 cores) a first 0.5 s
   * window once charged it next to nothing ("bottleneck ops[3] (map spin) 7% of CPU"), and a model fed that may
   * take its workers; the trial then measures and gives them back. */
  const char *first = strstr(log, ": first solve; bottleneck ops[2] (map spin)");
  if (first && first < trial_at && other < 0.5) assert_true(!lowered || lowered > trial_at);
  else if (first && first < trial_at)
    printf("other processes kept %.2f cores busy: nothing asserted of the first solve\n", other);
  else printf("the first window did not name the heavy stage: nothing asserted of the first solve\n");
  if (reverted) assert_non_null(strstr(log, "ops[2] (map spin) parallelism 1 -> 2: trial reverted"));
  /* Workers won the trial and the knobs were solved on its window (sequential costs): when that window named the
   * heavy stage, it got the workers. A window's costs are sampled: when each op's own cost in a chain on one thread
   * was the difference of two sampled inclusive times, beside other load (CI) the light stages' came out at 0 and
   * 5x, and once the prefetch's at 54% (own times are now measured inside each timed call, sl__nest); a misnamed
   * window's solve is on probation, which measures the change and takes it back. Printed. */
  const char *win = strstr(log, "solved on its window");
  const char *win_end = win ? strchr(win, '\n') : NULL, *named = win ? strstr(win, "bottleneck ops[2] (map spin)") : NULL;
  const char *lost = win ? strstr(win, "for the knobs before it") : NULL; /* not a kept trial's solve */
  bool won_named = named && (!win_end || named < win_end) && lost && (!win_end || lost < win_end);
  /* Beside two CPU hogs (other processes 1.4 cores busy) that solve once named the heavy stage and gave a light one
   * the workers: with some 0.6 of a core left, time-shared costs. As for the first solve, asserted on a mostly free
   * machine only. */
  if (won_named && other < 0.5) assert_non_null(strstr(log, "ops[2] (map spin) parallelism 1 -> 2: trial: "));
  else if (won_named)
    printf("other processes kept %.2f cores busy: nothing asserted of the solve on the trial's window\n", other);
  else if (win)
    printf("the trial's window did not name the heavy stage: its solve is on probation, nothing asserted of it\n");
  assert_true(js[0] == '[');
  for (const char *l = log; *l;) {
    const char *nl = strchr(l, '\n');
    assert_non_null(nl);
    char line[800];
    size_t n = (size_t)(nl - l) < sizeof line - 1 ? (size_t)(nl - l) : sizeof line - 1;
    memcpy(line, l, n);
    line[n] = 0;
    assert_non_null(strstr(line, " -> "));
    if (!strstr(line, "trial") && !strstr(line, "reverted: ")) {
      assert_non_null(strstr(line, "bottleneck"));
      assert_non_null(strstr(line, "predicted"));
    } else {
      assert_non_null(strstr(line, "elem/s"));
    }
    l = nl + 1;
  }
  sl_free(log);
  sl_free(js);
  sl_pipeline_free(p);
}

/* A stage whose CPU cost per element the test sets. */
static atomic_int g_us = 10;
static int var_call(void *state, sl_elem *e, sl_fn_call *call) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  double end = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + atomic_load(&g_us) * 1e-6;
  volatile uint64_t x = 1;
  for (;;) {
    for (int i = 0; i < 64; i++) x = x * 6364136223846793005ull + 1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    if ((double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 >= end) break;
  }
  return 0;
}

static bool reacted(sl_pipeline *p, sl_tuner *t, void *arg) { return sl_tuner_solves(t) > *(const int *)arg; }

/* The first stage costs 10 us of CPU per element, the second 150 us; then the first costs 600 us. What the
 * mechanism guarantees on any load: the op's CPU per element (thread CPU clocks, which time-sharing does not
 * inflate) moved 60x, so the next two windows both drift from the last solve and agree with each other, and the
 * tuner solves again, on a window that ran entirely at the new cost; the model then sees the first stage as 80% of
 * the CPU and never gives it fewer workers than it had. Whether it gets a worker per core also depends on the
 * predicted gain beating the window's measured throughput: printed. */
static void test_reacts_to_cost_change(void **st) {
  sl_fn_def d = {SL_FN_DEF_VERSION, 0, NULL, var_call, NULL};
  assert_int_equal(sl_fn_register("tune_var", &d, NULL), 0);
  atomic_store(&g_us, 10);
  sl_pipeline *p = tu_pipeline("{\"name\": \"var\", \"ops\": [{\"op\": \"range\", \"stop\": 100000000}, "
                               "{\"op\": \"map\", \"fn\": \"tune_var\", \"parallelism\": \"autotune\"}, "
                               "{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 150}, \"parallelism\": "
                               "\"autotune\"}, {\"op\": \"prefetch\", \"buffer\": \"autotune\"}]}");
  int64_t maxpar = par_of(p, 1);
  sl_tune_opts o = SL_TUNE_OPTS_INIT;
  o.interval = 0.5;
  sl_tuner *t = NULL;
  assert_int_equal(sl_pipeline_tune(&t, p, &o), 0);
  sl_iter *it = NULL;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  bool ok1 = run_until(it, p, t, solved, NULL, 120);
  ok1 = ok1 && run_until(it, p, t, trial_over, NULL, 120); /* and the sequential trial decided */
  run_for(it, p, t, 3 * o.interval); /* the knobs in force for a while */
  int64_t light_before = par_of(p, 1);
  int changes_before = sl_tuner_changes(t);
  int solves0 = sl_tuner_solves(t);
  atomic_store(&g_us, 600);
  bool ok2 = ok1 && run_until(it, p, t, reacted, &solves0, 120);
  int64_t light_after = par_of(p, 1);
  char *log = NULL;
  assert_int_equal(sl_tuner_log(&log, t, false), 0);
  printf("tuner log (the first stage's cost changed after change %d):\n%s", changes_before, log);
  sl_iter_free(it);
  sl_tuner_stop(t);
  printf("cores free: %s; drift re-solve seen: %s; stage workers after the change %lld of %lld (%lld before)\n",
         usable_cores_2() ? "yes" : "no", ok2 ? "yes" : "no", (long long)light_after, (long long)maxpar,
         (long long)light_before);
  assert_true(ok1);
  assert_true(ok2); /* a solve after the change */
  assert_true(light_after >= light_before);
  sl_free(log);
  sl_pipeline_free(p);
}

static uint64_t out_of(sl_pipeline *p, int i) {
  sl_op_stats s;
  assert_int_equal(sl_pipeline_op_stats(&s, p, i), 0);
  return s.elements_out;
}

/* The repeat's live cache (what the tuner sets): the epoch that starts after it is set is kept and replayed, so the
 * input runs two epochs of four, the output is the same sequence, and the memory is given back at the end; with a
 * budget smaller than an epoch the kept part is dropped and the input runs every epoch. */
static void test_repeat_live_cache(void **st) {
  for (int small = 0; small < 2; small++) {
    sl_pipeline *p = tu_pipeline("{\"ops\": [{\"op\": \"range\", \"stop\": 50}, {\"op\": \"map\", \"fn\": \"spin\", "
                                 "\"args\": {\"us\": 1}}, {\"op\": \"repeat\", \"count\": 4}]}");
    atomic_store(&sl__pipeline_op(p, 2)->live_cache, small ? 200 : 1 << 20);
    sl_iter *it = NULL;
    assert_int_equal(sl_pipeline_iter(&it, p), 0);
    sl_elem e;
    sl_elem_init(&e);
    for (int k = 0; k < 200; k++) {
      assert_int_equal(sl_iter_next(&e, it), 0);
      assert_int_equal(*(const int64_t *)sl_comp_data(&e.c[0]), k % 50);
      sl_elem_clear(&e);
      sl_op_stats s;
      assert_int_equal(sl_pipeline_op_stats(&s, p, 2), 0);
      if (!small && k == 120) assert_true(s.bytes_held >= 50 * sizeof(int64_t)); /* epoch 2 kept, replaying */
      if (small) assert_true(s.bytes_held <= 200);
    }
    assert_int_equal(sl_iter_next(&e, it), SL_END);
    sl_iter_free(it);
    assert_int_equal(out_of(p, 1), small ? 200 : 100);
    sl_op_stats s;
    assert_int_equal(sl_pipeline_op_stats(&s, p, 2), 0);
    assert_int_equal(s.bytes_held, 0);
    sl_pipeline_free(p);
  }
}

static bool cache_logged(sl_pipeline *p, sl_tuner *t, void *arg) {
  char *log = NULL;
  assert_int_equal(sl_tuner_log(&log, t, false), 0);
  bool y = strstr(log, " cache 0 -> ") != NULL;
  sl_free(log);
  return y;
}

/* Elements made upstream of the cache stop growing while the output goes on for two more epochs. */
static bool upstream_idle(sl_pipeline *p, sl_tuner *t, void *arg) {
  uint64_t *w = arg; /* [map's count, root's count when it was last seen to move] */
  uint64_t m = out_of(p, 1), r = out_of(p, 4);
  if (m != w[0]) {
    w[0] = m;
    w[1] = r;
    return false;
  }
  return r >= w[1] + 2 * 100;
}

/* The tuner inserts the plan's cache live: a costly deterministic stage before a repeat (300 us per element, an
 * epoch of 100) and a cheap one after it. The model's plan caches the costly stage's output; the repeat keeps the
 * next epoch and replays it, and the costly stage stops running. Asserts what the mechanism guarantees, not speed:
 * the change is logged with its reason, and then the upstream stage goes idle while the output continues. */
static void test_tuner_inserts_cache(void **st) {
  sl_pipeline *p = tu_pipeline("{\"name\": \"cacheable\", \"ops\": [{\"op\": \"range\", \"stop\": 100}, "
                               "{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 300}, \"parallelism\": "
                               "\"autotune\"}, {\"op\": \"repeat\"}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": "
                               "{\"us\": 20}}, {\"op\": \"prefetch\", \"buffer\": \"autotune\"}]}");
  sl_tune_opts o = SL_TUNE_OPTS_INIT;
  o.interval = 0.5;
  sl_tuner *t = NULL;
  assert_int_equal(sl_pipeline_tune(&t, p, &o), 0);
  sl_iter *it = NULL;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  bool logged = run_until(it, p, t, cache_logged, NULL, 120);
  uint64_t w[2] = {UINT64_MAX, 0};
  bool idle = logged && run_until(it, p, t, upstream_idle, w, 120);
  char *log = NULL;
  assert_int_equal(sl_tuner_log(&log, t, false), 0);
  printf("tuner log:\n%s", log);
  sl_iter_free(it);
  sl_tuner_stop(t);
  assert_true(logged);
  assert_non_null(strstr(log, "ops[2] (repeat repeat) cache 0 -> "));
  assert_non_null(strstr(log, "cache after ops[1] (map spin)"));
  assert_true(idle);
  sl_free(log);
  sl_pipeline_free(p);
}

/* What the tuner does to a running pipeline, done by hand: an "autotune" map and interleave switched between
 * workers and parallelism 1 (their consumer's thread), and an "autotune" prefetch between 4 ahead and none (its
 * consumer pulls), every few hundred elements give exactly the elements, in the order, of the same spec run with
 * fixed knobs. */
static void test_inline_switch_keeps_order(void **st) {
  const char *fmt = "{\"ops\": [{\"op\": \"range\", \"stop\": 6}, {\"op\": \"interleave\", \"cycle_length\": 3, "
                    "\"parallelism\": %s, \"source\": [{\"op\": \"range\", \"stop\": 3000}]}, {\"op\": \"map\", "
                    "\"fn\": \"spin\", \"args\": {\"us\": 0}, \"parallelism\": %s}, {\"op\": \"prefetch\", \"buffer\": %s}]}";
  char a[400], b[400];
  snprintf(a, sizeof a, fmt, "1", "1", "1");
  snprintf(b, sizeof b, fmt, "\"autotune\"", "\"autotune\"", "\"autotune\"");
  sl_pipeline *ref = tu_pipeline(a), *p = tu_pipeline(b);
  sl_iter *ir = NULL, *ip = NULL;
  assert_int_equal(sl_pipeline_iter(&ir, ref), 0);
  assert_int_equal(sl_pipeline_iter(&ip, p), 0);
  sl_elem x, y;
  sl_elem_init(&x);
  sl_elem_init(&y);
  int n = 0;
  for (;; n++) {
    if (n % 397 == 0) { /* 1, 2, 1, 2 ... on both ops, at odd moments */
      int par = (n / 397) % 2 ? 2 : 1;
      atomic_store(&sl__pipeline_op(p, 1)->active_par, par);
      atomic_store(&sl__pipeline_op(p, 3)->active_par, par);
      atomic_store(&sl__pipeline_op(p, 4)->active_buf, par == 1 ? 0 : 4); /* the prefetch: none ahead, or 4 */
    }
    int rr = sl_iter_next(&x, ir), rp = sl_iter_next(&y, ip);
    assert_int_equal(rr, rp);
    if (rr == SL_END) break;
    assert_int_equal(rr, 0);
    assert_int_equal(*(const int64_t *)sl_comp_data(&x.c[0]), *(const int64_t *)sl_comp_data(&y.c[0]));
    sl_elem_clear(&x);
    sl_elem_clear(&y);
  }
  assert_int_equal(n, 6 * 3000);
  sl_iter_free(ir);
  sl_iter_free(ip);
  sl_pipeline_free(ref);
  sl_pipeline_free(p);
}

static void test_bad_options(void **st) {
  sl_pipeline *p = tu_pipeline(SPIN4);
  sl_tune_opts o = SL_TUNE_OPTS_INIT;
  o.version = 99;
  sl_tuner *t = NULL;
  assert_int_equal(sl_pipeline_tune(&t, p, &o), SL_EINVAL);
  assert_null(t);
  o.version = SL_TUNE_OPTS_VERSION;
  o.interval = -1;
  assert_int_equal(sl_pipeline_tune(&t, p, &o), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "interval"));
  sl_tuner_stop(NULL);
  sl_pipeline_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_bad_options), cmocka_unit_test(test_converges_on_spin4),
                                     cmocka_unit_test(test_reacts_to_cost_change), cmocka_unit_test(test_repeat_live_cache),
                                     cmocka_unit_test(test_tuner_inserts_cache), cmocka_unit_test(test_inline_switch_keeps_order)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
