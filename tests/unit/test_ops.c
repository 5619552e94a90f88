/* test_ops.c: every operator's counts, order and edge cases, on the consumer's thread (sequential knobs). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static char *g_dir;


/* A user function registered through the public API: keeps even values. */
static int even_call(void *st, sl_elem *e, sl_fn_call *call) {
  int64_t v;
  sl_comp *c = sl_elem_get(e, "value");
  if (!c) return sl_error_set(SL_EINVAL, "%s: no value", call->op_path);
  sl_comp_get_i64(&v, c);
  call->keep = v % 2 == 0;
  return 0;
}
/* Fails at the element whose value equals args.at. */
static int fail_init(void **st, const sl_args *a, void *payload) {
  int64_t *at = malloc(sizeof *at);
  sl_args_int(at, a, "at", 5);
  *st = at;
  return 0;
}
static int fail_call(void *st, sl_elem *e, sl_fn_call *call) {
  int64_t v;
  sl_comp_get_i64(&v, sl_elem_get(e, "value"));
  if (v == *(int64_t *)st) return sl_error_set(SL_EINVAL, "boom at value %lld", (long long)v);
  return 0;
}
/* Adds a random number from the per-element seed. */
static int rand_call(void *st, sl_elem *e, sl_fn_call *call) {
  sl_rng r;
  sl_rng_seed(&r, call->seed);
  return sl_elem_set_i64(e, "r", (int64_t)(sl_rng_u64(&r) % 1000000));
}

static void test_range_take_skip(void **s) {
  int64_t v[100];
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"start\": 5, \"stop\": 50, \"step\": 5}, {\"op\": \"skip\", "
                     "\"count\": 2}, {\"op\": \"take\", \"count\": 3}]}");
  assert_int_equal(tu_collect_i64(p, "value", v, 100), 3);
  assert_int_equal(v[0], 15);
  assert_int_equal(v[2], 25);
  sl_pipeline_free(p);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"start\": 10, \"stop\": 0, \"step\": -3}]}");
  assert_int_equal(tu_collect_i64(p, "value", v, 100), 4); /* 10 7 4 1 */
  assert_int_equal(v[3], 1);
  sl_pipeline_free(p);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 0}, {\"op\": \"take\", \"count\": 3}]}");
  assert_int_equal(tu_count(p, 0), 0); /* empty input */
  sl_pipeline_free(p);
}

static void test_repeat_counts_and_forever(void **s) {
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"repeat\", \"count\": 4}]}");
  assert_int_equal(tu_count(p, 0), 12);
  sl_pipeline_free(p);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"repeat\"}, {\"op\": \"take\", \"count\": 1000}]}");
  assert_int_equal(tu_count(p, 0), 1000);
  sl_op_stats st;
  assert_int_equal(sl_pipeline_op_stats(&st, p, 1), 0);
  assert_int_equal(st.cardinality, -2);
  sl_pipeline_free(p);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 0}, {\"op\": \"repeat\"}]}");
  assert_int_equal(tu_count(p, 0), 0); /* an empty input repeated forever ends */
  sl_pipeline_free(p);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"repeat\", \"count\": 0}]}");
  assert_int_equal(tu_count(p, 0), 0);
  sl_pipeline_free(p);
}

static void test_shard_sizes(void **s) {
  int64_t total = 0;
  for (int i = 0; i < 3; i++) {
    sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 10}, {\"op\": \"shard\", \"num_shards\": 3, "
                       "\"index\": %d}]}", i);
    int64_t n = tu_count(p, 0);
    assert_int_equal(n, i == 0 ? 4 : 3);
    sl_op_stats st;
    sl_pipeline_op_stats(&st, p, 1);
    assert_int_equal(st.cardinality, n);
    total += n;
    sl_pipeline_free(p);
  }
  assert_int_equal(total, 10);
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 10}, {\"op\": \"shard\", \"num_shards\": 3, \"index\": 3}]}",
                       SL_EINVAL, "must be below num_shards");
}

/* "auto" reads WORLD_SIZE and RANK; the ranks' shards are disjoint and cover the input. */
static void test_shard_auto(void **s) {
  const char *spec = "{\"ops\": [{\"op\": \"range\", \"stop\": 10}, {\"op\": \"shard\", \"num_shards\": \"auto\", "
                     "\"index\": \"auto\"}]}";
  unsetenv("WORLD_SIZE");
  unsetenv("RANK");
  tu_expect_spec_error(spec, SL_EINVAL, "ops[1].num_shards: \"auto\" takes it from the launcher's environment, but "
                       "WORLD_SIZE is not set");
  setenv("WORLD_SIZE", "2", 1);
  tu_expect_spec_error(spec, SL_EINVAL, "ops[1].index: \"auto\" takes it from the launcher's environment, but RANK");
  setenv("RANK", "x", 1);
  tu_expect_spec_error(spec, SL_EINVAL, "RANK=\"x\" is not an integer");
  int64_t total = 0;
  for (int r = 0; r < 2; r++) {
    char v[8];
    snprintf(v, sizeof v, "%d", r);
    setenv("RANK", v, 1);
    sl_pipeline *p = tu_pipelinef("%s", spec);
    total += tu_count(p, 0);
    sl_pipeline_free(p);
  }
  assert_int_equal(total, 10);
  setenv("RANK", "2", 1);
  tu_expect_spec_error(spec, SL_EINVAL, "must be below num_shards");
  unsetenv("WORLD_SIZE");
  unsetenv("RANK");
}

static void test_batch_remainder_and_shapes(void **s) {
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 10}, {\"op\": \"batch\", \"size\": 4}]}");
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  int64_t sizes[3];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(sl_iter_next(&e, it), 0);
    sl_comp *c = sl_elem_get(&e, "value");
    assert_int_equal(c->rank, 1);
    sizes[i] = c->shape[0];
    assert_int_equal(((const int64_t *)sl_comp_data(c))[0], i * 4);
    sl_elem_clear(&e);
  }
  assert_int_equal(sl_iter_next(&e, it), SL_END);
  assert_int_equal(sizes[2], 2);
  sl_iter_free(it);
  sl_pipeline_free(p);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 10}, {\"op\": \"batch\", \"size\": 4, \"drop_remainder\": true}]}");
  assert_int_equal(tu_count(p, 0), 2);
  sl_pipeline_free(p);
}

static void test_batch_of_strings_and_ragged_errors(void **s) {
  char *f = tu_write_file(g_dir, "text.txt", "alpha\nbe\n\ngamma-delta-epsilon-zeta\n", 34);
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"lines\"}, {\"op\": \"batch\", "
                     "\"size\": 8}]}", f);
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_iter_next(&e, it), 0);
  sl_comp *c = sl_elem_get(&e, "line");
  assert_int_equal(c->dtype, SL_BYTES);
  assert_int_equal(c->shape[0], 4);
  const void *d;
  size_t len;
  assert_int_equal(sl_comp_string(&d, &len, c, 3), 0);
  assert_int_equal(len, 24);
  assert_memory_equal(d, "gamma-delta-epsilon-zeta", 24);
  assert_int_equal(sl_comp_string(&d, &len, c, 2), 0);
  assert_int_equal(len, 0);
  sl_elem_clear(&e);
  sl_iter_free(it);
  sl_pipeline_free(p);
  free(f);
}

static void test_padded_batch_pads_to_the_longest(void **s) {
  /* batch(2) of scalars, then padded_batch over ragged batches: sizes 2,2,1 padded to 2 with -1 */
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 5}, {\"op\": \"batch\", \"size\": 2}, "
                     "{\"op\": \"padded_batch\", \"size\": 3, \"padding_values\": {\"value\": -1}}]}");
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_iter_next(&e, it), 0);
  sl_comp *c = sl_elem_get(&e, "value");
  assert_int_equal(c->rank, 2);
  assert_int_equal(c->shape[0], 3);
  assert_int_equal(c->shape[1], 2);
  const int64_t *v = sl_comp_data(c);
  int64_t want[6] = {0, 1, 2, 3, 4, -1};
  assert_memory_equal(v, want, sizeof want);
  sl_elem_clear(&e);
  sl_iter_free(it);
  sl_pipeline_free(p);
  /* plain batch refuses ragged shapes, naming padded_batch */
  p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 5}, {\"op\": \"batch\", \"size\": 2}, {\"op\": \"batch\", \"size\": 3}]}");
  tu_count(p, SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "padded_batch"));
  assert_non_null(strstr(sl_error_last(), "ops[2]"));
  sl_pipeline_free(p);
}

static void test_shuffle_is_a_seeded_permutation(void **s) {
  int64_t a[200], b[200], c[200];
  const char *spec = "{\"seed\": %d, \"ops\": [{\"op\": \"range\", \"stop\": 200}, {\"op\": \"shuffle\", \"buffer\": 50}]}";
  sl_pipeline *p = tu_pipelinef(spec, 1);
  assert_int_equal(tu_collect_i64(p, "value", a, 200), 200);
  assert_int_equal(tu_collect_i64(p, "value", b, 200), 200); /* a second epoch reshuffles */
  sl_pipeline_free(p);
  p = tu_pipelinef(spec, 1);
  assert_int_equal(tu_collect_i64(p, "value", c, 200), 200);
  sl_pipeline_free(p);
  assert_memory_equal(a, c, sizeof a); /* same seed, same order */
  assert_memory_not_equal(a, b, sizeof a);
  int seen[200] = {0}, moved = 0;
  for (int i = 0; i < 200; i++) {
    seen[a[i]]++;
    moved += a[i] != i;
  }
  for (int i = 0; i < 200; i++) assert_int_equal(seen[i], 1);
  assert_true(moved > 150);
}

/* `initial`: the first output once 4 are buffered, the buffer growing by one an output (output i is one of the
 * first 4 + 2i inputs) up to 50; still a permutation; more than initial is refused, naming both. */
static void test_shuffle_initial_grows(void **s) {
  (void)s;
  int64_t a[200];
  sl_pipeline *p = tu_pipelinef("{\"seed\": 5, \"ops\": [{\"op\": \"range\", \"stop\": 200}, "
                                "{\"op\": \"shuffle\", \"buffer\": 50, \"initial\": 4}]}");
  assert_int_equal(tu_collect_i64(p, "value", a, 200), 200);
  sl_pipeline_free(p);
  int seen[200] = {0}, late = 0;
  for (int i = 0; i < 200; i++) {
    seen[a[i]]++;
    if (i < 23) assert_true(a[i] < 4 + 2 * i);
    late += i >= 23 && a[i] >= 50; /* past the growth, the full buffer's reach */
  }
  for (int i = 0; i < 200; i++) assert_int_equal(seen[i], 1);
  assert_true(late > 0);
  sl_pipeline *bad = NULL;
  const char *j = "{\"ops\": [{\"op\": \"range\", \"stop\": 9}, {\"op\": \"shuffle\", \"buffer\": 5, \"initial\": 6}]}";
  assert_int_not_equal(sl_pipeline_from_json(&bad, j, strlen(j), "test"), 0);
  assert_non_null(strstr(sl_error_last(), "initial 6"));
  sl_pipeline_free(bad);
}

static void test_filter_and_user_functions(void **s) {
  sl_fn_def even = {SL_FN_DEF_VERSION, SL_FN_FILTER, NULL, even_call, NULL};
  assert_int_equal(sl_fn_register("test_even", &even, NULL), 0);
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 11}, {\"op\": \"filter\", \"fn\": \"test_even\"}]}");
  int64_t v[20];
  assert_int_equal(tu_collect_i64(p, "value", v, 20), 6);
  assert_int_equal(v[5], 10);
  sl_pipeline_free(p);
  sl_fn_def bad = {99, 0, NULL, even_call, NULL};
  assert_int_equal(sl_fn_register("bad", &bad, NULL), SL_EVERSION);
}

static void test_map_error_names_op_and_element(void **s) {
  sl_fn_def f = {SL_FN_DEF_VERSION, 0, fail_init, fail_call, free};
  assert_int_equal(sl_fn_register("test_fail", &f, NULL), 0);
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 20}, {\"op\": \"map\", \"fn\": \"test_fail\", \"args\": "
                     "{\"at\": 7}}]}");
  assert_int_equal(tu_count(p, SL_EINVAL), 7);
  assert_non_null(strstr(sl_error_last(), "ops[1]"));
  assert_non_null(strstr(sl_error_last(), "element 7"));
  assert_non_null(strstr(sl_error_last(), "boom at value 7"));
  sl_pipeline_free(p);
}

static void test_interleave_order_and_block_length(void **s) {
  /* each input n yields n*10, n*10+1, n*10+2 via a nested range? (range takes no input) -> use repeat of the input */
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"start\": 1, \"stop\": 4}, {\"op\": \"interleave\", "
                     "\"cycle_length\": 2, \"block_length\": 2, \"source\": [{\"op\": \"repeat\", \"count\": 3}]}]}");
  int64_t v[20];
  assert_int_equal(tu_collect_i64(p, "value", v, 20), 9);
  int64_t want[9] = {1, 1, 2, 2, 1, 2, 3, 3, 3};
  assert_memory_equal(v, want, sizeof want);
  sl_pipeline_free(p);
}

static void test_cache_serves_later_epochs(void **s) {
  sl_fn_def f = {SL_FN_DEF_VERSION, 0, NULL, rand_call, NULL};
  assert_int_equal(sl_fn_register("test_counting", &f, NULL), 0);
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 50}, {\"op\": \"map\", \"fn\": \"test_counting\"}, "
                     "{\"op\": \"cache\"}, {\"op\": \"repeat\", \"count\": 3}]}");
  assert_int_equal(tu_count(p, 0), 150);
  sl_op_stats st;
  assert_int_equal(sl_pipeline_op_stats(&st, p, 1), 0);
  assert_int_equal(st.elements_out, 50); /* the map ran once per element, not three times */
  assert_int_equal(sl_pipeline_op_stats(&st, p, 2), 0);
  assert_true(st.bytes_held > 0);
  sl_pipeline_free(p);
  /* an abandoned first pass leaves no partial cache */
  p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 50}, {\"op\": \"cache\"}, {\"op\": \"take\", \"count\": 10}]}");
  assert_int_equal(tu_count(p, 0), 10);
  assert_int_equal(sl_pipeline_op_stats(&st, p, 1), 0);
  assert_int_equal(st.bytes_held, 0);
  sl_pipeline_free(p);
}

static void test_file_cache_rebuilds_when_corrupt_or_stale(void **s) {
  char path[4096];
  snprintf(path, sizeof path, "%s/c.cache", g_dir);
  int64_t a[100], b[100];
  const char *spec = "{\"seed\": %d, \"ops\": [{\"op\": \"range\", \"stop\": %d}, {\"op\": \"map\", \"fn\": "
                     "\"test_counting\"}, {\"op\": \"cache\", \"file\": \"%s\"}]}";
  sl_pipeline *p = tu_pipelinef(spec, 1, 40, path);
  assert_int_equal(tu_collect_i64(p, "r", a, 100), 40);
  sl_pipeline_free(p);
  /* a new pipeline (new process, in effect) reads the file: the map does not run */
  p = tu_pipelinef(spec, 1, 40, path);
  assert_int_equal(tu_collect_i64(p, "r", b, 100), 40);
  assert_memory_equal(a, b, 40 * sizeof(int64_t));
  sl_op_stats st;
  sl_pipeline_op_stats(&st, p, 1);
  assert_int_equal(st.elements_out, 0);
  sl_pipeline_free(p);
  /* corrupt one byte in the middle: rebuilt, same answers */
  FILE *f = fopen(path, "r+b");
  fseek(f, 100, SEEK_SET);
  int ch = fgetc(f);
  fseek(f, 100, SEEK_SET);
  fputc(ch ^ 0x55, f);
  fclose(f);
  p = tu_pipelinef(spec, 1, 40, path);
  assert_int_equal(tu_collect_i64(p, "r", b, 100), 40);
  assert_memory_equal(a, b, 40 * sizeof(int64_t));
  sl_pipeline_op_stats(&st, p, 1);
  assert_int_equal(st.elements_out, 40);
  sl_pipeline_free(p);
  /* a different upstream spec (stale cache): rebuilt with the new contents */
  p = tu_pipelinef(spec, 1, 30, path);
  assert_int_equal(tu_collect_i64(p, "r", b, 100), 30);
  sl_pipeline_free(p);
  /* truncated file (partial write): rebuilt */
  assert_int_equal(truncate(path, 50), 0);
  p = tu_pipelinef(spec, 1, 30, path);
  assert_int_equal(tu_collect_i64(p, "r", b, 100), 30);
  sl_pipeline_op_stats(&st, p, 1);
  assert_int_equal(st.elements_out, 30);
  sl_pipeline_free(p);
}

static void test_tfrecord_and_parse_example_on_independent_file(void **s) {
  char *src;
  assert_true(asprintf(&src, "%s/tests/data/independent.tfrecord", getenv("SL_SRC")) > 0);
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tfrecord\"}, {\"op\": \"map\", "
                     "\"fn\": \"parse_example\", \"args\": {\"features\": {\"label\": {\"dtype\": \"int64\"}, "
                     "\"name\": {\"dtype\": \"bytes\"}, \"score\": {\"dtype\": \"float32\", \"shape\": [2]}, "
                     "\"tags\": {\"dtype\": \"bytes\", \"shape\": [-1]}, \"missing\": {\"dtype\": \"int64\", "
                     "\"default\": 9}}}}]}", src);
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  for (int i = 0; i < 5; i++) {
    assert_int_equal(sl_iter_next(&e, it), 0);
    int64_t label, miss;
    sl_comp_get_i64(&label, sl_elem_get(&e, "label"));
    assert_int_equal(label, i * 10 - 3);
    sl_comp_get_i64(&miss, sl_elem_get(&e, "missing"));
    assert_int_equal(miss, 9);
    sl_comp *n = sl_elem_get(&e, "name");
    char want[16];
    snprintf(want, sizeof want, "item-%d", i);
    assert_int_equal(n->size, strlen(want));
    assert_memory_equal(sl_comp_data(n), want, n->size);
    const float *sc = sl_comp_data(sl_elem_get(&e, "score"));
    assert_true(sc[0] == (float)i + 0.5f && sc[1] == -1.25f);
    assert_int_equal(sl_elem_get(&e, "tags")->shape[0], (i % 2) + 1);
    assert_null(sl_elem_get(&e, "record"));
    sl_elem_clear(&e);
  }
  assert_int_equal(sl_iter_next(&e, it), SL_END);
  sl_iter_free(it);
  sl_op_stats st;
  sl_pipeline_op_stats(&st, p, 1);
  assert_int_equal(st.disk_bytes, 477);
  sl_pipeline_free(p);
  /* a required feature that is absent */
  p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tfrecord\"}, {\"op\": \"map\", \"fn\": "
        "\"parse_example\", \"args\": {\"features\": {\"nothere\": {\"dtype\": \"int64\"}}}}]}", src);
  tu_count(p, SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "lacks required feature 'nothere'"));
  assert_non_null(strstr(sl_error_last(), "element 0"));
  sl_pipeline_free(p);
  free(src);
}

static void test_invalid_protobuf_and_corrupt_skip(void **s) {
  char path[4096];
  snprintf(path, sizeof path, "%s/mixed.tfrecord", g_dir);
  sl_tfrecord_writer *w;
  assert_int_equal(sl_tfrecord_writer_open(&w, path, SL_COMPRESSION_NONE), 0);
  assert_int_equal(sl_tfrecord_write(w, "\xff\xff\xff\xff\xff", 5), 0); /* not a protobuf */
  sl_example *ex = sl_example_new();
  int64_t one = 1;
  sl_example_add_int64(ex, "x", &one, 1);
  sl_buf *b;
  assert_int_equal(sl_example_serialize(&b, ex), 0);
  for (int i = 0; i < 3; i++) assert_int_equal(sl_tfrecord_write(w, sl_buf_data(b), sl_buf_size(b)), 0);
  sl_buf_unref(b);
  sl_example_free(ex);
  assert_int_equal(sl_tfrecord_writer_close(w), 0);
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tfrecord\"}, {\"op\": \"map\", "
                     "\"fn\": \"parse_example\", \"args\": {\"features\": {\"x\": {\"dtype\": \"int64\"}}}}]}", path);
  tu_count(p, SL_ECORRUPT);
  assert_non_null(strstr(sl_error_last(), "not a valid tf.Example"));
  sl_pipeline_free(p);
  /* flip a data byte of record 2: default is an error naming file and record; "skip" counts it */
  FILE *f = fopen(path, "r+b");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, n - 6, SEEK_SET);
  int ch = fgetc(f);
  fseek(f, n - 6, SEEK_SET);
  fputc(ch ^ 1, f);
  fclose(f);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tfrecord\"}]}", path);
  assert_int_equal(tu_count(p, SL_ECORRUPT), 3);
  assert_non_null(strstr(sl_error_last(), "mixed.tfrecord: record 3"));
  sl_pipeline_free(p);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tfrecord\", \"on_corrupt\": \"skip\"}]}", path);
  assert_int_equal(tu_count(p, 0), 3);
  sl_op_stats st;
  sl_pipeline_op_stats(&st, p, 1);
  assert_int_equal(st.skipped, 1);
  sl_pipeline_free(p);
}

static void test_files_glob_sorted_and_shuffled(void **s) {
  char sub[4096];
  snprintf(sub, sizeof sub, "%s/g", g_dir);
  mkdir(sub, 0755);
  for (int i = 0; i < 6; i++) {
    char n[32];
    snprintf(n, sizeof n, "f%d.txt", i);
    char line[8];
    int len = snprintf(line, sizeof line, "%d\n", i);
    free(tu_write_file(sub, n, line, (size_t)len));
  }
  sl_pipeline *p = tu_pipelinef("{\"seed\": 3, \"ops\": [{\"op\": \"files\", \"glob\": \"%s/f*.txt\", \"shuffle\": true}, "
                     "{\"op\": \"lines\"}]}", sub);
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  char order[7] = {0};
  for (int i = 0; i < 6; i++) {
    assert_int_equal(sl_iter_next(&e, it), 0);
    order[i] = *(const char *)sl_comp_data(sl_elem_get(&e, "line"));
    sl_elem_clear(&e);
  }
  assert_int_equal(sl_iter_next(&e, it), SL_END);
  sl_iter_free(it);
  assert_string_not_equal(order, "012345");
  sl_pipeline_free(p);
}

static int setup(void **s) {
  g_dir = tu_tmpdir("ops");
  return 0;
}
static int teardown(void **s) {
  tu_rmtree(g_dir);
  free(g_dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_range_take_skip),
      cmocka_unit_test(test_repeat_counts_and_forever),
      cmocka_unit_test(test_shard_sizes),
      cmocka_unit_test(test_shard_auto),
      cmocka_unit_test(test_batch_remainder_and_shapes),
      cmocka_unit_test(test_batch_of_strings_and_ragged_errors),
      cmocka_unit_test(test_padded_batch_pads_to_the_longest),
      cmocka_unit_test(test_shuffle_is_a_seeded_permutation),
      cmocka_unit_test(test_shuffle_initial_grows),
      cmocka_unit_test(test_filter_and_user_functions),
      cmocka_unit_test(test_map_error_names_op_and_element),
      cmocka_unit_test(test_interleave_order_and_block_length),
      cmocka_unit_test(test_cache_serves_later_epochs),
      cmocka_unit_test(test_file_cache_rebuilds_when_corrupt_or_stale),
      cmocka_unit_test(test_tfrecord_and_parse_example_on_independent_file),
      cmocka_unit_test(test_invalid_protobuf_and_corrupt_skip),
      cmocka_unit_test(test_files_glob_sorted_and_shuffled),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
