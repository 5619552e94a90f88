#define _GNU_SOURCE
/* test_state.c: a run's saved position (sl_iter_state / sl_pipeline_iter_at): cut a run at many points, restore
 * (on the same or another parallelism), and the elements after the cut are exactly those of the uninterrupted run,
 * in order; across repeat's epochs, shuffles, interleaves, parallel and random maps, filters, batches, prefetches;
 * bad states (truncated, damaged, of another pipeline, data changed) are refused with messages that say why.
 * SL_TEST_THREADED SL_TEST_TIMEOUT(300) */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sluice/tfrecord.h"

static char *g_dir;

/* A random map: adds "r", drawn from the element's seed. */
static int tag_call(void *st, sl_elem *e, sl_fn_call *call) {
  (void)st;
  return sl_elem_set_i64(e, "r", (int64_t)(call->seed & 0xffff));
}
/* A filter that drops a record in 5 by its bytes (or a "value" that is a multiple of 5 or 7 after 40). */
static int drop_call(void *st, sl_elem *e, sl_fn_call *call) {
  (void)st;
  const sl_comp *c = sl_elem_get(e, "record"), *v = sl_elem_get(e, "value");
  int64_t x;
  if (!c && v && !sl_comp_get_i64(&x, v)) {
    call->keep = x % 5 != 0 && !(x > 40 && x % 7 == 0);
    return 0;
  }
  uint64_t h = 0;
  const unsigned char *d = c ? sl_comp_data(c) : NULL;
  for (size_t i = 0; c && i < c->size; i++) h = h * 31 + d[i];
  call->keep = h % 5 != 0;
  return 0;
}

/* A map that fails on the values test_drop drops (for on_error "skip", on workers). */
static int fail_call(void *st, sl_elem *e, sl_fn_call *call) {
  sl_fn_call c = {.keep = true};
  drop_call(st, e, &c);
  (void)call;
  if (c.keep) return 0;
  sl_error_set(SL_EINVAL, "a planted failure");
  return SL_EINVAL;
}

static int setup(void **s) {
  (void)s;
  static const sl_fn_def tag = {SL_FN_DEF_VERSION, SL_FN_RANDOM, NULL, tag_call, NULL};
  static const sl_fn_def drop = {SL_FN_DEF_VERSION, SL_FN_FILTER, NULL, drop_call, NULL};
  sl_fn_register("test_tag", &tag, NULL);
  sl_fn_register("test_drop", &drop, NULL);
  static const sl_fn_def fail = {SL_FN_DEF_VERSION, 0, NULL, fail_call, NULL};
  sl_fn_register("test_fail", &fail, NULL);
  g_dir = tu_tmpdir("state");
  static const int counts[] = {37, 41, 23};
  for (int f = 0; f < 3; f++) {
    char path[512];
    snprintf(path, sizeof path, "%s/d-%d.tfrecord", g_dir, f);
    sl_tfrecord_writer *w;
    if (sl_tfrecord_writer_open(&w, path, SL_COMPRESSION_NONE)) return -1;
    for (int k = 0; k < counts[f]; k++) {
      char rec[64];
      int n = snprintf(rec, sizeof rec, "file %d record %d%.*s", f, k, k % 9, "xxxxxxxxx");
      if (sl_tfrecord_write(w, rec, (size_t)n)) return -1;
    }
    if (sl_tfrecord_writer_close(w)) return -1;
  }
  return 0;
}
static int teardown(void **s) {
  (void)s;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd)) return -1;
  free(g_dir);
  return 0;
}

/* The specs: %1$s the data directory, %2$d the parallelism of the threaded ops. */
static const char *const SPECS[] = {
    "{\"seed\": %3$d, \"ops\": [{\"op\": \"files\", \"glob\": \"%1$s/d-*.tfrecord\", \"shuffle\": true},"
    " {\"op\": \"tfrecord\"}, {\"op\": \"shuffle\", \"buffer\": 16},"
    " {\"op\": \"map\", \"fn\": \"test_tag\", \"parallelism\": %2$d}, {\"op\": \"filter\", \"fn\": \"test_drop\"},"
    " {\"op\": \"batch\", \"size\": 5}, {\"op\": \"prefetch\", \"buffer\": 3}]}",
    "{\"seed\": %3$d, \"ops\": [{\"op\": \"files\", \"glob\": \"%1$s/d-*.tfrecord\"},"
    " {\"op\": \"interleave\", \"cycle_length\": 2, \"parallelism\": %2$d, \"source\": [{\"op\": \"tfrecord\"}]},"
    " {\"op\": \"map\", \"fn\": \"test_tag\", \"parallelism\": %2$d}, {\"op\": \"shuffle\", \"buffer\": 8},"
    " {\"op\": \"batch\", \"size\": 4, \"drop_remainder\": true}, {\"op\": \"prefetch\", \"buffer\": 2}]}",
    "{\"seed\": %3$d, \"ops\": [{\"op\": \"range\", \"stop\": 150}, {\"op\": \"repeat\", \"count\": 3},"
    " {\"op\": \"shuffle\", \"buffer\": 10, \"initial\": 3}, {\"op\": \"take\", \"count\": 400}, {\"op\": \"skip\", \"count\": 7},"
    " {\"op\": \"shard\", \"num_shards\": 2, \"index\": 1}, {\"op\": \"map\", \"fn\": \"test_tag\", \"parallelism\": %2$d},"
    " {\"op\": \"batch\", \"size\": 3}, {\"op\": \"prefetch\", \"buffer\": %2$d}]}",
    "{\"seed\": %3$d, \"ops\": [{\"op\": \"files\", \"glob\": \"%1$s/d-*.tfrecord\", \"shuffle\": true},"
    " {\"op\": \"tfrecord\"}, {\"op\": \"repeat\", \"count\": 2},"
    " {\"op\": \"map\", \"fn\": \"test_tag\", \"parallelism\": %2$d}, {\"op\": \"prefetch\", \"buffer\": 4}]}",
    "{\"seed\": %3$d, \"ops\": [{\"op\": \"range\", \"stop\": 101}, {\"op\": \"shuffle\", \"buffer\": 9},"
    " {\"op\": \"shard\", \"num_shards\": 3, \"index\": 1, \"remainder\": \"pad\", \"in_step\": true},"
    " {\"op\": \"filter\", \"fn\": \"test_drop\"}, {\"op\": \"map\", \"fn\": \"test_tag\", \"parallelism\": %2$d},"
    " {\"op\": \"batch\", \"size\": 4}, {\"op\": \"prefetch\", \"buffer\": 2}]}",
};
#define NSPECS (sizeof SPECS / sizeof *SPECS)

static int g_seed = 3;
static sl_pipeline *spec(size_t i, int par) { return tu_pipelinef(SPECS[i], g_dir, par, g_seed + (int)i); }

/* Element digests of a run (from a state when `st`), at most max; *n gets how many. */
static uint64_t *digests(sl_pipeline *p, const void *st, size_t len, int64_t take, int64_t *n, void **state,
                         size_t *slen) {
  sl_iter *it = NULL;
  int rc = st ? sl_pipeline_iter_at(&it, p, st, len) : sl_pipeline_iter(&it, p);
  if (rc) fprintf(stderr, "restore: %s\n", sl_error_last());
  assert_int_equal(rc, 0);
  size_t cap = 64;
  uint64_t *d = malloc(cap * sizeof *d);
  sl_elem e;
  sl_elem_init(&e);
  *n = 0;
  while (take < 0 || *n < take) {
    rc = sl_iter_next(&e, it);
    if (rc) break;
    if ((size_t)*n == cap) d = realloc(d, (cap *= 2) * sizeof *d);
    assert_int_equal(sl_elem_digest(&d[*n], &e), 0);
    (*n)++;
    sl_elem_clear(&e);
  }
  if (rc < 0) fprintf(stderr, "run: %s\n", sl_error_last());
  assert_true(rc >= 0);
  if (state) {
    rc = sl_iter_state(it, state, slen);
    if (rc) fprintf(stderr, "state: %s\n", sl_error_last());
    assert_int_equal(rc, 0);
  }
  sl_iter_free(it);
  return d;
}

/* Cuts spec i at many points (a state taken on parallelism pa restored on pb, in turn) and checks the rest. */
static void check_cuts(size_t i) {
  sl_pipeline *p1 = spec(i, 1), *p2 = spec(i, 2);
  int64_t n;
  uint64_t *full = digests(p1, NULL, 0, -1, &n, NULL, NULL);
  int64_t n2;
  uint64_t *full2 = digests(p2, NULL, 0, -1, &n2, NULL, NULL);
  assert_int_equal(n, n2); /* the parallelism does not change the stream */
  assert_memory_equal(full, full2, (size_t)n * sizeof *full);
  free(full2);
  unsigned seed = (unsigned)(i * 7919 + 1 + (unsigned)g_seed * 31);
  for (int t = 0; t < 14; t++) {
    int64_t cut = t == 0 ? 0 : t == 1 ? n : t == 2 ? n - 1 : (int64_t)(rand_r(&seed) % (unsigned)(n + 1));
    sl_pipeline *pa = t % 2 ? p2 : p1, *pb = t % 3 ? p1 : p2;
    void *st;
    size_t len;
    int64_t got;
    sl_pipeline_set_epoch(pa, 0); /* each run of a pipeline is its next epoch: cut epoch 0 */
    free(digests(pa, NULL, 0, cut, &got, &st, &len));
    assert_int_equal(got, cut);
    int64_t rest;
    uint64_t *after = digests(pb, st, len, -1, &rest, NULL, NULL);
    if (rest != n - cut || memcmp(after, full + cut, (size_t)rest * sizeof *after))
      fprintf(stderr, "spec %zu, cut at %lld of %lld (parallelism %d -> %d): %lld elements after\n", i, (long long)cut,
              (long long)n, pa == p2 ? 2 : 1, pb == p2 ? 2 : 1, (long long)rest);
    assert_int_equal(rest, n - cut);
    assert_memory_equal(after, full + cut, (size_t)rest * sizeof *after);
    free(after);
    sl_free(st);
  }
  free(full);
  sl_pipeline_free(p1);
  sl_pipeline_free(p2);
}

static void test_cuts_shuffle_filter_batch(void **s) {
  (void)s;
  for (g_seed = 3; g_seed < 6; g_seed++) check_cuts(0); /* three seeds: other orders, other cut points */
  g_seed = 3;
}
static void test_cuts_interleave(void **s) {
  (void)s;
  for (g_seed = 3; g_seed < 6; g_seed++) check_cuts(1);
  g_seed = 3;
}
static void test_cuts_counts_and_epochs(void **s) {
  (void)s;
  check_cuts(2);
}
static void test_cuts_repeat_over_files(void **s) {
  (void)s;
  check_cuts(3);
}
static void test_cuts_ranks_in_step(void **s) {
  (void)s;
  check_cuts(4);
}

/* Ranks in step: three ranks with a filter that drops elements unevenly yield the same number of batches; together
 * their kept elements are every kept element once (pad repeats the epoch's first ones), the rest filled and counted. */
static void test_ranks_in_step(void **s) {
  (void)s;
  int64_t counts[3];
  uint64_t filled = 0;
  int seen[101] = {0};
  for (int r = 0; r < 3; r++) {
    sl_pipeline *p = tu_pipelinef("{\"seed\": 7, \"ops\": [{\"op\": \"range\", \"stop\": 101},"
                                  " {\"op\": \"shard\", \"num_shards\": 3, \"index\": %d, \"in_step\": true, \"remainder\": \"pad\"},"
                                  " {\"op\": \"map\", \"fn\": \"test_fail\", \"on_error\": \"skip\", \"parallelism\": %d}]}",
                                  r, 1 + r % 2);
    int64_t v[64];
    counts[r] = tu_collect_i64(p, "value", v, 64);
    for (int64_t i = 0; i < counts[r]; i++) seen[v[i]]++;
    sl_op_stats st;
    assert_int_equal(sl_pipeline_op_stats(&st, p, 2), 0);
    filled += st.filled;
    sl_pipeline_free(p);
  }
  assert_int_equal(counts[0], 34); /* 101 over 3 ranks, padded: 34 each */
  assert_int_equal(counts[1], 34);
  assert_int_equal(counts[2], 34);
  int kept = 0, extra = 0;
  for (int x = 0; x < 101; x++) {
    bool keep = x % 5 != 0 && !(x > 40 && x % 7 == 0);
    if (!keep) assert_true(seen[x] == 0);
    else {
      assert_true(seen[x] >= 1);
      kept++;
      extra += seen[x] - 1;
    }
  }
  assert_int_equal(kept + extra, 3 * 34);
  assert_true(filled > 0);
  /* the padding repeats element 0, which the map drops too: every extra element is a filled place */
  assert_int_equal((int64_t)filled, (int64_t)extra);
}

/* A state restored twice, and a state of a restored run, continue the same way. */
static void test_state_of_a_restored_run(void **s) {
  (void)s;
  sl_pipeline *p = spec(1, 2);
  int64_t n, a, b, c;
  uint64_t *full = digests(p, NULL, 0, -1, &n, NULL, NULL);
  void *s1, *s2;
  size_t l1, l2;
  sl_pipeline_set_epoch(p, 0);
  free(digests(p, NULL, 0, 5, &a, &s1, &l1));
  uint64_t *mid = digests(p, s1, l1, 6, &b, &s2, &l2);
  uint64_t *rest = digests(p, s2, l2, -1, &c, NULL, NULL);
  assert_int_equal(a + b + c, n);
  assert_memory_equal(mid, full + 5, (size_t)b * sizeof *mid);
  assert_memory_equal(rest, full + 11, (size_t)c * sizeof *rest);
  free(full);
  free(mid);
  free(rest);
  sl_free(s1);
  sl_free(s2);
  sl_pipeline_free(p);
}

/* Slow elements (over a millisecond each) under a prefetch: after the first state of a run, its producer keeps a
 * snapshot of its input's record, and later states use it (without waiting for the element being made). */
static void test_states_of_slow_elements_use_snapshots(void **s) {
  (void)s;
  sl_pipeline *p = tu_pipeline("{\"seed\": 8, \"ops\": [{\"op\": \"range\", \"stop\": 40}, {\"op\": \"shuffle\", "
                               "\"buffer\": 6}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 1500}}, "
                               "{\"op\": \"map\", \"fn\": \"test_tag\"}, {\"op\": \"prefetch\", \"buffer\": 4}]}");
  int64_t n;
  uint64_t *full = digests(p, NULL, 0, -1, &n, NULL, NULL);
  sl_pipeline_set_epoch(p, 0);
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  void *st[4] = {0};
  size_t len[4];
  int64_t at[4], k = 0;
  for (int j = 0; j < 4; j++) {
    for (int64_t m = 0; m < 3 + 2 * j; m++, k++) {
      assert_int_equal(sl_iter_next(&e, it), 0);
      sl_elem_clear(&e);
    }
    usleep(3000 * (unsigned)j); /* the producer fills its buffer meanwhile */
    assert_int_equal(sl_iter_state(it, &st[j], &len[j]), 0);
    at[j] = k;
  }
  sl_iter_free(it);
  for (int j = 0; j < 4; j++) {
    int64_t rest;
    uint64_t *after = digests(p, st[j], len[j], -1, &rest, NULL, NULL);
    assert_int_equal(rest, n - at[j]);
    assert_memory_equal(after, full + at[j], (size_t)rest * sizeof *after);
    free(after);
    sl_free(st[j]);
  }
  free(full);
  sl_pipeline_free(p);
}

static void expect_refused(sl_pipeline *p, const void *st, size_t len, int code, const char *needle) {
  sl_iter *it = NULL;
  int rc = sl_pipeline_iter_at(&it, p, st, len);
  if (rc != code || !strstr(sl_error_last(), needle))
    fprintf(stderr, "expected %d with '%s', got %d: %s\n", code, needle, rc, sl_error_last());
  assert_int_equal(rc, code);
  assert_non_null(strstr(sl_error_last(), needle));
  assert_null(it);
}

static void test_bad_states_are_refused(void **s) {
  (void)s;
  sl_pipeline *p = spec(0, 2);
  void *st;
  size_t len;
  int64_t n;
  free(digests(p, NULL, 0, 4, &n, &st, &len));
  unsigned char *b = st;
  expect_refused(p, st, len / 2, SL_ECORRUPT, "checksum");
  expect_refused(p, st, 5, SL_EINVAL, "not a sluice state");
  b[len / 2] ^= 0x40;
  expect_refused(p, st, len, SL_ECORRUPT, "damaged");
  b[len / 2] ^= 0x40;
  /* Another pipeline: another batch size (a knob that changes what it makes) is named. */
  char *js;
  assert_true(asprintf(&js, SPECS[0], g_dir, 2, g_seed) > 0);
  char *at = strstr(js, "\"size\": 5");
  assert_non_null(at);
  at[8] = '6';
  sl_pipeline *q = tu_pipeline(js);
  free(js);
  expect_refused(q, st, len, SL_EINVAL, "ops[5]");
  sl_pipeline_free(q);
  q = spec(1, 2);
  expect_refused(q, st, len, SL_EINVAL, "another pipeline");
  sl_pipeline_free(q);
  /* A data file changed since: named. */
  char path[512];
  snprintf(path, sizeof path, "%s/d-1.tfrecord", g_dir);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  FILE *f = fopen(path, "ab");
  assert_non_null(f);
  fputc(0, f);
  fclose(f);
  expect_refused(p, st, len, SL_EINVAL, "d-1.tfrecord changed");
  assert_int_equal(truncate(path, sb.st_size), 0); /* the same bytes again, a new time: still refused */
  expect_refused(p, st, len, SL_EINVAL, "modification time");
  sl_free(st);
  sl_pipeline_free(p);
}

/* set_epoch: the next run is that epoch's order; a state taken in epoch 3 restores into epoch 3. */
static void test_set_epoch(void **s) {
  (void)s;
  sl_pipeline *p = spec(3, 1);
  int64_t n0, n2, n2b;
  uint64_t *e0 = digests(p, NULL, 0, -1, &n0, NULL, NULL);
  free(digests(p, NULL, 0, -1, &n2, NULL, NULL)); /* epoch 1 */
  uint64_t *e2 = digests(p, NULL, 0, -1, &n2, NULL, NULL);
  sl_pipeline_set_epoch(p, 2);
  uint64_t *e2b = digests(p, NULL, 0, -1, &n2b, NULL, NULL);
  assert_int_equal(n2, n2b);
  assert_memory_equal(e2, e2b, (size_t)n2 * sizeof *e2);
  assert_memory_not_equal(e0, e2, (size_t)n0 * sizeof *e0);
  free(e0);
  free(e2);
  free(e2b);
  sl_pipeline_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cuts_shuffle_filter_batch), cmocka_unit_test(test_cuts_interleave),
      cmocka_unit_test(test_cuts_counts_and_epochs),    cmocka_unit_test(test_cuts_repeat_over_files),
      cmocka_unit_test(test_state_of_a_restored_run),  cmocka_unit_test(test_set_epoch),
      cmocka_unit_test(test_states_of_slow_elements_use_snapshots),
      cmocka_unit_test(test_cuts_ranks_in_step),        cmocka_unit_test(test_ranks_in_step),
      cmocka_unit_test(test_bad_states_are_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
