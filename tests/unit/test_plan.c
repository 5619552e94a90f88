/* test_plan.c: the planner on pipelines with known right answers: synthetic traces whose costs are given, and
 * real runs of `spin` stages whose CPU cost per element is known. Nothing here asserts on speed.
 * SL_TEST_THREADED (real runs use worker threads) */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan_int.h"
#include "testutil.h"

/* SL_TEST_TIMEOUT(240) */

/* ---- synthetic traces: a chain of ops with given costs ---- */
typedef struct {
  const char *obj;  /* the op's spec object */
  double us;        /* CPU microseconds per element it produces */
  double ratio;     /* elements it produces per output element */
  uint64_t bytes;   /* bytes per element */
  uint64_t disk;    /* disk bytes per element */
  int64_t card;     /* cardinality */
  bool random;
  double wall_us;   /* wall microseconds per element when it waits (0: same as us) */
} syn_op;

/* Process CPU seconds the synthetic trace reports (0: the sum of its ops'), and the dataset bytes of a files op
 * (by op index; 0: unknown). */
static double g_syn_process_cpu;
static uint64_t g_syn_src[8];
static bool g_syn_serial[8]; /* ops whose function is SL_FN_SERIAL */
/* run.device_read_bytes and run.read_chars of the synthetic trace (-1: absent, as in a version 1 trace) */
static int64_t g_syn_device = -1, g_syn_rchar = -1;
static double g_syn_N; /* output elements of the synthetic trace (0: 10000) */

static sl_trace *syn_trace(const syn_op *ops, int n, double disk_bw, uint64_t mem_avail, int version) {
  const double N = g_syn_N > 0 ? g_syn_N : 10000, T = 2.0;
  json_t *spec_ops = json_array(), *tops = json_array();
  double cpu = 0; /* the process's CPU: its ops' (the planner charges the rest to the consumer) */
  for (int i = 0; i < n; i++) cpu += N * ops[i].ratio * ops[i].us * 1e-6;
  if (g_syn_process_cpu > 0) cpu = g_syn_process_cpu;
  for (int i = 0; i < n; i++) {
    json_error_t e;
    json_t *o = json_loads(ops[i].obj, 0, &e);
    assert_non_null(o);
    json_array_append_new(spec_ops, o);
    char path[32];
    snprintf(path, sizeof path, "ops[%d]", i);
    const char *kind = json_string_value(json_object_get(o, "op"));
    const char *fn = json_string_value(json_object_get(o, "fn"));
    json_t *par = json_object_get(o, "parallelism");
    double el = N * ops[i].ratio;
    json_array_append_new(tops, json_pack("{s:s, s:s, s:s, s:i, s:b, s:I, s:I, s:b, s:b, s:{s:b, s:b}, s:I, s:I, s:I, "
                                          "s:f, s:f, s:f, s:I, s:I, s:f, s:I, s:I, s:I, s:f, s:f}",
                                          "path", path, "op", kind, "label", fn ? fn : kind, "parent",
                                          i == n - 1 ? -1 : i + 1, "nested", 0, "parallelism",
                                          (json_int_t)(json_is_integer(par) ? json_integer_value(par) : 1), "buffer",
                                          (json_int_t)0, "async", 0, "random", ops[i].random, "autotune",
                                          "parallelism", json_is_string(par), "buffer", 0, "elements_out",
                                          (json_int_t)el, "elements_in", (json_int_t)el, "bytes_out",
                                          (json_int_t)(el * (double)ops[i].bytes), "cpu_seconds",
                                          el * ops[i].us * 1e-6, "wall_seconds", el * (ops[i].wall_us > 0 ? ops[i].wall_us : ops[i].us) * 1e-6,
                                          "wait_seconds", 0.0, "disk_bytes", (json_int_t)(el * (double)ops[i].disk),
                                          "skipped", (json_int_t)0, "buffer_occupancy", 0.0, "bytes_held",
                                          (json_int_t)0, "bytes_held_peak", (json_int_t)0, "cardinality",
                                          (json_int_t)ops[i].card, "call_mean", ops[i].us * 1e-6, "call_sd", 0.0));
    if (i < 8 && g_syn_src[i])
      json_object_set_new(json_array_get(tops, (size_t)i), "source_bytes", json_integer((json_int_t)g_syn_src[i]));
    if (i < 8 && g_syn_serial[i]) json_object_set_new(json_array_get(tops, (size_t)i), "serial", json_true());
  }
  json_t *root = json_pack("{s:s, s:i, s:s, s:s, s:{s:s, s:o}, s:{s:f, s:i, s:I, s:I, s:f, s:s, s:s}, "
                           "s:{s:f, s:I, s:b, s:f, s:f}, s:o}",
                           "format", "sluice-trace", "version", version, "sluice", "test", "origin", "syn", "spec",
                           "name", "syn", "ops", spec_ops, "machine", "cores", 2.0, "cpus_online", 2, "mem_total",
                           (json_int_t)mem_avail, "mem_available", (json_int_t)mem_avail, "disk_bandwidth", disk_bw,
                           "disk_method", "none", "disk_path", "", "run", "seconds", T, "elements", (json_int_t)N,
                           "ended", 0, "throughput", N / T, "process_cpu_seconds", cpu, "ops", tops);
  assert_non_null(root);
  if (g_syn_device >= 0) {
    json_object_set_new(json_object_get(root, "run"), "device_read_bytes", json_integer(g_syn_device));
    json_object_set_new(json_object_get(root, "run"), "read_chars", json_integer(g_syn_rchar));
  }
  char *s = json_dumps(root, 0);
  json_decref(root);
  sl_trace *t = NULL;
  int rc = sl_trace_from_json(&t, s, strlen(s), "syn");
  free(s);
  if (version != SL_TRACE_VERSION) {
    assert_int_equal(rc, SL_EVERSION);
    return NULL;
  }
  if (rc) fprintf(stderr, "%s\n", sl_error_last());
  assert_int_equal(rc, 0);
  return t;
}

static sl_plan *solve(const sl_trace *t, double cores, int64_t memory) {
  sl_plan_opts o = SL_PLAN_OPTS_INIT;
  o.cores = cores;
  o.memory = memory;
  o.handoff = SL_PLAN_HANDOFF_NONE; /* known costs only: no measured thread hand-off */
  sl_plan *p = NULL;
  int rc = sl_plan_solve(&p, t, &o);
  if (rc) fprintf(stderr, "%s\n", sl_error_last());
  assert_int_equal(rc, 0);
  return p;
}

#define RANGE "{\"op\": \"range\", \"stop\": 10000}"
#define SPIN(us) "{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": " #us "}}"

/* 4 spin stages, the second heavy: the LP's bound is C / sum(c_i) and the heavy stage gets the cores. */
static void test_lp_bound_and_allocation(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 1, 8, 0, 10000, false, 0}, {SPIN(50), 50, 1, 8, 0, 10000, false, 0},
                  {SPIN(200), 200, 1, 8, 0, 10000, false, 0}, {SPIN(50), 50, 1, 8, 0, 10000, false, 0},
                  {SPIN(50), 50, 1, 8, 0, 10000, false, 0}};
  sl_trace *t = syn_trace(ops, 5, 0, 1ull << 32, SL_TRACE_VERSION);
  for (double C = 2; C <= 4; C += 2) {
    sl_plan *p = solve(t, C, 0);
    double want = C / 350.1e-6;
    assert_true(fabs(sl_plan_bound(p) / want - 1) < 0.01);
    assert_string_equal(sl_plan_limit(p), "cpu");
    assert_int_equal(sl_plan_bottleneck(p), 2);
    assert_true(sl_plan_parallelism(p, 2) >= (int64_t)ceil(C * 200 / 350.1));
    if (C == 2) { /* at 4 cores one light stage also needs a second thread */
      assert_int_equal(sl_plan_parallelism(p, 1), 1);
      assert_int_equal(sl_plan_parallelism(p, 3), 1);
      assert_int_equal(sl_plan_parallelism(p, 4), 1);
    }
    /* The integer plan reaches the bound here. */
    assert_true(sl_plan_predicted(p) >= 0.99 * sl_plan_bound(p));
    char *spec = NULL;
    assert_int_equal(sl_plan_spec_json(&spec, p), 0);
    assert_null(strstr(spec, "autotune"));
    assert_non_null(strstr(spec, "\"prefetch\""));
    sl_pipeline *q = NULL;
    assert_int_equal(sl_pipeline_from_json(&q, spec, strlen(spec), "planned"), 0);
    sl_pipeline_free(q);
    sl_free(spec);
    sl_plan_free(p);
  }
  sl_trace_free(t);
}

/* Functions that share one lock (Python's, SL_FN_SERIAL) get one core together: two serial 100 us stages bound the
 * pipeline at 1 / 200 us whatever the cores and their parallelism, and the report says why; the CPU alone would
 * allow 4 / 300 us. */
static void test_serial_functions_share_a_core(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 1, 8, 0, 10000, false, 0},
                  {"{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 100}, \"parallelism\": \"autotune\"}", 100, 1, 8, 0, 10000, false, 0},
                  {"{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 100}, \"parallelism\": \"autotune\"}", 100, 1, 8, 0, 10000, false, 0},
                  {"{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 100}, \"parallelism\": \"autotune\"}", 100, 1, 8, 0, 10000, false, 0}};
  g_syn_serial[1] = g_syn_serial[2] = true;
  sl_trace *t = syn_trace(ops, 4, 0, 1ull << 32, SL_TRACE_VERSION);
  g_syn_serial[1] = g_syn_serial[2] = false;
  /* The flag survives the trace's JSON. */
  char *js = NULL;
  assert_int_equal(sl_trace_to_json(&js, t), 0);
  assert_non_null(strstr(js, "\"serial\": true"));
  sl_free(js);
  sl_plan *p = solve(t, 4, 0);
  assert_true(fabs(sl_plan_bound(p) / 5000.0 - 1) < 0.01);
  assert_string_equal(sl_plan_limit(p), "serial");
  assert_true(sl_plan_predicted(p) <= sl_plan_bound(p) * 1.0001);
  char *rep = NULL;
  assert_int_equal(sl_plan_report(&rep, p, false), 0);
  assert_non_null(strstr(rep, "GIL"));
  assert_non_null(strstr(rep, "ops[1] spin ops[2] spin"));
  sl_free(rep);
  sl_plan_free(p);
  sl_trace_free(t);
  /* The same stages without the flag: the CPU bounds them. */
  t = syn_trace(ops, 4, 0, 1ull << 32, SL_TRACE_VERSION);
  p = solve(t, 4, 0);
  assert_true(fabs(sl_plan_bound(p) / (4 / 300.1e-6) - 1) < 0.01);
  assert_string_equal(sl_plan_limit(p), "cpu");
  sl_plan_free(p);
  sl_trace_free(t);
}

/* A sequential op (filter) caps the bound whatever the cores. */
static void test_sequential_cap(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 1, 8, 0, 10000, false, 0}, {SPIN(100), 100, 1, 8, 0, 10000, false, 0},
                  {"{\"op\": \"filter\", \"fn\": \"length\", \"args\": {\"component\": \"value\"}}", 400, 1, 8, 0, -1,
                   false, 0}};
  sl_trace *t = syn_trace(ops, 3, 0, 1ull << 32, SL_TRACE_VERSION);
  sl_plan *p = solve(t, 8, 0);
  assert_true(fabs(sl_plan_bound(p) / 2500.0 - 1) < 0.01);
  assert_string_equal(sl_plan_limit(p), "sequential");
  assert_int_equal(sl_plan_bottleneck(p), 2);
  sl_plan_free(p);
  sl_trace_free(t);
}

/* Disk-bound: 1 MB read per element at 50 MB/s bounds the pipeline at 50 elements/s, and the report says so. */
static void test_disk_bound(void **st) {
  syn_op ops[] = {{RANGE, 1, 1, 8, 1000000, 10000, false, 0}, {SPIN(100), 100, 1, 8, 0, 10000, false, 0}};
  sl_trace *t = syn_trace(ops, 2, 50e6, 1ull << 32, SL_TRACE_VERSION);
  sl_plan *p = solve(t, 2, 0);
  assert_true(fabs(sl_plan_bound(p) / 50.0 - 1) < 0.01);
  assert_string_equal(sl_plan_limit(p), "disk");
  char *r = NULL;
  assert_int_equal(sl_plan_report(&r, p, false), 0);
  assert_non_null(strstr(r, "limited by disk bandwidth"));
  sl_free(r);
  assert_int_equal(sl_plan_report(&r, p, true), 0);
  assert_non_null(strstr(r, "\"limit\": \"disk\""));
  sl_free(r);
  sl_plan_free(p);
  /* A faster disk given as an option lifts the bound to the CPU's. */
  sl_plan_opts o = SL_PLAN_OPTS_INIT;
  o.cores = 2;
  o.handoff = SL_PLAN_HANDOFF_NONE;
  o.disk_bandwidth = 1e12;
  assert_int_equal(sl_plan_solve(&p, t, &o), 0);
  assert_string_equal(sl_plan_limit(p), "cpu");
  sl_plan_free(p);
  sl_trace_free(t);
}

/* Solves t on 2 cores and checks its reports: the limit, and each string of `present` / `absent` in the text report
 * ("T:" prefix) or the JSON one ("J:"). Frees t. */
static void expect_reports(sl_trace *t, const char *limit, const char *const *present, const char *const *absent) {
  sl_plan *p = solve(t, 2, 0);
  char *r = NULL, *js = NULL;
  assert_int_equal(sl_plan_report(&r, p, false), 0);
  assert_int_equal(sl_plan_report(&js, p, true), 0);
  assert_string_equal(sl_plan_limit(p), limit);
  for (int k = 0; present[k]; k++) {
    const char *in = present[k][0] == 'J' ? js : r;
    if (!strstr(in, present[k] + 2)) fprintf(stderr, "not said: %s\n%s\n", present[k] + 2, in);
    assert_non_null(strstr(in, present[k] + 2));
  }
  for (int k = 0; absent && absent[k]; k++) assert_null(strstr(absent[k][0] == 'J' ? js : r, absent[k] + 2));
  sl_free(r);
  sl_free(js);
  sl_plan_free(p);
  sl_trace_free(t);
}

/* Issue 48 row 1: disk is what the block device delivered. A reader of 1 MB per element whose bytes all came from the
 * page cache (device_read_bytes 0, rchar 10 GB) is not limited by a 50 MB/s disk, and its wall time beyond its CPU
 * is not I/O; the same trace with the device delivering every byte is disk-bound and waits on I/O. */
static void test_page_cache_is_not_disk(void **st) {
  syn_op ops[] = {{RANGE, 50, 1, 8, 1000000, 10000, false, 1000}, {SPIN(100), 100, 1, 8, 0, 10000, false, 0}};
  g_syn_rchar = (int64_t)10000 * 1000000;
  g_syn_device = 0;
  sl_trace *cached = syn_trace(ops, 2, 50e6, 1ull << 32, SL_TRACE_VERSION);
  g_syn_device = (int64_t)10000 * 1000000;
  sl_trace *device = syn_trace(ops, 2, 50e6, 1ull << 32, SL_TRACE_VERSION);
  g_syn_device = g_syn_rchar = -1;
  expect_reports(cached, "cpu", (const char *[]){"T:came from the page cache", "J:\"device_share\": 0.0", NULL},
                 (const char *[]){"T:needs threads", "J:\"waits\": \"io\"", NULL});
  expect_reports(device, "disk", (const char *[]){"T:limited by disk bandwidth", "J:\"waits\": \"io\"", NULL}, NULL);
}

/* Issue 48 row 6: 25 batches of 64 are 1,600 decodes. A trace with few output elements but many elements at the op
 * that does the work is planned from (the bottleneck named, counted by the heavy ops); one whose heavy op also made
 * few is too short, and still names the op that dominates the CPU. */
static void test_short_trace_counts_heavy_ops(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 64, 8, 0, 100000, false, 0}, {SPIN(5000), 5000, 64, 8, 0, 100000, false, 0},
                  {SPIN(20), 20, 64, 8, 0, 100000, false, 0}, {"{\"op\": \"batch\", \"size\": 64}", 5, 1, 512, 0, -1, false, 0}};
  /* The same pipeline with 25 elements everywhere (no batch: each output element is one decode). */
  syn_op few[] = {{RANGE, 0.1, 1, 8, 0, 100000, false, 0}, {SPIN(5000), 5000, 1, 8, 0, 100000, false, 0},
                  {SPIN(20), 20, 1, 8, 0, 100000, false, 0}};
  g_syn_N = 25;
  sl_trace *batched = syn_trace(ops, 4, 0, 1ull << 32, SL_TRACE_VERSION), *flat = syn_trace(few, 3, 0, 1ull << 32, SL_TRACE_VERSION);
  g_syn_N = 0;
  expect_reports(batched, "cpu",
                 (const char *[]){"T:Counted by the ops that carry the CPU: the trace saw 25 output elements",
                                  "T:Bottleneck: ops[1] (map spin)", "J:\"bottleneck\": \"ops[1]\"",
                                  "J:\"counted_by\": \"heavy_ops\"", NULL},
                 (const char *[]){"T:Too short", NULL});
  expect_reports(flat, "cpu",
                 (const char *[]){"T:Too short to name a bottleneck: the trace saw 25 output elements",
                                  "T:Dominant op, whatever the count: ops[1] (map spin), 100% of the CPU over 25 of "
                                  "its elements",
                                  "T:<- dominant", "J:\"bottleneck\": null", "J:\"dominant\": \"ops[1]\"", NULL},
                 NULL);
}

#define REPEAT "{\"op\": \"repeat\"}"

static const char *cache_report(sl_plan *p) {
  static char buf[8192];
  char *r = NULL;
  assert_int_equal(sl_plan_report(&r, p, true), 0);
  snprintf(buf, sizeof buf, "%s", r);
  sl_free(r);
  return buf;
}

/* Cache: chosen after the expensive deterministic op when it fits; the planned spec has it there. */
static void test_cache_chosen(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 1, 1000, 0, 10000, false, 0}, {SPIN(300), 300, 1, 1000, 0, 10000, false, 0},
                  {REPEAT, 0.1, 1, 1000, 0, -2, false, 0}, {SPIN(10), 10, 1, 1000, 0, -2, false, 0}};
  sl_trace *t = syn_trace(ops, 4, 0, 1ull << 32, SL_TRACE_VERSION);
  sl_plan *p = solve(t, 2, 0);
  assert_int_equal(sl_plan_cache_point(p), 1);
  /* With the cache the upstream costs vanish: 2 cores / (10 us + the cache read) */
  assert_true(sl_plan_bound(p) > 2 / 11e-6 * 0.9);
  char *spec = NULL;
  assert_int_equal(sl_plan_spec_json(&spec, p), 0);
  json_t *j = json_loads(spec, 0, NULL);
  json_t *pops = json_object_get(j, "ops");
  assert_string_equal(json_string_value(json_object_get(json_array_get(pops, 2), "op")), "cache");
  /* The ops after the cache moved one place down: they keep the seeds of their old places (a seeded shuffle or
   * crop there draws the same after optimize); the ops before it and the cache carry no seed_op. */
  for (int i = 0; i < 3; i++) assert_null(json_object_get(json_array_get(pops, (size_t)i), "seed_op"));
  assert_int_equal(json_integer_value(json_object_get(json_array_get(pops, 3), "seed_op")), 2);
  assert_int_equal(json_integer_value(json_object_get(json_array_get(pops, 4), "seed_op")), 3);
  json_decref(j);
  sl_free(spec);
  sl_plan_free(p);
  sl_trace_free(t);
}

/* The plan optimize falls back to when the input ran faster than every plan: the input's own knobs, nothing
 * inserted. */
static void test_as_traced(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 1, 1000, 0, 10000, false, 0},
                  {"{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 300}, \"parallelism\": 3}", 300, 1, 1000, 0,
                   10000, false, 0},
                  {REPEAT, 0.1, 1, 1000, 0, -2, false, 0}, {SPIN(10), 10, 1, 1000, 0, -2, false, 0}};
  sl_trace *t = syn_trace(ops, 4, 0, 1ull << 32, SL_TRACE_VERSION);
  sl_plan *p = solve(t, 2, 0);
  assert_int_equal(sl_plan_cache_point(p), 1); /* the solved plan changes things: a cache, a root prefetch */
  assert_int_equal(sl__plan_as_traced(p), 0);
  assert_int_equal(sl_plan_cache_point(p), -1);
  assert_int_equal(sl_plan_parallelism(p, 1), 3);
  assert_int_equal(sl_plan_parallelism(p, 3), 1);
  assert_true(sl_plan_predicted(p) > 0);
  char *spec = NULL;
  assert_int_equal(sl_plan_spec_json(&spec, p), 0);
  json_t *j = json_loads(spec, 0, NULL);
  json_t *jo = json_object_get(j, "ops");
  assert_int_equal(json_array_size(jo), 4);
  assert_null(strstr(spec, "\"cache\""));
  assert_null(strstr(spec, "\"prefetch\""));
  assert_int_equal(json_integer_value(json_object_get(json_array_get(jo, 1), "parallelism")), 3);
  json_decref(j);
  sl_free(spec);
  sl_plan_free(p);
  sl_trace_free(t);
}

static void test_cache_refused_random(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 1, 1000, 0, 10000, false, 0},
                  {"{\"op\": \"shuffle\", \"buffer\": 100}", 1, 1, 1000, 0, 10000, true, 0},
                  {SPIN(300), 300, 1, 1000, 0, 10000, false, 0}, {REPEAT, 0.1, 1, 1000, 0, -2, false, 0}};
  sl_trace *t = syn_trace(ops, 4, 0, 1ull << 32, SL_TRACE_VERSION);
  sl_plan *p = solve(t, 2, 0);
  assert_int_equal(sl_plan_cache_point(p), -1);
  /* Before the shuffle it would be legal but worthless (the range costs nothing); after it, refused. */
  assert_non_null(strstr(cache_report(p), "random op ops[1] (shuffle) upstream"));
  sl_plan_free(p);
  sl_trace_free(t);
}

static void test_cache_refused_size(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 1, 100000, 0, 10000, false, 0}, {SPIN(300), 300, 1, 100000, 0, 10000, false, 0},
                  {REPEAT, 0.1, 1, 100000, 0, -2, false, 0}};
  sl_trace *t = syn_trace(ops, 3, 0, 1ull << 32, SL_TRACE_VERSION);
  /* 10000 x 100 kB = 1 GB does not fit 64 MB. */
  sl_plan *p = solve(t, 2, 64 << 20);
  assert_int_equal(sl_plan_cache_point(p), -1);
  assert_non_null(strstr(cache_report(p), "exceeds"));
  assert_true(sl_plan_memory(p) <= 64 << 20);
  sl_plan_free(p);
  /* With 4 GB it fits and is taken. */
  p = solve(t, 2, 4ll << 30);
  assert_int_equal(sl_plan_cache_point(p), 1);
  sl_plan_free(p);
  sl_trace_free(t);
}

static void test_cache_refused_infinite(void **st) {
  syn_op ops[] = {{"{\"op\": \"range\"}", 0.1, 1, 1000, 0, -2, false, 0}, {SPIN(300), 300, 1, 1000, 0, -2, false, 0},
                  {REPEAT, 0.1, 1, 1000, 0, -2, false, 0}};
  sl_trace *t = syn_trace(ops, 3, 0, 1ull << 32, SL_TRACE_VERSION);
  sl_plan *p = solve(t, 2, 0);
  assert_int_equal(sl_plan_cache_point(p), -1);
  assert_non_null(strstr(cache_report(p), "infinite cardinality"));
  sl_plan_free(p);
  sl_trace_free(t);
}

/* An op that waits 2 ms per element (I/O) and uses 10 us of CPU: with its parallelism tunable it gets the threads to
 * overlap its waits and the CPU binds; with its parallelism fixed at 1, waiting binds (one thread: 1 / 2050 us). */
static void test_wait_bound(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 1, 8, 0, 10000, false, 0},
                  {"{\"op\": \"map\", \"fn\": \"sleep_io\", \"args\": {\"us\": 2000}, \"parallelism\": \"autotune\"}",
                   10, 1, 8, 0, 10000, false, 2000},
                  {SPIN(50), 50, 1, 8, 0, 10000, false, 0}};
  sl_trace *t = syn_trace(ops, 3, 0, 1ull << 32, SL_TRACE_VERSION);
  sl_plan *p = solve(t, 2, 0);
  assert_string_equal(sl_plan_limit(p), "cpu");
  assert_true(fabs(sl_plan_bound(p) * 60.1e-6 / 2 - 1) < 0.01);
  assert_true(sl_plan_predicted(p) >= 0.9 * sl_plan_bound(p));
  assert_true(sl_plan_parallelism(p, 1) >= (int64_t)(0.9 * sl_plan_predicted(p) * 2010e-6));
  assert_int_equal(sl_plan_bottleneck(p), 1);
  char *r = NULL;
  assert_int_equal(sl_plan_report(&r, p, false), 0);
  assert_non_null(strstr(r, "it needs threads, not cores"));
  sl_free(r);
  sl_plan_free(p);
  sl_plan_opts o = SL_PLAN_OPTS_INIT;
  o.cores = 2;
  o.handoff = SL_PLAN_HANDOFF_NONE;
  o.knobs = SL_PLAN_KNOBS_AUTOTUNE;
  sl_trace_free(t);
  ops[1].obj = "{\"op\": \"map\", \"fn\": \"sleep_io\", \"args\": {\"us\": 2000}, \"parallelism\": 1}";
  t = syn_trace(ops, 3, 0, 1ull << 32, SL_TRACE_VERSION);
  assert_int_equal(sl_plan_solve(&p, t, &o), 0);
  assert_string_equal(sl_plan_limit(p), "wait");
  /* One thread runs the whole chain: 2000 us of waiting + 50 us of spin + the range. */
  assert_true(fabs(sl_plan_bound(p) * 2050.1e-6 - 1) < 0.01);
  sl_plan_free(p);
  sl_trace_free(t);
}

/* ---- bad input ---- */
static void test_bad_version(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 1, 8, 0, 10000, false, 0}};
  assert_null(syn_trace(ops, 1, 0, 1ull << 32, SL_TRACE_VERSION + 1));
  assert_non_null(strstr(sl_error_last(), "version"));
  sl_trace *t = NULL;
  assert_int_equal(sl_trace_from_json(&t, "{\"format\": \"other\"}", 19, "x.json"), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "not a sluice trace"));
  assert_int_equal(sl_trace_from_json(&t, "{nope", 5, "x.json"), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "x.json:1:"));
  assert_int_equal(sl_trace_load(&t, "/nonexistent/trace.json"), SL_ENOTFOUND); /* opened by sl__open_regular */
}

static void test_different_spec(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 1, 8, 0, 10000, false, 0}, {SPIN(100), 100, 1, 8, 0, 10000, false, 0}};
  sl_trace *t = syn_trace(ops, 2, 0, 1ull << 32, SL_TRACE_VERSION);
  /* The same pipeline with other knobs and a prefetch is the same pipeline. */
  sl_pipeline *same = tu_pipeline("{\"name\": \"syn\", \"ops\": [" RANGE ", {\"op\": \"map\", \"fn\": \"spin\", "
                                  "\"args\": {\"us\": 100}, \"parallelism\": 4}, {\"op\": \"prefetch\", \"buffer\": 3}]}");
  assert_int_equal(sl_trace_check_spec(t, same), 0);
  sl_pipeline *other = tu_pipeline("{\"name\": \"syn\", \"ops\": [" RANGE ", " SPIN(50) "]}");
  assert_int_equal(sl_trace_check_spec(t, other), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "different pipeline"));
  assert_non_null(strstr(sl_error_last(), "\"us\":50"));
  sl_pipeline_free(same);
  sl_pipeline_free(other);
  sl_trace_free(t);
}

static void test_infeasible_budgets(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 1, 4000, 0, 10000, false, 0}, {SPIN(100), 100, 1, 4000, 0, 10000, false, 0}};
  sl_trace *t = syn_trace(ops, 2, 0, 1ull << 32, SL_TRACE_VERSION);
  sl_plan *p = NULL;
  sl_plan_opts o = SL_PLAN_OPTS_INIT;
  o.cores = -1;
  assert_int_equal(sl_plan_solve(&p, t, &o), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "infeasible budget"));
  o.cores = 2;
  o.consumer_cores = 2;
  assert_int_equal(sl_plan_solve(&p, t, &o), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "no cores left"));
  o.consumer_cores = 0;
  o.memory = 1000; /* below one 4 kB element */
  assert_int_equal(sl_plan_solve(&p, t, &o), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "infeasible budget: memory"));
  assert_null(p);
  sl_trace_free(t);
}

/* ---- real runs of spin stages ---- */
static const sl_machine *test_machine(void) {
  static sl_machine m;
  sl_machine_probe(&m, NULL, 0);
  m.cores = 2;
  return &m;
}

/* A planted bottleneck: measured costs match the spin microseconds, the analyzer names the heavy op, the LP bound
 * equals C / sum(c_i) and the heavy stage gets the cores. */
static void test_planted_bottleneck(void **st) {
  sl_pipeline *p = tu_pipeline("{\"name\": \"planted\", \"ops\": [{\"op\": \"range\", \"stop\": 1000000}, " SPIN(100)
                               ", " SPIN(800) ", " SPIN(100) ", " SPIN(100) "]}");
  sl_trace_opts to = SL_TRACE_OPTS_INIT;
  to.take = 1000; /* the heavy stage timed 1 call in 2-4 (a few % of spread), the light ones 1 in 16-32 (more) */
  to.seconds = 60;
  to.machine = test_machine();
  sl_trace *t = NULL;
  assert_int_equal(sl_trace_run(&t, p, &to), 0);
  assert_int_equal(sl_trace_elements(t), 1000);
  sl_op_stats s;
  double sum = 0;
  for (int i = 0; i < sl_trace_op_count(t); i++) {
    assert_int_equal(sl_trace_op(&s, t, i), 0);
    sum += s.cpu_seconds / (double)sl_trace_elements(t);
  }
  /* 1100 us of spin per element, the heavy stage 800 us of it. The costs are sampled estimates: what is asserted is
   * the relation spin guarantees (it burns thread CPU, so load does not change it and sampling noise cannot turn
   * 8x into less than 2x), not a window around 1100 us (bench/trace_cost measures the estimates' accuracy). */
  sl_op_stats heavy;
  assert_int_equal(sl_trace_op(&heavy, t, 2), 0);
  for (int i = 1; i <= 4; i++) {
    if (i == 2) continue;
    assert_int_equal(sl_trace_op(&s, t, i), 0);
    if (!(heavy.cpu_seconds > 2 * s.cpu_seconds)) /* once under a loaded CI, not reproduced since: the figures */
      for (int j = 0; j < sl_trace_op_count(t); j++) {
        sl_op_stats d;
        sl_trace_op(&d, t, j);
        print_message("op %d: %.1f us CPU, %.1f us wall per element, %llu out\n", j,
                      d.cpu_seconds * 1e6 / (double)sl_trace_elements(t),
                      d.wall_seconds * 1e6 / (double)sl_trace_elements(t), (unsigned long long)d.elements_out);
      }
    assert_true(heavy.cpu_seconds > 2 * s.cpu_seconds);
  }
  sl_plan *pl = solve(t, 2, 0);
  assert_int_equal(sl_plan_bottleneck(pl), 2);
  /* The bound is C / sum(c) over the model's CPU per element: the ops' costs, topped up to the process's CPU per
   * element when they sum to less (the consumer's loop, and what sampling left out: on 1000 elements each op's
   * estimate spreads by 5-17%, so their sum can fall short of what the process spent). */
  double cpe = sl_plan_cpu_per_element(pl), proc = sl_trace_process_cpu(t) / (double)sl_trace_elements(t);
  if (!(fabs(sl_plan_bound(pl) * cpe / 2 - 1) < 0.01 && cpe >= 0.999 * fmin(sum, proc) && cpe <= 1.001 * fmax(sum, proc))) {
    char *rep = NULL; /* the figures the bound was made from */
    sl_plan_report(&rep, pl, false);
    print_message("bound %.1f elem/s; ops' sum %.1f us, process %.1f us, model %.1f us CPU per element\n%s",
                  sl_plan_bound(pl), sum * 1e6, proc * 1e6, cpe * 1e6, rep ? rep : "");
    sl_free(rep);
  }
  assert_true(fabs(sl_plan_bound(pl) * cpe / 2 - 1) < 0.01);
  assert_true(cpe >= 0.999 * fmin(sum, proc) && cpe <= 1.001 * fmax(sum, proc));
  /* And that is the planted work: 1100 us of spin per element (thread CPU, which load does not change), plus the
   * engine's own per-element cost (more under the sanitizers). */
  assert_true(cpe > 0.97 * 1100e-6 && cpe < 1.5 * 1100e-6);
  /* The heavy stage gets the cores. (The light stages' own times are sampled estimates, so a tie between equally
   * good plans may fall either way: not asserted.) */
  assert_true(sl_plan_parallelism(pl, 2) >= 2);
  for (int i = 1; i <= 4; i++) assert_true(sl_plan_parallelism(pl, i) <= sl_plan_parallelism(pl, 2));
  char *r = NULL;
  assert_int_equal(sl_plan_report(&r, pl, false), 0);
  assert_non_null(strstr(r, "Bottleneck: ops[2] (map spin)"));
  /* The report fits a terminal: 100 columns, and 24 lines would hold 5 more ops. */
  int lines = 0, col = 0, widest = 0;
  for (char *c = r; *c; c++) {
    if (*c == '\n') lines++, col = 0;
    else if (++col > widest) widest = col;
  }
  assert_true(lines <= 19);
  assert_true(widest <= 100);
  sl_free(r);
  sl_plan_free(pl);
  sl_trace_free(t);
  sl_pipeline_free(p);
}

/* A trace survives its JSON form. */
static void test_trace_round_trip(void **st) {
  sl_pipeline *p = tu_pipeline("{\"name\": \"rt\", \"ops\": [{\"op\": \"range\", \"stop\": 500}, " SPIN(5)
                               ", {\"op\": \"batch\", \"size\": 10}, {\"op\": \"prefetch\", \"buffer\": 2}]}");
  sl_trace_opts to = SL_TRACE_OPTS_INIT;
  to.machine = test_machine();
  sl_trace *t = NULL, *u = NULL;
  assert_int_equal(sl_trace_run(&t, p, &to), 0);
  assert_true(sl_trace_ended(t));
  assert_int_equal(sl_trace_elements(t), 50);
  char *a = NULL, *b = NULL;
  assert_int_equal(sl_trace_to_json(&a, t), 0);
  assert_int_equal(sl_trace_from_json(&u, a, strlen(a), "rt"), 0);
  assert_int_equal(sl_trace_to_json(&b, u), 0);
  assert_string_equal(a, b);
  assert_int_equal(sl_trace_check_spec(u, p), 0);
  sl_op_stats s;
  assert_int_equal(sl_trace_op(&s, u, 0), 0);
  assert_int_equal(s.elements_out, 500);
  assert_int_equal(s.cardinality, 500);
  sl_free(a);
  sl_free(b);
  sl_trace_free(t);
  sl_trace_free(u);
  sl_pipeline_free(p);
}

/* The one-line API: "autotune" knobs get numbers; fixed knobs stay. */
static void test_pipeline_optimize(void **st) {
  sl_pipeline *p = tu_pipeline("{\"name\": \"one\", \"ops\": [{\"op\": \"range\", \"stop\": 100000}, {\"op\": \"map\", "
                               "\"fn\": \"spin\", \"args\": {\"us\": 200}, \"parallelism\": \"autotune\"}, {\"op\": "
                               "\"map\", \"fn\": \"spin\", \"args\": {\"us\": 20}, \"parallelism\": 1}]}");
  sl_optimize_opts oo = SL_OPTIMIZE_OPTS_INIT;
  sl_optimize_result res;
  oo.trace_seconds = 0.3;
  oo.machine = test_machine();
  oo.result = &res;
  assert_int_equal(sl_pipeline_optimize(p, &oo), 0);
  assert_true(res.predicted > 0 && res.bound >= res.predicted * 0.999);
  char *s = NULL;
  assert_int_equal(sl_pipeline_to_json(&s, p), 0);
  assert_null(strstr(s, "autotune"));
  json_t *j = json_loads(s, 0, NULL);
  json_t *ops = json_object_get(j, "ops");
  assert_true(json_integer_value(json_object_get(json_array_get(ops, 1), "parallelism")) >= 2);
  assert_int_equal(json_integer_value(json_object_get(json_array_get(ops, 2), "parallelism")), 1);
  json_decref(j);
  sl_free(s);
  /* The rebuilt pipeline runs. */
  sl_iter *it = NULL;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  for (int i = 0; i < 20; i++) {
    assert_int_equal(sl_iter_next(&e, it), 0);
    sl_elem_clear(&e);
  }
  sl_iter_free(it);
  sl_pipeline_free(p);
}


/* A trace that ended while a shuffle buffer was filling: its upstream made twice the elements the output took.
 * In steady state a shuffle passes on one element per element it takes, so the upstream costs count once. */
static void test_shuffle_fill_visits(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 2, 8, 0, 10000, false, 0}, {SPIN(100), 100, 2, 8, 0, 10000, false, 0},
                  {"{\"op\": \"shuffle\", \"buffer\": 10000}", 0.1, 1, 8, 0, 10000, true, 0},
                  {SPIN(100), 100, 1, 8, 0, 10000, false, 0}};
  sl_trace *t = syn_trace(ops, 4, 0, 1ull << 32, SL_TRACE_VERSION);
  sl_plan *p = solve(t, 2, 0);
  assert_true(fabs(sl_plan_bound(p) * 200.2e-6 / 2 - 1) < 0.01);
  sl_plan_free(p);
  sl_trace_free(t);
}

static bool report_has(sl_plan *p, const char *what) {
  char *r = NULL;
  assert_int_equal(sl_plan_report(&r, p, false), 0);
  bool has = strstr(r, what) != NULL;
  sl_free(r);
  return has;
}

/* Own times are differences of sampled times: one op shows wall above its CPU, its neighbour the reverse, and the
 * thread as a whole spent no more wall than CPU. Nobody waited on I/O. */
static void test_no_phantom_waits(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 1, 8, 0, 10000, false, 0}, {SPIN(50), 50, 1, 8, 0, 10000, false, 150},
                  {SPIN(100), 100, 1, 8, 0, 10000, false, 1}};
  sl_trace *t = syn_trace(ops, 3, 0, 1ull << 32, SL_TRACE_VERSION);
  sl_plan *p = solve(t, 2, 0);
  assert_false(report_has(p, "I/O or sleep"));
  assert_string_equal(sl_plan_limit(p), "cpu");
  sl_plan_free(p);
  sl_trace_free(t);
  /* The control: with its neighbour's wall as measured, the same op does wait. */
  ops[2].wall_us = 0;
  t = syn_trace(ops, 3, 0, 1ull << 32, SL_TRACE_VERSION);
  p = solve(t, 2, 0);
  assert_true(report_has(p, "I/O or sleep"));
  sl_plan_free(p);
  sl_trace_free(t);
}

/* A process that kept every core busy was not waiting on I/O, whatever its ops' wall times say. */
static void test_saturated_no_waits(void **st) {
  syn_op ops[] = {{RANGE, 0.1, 1, 8, 0, 10000, false, 0}, {SPIN(50), 50, 1, 8, 0, 10000, false, 500},
                  {SPIN(100), 100, 1, 8, 0, 10000, false, 0}};
  sl_trace *t = syn_trace(ops, 3, 0, 1ull << 32, SL_TRACE_VERSION);
  sl_plan *p = solve(t, 2, 0);
  assert_true(report_has(p, "I/O or sleep"));
  sl_plan_free(p);
  sl_trace_free(t);
  g_syn_process_cpu = 2 * 2.0; /* 2 cores x the trace's 2 s */
  t = syn_trace(ops, 3, 0, 1ull << 32, SL_TRACE_VERSION);
  g_syn_process_cpu = 0;
  p = solve(t, 2, 0);
  assert_false(report_has(p, "I/O or sleep"));
  sl_plan_free(p);
  sl_trace_free(t);
}

/* A trace that read a quarter of the dataset's bytes: the cache's size is scaled from the files' sizes. */
static void test_cache_estimated(void **st) {
  syn_op ops[] = {{"{\"op\": \"files\", \"list\": [\"a.tfrecord\"]}", 0.1, 0.0001, 8, 0, 1, false, 0},
                  {"{\"op\": \"tfrecord\"}", 1, 1, 1000, 10000, -1, false, 0},
                  {SPIN(300), 300, 1, 1000, 0, -1, false, 0}, {REPEAT, 0.1, 1, 1000, 0, -2, false, 0},
                  {SPIN(10), 10, 1, 1000, 0, -2, false, 0}};
  g_syn_src[0] = 400000000;
  sl_trace *t = syn_trace(ops, 5, 0, 1ull << 32, SL_TRACE_VERSION);
  g_syn_src[0] = 0;
  sl_plan *p = solve(t, 2, 0);
  assert_int_equal(sl_plan_cache_point(p), 2);
  assert_true(report_has(p, "(about 49.6 MB)"));
  assert_non_null(strstr(cache_report(p), "\"cache_after\": \"ops[2]\""));
  /* 10000 elements read 100 MB of 400 MB: 40000 elements of 1000 + 128 bytes, and a 10% margin. */
  assert_non_null(strstr(cache_report(p), "\"bytes\": 49632000"));
  sl_plan_free(p);
  /* The estimate is held to the budget too. */
  p = solve(t, 2, 40 << 20);
  assert_int_equal(sl_plan_cache_point(p), -1);
  assert_non_null(strstr(cache_report(p), "exceeds"));
  sl_plan_free(p);
  sl_trace_free(t);
  /* Without the dataset's size there is nothing to scale by. */
  t = syn_trace(ops, 5, 0, 1ull << 32, SL_TRACE_VERSION);
  p = solve(t, 2, 0);
  assert_int_equal(sl_plan_cache_point(p), -1);
  assert_non_null(strstr(cache_report(p), "size unknown"));
  sl_plan_free(p);
  sl_trace_free(t);
}

/* Hand-offs decide: elements that cost less to make than to hand over stay on one thread; expensive ones get the
 * cores. */
static void test_handoff_decides(void **st) {
  sl_plan_opts o = SL_PLAN_OPTS_INIT;
  o.cores = 2;
  o.handoff = 10e-6;
  syn_op cheap[] = {{RANGE, 0.1, 1, 8, 0, 10000, false, 0}, {SPIN(1), 1, 1, 8, 0, 10000, false, 0},
                    {SPIN(1), 1, 1, 8, 0, 10000, false, 0}, {SPIN(1), 1, 1, 8, 0, 10000, false, 0}};
  sl_trace *t = syn_trace(cheap, 4, 0, 1ull << 32, SL_TRACE_VERSION);
  sl_plan *p = NULL;
  assert_int_equal(sl_plan_solve(&p, t, &o), 0);
  for (int i = 1; i <= 3; i++) assert_int_equal(sl_plan_parallelism(p, i), 1);
  /* Nor does a root prefetch pay for its hand-off here. */
  char *spec = NULL;
  assert_int_equal(sl_plan_spec_json(&spec, p), 0);
  assert_null(strstr(spec, "prefetch"));
  sl_free(spec);
  sl_plan_free(p);
  sl_trace_free(t);
  syn_op dear[] = {{RANGE, 0.1, 1, 8, 0, 10000, false, 0}, {SPIN(200), 200, 1, 8, 0, 10000, false, 0},
                   {SPIN(1), 1, 1, 8, 0, 10000, false, 0}};
  t = syn_trace(dear, 3, 0, 1ull << 32, SL_TRACE_VERSION);
  assert_int_equal(sl_plan_solve(&p, t, &o), 0);
  assert_true(sl_plan_parallelism(p, 1) >= 2);
  assert_int_equal(sl_plan_parallelism(p, 2), 1);
  sl_plan_free(p);
  sl_trace_free(t);
}

/* A measured run of a pipeline with a cache starts counting once the cache holds its first pass. */
static void test_warmup_fills_caches(void **st) {
  sl_pipeline *p = tu_pipeline("{\"name\": \"wc\", \"ops\": [{\"op\": \"range\", \"stop\": 300}, " SPIN(50)
                               ", {\"op\": \"cache\"}, {\"op\": \"repeat\"}]}");
  sl_trace_opts to = SL_TRACE_OPTS_INIT;
  to.machine = test_machine();
  to.take = 500;
  to.warmup = 0.001;
  to.warmup_fills_caches = true;
  sl_trace *t = NULL;
  assert_true(!sl_pipeline_caches_complete(p));
  assert_int_equal(sl_trace_run(&t, p, &to), 0);
  assert_true(sl_pipeline_caches_complete(p));
  sl_op_stats s;
  assert_int_equal(sl_trace_op(&s, t, 1), 0);
  assert_int_equal(s.elements_out, 0); /* every counted element came from the cache */
  sl_trace_free(t);
  sl_pipeline_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shuffle_fill_visits),     cmocka_unit_test(test_no_phantom_waits),
      cmocka_unit_test(test_saturated_no_waits),      cmocka_unit_test(test_cache_estimated),
      cmocka_unit_test(test_handoff_decides),         cmocka_unit_test(test_warmup_fills_caches),
      cmocka_unit_test(test_lp_bound_and_allocation), cmocka_unit_test(test_sequential_cap),
      cmocka_unit_test(test_serial_functions_share_a_core),
      cmocka_unit_test(test_disk_bound),              cmocka_unit_test(test_wait_bound),
      cmocka_unit_test(test_page_cache_is_not_disk),
      cmocka_unit_test(test_short_trace_counts_heavy_ops),
      cmocka_unit_test(test_cache_chosen),
      cmocka_unit_test(test_as_traced),
      cmocka_unit_test(test_cache_refused_random),    cmocka_unit_test(test_cache_refused_size),
      cmocka_unit_test(test_cache_refused_infinite),  cmocka_unit_test(test_bad_version),
      cmocka_unit_test(test_different_spec),          cmocka_unit_test(test_infeasible_budgets),
      cmocka_unit_test(test_planted_bottleneck),      cmocka_unit_test(test_trace_round_trip),
      cmocka_unit_test(test_pipeline_optimize),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
