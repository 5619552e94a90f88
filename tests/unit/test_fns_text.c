/* test_fns_text.c: tokenize (vocabulary lookup, punctuation, unknown ids, lowercase, huge tokens, empty and
 * missing vocabularies) and the bucket_by_sequence_length op (bucket choice, padding, remainders, bad specs).
 * SL_TEST_THREADED (the bucketing pipeline runs a parallel map) */
#define _GNU_SOURCE
#include "test_fns_util.h"

static char *g_dir, *g_vocab;

static int setup(void **st) {
  g_dir = tu_tmpdir("fntext");
  static const char vocab[] = "[PAD]\n[UNK]\n[BOS]\n[EOS]\nhello\nworld\n,\n.\n!\ncafé\nthe\r\nhello\n";
  g_vocab = tu_write_file(g_dir, "vocab.txt", vocab, sizeof vocab - 1);
  return 0;
}
static int teardown(void **st) {
  tu_rmtree(g_dir);
  free(g_dir);
  free(g_vocab);
  return 0;
}

static void tokens_of(const char *args_fmt, const char *text, size_t len, int32_t *out, int64_t *n) {
  char args[1024];
  snprintf(args, sizeof args, args_fmt, g_vocab);
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_bytes(&e, "line", NULL, 0, text, len), 0);
  int rc = tf_run("tokenize", args, &e, 0);
  if (rc) fprintf(stderr, "%s\n", sl_error_last());
  assert_int_equal(rc, 0);
  sl_comp *c = sl_elem_get(&e, "tokens");
  assert_non_null(c);
  assert_int_equal(c->dtype, SL_INT32);
  assert_int_equal(c->rank, 1);
  *n = c->shape[0];
  if (*n) memcpy(out, sl_comp_data(c), (size_t)*n * 4);
  assert_null(sl_elem_get(&e, "line"));
  sl_elem_clear(&e);
}

static void test_tokenize_basic(void **st) {
  int32_t t[64];
  int64_t n;
  tokens_of("{\"vocab\": \"%s\"}", "hello, world!  the café zzz.", strlen("hello, world!  the café zzz."), t, &n);
  int32_t want[] = {4, 6, 5, 8, 10, 9, 1, 7};
  assert_int_equal(n, 8);
  assert_memory_equal(t, want, sizeof want);
  tokens_of("{\"vocab\": \"%s\", \"bos_id\": 2, \"eos_id\": 3}", "world", 5, t, &n);
  int32_t want2[] = {2, 5, 3};
  assert_int_equal(n, 3);
  assert_memory_equal(t, want2, sizeof want2);
  /* Empty and all-space lines. */
  tokens_of("{\"vocab\": \"%s\"}", "   \t ", 5, t, &n);
  assert_int_equal(n, 0);
  /* unknown_id -1 drops unknown tokens; another unknown id. */
  tokens_of("{\"vocab\": \"%s\", \"unknown_id\": -1}", "a hello b", 9, t, &n);
  assert_int_equal(n, 1);
  assert_int_equal(t[0], 4);
  tokens_of("{\"vocab\": \"%s\", \"unknown_id\": 0}", "a hello", 7, t, &n);
  assert_int_equal(t[0], 0);
  /* Lowercase. */
  tokens_of("{\"vocab\": \"%s\", \"lowercase\": true}", "HeLLo WORLD", 11, t, &n);
  assert_int_equal(n, 2);
  assert_int_equal(t[0], 4);
  assert_int_equal(t[1], 5);
  tokens_of("{\"vocab\": \"%s\"}", "HeLLo", 5, t, &n);
  assert_int_equal(t[0], 1);
  /* Punctuation kept inside words when asked. */
  tokens_of("{\"vocab\": \"%s\", \"split_punctuation\": false}", "hello, world", 12, t, &n);
  assert_int_equal(n, 2);
  assert_int_equal(t[0], 1);
}

static void test_tokenize_huge_token(void **st) {
  size_t len = 4u << 20;
  char *big = malloc(len);
  memset(big, 'x', len);
  memcpy(big, "hello ", 6);
  memcpy(big + len - 6, " world", 6);
  int32_t t[8];
  int64_t n;
  tokens_of("{\"vocab\": \"%s\", \"lowercase\": true}", big, len, t, &n);
  assert_int_equal(n, 3);
  assert_int_equal(t[0], 4);
  assert_int_equal(t[1], 1);
  assert_int_equal(t[2], 5);
  /* A line of only punctuation: one token per character. */
  memset(big, '!', 100000);
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_bytes(&e, "line", NULL, 0, big, 100000), 0);
  char args[512];
  snprintf(args, sizeof args, "{\"vocab\": \"%s\"}", g_vocab);
  assert_int_equal(tf_run("tokenize", args, &e, 0), 0);
  assert_int_equal(sl_elem_get(&e, "tokens")->shape[0], 100000);
  sl_elem_clear(&e);
  free(big);
}

static void test_tokenize_bad_vocab(void **st) {
  char *empty = tu_write_file(g_dir, "empty.txt", "", 0);
  char args[512];
  tf_fn f;
  snprintf(args, sizeof args, "{\"vocab\": \"%s\"}", empty);
  assert_int_equal(tf_open(&f, "tokenize", args), SL_EINVAL);
  tf_expect_msg("empty");
  tf_expect_msg("ops[1].args.vocab");
  snprintf(args, sizeof args, "{\"vocab\": \"%s/none.txt\"}", g_dir);
  assert_int_equal(tf_open(&f, "tokenize", args), SL_ENOTFOUND);
  tf_expect_msg("none.txt");
  assert_int_equal(tf_open(&f, "tokenize", "{}"), SL_EINVAL);
  tf_expect_msg("vocab");
  /* A vocabulary without [UNK]: the unknown id is its size. */
  char *small = tu_write_file(g_dir, "small.txt", "a\nb", 3);
  snprintf(args, sizeof args, "{\"vocab\": \"%s\"}", small);
  assert_int_equal(tf_open(&f, "tokenize", args), 0);
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_bytes(&e, "line", NULL, 0, "b c", 3), 0);
  assert_int_equal(tf_call(&f, &e, 0, 0, NULL), 0);
  const int32_t *t = sl_comp_data(sl_elem_get(&e, "tokens"));
  assert_int_equal(t[0], 1);
  assert_int_equal(t[1], 2);
  sl_elem_clear(&e);
  /* Not text. */
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_i64(&e, "line", 1), 0);
  assert_int_equal(tf_call(&f, &e, 0, 0, NULL), SL_EINVAL);
  sl_elem_clear(&e);
  tf_close(&f);
  free(empty);
  free(small);
}

/* Lines of 1..40 words -> tokenize -> filter length <= 30 -> bucket_by_sequence_length. */
static void test_bucket(void **st) {
  sl__str text = {0};
  for (int i = 0; i < 200; i++) {
    int len = 1 + (i * 7) % 40;
    for (int k = 0; k < len; k++) sl__str_printf(&text, k ? " hello" : "hello");
    sl__str_printf(&text, "\n");
  }
  char *path = tu_write_file(g_dir, "lines.txt", text.s, text.len);
  sl__str_dispose(&text);
  for (int pad = 0; pad < 2; pad++)
    for (int drop = 0; drop < 2; drop++) {
      char spec[2048];
      snprintf(spec, sizeof spec,
               "{\"name\": \"b\", \"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"interleave\", \"source\": "
               "[{\"op\": \"lines\"}]}, {\"op\": \"map\", \"fn\": \"tokenize\", \"args\": {\"vocab\": \"%s\"}, "
               "\"parallelism\": 2}, {\"op\": \"filter\", \"fn\": \"length\", \"args\": {\"component\": \"tokens\", \"max\": "
               "30}}, {\"op\": \"bucket_by_sequence_length\", \"component\": \"tokens\", \"boundaries\": [5, 10, 20], "
               "\"batch_sizes\": [8, 4, 4, 2], \"padding_values\": {\"tokens\": -1}, \"pad_to_bucket_boundary\": %s, "
               "\"drop_remainder\": %s}]}",
               path, g_vocab, pad ? "true" : "false", drop ? "true" : "false");
      sl_pipeline *p = tu_pipeline(spec);
      sl_iter *it;
      assert_int_equal(sl_pipeline_iter(&it, p), 0);
      sl_elem e;
      sl_elem_init(&e);
      int rc, total = 0;
      while ((rc = sl_iter_next(&e, it)) == 0) {
        sl_comp *c = sl_elem_get(&e, "tokens");
        assert_int_equal(c->rank, 2);
        int64_t bs = c->shape[0], L = c->shape[1];
        const int32_t *d = sl_comp_data(c);
        int64_t minlen = 1000, maxlen = 0;
        for (int64_t r = 0; r < bs; r++) {
          int64_t len = 0;
          while (len < L && d[r * L + len] != -1) len++;
          for (int64_t k = len; k < L; k++) assert_int_equal(d[r * L + k], -1);
          if (len < minlen) minlen = len;
          if (len > maxlen) maxlen = len;
        }
        int bucket = maxlen < 5 ? 0 : maxlen < 10 ? 1 : maxlen < 20 ? 2 : 3;
        int lo[] = {0, 5, 10, 20}, hi[] = {4, 9, 19, 30}, sizes[] = {8, 4, 4, 2};
        assert_true(minlen >= lo[bucket] && maxlen <= hi[bucket]);
        assert_true(bs <= sizes[bucket]);
        if (drop) assert_int_equal(bs, sizes[bucket]);
        if (pad && bucket < 3) assert_int_equal(L, hi[bucket]);
        else assert_int_equal(L, maxlen);
        total += (int)bs;
        sl_elem_clear(&e);
      }
      assert_int_equal(rc, SL_END);
      int kept = 0;
      for (int i = 0; i < 200; i++) kept += 1 + (i * 7) % 40 <= 30;
      if (!drop) assert_int_equal(total, kept);
      else assert_true(total <= kept && total > kept - 20);
      sl_iter_free(it);
      sl_pipeline_free(p);
    }
  free(path);
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"bucket_by_sequence_length\", "
                       "\"component\": \"value\", \"boundaries\": [5], \"batch_sizes\": [1]}]}",
                       SL_EINVAL, "batch_sizes");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"bucket_by_sequence_length\", "
                       "\"component\": \"value\", \"boundaries\": [5, 3], \"batch_sizes\": [1, 1, 1]}]}",
                       SL_EINVAL, "increase");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"bucket_by_sequence_length\", "
                       "\"boundaries\": [5], \"batch_sizes\": [1, 1]}]}",
                       SL_EINVAL, "component");
  /* Scalars (length 1) all go to the first bucket; a missing component is an error at run time. */
  sl_pipeline *p = tu_pipeline("{\"ops\": [{\"op\": \"range\", \"stop\": 7}, {\"op\": \"bucket_by_sequence_length\", "
                               "\"component\": \"value\", \"boundaries\": [2], \"batch_sizes\": [3, 1]}]}");
  assert_int_equal(tu_count(p, 0), 3);
  sl_pipeline_free(p);
  /* A component that no earlier op makes is caught when the pipeline is built. */
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 7}, {\"op\": \"bucket_by_sequence_length\", "
                       "\"component\": \"nope\", \"boundaries\": [2], \"batch_sizes\": [3, 1]}]}",
                       SL_EINVAL, "no component 'nope' reaches this op (the element has: 'value')");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tokenize_basic),
      cmocka_unit_test(test_tokenize_huge_token),
      cmocka_unit_test(test_tokenize_bad_vocab),
      cmocka_unit_test(test_bucket),
  };
  int rc = cmocka_run_group_tests(tests, setup, teardown);
  tf_release_all();
  return rc;
}
