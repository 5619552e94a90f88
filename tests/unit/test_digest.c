/* test_digest.c: sl_elem_digest: its canonical bytes, what changes it and what does not, and the sum over a
 * stream being independent of order and additive over disjoint parts. */
#include <string.h>
#include <xxhash.h>

#include "testutil.h"

static uint64_t digest_of(const sl_elem *e) {
  uint64_t d = 0;
  assert_int_equal(sl_elem_digest(&d, e), 0);
  return d;
}

/* The canonical bytes written out by hand: a change of format shows here first. */
static void test_canonical_bytes_of_a_scalar(void **s) {
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_i64(&e, "x", 258), 0);
  unsigned char want[] = {1, 0, 0, 0, 'x', 5, 0, 0, 0, 'i', 'n', 't', '6', '4', 0, 0, 0, 0, 0, 0, 0, 0,
                          2, 1, 0, 0, 0, 0, 0, 0};
  assert_true(digest_of(&e) == XXH3_64bits(want, sizeof want));
  sl_elem_clear(&e);
}

static void test_names_dtypes_shapes_and_string_bounds_count(void **s) {
  sl_elem a, b;
  sl_elem_init(&a);
  sl_elem_init(&b);
  int32_t v[6] = {1, 2, 3, 4, 5, 6};
  int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
  assert_int_equal(sl_elem_set_tensor(&a, "t", SL_INT32, 2, s23, NULL, 0, v), 0);
  assert_int_equal(sl_elem_set_tensor(&b, "t", SL_INT32, 2, s32, NULL, 0, v), 0);
  assert_true(digest_of(&a) != digest_of(&b)); /* same payload, other shape */
  sl_elem_clear(&b);
  assert_int_equal(sl_elem_set_tensor(&b, "t", SL_FLOAT32, 2, s23, NULL, 0, v), 0);
  assert_true(digest_of(&a) != digest_of(&b)); /* same bits, other dtype */
  sl_elem_clear(&b);
  assert_int_equal(sl_elem_set_tensor(&b, "u", SL_INT32, 2, s23, NULL, 0, v), 0);
  assert_true(digest_of(&a) != digest_of(&b)); /* other name */
  sl_elem_clear(&b);
  assert_int_equal(sl_elem_set_tensor(&b, "t", SL_INT32, 2, s23, NULL, 0, v), 0);
  assert_true(digest_of(&a) == digest_of(&b));
  sl_elem_clear(&a);
  sl_elem_clear(&b);
  /* "ab" then "c" is not "a" then "bc": string lengths are part of the bytes */
  assert_int_equal(sl_elem_set_bytes(&a, "s", NULL, 0, "ab", 2), 0);
  assert_int_equal(sl_elem_set_bytes(&a, "t", NULL, 0, "c", 1), 0);
  assert_int_equal(sl_elem_set_bytes(&b, "s", NULL, 0, "a", 1), 0);
  assert_int_equal(sl_elem_set_bytes(&b, "t", NULL, 0, "bc", 2), 0);
  assert_true(digest_of(&a) != digest_of(&b));
  sl_elem_clear(&a);
  sl_elem_clear(&b);
}

/* A view into a shared buffer and an inline copy of the same bytes digest alike. */
static void test_storage_does_not_matter(void **s) {
  sl_elem a, b;
  sl_elem_init(&a);
  sl_elem_init(&b);
  sl_buf *buf = sl_buf_alloc(64);
  assert_non_null(buf);
  memset(sl_buf_data(buf), 0, 64);
  memcpy((char *)sl_buf_data(buf) + 8, "hello", 5);
  assert_int_equal(sl_elem_set_bytes(&a, "s", buf, 8, NULL, 5), 0);
  assert_int_equal(sl_elem_set_bytes(&b, "s", NULL, 0, "hello", 5), 0);
  sl_buf_unref(buf);
  assert_true(digest_of(&a) == digest_of(&b));
  sl_elem_clear(&a);
  sl_elem_clear(&b);
}

static uint64_t stream_digest(const char *json) {
  sl_pipeline *p = tu_pipeline(json);
  sl_iter *it = NULL;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  uint64_t sum = 0;
  int rc;
  while ((rc = sl_iter_next(&e, it)) == 0) {
    sum += digest_of(&e);
    sl_elem_clear(&e);
  }
  assert_int_equal(rc, SL_END);
  sl_iter_free(it);
  sl_pipeline_free(p);
  return sum;
}

static void test_stream_sum_ignores_order_and_adds_over_shards(void **s) {
  uint64_t whole = stream_digest("{\"ops\": [{\"op\": \"range\", \"stop\": 500}]}");
  uint64_t shuffled = stream_digest("{\"seed\": 7, \"ops\": [{\"op\": \"range\", \"stop\": 500}, "
                                    "{\"op\": \"shuffle\", \"buffer\": 100}]}");
  uint64_t s0 = stream_digest("{\"ops\": [{\"op\": \"range\", \"stop\": 500}, "
                              "{\"op\": \"shard\", \"num_shards\": 2, \"index\": 0}]}");
  uint64_t s1 = stream_digest("{\"ops\": [{\"op\": \"range\", \"stop\": 500}, "
                              "{\"op\": \"shard\", \"num_shards\": 2, \"index\": 1}]}");
  uint64_t fewer = stream_digest("{\"ops\": [{\"op\": \"range\", \"stop\": 499}]}");
  assert_true(whole == shuffled);
  assert_true(s0 + s1 == whole);
  assert_true(s0 != s1);
  assert_true(fewer != whole);
}

static void test_malformed_component_is_an_error(void **s) {
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_i64(&e, "x", 1), 0);
  e.c[0].dtype = (sl_dtype)42;
  uint64_t d = 0;
  assert_int_equal(sl_elem_digest(&d, &e), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "'x'"));
  e.c[0].dtype = SL_INT64;
  sl_elem_clear(&e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_canonical_bytes_of_a_scalar),
      cmocka_unit_test(test_names_dtypes_shapes_and_string_bounds_count),
      cmocka_unit_test(test_storage_does_not_matter),
      cmocka_unit_test(test_stream_sum_ignores_order_and_adds_over_shards),
      cmocka_unit_test(test_malformed_component_is_an_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
