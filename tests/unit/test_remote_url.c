/* test_remote_url.c: the text side of remote paths (io/url.c, io/s3_list.c): brace ranges as WebDataset writes them,
 * URLs as messages show them, s3:// URLs split, SigV4's encoding, and one page of a ListObjectsV2 answer. */
#include <string.h>

#include "io/stream_int.h"
#include "testutil.h"

static void expand(const char *pat, size_t want_n, const char *first, const char *last) {
  char **a = NULL;
  size_t n = 0;
  assert_int_equal(sl__brace_expand(&a, &n, pat, 100000), 0);
  assert_int_equal(n, want_n);
  assert_string_equal(a[0], first);
  assert_string_equal(a[n - 1], last);
  assert_null(a[n]);
  for (size_t i = 0; i < n; i++) sl__free(a[i]);
  sl__free(a);
}

static void test_brace_ranges(void **s) {
  expand("shard-{000000..000127}.tar", 128, "shard-000000.tar", "shard-000127.tar");
  expand("http://h/a-{0..9}.tar", 10, "http://h/a-0.tar", "http://h/a-9.tar");
  expand("a-{8..11}", 4, "a-8", "a-11");        /* no leading zero: no padding */
  expand("a-{08..11}", 4, "a-08", "a-11");      /* padded to the widest bound */
  expand("a-{3..1}", 3, "a-3", "a-1");          /* descending */
  expand("{a,b}/{1..2}.x", 4, "a/1.x", "b/2.x"); /* braces multiply, the first varies slowest */
  expand("p/{x,y{1..3}}", 4, "p/x", "p/y3");    /* nested */
  expand("plain.tar", 1, "plain.tar", "plain.tar");
  expand("{x}.tar", 1, "{x}.tar", "{x}.tar");   /* no alternative: text, as in the shells */
  char **a = NULL;
  size_t n = 0;
  assert_int_equal(sl__brace_expand(&a, &n, "a-{0..99999}", 1000), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "more than 1000"));
  assert_int_equal(sl__brace_expand(&a, &n, "a-{0..1", 1000), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "without its '}'"));
  for (size_t i = 0; i < n; i++) sl__free(a[i]);
  sl__free(a);
}

static void test_url_shown(void **s) {
  char *u = sl__url_shown("https://user:SECRET@host:8443/b/k.tar?X-Amz-Signature=SIG#f");
  assert_string_equal(u, "https://***@host:8443/b/k.tar?...");
  sl__free(u);
  u = sl__url_shown("http://h/x.tar");
  assert_string_equal(u, "http://h/x.tar");
  sl__free(u);
  char *b, *k;
  assert_int_equal(sl__s3_split(&b, &k, "s3://my-bucket/a/b c.tfrecord"), 0);
  assert_string_equal(b, "my-bucket");
  assert_string_equal(k, "a/b c.tfrecord");
  sl__free(b);
  sl__free(k);
  assert_int_equal(sl__s3_split(&b, &k, "s3:///k"), SL_EINVAL);
  assert_int_equal(sl__s3_split(&b, &k, "s3://b@d/k"), SL_EINVAL);
  char *e = sl__uri_encode("a b/c~d=e&é", true);
  assert_string_equal(e, "a%20b/c~d%3De%26%C3%A9");
  sl__free(e);
  e = sl__uri_encode("p/q", false);
  assert_string_equal(e, "p%2Fq");
  sl__free(e);
  assert_true(sl__is_url("HTTPS://h/x") && sl__is_url("s3://b/k") && !sl__is_url("/data/x") && !sl__is_url("ftp://h"));
}

static void test_s3_list_page(void **s) {
  const char *xml =
      "<?xml version=\"1.0\"?><ListBucketResult><IsTruncated>true</IsTruncated>"
      "<Contents><Key>p/a&amp;b.tfrecord</Key><Size>123</Size></Contents>"
      "<Contents><Key>p/&#xe9;.tar</Key><Size>7</Size></Contents>"
      "<NextContinuationToken>tok/+=</NextContinuationToken></ListBucketResult>";
  char **keys = NULL, *next = NULL;
  uint64_t *sizes = NULL;
  size_t n = 0;
  assert_int_equal(sl__s3_list_parse(&keys, &sizes, &n, &next, xml, strlen(xml), "s3://b/p/*"), 0);
  assert_int_equal(n, 2);
  assert_string_equal(keys[0], "p/a&b.tfrecord");
  assert_int_equal(sizes[0], 123);
  assert_string_equal(keys[1], "p/\xc3\xa9.tar");
  assert_string_equal(next, "tok/+=");
  for (size_t i = 0; i < n; i++) sl__free(keys[i]);
  sl__free(keys);
  sl__free(sizes);
  sl__free(next);
  keys = NULL;
  sizes = NULL;
  n = 0;
  const char *err = "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>";
  assert_int_equal(sl__s3_list_parse(&keys, &sizes, &n, &next, err, strlen(err), "s3://b/p/*"), SL_EIO);
  assert_non_null(strstr(sl_error_last(), "AccessDenied: Access Denied"));
  const char *cut = "<ListBucketResult><Contents><Key>a</Key><Size>1";
  assert_int_equal(sl__s3_list_parse(&keys, &sizes, &n, &next, cut, strlen(cut), "s3://b/p/*"), SL_ECORRUPT);
  const char *notoken = "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
  assert_int_equal(sl__s3_list_parse(&keys, &sizes, &n, &next, notoken, strlen(notoken), "w"), SL_ECORRUPT);
  assert_int_equal(n, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_brace_ranges),
      cmocka_unit_test(test_url_shown),
      cmocka_unit_test(test_s3_list_page),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
