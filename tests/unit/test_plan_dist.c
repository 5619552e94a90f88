/* test_plan_dist.c: the offload planner (sl_plan_offload) on synthetic traces with planted costs, bytes and counts:
 * the cut, the workers and the predicted rate it must find, worked out by hand in each case. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sluice/dist.h"
#include "sluice/trace.h"
#include "testutil.h"

/* SL_TEST_TIMEOUT(60) */

typedef struct {
  const char *obj;   /* the op's spec object */
  double n;          /* elements it yielded in the trace */
  double cpu;        /* CPU seconds it spent in all */
  double bytes;      /* bytes it yielded in all */
} dist_op;

/* A trace of a top-level chain whose last op yielded ops[n-1].n elements in 1 s on a 1-core machine. */
static sl_trace *chain_trace(const dist_op *ops, int n) {
  json_t *spec_ops = json_array(), *tops = json_array();
  for (int i = 0; i < n; i++) {
    json_t *o = json_loads(ops[i].obj, 0, NULL);
    assert_non_null(o);
    json_array_append_new(spec_ops, o);
    char path[32];
    snprintf(path, sizeof path, "ops[%d]", i);
    const char *kind = json_string_value(json_object_get(o, "op"));
    json_array_append_new(tops, json_pack("{s:s, s:s, s:s, s:i, s:b, s:I, s:I, s:b, s:b, s:I, s:I, s:I, s:f, s:f, "
                                          "s:f, s:I, s:I, s:f, s:I, s:I, s:I, s:f, s:f}",
                                          "path", path, "op", kind, "label", kind, "parent", i == n - 1 ? -1 : i + 1,
                                          "nested", 0, "parallelism", (json_int_t)1, "buffer", (json_int_t)0, "async", 0,
                                          "random", 0, "elements_out", (json_int_t)ops[i].n, "elements_in",
                                          (json_int_t)(i ? ops[i - 1].n : 0), "bytes_out", (json_int_t)ops[i].bytes,
                                          "cpu_seconds", ops[i].cpu, "wall_seconds", ops[i].cpu, "wait_seconds", 0.0,
                                          "disk_bytes", (json_int_t)0, "skipped", (json_int_t)0, "buffer_occupancy", 0.0,
                                          "bytes_held", (json_int_t)0, "bytes_held_peak", (json_int_t)0, "cardinality",
                                          (json_int_t)-2, "call_mean", 1e-6, "call_sd", 0.0));
  }
  double cpu = 0;
  for (int i = 0; i < n; i++) cpu += ops[i].cpu;
  json_t *root = json_pack("{s:s, s:i, s:s, s:s, s:{s:s, s:o}, s:{s:f, s:i, s:I, s:I, s:f, s:s, s:s}, "
                           "s:{s:f, s:I, s:b, s:f, s:f}, s:o}",
                           "format", "sluice-trace", "version", SL_TRACE_VERSION, "sluice", "test", "origin", "syn",
                           "spec", "name", "syn", "ops", spec_ops, "machine", "cores", 1.0, "cpus_online", 1,
                           "mem_total", (json_int_t)1 << 32, "mem_available", (json_int_t)1 << 32, "disk_bandwidth",
                           1e9, "disk_method", "none", "disk_path", "", "run", "seconds", 1.0, "elements",
                           (json_int_t)ops[n - 1].n, "ended", 0, "throughput", ops[n - 1].n, "process_cpu_seconds", cpu,
                           "ops", tops);
  assert_non_null(root);
  char *s = json_dumps(root, 0);
  json_decref(root);
  sl_trace *t = NULL;
  int rc = sl_trace_from_json(&t, s, strlen(s), "syn");
  free(s);
  if (rc) fprintf(stderr, "%s\n", sl_error_last());
  assert_int_equal(rc, 0);
  return t;
}

/* files -> repeat -> shuffle(1000) -> map(decode) -> batch(10): a 1 s trace made 10 batches (100 decoded images)
 * while the shuffle took 1100 records (1000 of them still in its buffer). Steady state: 10 records per batch. */
static const dist_op SHUF[] = {
    {"{\"op\": \"files\", \"list\": [\"a\"]}", 1, 0.0, 0},
    {"{\"op\": \"repeat\"}", 1100, 0.011, 1100.0 * 1000},        /* 10 us per record, 1 kB each */
    {"{\"op\": \"shuffle\", \"buffer\": 1000}", 100, 0.0, 100.0 * 1000},
    {"{\"op\": \"map\", \"fn\": \"spin\"}", 100, 0.5, 100.0 * 100000}, /* 5 ms per image, 100 kB each */
    {"{\"op\": \"batch\", \"size\": 10}", 10, 0.001, 10.0 * 1000000},  /* 0.1 ms per batch */
};

/* The shuffle's filling is not charged to the output: the records above it cost 10 x 10 us = 0.1 ms per batch and
 * ship 10 kB, not 1100/10 x 10 us = 1.1 ms and 110 kB. */
static void steady_state_through_a_shuffle(void **state) {
  (void)state;
  sl_trace *t = chain_trace(SHUF, 5);
  sl_offload_opts o = SL_OFFLOAD_OPTS_INIT;
  o.workers = 4;
  o.worker_cores = 1;
  o.trainer_cores = 1;
  o.link_bandwidth = 1e12;
  sl_offload_plan p;
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  /* alone: 1 / (0.1 ms + 50 ms + 0.1 ms) */
  assert_true(fabs(p.predicted_local - 1 / 0.0502) < 1e-6 * p.predicted_local);
  /* the best cut sends the decode to the workers (before the batch, ops[4]): the trainer only batches (0.1 ms);
   * 4 workers make 4 / 50.1 ms = 79.8 batches/s */
  assert_int_equal(p.cut, 4);
  assert_int_equal(p.workers, 4);
  assert_true(fabs(p.worker_cpu - 0.0501) < 1e-9);
  assert_true(fabs(p.bytes_per_element - 1e6) < 1e-3);
  assert_true(fabs(p.predicted - 4 / 0.0501) < 1e-6 * p.predicted);
  assert_string_equal(p.limit, "workers");
  /* a link of 10 MB/s: shipping decoded images (1 MB per batch) allows 10/s, shipping records (10 kB) leaves the
   * trainer 50.1 ms per batch: 19.96/s, not 10% over the trainer alone (19.92/s): no cut pays. Taking any gain,
   * records cross the cut before the shuffle (ops[2]) and before the decode (ops[3]) alike, at the same rate: the
   * first of equals is kept. */
  o.link_bandwidth = 1e7;
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_int_equal(p.cut, 0);
  o.min_gain = -1;
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_int_equal(p.cut, 2);
  assert_true(fabs(p.bytes_per_element - 1e4) < 1e-3);
  assert_true(fabs(p.predicted - 1 / 0.0501) < 1e-6 * p.predicted);
  assert_string_equal(p.limit, "trainer");
  sl_trace_free(t);
}

/* Receiving is charged to the trainer. At 20 MB per CPU second, a batch (1 MB) costs it 50 ms to receive: cutting
 * at the end (ops[5]: 50 ms, 20/s) beats cutting before the batch (50 + 0.1 ms). At 2 MB per CPU second a batch
 * costs 500 ms, and records (10 kB: 5 ms, on top of the decode's 50.1 ms: 18.1/s) lose to the trainer alone
 * (50.2 ms: 19.9/s): no cut pays. */
static void receive_cost_on_the_trainer(void **state) {
  (void)state;
  sl_trace *t = chain_trace(SHUF, 5);
  sl_offload_opts o = SL_OFFLOAD_OPTS_INIT;
  o.workers = 4;
  o.worker_cores = 1;
  o.trainer_cores = 1;
  o.link_bandwidth = 1e12;
  o.recv_bandwidth = 2e7;
  sl_offload_plan p;
  /* 20/s against 19.92/s alone: 0.4% is within the model's error, so by default no cut is taken */
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_int_equal(p.cut, 0);
  assert_int_equal(p.workers, 0);
  o.min_gain = -1; /* any gain */
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_int_equal(p.cut, 5);
  assert_true(fabs(p.trainer_cpu - 0.05) < 1e-9);
  assert_true(fabs(p.worker_cpu - (0.0502 + 0.05)) < 1e-9); /* the workers send what the trainer receives */
  assert_true(fabs(p.predicted - 20) < 1e-6);
  assert_string_equal(p.limit, "trainer");
  o.recv_bandwidth = 2e6;
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_int_equal(p.cut, 0);
  assert_int_equal(p.workers, 0);
  assert_true(p.predicted == p.predicted_local);
  /* a version-1 caller's struct has no recv_bandwidth (nor min_gain): they are not read */
  o.version = 1;
  o.recv_bandwidth = 1;
  o.min_gain = 0.5;
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_int_equal(p.cut, 4);
  sl_trace_free(t);
}

/* Sending is charged to the workers, at its own rate. Receiving at 1 GB per CPU second costs the trainer 1 ms a
 * batch (1 MB); sending at 20 MB per CPU second costs a worker 50 ms. Cut before the batch (ops[4]): 4 workers at
 * 50.1 + 50 ms make 39.96/s, half of what the receive rate alone would say (4 / 51.1 ms = 78.3/s). At 4 MB per CPU
 * second (250 ms a batch) decoded images lose to the trainer alone; records (10 kB: 2.5 ms a worker) leave the
 * trainer 50.11 ms, 19.96/s: 0.2% over the trainer alone (19.92/s), and no cut pays. */
static void send_cost_on_the_workers(void **state) {
  (void)state;
  sl_trace *t = chain_trace(SHUF, 5);
  sl_offload_opts o = SL_OFFLOAD_OPTS_INIT;
  o.workers = 4;
  o.worker_cores = 1;
  o.trainer_cores = 1;
  o.link_bandwidth = 1e12;
  o.recv_bandwidth = 1e9;
  sl_offload_plan p;
  /* without a send rate, the workers pay the receive rate */
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_int_equal(p.cut, 4);
  assert_true(fabs(p.worker_cpu - 0.0511) < 1e-9);
  assert_true(fabs(p.predicted - 4 / 0.0511) < 1e-6 * p.predicted);
  o.send_bandwidth = 2e7;
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_int_equal(p.cut, 4);
  assert_int_equal(p.workers, 4);
  assert_true(fabs(p.worker_cpu - 0.1001) < 1e-9);
  assert_true(fabs(p.trainer_cpu - 0.0011) < 1e-9);
  assert_true(fabs(p.predicted - 4 / 0.1001) < 1e-6 * p.predicted);
  assert_string_equal(p.limit, "workers");
  o.send_bandwidth = 4e6;
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_int_equal(p.cut, 0);
  assert_int_equal(p.workers, 0);
  assert_true(p.predicted == p.predicted_local);
  /* taking any gain: the records' cut, the first of equals (before the shuffle, ops[2]) */
  o.min_gain = -1;
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_int_equal(p.cut, 2);
  assert_true(fabs(p.trainer_cpu - 0.05011) < 1e-9);
  assert_true(fabs(p.worker_cpu - 0.0026) < 1e-9);
  assert_true(fabs(p.predicted - 1 / 0.05011) < 1e-6 * p.predicted);
  assert_string_equal(p.limit, "trainer");
  /* a version-2 caller's struct has no send_bandwidth: the workers pay the receive rate */
  o.version = 2;
  o.min_gain = 0;
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_int_equal(p.cut, 4);
  assert_true(fabs(p.worker_cpu - 0.0511) < 1e-9);
  sl_trace_free(t);
}

/* The gain a cut needs over the trainer alone (10% by default), the link free: a trainer of 2 cores alone makes
 * 39.8/s (50.2 ms a batch); 1 worker of 1 core decoding for it (50.1 ms) makes 19.96/s and 1 worker of 1.1 cores
 * 21.96/s: no cut. With 2.4 cores it makes 47.9/s, 20% over the trainer alone: cut. */
static void a_cut_must_beat_the_trainer_alone(void **state) {
  (void)state;
  sl_trace *t = chain_trace(SHUF, 5);
  sl_offload_opts o = SL_OFFLOAD_OPTS_INIT;
  o.workers = 1;
  o.worker_cores = 1;
  o.trainer_cores = 2;
  o.link_bandwidth = 1e12;
  sl_offload_plan p;
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_true(fabs(p.predicted_local - 2 / 0.0502) < 1e-6 * p.predicted_local);
  assert_int_equal(p.cut, 0);
  o.worker_cores = 1.1;
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_int_equal(p.cut, 0);
  o.worker_cores = 2.4;
  assert_int_equal(sl_plan_offload(NULL, &p, t, &o), 0);
  assert_int_equal(p.cut, 4); /* the batch stays on the trainer: 50.1 ms on the worker */
  assert_int_equal(p.workers, 1);
  assert_true(fabs(p.predicted - 2.4 / 0.0501) < 1e-6 * p.predicted);
  sl_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(steady_state_through_a_shuffle),
      cmocka_unit_test(receive_cost_on_the_trainer),
      cmocka_unit_test(send_cost_on_the_workers),
      cmocka_unit_test(a_cut_must_beat_the_trainer_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
