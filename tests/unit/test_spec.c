/* test_spec.c: spec parsing, and the error each malformed spec gets (with line/column or JSON path). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static void test_malformed_json_gives_line_and_column(void **s) {
  tu_expect_spec_error("{\"ops\": [\n  {\"op\": \"range\",, }\n]}", SL_EINVAL, "test:2:");
}

static void test_unknown_op_lists_known_ones(void **s) {
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"mapp\"}]}", SL_EINVAL,
                       "ops[1].op: unknown op 'mapp'");
}

static void test_unknown_function(void **s) {
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"map\", \"fn\": \"nope\"}]}", SL_EINVAL,
                       "ops[1].fn: unknown function 'nope'");
}

static void test_wrong_knob_type_names_the_path(void **s) {
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"map\", \"fn\": \"identity\"}, "
                       "{\"op\": \"batch\", \"size\": 2}, {\"op\": \"map\", \"fn\": \"identity\", \"parallelism\": \"x\"}]}",
                       SL_EINVAL, "ops[3].parallelism");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"batch\", \"size\": true}]}", SL_EINVAL,
                       "ops[1].size: expected an integer");
}

static void test_negative_size(void **s) {
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"batch\", \"size\": -4}]}", SL_EINVAL,
                       "ops[1].size: -4 is out of range (valid: 1..16777216)");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"prefetch\", \"buffer\": 0}]}", SL_EINVAL,
                       "ops[1].buffer");
}

static void test_unknown_knob_is_caught(void **s) {
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"shuffle\", \"bufer\": 4}]}", SL_EINVAL,
                       "ops[1].bufer: unknown knob");
}

static void test_nested_path_in_interleave_source(void **s) {
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"interleave\", \"source\": "
                       "[{\"op\": \"take\", \"count\": \"x\"}]}]}",
                       SL_EINVAL, "ops[1].source[0].count");
}

static void test_missing_file_and_empty_glob(void **s) {
  tu_expect_spec_error("{\"ops\": [{\"op\": \"files\", \"list\": [\"/nonexistent/a.tfrecord\"]}, {\"op\": \"tfrecord\"}]}",
                       SL_ENOTFOUND, "/nonexistent/a.tfrecord");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"files\", \"glob\": \"/nonexistent/*.tfrecord\"}]}", SL_ENOTFOUND,
                       "matched no files");
}

static void test_reader_needs_input_and_source_must_come_first(void **s) {
  tu_expect_spec_error("{\"ops\": [{\"op\": \"tfrecord\"}]}", SL_EINVAL, "needs an input");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"range\"}]}", SL_EINVAL, "must come first");
  tu_expect_spec_error("{\"ops\": []}", SL_EINVAL, "no ops");
  tu_expect_spec_error("[1, 2]", SL_EINVAL, "must be a JSON object");
  tu_expect_spec_error("{\"opz\": []}", SL_EINVAL, "unknown top-level key 'opz'");
}

static void test_filter_needs_a_predicate(void **s) {
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"filter\", \"fn\": \"identity\"}]}",
                       SL_EINVAL, "not a predicate");
}

static void test_autotune_and_normalised_output(void **s) {
  sl_pipeline *p = tu_pipeline("{\"name\": \"n\", \"ops\": [{\"op\": \"range\", \"stop\": 10}, {\"op\": \"map\", "
                               "\"fn\": \"identity\", \"parallelism\": \"autotune\"}, {\"op\": \"prefetch\"}]}");
  char *js = NULL;
  assert_int_equal(sl_pipeline_to_json(&js, p), 0);
  assert_non_null(strstr(js, "\"autotune\""));
  assert_non_null(strstr(js, "\"buffer\": 1")); /* defaults are written back */
  sl_pipeline *q = tu_pipeline(js);           /* and the output reads back */
  assert_int_equal(tu_count(q, 0), 10);
  sl_free(js);
  sl_pipeline_free(q);
  sl_pipeline_free(p);
}

static void test_spec_file_errors_name_the_file(void **s) {
  sl_pipeline *p = NULL;
  assert_int_equal(sl_pipeline_from_file(&p, "/nonexistent/spec.json"), SL_EIO);
  assert_non_null(strstr(sl_error_last(), "/nonexistent/spec.json"));
  char *dir = tu_tmpdir("spec");
  char *f = tu_write_file(dir, "bad.json", "{\n\"ops\": [\n}", 12);
  assert_int_equal(sl_pipeline_from_file(&p, f), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "bad.json:3:"));
  tu_rmtree(dir);
  free(dir);
  free(f);
}

static void test_builder_makes_the_same_pipeline(void **s) {
  sl_builder *b = sl_builder_new("built", 7);
  assert_non_null(b);
  assert_int_equal(sl_builder_range(b, 0, 100, 1), 0);
  assert_int_equal(sl_builder_map(b, "spin", "{\"us\": 1}", SL_AUTOTUNE), 0);
  assert_int_equal(sl_builder_batch(b, 10, true), 0);
  assert_int_equal(sl_builder_prefetch(b, 2), 0);
  assert_int_equal(sl_builder_begin_source(b), SL_EINVAL); /* no interleave before */
  sl_pipeline *p = NULL;
  assert_int_equal(sl_builder_build(&p, b), 0);
  assert_int_equal(tu_count(p, 0), 10);
  assert_string_equal(sl_pipeline_name(p), "built");
  assert_int_equal(sl_pipeline_seed(p), 7);
  sl_pipeline_free(p);
  assert_int_equal(sl_builder_op(b, "take", "{\"count\": 3"), SL_EINVAL);
  sl_builder_free(b);

  b = sl_builder_new("nested", 1);
  assert_int_equal(sl_builder_range(b, 0, 4, 1), 0);
  assert_int_equal(sl_builder_op(b, "interleave", "{\"cycle_length\": 2}"), 0);
  assert_int_equal(sl_builder_begin_source(b), 0);
  assert_int_equal(sl_builder_op(b, "repeat", "{\"count\": 3}"), 0);
  assert_int_equal(sl_builder_end_source(b), 0);
  assert_int_equal(sl_builder_build(&p, b), 0);
  assert_int_equal(tu_count(p, 0), 12);
  sl_pipeline_free(p);
  sl_builder_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_malformed_json_gives_line_and_column),
      cmocka_unit_test(test_unknown_op_lists_known_ones),
      cmocka_unit_test(test_unknown_function),
      cmocka_unit_test(test_wrong_knob_type_names_the_path),
      cmocka_unit_test(test_negative_size),
      cmocka_unit_test(test_unknown_knob_is_caught),
      cmocka_unit_test(test_nested_path_in_interleave_source),
      cmocka_unit_test(test_missing_file_and_empty_glob),
      cmocka_unit_test(test_reader_needs_input_and_source_must_come_first),
      cmocka_unit_test(test_filter_needs_a_predicate),
      cmocka_unit_test(test_autotune_and_normalised_output),
      cmocka_unit_test(test_spec_file_errors_name_the_file),
      cmocka_unit_test(test_builder_makes_the_same_pipeline),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
