/* test_plan_net.c: the network model of a remote reader (plan/plan_net.c): k requests of B bytes in flight, each
 * paying the time to first byte L and then B / b at one stream's bandwidth, carry min(k B / (L + B / b), link);
 * and the network in the LP (plan_lp.c) on planted counters (known answers): the requests in flight it plans, the
 * bound when the link is the limit, and a tight memory budget shared by the read-ahead. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_int.h"
#include "trace/trace_int.h"
#include "testutil.h"

static void test_rate(void **s) {
  sl__pm_net n = {.latency = 0.05, .stream_bw = 100e6, .block = 8e6, .link = INFINITY};
  /* one request: 8 MB every 50 ms + 80 ms */
  assert_true(fabs(sl__plan_net_rate(&n, 1) - 8e6 / 0.13) < 1);
  /* Little's law: rate grows with the requests in flight until the link caps it */
  assert_true(fabs(sl__plan_net_rate(&n, 4) - 4 * 8e6 / 0.13) < 1);
  n.link = 25e6; /* 200 Mbit/s */
  assert_true(fabs(sl__plan_net_rate(&n, 4) - 25e6) < 1e-6);
  n.link = 100e6; /* one request does not reach it */
  assert_true(fabs(sl__plan_net_rate(&n, 1) - 8e6 / 0.13) < 1);
  /* a stream too fast to time: latency alone */
  sl__pm_net f = {.latency = 0.05, .stream_bw = INFINITY, .block = 1e6, .link = INFINITY};
  assert_true(fabs(sl__plan_net_rate(&f, 2) - 2e6 / 0.05) < 1e-3);
}

/* Planted: 10000 elements on 2 cores; op 1 (a map, 40 us of CPU an element: 50000 elem/s on 2 workers) read 100 MB
 * in 100 requests of 1 MB, 50 ms to first byte and 10 ms transferring each (100 MB/s a stream), one in flight:
 * 10 kB an element, and one request in flight carries 1 MB / 60 ms = 16.7 MB/s. */
#define ELEMS 10000.0
#define PER_REQ (1e6 / 0.06)
#define BPE 1e4
/* The plan of planted counters st (n ops of p, a 6.5 s trace on 2 cores, the process's CPU) under `memory`; frees p. */
static sl_plan *solve_planted(sl_pipeline *p, const sl_op_stats *st, int n, double process_cpu, int64_t memory,
                              char **report) {
  sl_machine m;
  memset(&m, 0, sizeof m);
  m.cores = 2;
  m.cpus_online = 2;
  m.mem_available = (int64_t)1 << 34;
  sl_trace *t = NULL;
  assert_int_equal(sl__trace_from_counters(&t, sl__pipeline_spec(p), "planted", &m, st, NULL, n, 6.5, process_cpu, 0), 0);
  sl_plan_opts o = SL_PLAN_OPTS_INIT;
  o.handoff = SL_PLAN_HANDOFF_NONE;
  o.memory = memory;
  sl_plan *pl = NULL;
  assert_int_equal(sl_plan_solve(&pl, t, &o), 0);
  if (report) assert_int_equal(sl_plan_report(report, pl, false), 0);
  sl_trace_free(t);
  sl_pipeline_free(p);
  return pl;
}

/* sat (NULL: none): the reader's bytes and seconds alone, then together (sl_op_stats.net_solo_bytes ...), and its
 * summed transfer seconds. */
static sl_plan *planted_sat(int64_t memory, const double *sat, char **report) {
  sl_pipeline *p = tu_pipeline("{\"name\": \"n\", \"ops\": [{\"op\": \"range\", \"stop\": 100000000}, {\"op\": "
                               "\"map\", \"fn\": \"spin\", \"args\": {\"us\": 40}}]}");
  sl_op_stats st[2];
  double sum = 0;
  for (int i = 0; i < 2; i++) {
    assert_int_equal(sl_pipeline_op_stats(&st[i], p, i), 0);
    st[i].elements_out = (uint64_t)ELEMS;
    st[i].elements_in = i ? (uint64_t)ELEMS : 0;
    st[i].bytes_out = (uint64_t)(ELEMS * 8);
    st[i].cpu_seconds = ELEMS * (i ? 40e-6 : 0.1e-6);
    st[i].wall_seconds = st[i].cpu_seconds;
    st[i].wait_seconds = 0;
    st[i].runq_seconds = 0;
    sum += st[i].cpu_seconds;
  }
  st[1].net_requests = 100;
  st[1].net_bytes = 100000000;
  st[1].bytes_out = 100000000; /* the reader yields what it received (the plan's bytes per element: 10 kB) */
  st[1].net_ttfb_seconds = 100 * 0.05;
  st[1].net_xfer_seconds = 100 * 0.01;
  st[1].net_block_bytes = 1000000;
  st[1].net_in_flight = 1;
  st[1].wall_seconds += 6; /* the reader waited on its one request */
  if (sat) {
    st[1].net_solo_bytes = (uint64_t)sat[0];
    st[1].net_solo_seconds = sat[1];
    st[1].net_overlap_bytes = (uint64_t)sat[2];
    st[1].net_overlap_seconds = sat[3];
    st[1].net_xfer_seconds = sat[4];
  }
  return solve_planted(p, st, 2, sum, memory, report);
}

static sl_plan *planted(int64_t memory, char **report) { return planted_sat(memory, NULL, report); }

/* Unconstrained: the CPU limits; the plan keeps enough requests in flight to carry its rate with a tenth to spare
 * (Little's law: X x bytes per element x (L + B / b) / B), not the cap. */
static void test_lp_plans_in_flight(void **st) {
  unsetenv("SLUICE_LINK_BANDWIDTH");
  sl_plan *P = planted(0, NULL);
  assert_int_equal(P->nnet, 1);
  const sl__pm_net *x = &P->net[0];
  assert_string_not_equal(sl_plan_limit(P), "network");
  assert_true(P->predicted > 40000 && P->predicted <= 50000);
  double want = ceil(1.1 * P->predicted * BPE / PER_REQ);
  assert_true(fabs((double)x->in_flight - want) <= 1);
  assert_true(x->in_flight > 20 && x->in_flight < 64);
  assert_true(x->rate >= P->predicted * BPE);
  sl_plan_free(P);
}

/* A link of 100 MB/s carries 10000 elements of 10 kB a second: the LP's bound, limit "network" naming the reader,
 * and no more requests in flight than carry it (7, not the 33 the CPU rate would want). */
static void test_lp_link_limit(void **st) {
  setenv("SLUICE_LINK_BANDWIDTH", "100000000", 1);
  char *r = NULL;
  sl_plan *P = planted(0, &r);
  unsetenv("SLUICE_LINK_BANDWIDTH");
  assert_string_equal(sl_plan_limit(P), "network");
  assert_true(fabs(P->bound - 1e4) < 1);
  assert_true(P->predicted <= 1e4 * 1.0001);
  assert_int_equal(sl_plan_bottleneck(P), 1);
  assert_int_equal(P->net[0].in_flight, (int64_t)ceil(1.1 * 1e4 * BPE / PER_REQ));
  assert_non_null(strstr(r, "limited by the network"));
  assert_non_null(strstr(r, "is the limit, waiting on the network"));
  sl_plan_free(P);
  sl_free(r);
}

/* 12 MB of memory: the read-ahead gets what the pipeline's floor leaves, just under 12 requests of 1 MB in the LP
 * (its bound: under 12 x 16.7 MB/s over 10 kB = 20000 elem/s, below the CPU's 50000), 11 whole ones in the plan
 * (18333 elem/s): limit "network", within the budget. */
static void test_lp_memory_tight(void **st) {
  unsetenv("SLUICE_LINK_BANDWIDTH");
  sl_plan *P = planted(12000000, NULL);
  const sl__pm_net *x = &P->net[0];
  assert_string_equal(sl_plan_limit(P), "network");
  assert_true(sl_plan_memory(P) <= 12000000);
  assert_int_equal(x->in_flight, 11);
  assert_true(P->bound <= 12 * PER_REQ / BPE && P->bound >= 11.9 * PER_REQ / BPE);
  assert_true(fabs(P->predicted - 11 * PER_REQ / BPE) < 1);
  sl_plan_free(P);
}

/* The link measured: 10 MB alone at 100 MB/s, then 90 MB with 4 requests at once over 0.9 s, each getting 25 MB/s:
 * a full link of 100 MB/s, which bounds at 10000 elem/s and says so. The same bytes with each request keeping its
 * 100 MB/s together (3 at once, 300 MB/s) show no full link: unknown, the CPU limits. */
static void test_link_measured(void **st) {
  unsetenv("SLUICE_LINK_BANDWIDTH");
  const double full[] = {10e6, 0.1, 90e6, 0.9, 0.1 + 4 * 0.9};
  char *r = NULL;
  sl_plan *P = planted_sat(0, full, &r);
  assert_string_equal(P->link_source, "measured");
  assert_true(fabs(P->net[0].link - 100e6) < 1);
  assert_string_equal(sl_plan_limit(P), "network");
  assert_true(fabs(P->bound - 1e4) < 1);
  assert_non_null(strstr(r, "measured: the requests shared a full link"));
  sl_plan_free(P);
  sl_free(r);
  const double open_link[] = {10e6, 0.1, 90e6, 0.3, 0.1 + 0.9};
  P = planted_sat(0, open_link, &r);
  assert_string_equal(P->link_source, "unknown");
  assert_false(isfinite(P->net[0].link));
  assert_string_not_equal(sl_plan_limit(P), "network");
  assert_non_null(strstr(r, "link unknown"));
  sl_plan_free(P);
  sl_free(r);
  /* the user's figure wins over a measured one */
  setenv("SLUICE_LINK_BANDWIDTH", "50000000", 1);
  P = planted_sat(0, full, NULL);
  unsetenv("SLUICE_LINK_BANDWIDTH");
  assert_string_equal(P->link_source, "user");
  assert_true(fabs(P->bound - 5e3) < 1);
  sl_plan_free(P);
}

/* Four files at once each saw a quarter of a full link: each file's requests together got 10 MB/s (4 at once, each
 * 2.5 MB/s against 100 alone), but the trace's 6.5 s carried 100 MB, 15.4 MB/s: the link is at least that. */
static void test_link_at_least_what_the_trace_carried(void **st) {
  unsetenv("SLUICE_LINK_BANDWIDTH");
  const double shared[] = {10e6, 0.1, 90e6, 9.0, 0.1 + 4 * 9.0};
  sl_plan *P = planted_sat(0, shared, NULL);
  assert_string_equal(P->link_source, "measured");
  assert_true(fabs(P->net[0].link - 100e6 / 6.5) < 1);
  assert_true(fabs(P->bound - 100e6 / 6.5 / BPE) < 1);
  sl_plan_free(P);
}

/* Keep (plan_net.c's sl__plan_net_keep): files -> [repeat] -> tfrecord (the remote reader: 8 objects of 12.5 MB, 10 kB
 * an element, its I/O threads 5 ns a byte: 50 us an element) -> a 40 us map, 10000 elements, a link of 100 MB/s
 * (10000 elem/s). With the repeat and room, the plan keeps the epoch (100 MB and 5%), the reader leaves the LP and
 * its I/O threads' CPU leaves the model: the CPU limits, near 2 / 41 us. Without the repeat, or with 50 MB of memory,
 * nothing is kept and the link limits; the report says why not when the budget is what stops it. Unconstrained by a
 * link, the I/O threads' CPU is priced: 2 / (41 + 50) us at most. */
static sl_plan *planted_keep(bool repeat, int64_t memory, char **report) {
  char spec[512];
  snprintf(spec, sizeof spec, "{\"name\": \"k\", \"ops\": [{\"op\": \"files\", \"list\": [\"http://h.invalid/s-{0..7}.tfrecord\"]}%s, "
           "{\"op\": \"tfrecord\"}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 40}}]}",
           repeat ? ", {\"op\": \"repeat\"}" : "");
  sl_pipeline *p = tu_pipeline(spec);
  int n = sl_pipeline_op_count(p), rd = n - 2;
  sl_op_stats st[4];
  double sum = 0;
  for (int i = 0; i < n; i++) {
    assert_int_equal(sl_pipeline_op_stats(&st[i], p, i), 0);
    bool files = i == 0;
    st[i].elements_out = files ? 8 : (uint64_t)ELEMS;
    st[i].elements_in = i ? (i == rd ? 8 : (uint64_t)ELEMS) : 0;
    st[i].bytes_out = (uint64_t)(ELEMS * 8);
    st[i].cpu_seconds = ELEMS * (i == n - 1 ? 40e-6 : i == rd ? 1e-6 : 0.01e-6);
    st[i].wall_seconds = st[i].cpu_seconds;
    st[i].wait_seconds = 0;
    st[i].runq_seconds = 0;
    sum += st[i].cpu_seconds;
  }
  sl_op_stats *r = &st[rd];
  r->net_requests = 100;
  r->net_bytes = 100000000;
  r->bytes_out = 100000000;
  r->net_ttfb_seconds = 100 * 0.05;
  r->net_xfer_seconds = 100 * 0.01;
  r->net_block_bytes = 1000000;
  r->net_in_flight = 1;
  r->net_objects = 8;
  r->net_object_bytes = 100000000;
  r->net_cpu_seconds = 0.5;
  r->wall_seconds += 6;
  return solve_planted(p, st, n, sum + 0.5, memory, report);
}

static void test_keep(void **st) {
  setenv("SLUICE_LINK_BANDWIDTH", "100000000", 1);
  char *r = NULL, *spec = NULL;
  sl_plan *P = planted_keep(true, 0, &r);
  assert_int_equal(P->nnet, 1);
  const sl__pm_net *x = &P->net[0];
  assert_true(x->reread);
  assert_true(fabs(x->epoch_bytes - 1e8) < 1);
  assert_true(fabs(x->keep - 1.05e8) < 2);
  assert_string_not_equal(sl_plan_limit(P), "network");
  assert_true(P->predicted > 40000 && P->predicted <= 2 / 41e-6 * 1.01);
  assert_non_null(strstr(r, "keeps its objects in memory"));
  assert_int_equal(sl_plan_spec_json(&spec, P), 0);
  assert_non_null(strstr(spec, "\"keep\": 105000000"));
  sl_free(spec);
  sl_free(r);
  sl_plan_free(P);
  P = planted_keep(false, 0, NULL); /* one pass: nothing to keep for */
  assert_false(P->net[0].reread);
  assert_true(P->net[0].keep == 0);
  assert_string_equal(sl_plan_limit(P), "network");
  sl_plan_free(P);
  P = planted_keep(true, 50000000, &r); /* the epoch does not fit */
  assert_true(P->net[0].keep == 0);
  assert_string_equal(sl_plan_limit(P), "network");
  assert_true(sl_plan_memory(P) <= 50000000);
  assert_non_null(strstr(r, "more than the memory budget leaves"));
  sl_free(r);
  sl_plan_free(P);
  unsetenv("SLUICE_LINK_BANDWIDTH");
  P = planted_keep(false, 0, NULL); /* no link figure: the CPU limits, the I/O threads' CPU in it */
  assert_string_not_equal(sl_plan_limit(P), "network");
  assert_true(fabs(P->net[0].cpu - 50e-6) < 1e-9);
  assert_true(P->predicted <= 2 / 91e-6 * 1.01 && P->predicted > 2 / 91e-6 * 0.8);
  sl_plan_free(P);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_rate), cmocka_unit_test(test_lp_plans_in_flight),
                                     cmocka_unit_test(test_lp_link_limit), cmocka_unit_test(test_lp_memory_tight),
                                     cmocka_unit_test(test_link_measured),
                                     cmocka_unit_test(test_link_at_least_what_the_trace_carried),
                                     cmocka_unit_test(test_keep)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
