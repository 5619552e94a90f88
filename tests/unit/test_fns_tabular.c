/* test_fns_tabular.c: parse_csv (types, defaults, quoting, field-count and number errors with the line, skip
 * mode), hash_bucket (stable values), log1p. SL_TEST_THREADED (pipelines with a parallel map) */
#define _GNU_SOURCE
#include "test_fns_util.h"

#include <xxhash.h>

static const char *COLS =
    "{\"columns\": [{\"name\": \"label\", \"dtype\": \"int64\"}, {\"name\": \"dense\", \"dtype\": \"float32\", "
    "\"count\": 3, \"default\": -5}, {\"name\": \"cat\", \"dtype\": \"bytes\", \"count\": 2, \"default\": \"none\"}]%s}";

static int parse_line(const char *extra, const char *line, uint64_t index, sl_elem *e, bool *keep) {
  char args[1024];
  snprintf(args, sizeof args, COLS, extra ? extra : "");
  sl_elem_init(e);
  assert_int_equal(sl_elem_set_bytes(e, "line", NULL, 0, line, strlen(line)), 0);
  tf_fn f;
  assert_int_equal(tf_open(&f, "parse_csv", args), 0);
  int rc = tf_call(&f, e, 0, index, keep);
  tf_close(&f);
  return rc;
}

static void test_parse_csv_values(void **st) {
  sl_elem e;
  bool keep;
  assert_int_equal(parse_line(NULL, "1,0.5,,3e2,abc,\"x,\"\"y\"\"\"", 0, &e, &keep), 0);
  assert_true(keep);
  int64_t label;
  sl_comp_get_i64(&label, sl_elem_get(&e, "label"));
  assert_int_equal(label, 1);
  assert_int_equal(sl_elem_get(&e, "label")->rank, 0);
  sl_comp *d = sl_elem_get(&e, "dense");
  assert_int_equal(d->rank, 1);
  assert_int_equal(d->shape[0], 3);
  const float *f = sl_comp_data(d);
  assert_true(f[0] == 0.5f && f[1] == -5.0f && f[2] == 300.0f);
  sl_comp *c = sl_elem_get(&e, "cat");
  const void *p;
  size_t n;
  assert_int_equal(sl_comp_string(&p, &n, c, 0), 0);
  assert_int_equal(n, 3);
  assert_memory_equal(p, "abc", 3);
  assert_int_equal(sl_comp_string(&p, &n, c, 1), 0);
  assert_int_equal(n, 5);
  assert_memory_equal(p, "x,\"y\"", 5);
  assert_null(sl_elem_get(&e, "line"));
  sl_elem_clear(&e);
  /* Empty categoricals take the default; an empty quoted string stays empty. */
  assert_int_equal(parse_line(NULL, "0,1,2,3,,\"\"", 0, &e, &keep), 0);
  c = sl_elem_get(&e, "cat");
  sl_comp_string(&p, &n, c, 0);
  assert_int_equal(n, 4);
  sl_comp_string(&p, &n, c, 1);
  assert_int_equal(n, 0);
  sl_elem_clear(&e);
  /* Tab delimiter. */
  assert_int_equal(parse_line(", \"delimiter\": \"\\t\"", "7\t1\t2\t3\ta\tb", 0, &e, &keep), 0);
  sl_comp_get_i64(&label, sl_elem_get(&e, "label"));
  assert_int_equal(label, 7);
  sl_elem_clear(&e);
}

static void test_parse_csv_errors(void **st) {
  struct {
    const char *line, *needle;
  } bad[] = {
      {"1,2,3,4,a", "5 fields, expected 6"},
      {"1,2,3,4,a,b,c", "7 fields, expected 6"},
      {"1,x,3,4,a,b", "'x' is not a valid float32"},
      {"1.5,1,3,4,a,b", "is not a valid int64"},
      {",1,3,4,a,b", "column 'label') is empty and has no default"},
      {"1,2,3,4,\"a,b", "unterminated"},
      {"1,2,3,4,\"a\"b,c", "after the closing quote"},
      {"99999999999999999999,1,2,3,a,b", "not a valid int64"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    sl_elem e;
    bool keep;
    int rc = parse_line(NULL, bad[k].line, 41, &e, &keep);
    assert_int_equal(rc, SL_EINVAL);
    tf_expect_msg(bad[k].needle);
    tf_expect_msg("element 41");
    /* a line made by hand has no file: no line number is guessed from the element index */
    assert_null(strstr(sl_error_last(), "line 42"));
    sl_elem_clear(&e);
    /* Skip mode drops the element without an error. */
    rc = parse_line(", \"on_error\": \"skip\"", bad[k].line, 41, &e, &keep);
    assert_int_equal(rc, 0);
    assert_false(keep);
    sl_elem_clear(&e);
  }
  tf_fn f;
  assert_int_equal(tf_open(&f, "parse_csv", "{}"), SL_EINVAL);
  assert_int_equal(tf_open(&f, "parse_csv", "{\"columns\": [{\"name\": \"a\", \"dtype\": \"int9\"}]}"), SL_EINVAL);
  assert_int_equal(tf_open(&f, "parse_csv", "{\"columns\": [{\"name\": \"a\", \"dtype\": \"int64\", \"default\": \"x\"}]}"),
                   SL_EINVAL);
  assert_int_equal(tf_open(&f, "parse_csv", "{\"columns\": [{\"name\": \"a\", \"dtype\": \"int64\"}], \"delimiter\": \";;\"}"),
                   SL_EINVAL);
  assert_int_equal(tf_open(&f, "parse_csv", "{\"columns\": [{\"name\": \"a\", \"dtype\": \"int64\"}], \"on_error\": \"x\"}"),
                   SL_EINVAL);
}

/* In a pipeline: bad lines are skipped (and the rest counted) or stop the run naming the line. */
static void test_parse_csv_pipeline(void **st) {
  char *dir = tu_tmpdir("fntab");
  const char text[] = "1,2\n3,4\nbad\n5,x\n7,8\n";
  char *path = tu_write_file(dir, "t.csv", text, sizeof text - 1);
  char spec[1024];
  const char *fmt = "{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"interleave\", \"source\": [{\"op\": "
                    "\"lines\"}]}, {\"op\": \"map\", \"fn\": \"parse_csv\", \"parallelism\": %d, \"args\": {\"columns\": "
                    "[{\"name\": \"a\", \"dtype\": \"int64\"}, {\"name\": \"b\", \"dtype\": \"int64\"}]%s}}]}";
  /* Skip mode, sequential and parallel: the same lines kept, in order, and the dropped ones counted. */
  sl_pipeline *p;
  for (int par = 1; par <= 2; par++) {
    snprintf(spec, sizeof spec, fmt, path, par, ", \"on_error\": \"skip\"");
    p = tu_pipeline(spec);
    int64_t got[8];
    assert_int_equal(tu_collect_i64(p, "a", got, 8), 3);
    assert_true(got[0] == 1 && got[1] == 3 && got[2] == 7);
    sl_op_stats ost;
    assert_int_equal(sl_pipeline_op_stats(&ost, p, 3), 0);
    assert_string_equal(ost.op, "map");
    assert_int_equal(ost.skipped, 2);
    sl_pipeline_free(p);
  }
  for (int par = 1; par <= 2; par++) {
    snprintf(spec, sizeof spec, fmt, path, par, "");
    p = tu_pipeline(spec);
    tu_count(p, SL_EINVAL);
    tf_expect_msg("t.csv, line 3");
    sl_pipeline_free(p);
  }
  free(path);
  tu_rmtree(dir);
  free(dir);
}

/* A bad line's error names its file and 1-based line, not the element index: two files, an empty line skipped. */
static void test_parse_csv_names_file_and_line(void **st) {
  char *dir = tu_tmpdir("fntabl");
  const char a[] = "1,2\n3,4\n", b[] = "5,6\n\n7,8\n9,oops\n";
  char *pa = tu_write_file(dir, "a.csv", a, sizeof a - 1), *pb = tu_write_file(dir, "b.csv", b, sizeof b - 1);
  for (int par = 1; par <= 2; par++) {
    sl_pipeline *p = tu_pipelinef(
        "{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\", \"%s\"]}, {\"op\": \"lines\", \"skip_empty\": true}, "
        "{\"op\": \"map\", \"fn\": \"parse_csv\", \"parallelism\": %d, \"args\": {\"columns\": [{\"name\": \"a\", "
        "\"dtype\": \"int64\"}, {\"name\": \"b\", \"dtype\": \"int64\"}]}}]}",
        pa, pb, par);
    assert_int_equal(tu_count(p, SL_EINVAL), 4);
    tf_expect_msg("b.csv, line 4");
    tf_expect_msg("element 4");
    tf_expect_msg("ops[2]");
    sl_pipeline_free(p);
  }
  free(pa);
  free(pb);
  tu_rmtree(dir);
  free(dir);
}

static void test_hash_bucket(void **st) {
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_bytes(&e, "s", NULL, 0, "68fd1e64", 8), 0);
  assert_int_equal(tf_run("hash_bucket", "{\"component\": \"s\", \"buckets\": 1000}", &e, 0), 0);
  int64_t v;
  sl_comp_get_i64(&v, sl_elem_get(&e, "s"));
  assert_int_equal(v, (int64_t)(XXH64("68fd1e64", 8, 0) % 1000));
  sl_elem_clear(&e);
  /* Known value: stable across versions (XXH64 of "abc", seed 0, is 0x44bc2cf5ad770999). */
  assert_true(XXH64("abc", 3, 0) == 0x44bc2cf5ad770999ull);
  /* A string array keeps its shape; an empty string hashes like any other. */
  sl_elem_init(&e);
  assert_int_equal(parse_line(NULL, "1,2,3,4,abc,", 0, &e, NULL), 0);
  assert_int_equal(tf_run("hash_bucket", "{\"component\": \"cat\", \"buckets\": 97, \"output\": \"ids\", \"seed\": 3}",
                          &e, 0), 0);
  sl_comp *c = sl_elem_get(&e, "ids");
  assert_int_equal(c->dtype, SL_INT64);
  assert_int_equal(c->rank, 1);
  assert_int_equal(c->shape[0], 2);
  const int64_t *ids = sl_comp_data(c);
  assert_int_equal(ids[0], (int64_t)(XXH64("abc", 3, 3) % 97));
  assert_int_equal(ids[1], (int64_t)(XXH64("none", 4, 3) % 97));
  sl_elem_clear(&e);
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_i64(&e, "s", 4), 0);
  assert_int_equal(tf_run("hash_bucket", "{\"component\": \"s\", \"buckets\": 10}", &e, 0), SL_EINVAL);
  sl_elem_clear(&e);
  tf_fn f;
  assert_int_equal(tf_open(&f, "hash_bucket", "{\"component\": \"s\"}"), SL_EINVAL);
  tf_expect_msg("buckets");
}

static void test_log1p(void **st) {
  int64_t v[4] = {0, 1, -3, 1000};
  int64_t shape[1] = {4};
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_tensor(&e, "x", SL_INT64, 1, shape, NULL, 0, v), 0);
  assert_int_equal(tf_run("log1p", "{\"component\": \"x\"}", &e, 0), 0);
  const float *f = sl_comp_data(sl_elem_get(&e, "x"));
  assert_true(f[0] == 0.0f && fabsf(f[1] - (float)log(2.0)) < 1e-6f && f[2] == 0.0f && fabsf(f[3] - (float)log(1001.0)) < 1e-5f);
  sl_elem_clear(&e);
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_tensor(&e, "x", SL_INT64, 1, shape, NULL, 0, v), 0);
  assert_int_equal(tf_run("log1p", "{\"component\": \"x\", \"clip_negative\": false}", &e, 0), SL_EINVAL);
  tf_expect_msg("x'[2]");
  sl_elem_clear(&e);
}

/* Random lines over a small alphabet (quotes, delimiters, digits, signs): every outcome is a parse or an error. */
static void test_parse_csv_fuzz(void **st) {
  static const char alpha[] = "\",,,0123456789.-e+x \t\"";
  char args[1024];
  snprintf(args, sizeof args, COLS, "");
  tf_fn f;
  assert_int_equal(tf_open(&f, "parse_csv", args), 0);
  uint64_t s = 99;
  int ok = 0;
  for (int it = 0; it < 5000; it++) {
    char line[64];
    int n = it % 40;
    for (int i = 0; i < n; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      line[i] = alpha[(s >> 33) % (sizeof alpha - 1)];
    }
    sl_elem e;
    sl_elem_init(&e);
    assert_int_equal(sl_elem_set_bytes(&e, "line", NULL, 0, line, (size_t)n), 0);
    int rc = tf_call(&f, &e, 0, (uint64_t)it, NULL);
    assert_true(rc == 0 || rc == SL_EINVAL);
    ok += rc == 0;
    sl_elem_clear(&e);
  }
  tf_close(&f);
  (void)ok;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_csv_values), cmocka_unit_test(test_parse_csv_errors),
      cmocka_unit_test(test_parse_csv_pipeline), cmocka_unit_test(test_hash_bucket),
      cmocka_unit_test(test_parse_csv_names_file_and_line),
      cmocka_unit_test(test_log1p), cmocka_unit_test(test_parse_csv_fuzz),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  tf_release_all();
  return rc;
}
