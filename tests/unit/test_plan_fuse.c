/* test_plan_fuse.c: the planner's fusion rewrite (plan/plan_fuse.c): which pairs it fuses and into what, what keeps
 * ops apart ("fuse": false, a crop writing elsewhere, an op between), and that the fused pipeline yields elements of
 * the same components, shapes, dtypes and label order as the input spec. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_fuse_int.h"
#include "testutil.h"

static json_t *load(const char *js) {
  json_error_t err;
  json_t *s = json_loads(js, 0, &err);
  if (!s) fprintf(stderr, "bad test spec: %s\n", err.text);
  assert_non_null(s);
  return s;
}

#define DEC "{\"op\": \"map\", \"fn\": \"decode_jpeg\", \"parallelism\": 2, \"args\": {\"component\": \"image/encoded\", \"channels\": 3}}"

static void test_decode_then_rrc_is_fused(void **st) {
  json_t *s = load("{\"seed\": 1, \"ops\": [{\"op\": \"files\", \"glob\": \"x/*\"}, " DEC ", "
                   "{\"op\": \"map\", \"fn\": \"random_resized_crop\", \"parallelism\": \"autotune\", \"deterministic\": false, "
                   "\"args\": {\"size\": [96, 80], \"scale\": [0.2, 1], \"method\": \"area\"}}, "
                   "{\"op\": \"map\", \"fn\": \"random_flip\"}, {\"op\": \"batch\", \"size\": 4}]}");
  assert_int_equal(sl__plan_fuse_spec(s), 1);
  json_t *ops = json_object_get(s, "ops");
  assert_int_equal(json_array_size(ops), 4);
  json_t *f = json_array_get(ops, 1);
  assert_string_equal(json_string_value(json_object_get(f, "fn")), "decode_and_crop_jpeg");
  assert_string_equal(json_string_value(json_object_get(f, "parallelism")), "autotune");
  assert_true(json_is_false(json_object_get(f, "deterministic")));
  json_t *a = json_object_get(f, "args");
  assert_true(json_is_true(json_object_get(a, "random")));
  assert_string_equal(json_string_value(json_object_get(a, "component")), "image/encoded");
  assert_string_equal(json_string_value(json_object_get(a, "method")), "area");
  assert_int_equal(json_integer_value(json_object_get(a, "channels")), 3);
  assert_int_equal(json_integer_value(json_array_get(json_object_get(a, "size"), 1)), 80);
  assert_non_null(json_object_get(a, "scale"));
  assert_string_equal(json_string_value(json_object_get(json_array_get(ops, 2), "fn")), "random_flip");
  const char *c = json_string_value(json_object_get(s, "comment"));
  assert_non_null(c);
  assert_non_null(strstr(c, "ops[1] decode_jpeg + ops[2] random_resized_crop"));
  json_decref(s);
}

static void test_center_crop_and_resize_are_fused(void **st) {
  json_t *s = load("{\"ops\": [{\"op\": \"interleave\", \"source\": [{\"op\": \"tfrecord\"}, " DEC ", "
                   "{\"op\": \"map\", \"fn\": \"center_crop\", \"args\": {\"fraction\": 0.875}}]}, " DEC ", "
                   "{\"op\": \"map\", \"fn\": \"resize\", \"parallelism\": 3, \"args\": {\"shorter_side\": 256}}]}");
  assert_int_equal(sl__plan_fuse_spec(s), 2);
  json_t *ops = json_object_get(s, "ops");
  json_t *src = json_object_get(json_array_get(ops, 0), "source");
  assert_int_equal(json_array_size(src), 2);
  json_t *a = json_object_get(json_array_get(src, 1), "args");
  assert_true(json_object_get(a, "center_fraction") != NULL);
  assert_null(json_object_get(a, "random"));
  json_t *r = json_array_get(ops, 1);
  assert_int_equal(json_integer_value(json_object_get(r, "parallelism")), 3);
  a = json_object_get(r, "args");
  assert_true(json_is_true(json_object_get(a, "full")));
  assert_int_equal(json_integer_value(json_object_get(a, "shorter_side")), 256);
  assert_non_null(strstr(json_string_value(json_object_get(s, "comment")), "ops[0].source[1] decode_jpeg"));
  json_decref(s);
}

static void test_what_stays_apart(void **st) {
  const char *specs[] = {
      /* "fuse": false on either op */
      "{\"ops\": [" DEC ", {\"op\": \"map\", \"fn\": \"random_resized_crop\", \"fuse\": false, \"args\": {\"size\": [8, 8]}}]}",
      "{\"ops\": [{\"op\": \"map\", \"fn\": \"decode_jpeg\", \"fuse\": false}, {\"op\": \"map\", \"fn\": \"resize\", \"args\": {\"size\": [8, 8]}}]}",
      /* the crop keeps the full image beside its output */
      "{\"ops\": [" DEC ", {\"op\": \"map\", \"fn\": \"random_resized_crop\", \"args\": {\"size\": [8, 8], \"output\": \"crop\"}}]}",
      /* the crop reads another component */
      "{\"ops\": [" DEC ", {\"op\": \"map\", \"fn\": \"center_crop\", \"args\": {\"size\": [8, 8], \"component\": \"other\"}}]}",
      /* an op between, and an arg the rewrite does not know */
      "{\"ops\": [" DEC ", {\"op\": \"map\", \"fn\": \"random_flip\"}, {\"op\": \"map\", \"fn\": \"resize\", \"args\": {\"size\": [8, 8]}}]}",
      "{\"ops\": [" DEC ", {\"op\": \"map\", \"fn\": \"resize\", \"args\": {\"size\": [8, 8], \"antialias\": true}}]}",
  };
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    json_t *s = load(specs[i]);
    json_t *before = json_deep_copy(s);
    assert_int_equal(sl__plan_fuse_spec(s), 0);
    assert_true(json_equal(s, before));
    json_decref(s);
    json_decref(before);
  }
}

/* A tiny generated dataset, read in a fixed order. */
static char *g_dir;
static int setup(void **st) {
  g_dir = tu_tmpdir("plan_fuse");
  sl_gen_opts o = SL_GEN_OPTS_INIT;
  o.out_dir = g_dir;
  o.n = 12;
  o.shards = 1;
  o.seed = 3;
  return sl_gen_run(NULL, &o);
}
static int teardown(void **st) {
  tu_rmtree(g_dir);
  free(g_dir);
  return 0;
}

static sl_pipeline *spec_pipeline(const char *crop_op) {
  return tu_pipelinef("{\"seed\": 5, \"ops\": [{\"op\": \"files\", \"glob\": \"%s/train-*\"}, "
                      "{\"op\": \"interleave\", \"cycle_length\": 1, \"source\": [{\"op\": \"tfrecord\"}]}, "
                      "{\"op\": \"map\", \"fn\": \"parse_example\", \"args\": {\"features\": {\"image/encoded\": "
                      "{\"dtype\": \"bytes\"}, \"image/class/label\": {\"dtype\": \"int64\"}}}}, "
                      "{\"op\": \"map\", \"fn\": \"decode_jpeg\", \"parallelism\": 2, \"args\": {\"channels\": 3}}, %s, "
                      "{\"op\": \"map\", \"fn\": \"random_flip\"}, {\"op\": \"map\", \"fn\": \"normalize\"}, "
                      "{\"op\": \"batch\", \"size\": 4, \"drop_remainder\": true}]}",
                      g_dir, crop_op);
}

/* Runs both pipelines to the end: the same number of elements, each with the same components, dtypes, shapes and
 * labels. */
static void expect_same_structure(sl_pipeline *a, sl_pipeline *b) {
  sl_iter *ia, *ib;
  assert_int_equal(sl_pipeline_iter(&ia, a), 0);
  assert_int_equal(sl_pipeline_iter(&ib, b), 0);
  int n = 0;
  for (;;) {
    sl_elem x, y;
    sl_elem_init(&x);
    sl_elem_init(&y);
    int ra = sl_iter_next(&x, ia), rb = sl_iter_next(&y, ib);
    assert_int_equal(ra, rb);
    if (ra == SL_END) break;
    assert_int_equal(ra, 0);
    assert_int_equal(x.n, y.n);
    for (int k = 0; k < x.n; k++) {
      sl_comp *cy = sl_elem_get(&y, x.c[k].name);
      assert_non_null(cy);
      assert_int_equal(x.c[k].dtype, cy->dtype);
      assert_int_equal(x.c[k].rank, cy->rank);
      for (int d = 0; d < x.c[k].rank; d++) assert_int_equal(x.c[k].shape[d], cy->shape[d]);
    }
    sl_comp *la = sl_elem_get(&x, "image/class/label"), *lb = sl_elem_get(&y, "image/class/label");
    assert_memory_equal(sl_comp_data(la), sl_comp_data(lb), la->size);
    sl_elem_clear(&x);
    sl_elem_clear(&y);
    n++;
  }
  assert_int_equal(n, 3);
  sl_iter_free(ia);
  sl_iter_free(ib);
}

static void test_fused_pipeline_same_elements(void **st) {
  const char *crops[] = {"{\"op\": \"map\", \"fn\": \"random_resized_crop\", \"args\": {\"size\": [64, 48]}}",
                         "{\"op\": \"map\", \"fn\": \"center_crop\", \"args\": {\"size\": [100, 120]}}",
                         "{\"op\": \"map\", \"fn\": \"resize\", \"args\": {\"size\": [50, 70], \"method\": \"area\"}}"};
  for (int i = 0; i < 3; i++) {
    sl_pipeline *p = spec_pipeline(crops[i]), *f = NULL;
    assert_int_equal(sl__plan_fuse(&f, p), 0);
    assert_non_null(f);
    char *js = NULL;
    assert_int_equal(sl_pipeline_to_json(&js, f), 0);
    assert_non_null(strstr(js, "decode_and_crop_jpeg"));
    assert_null(strstr(js, "\"decode_jpeg\""));
    sl_free(js);
    expect_same_structure(p, f);
    sl_pipeline_free(p);
    sl_pipeline_free(f);
  }
}

/* "fuse": false is a valid knob on any op, and keeps the pair apart through the optimizer. */
static void test_optimizer_fuses_unless_told_not_to(void **st) {
  for (int keep = 0; keep < 2; keep++) {
    char crop[200];
    snprintf(crop, sizeof crop, "{\"op\": \"map\", \"fn\": \"random_resized_crop\"%s, \"args\": {\"size\": [32, 32]}}",
             keep ? ", \"fuse\": false" : "");
    sl_pipeline *p = spec_pipeline(crop);
    sl_optimize_opts oo = SL_OPTIMIZE_OPTS_INIT;
    oo.trace_seconds = 0.2;
    assert_int_equal(sl_pipeline_optimize(p, &oo), 0);
    char *js = NULL;
    assert_int_equal(sl_pipeline_to_json(&js, p), 0);
    assert_true((strstr(js, "decode_and_crop_jpeg") != NULL) == !keep);
    assert_true((strstr(js, "\"decode_jpeg\"") != NULL) == keep);
    sl_free(js);
    sl_pipeline_free(p);
  }
  char bad[512];
  snprintf(bad, sizeof bad, "{\"ops\": [{\"op\": \"files\", \"glob\": \"%s/train-*\"}, {\"op\": \"map\", \"fn\": "
           "\"decode_jpeg\", \"fuse\": 1}]}", g_dir);
  tu_expect_spec_error(bad, SL_EINVAL, "fuse");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode_then_rrc_is_fused),
      cmocka_unit_test(test_center_crop_and_resize_are_fused),
      cmocka_unit_test(test_what_stays_apart),
      cmocka_unit_test(test_fused_pipeline_same_elements),
      cmocka_unit_test(test_optimizer_fuses_unless_told_not_to),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
