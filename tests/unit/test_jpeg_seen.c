/* test_jpeg_seen.c: the set of JPEGs a strict cropped decode has read whole (fns/jpeg_seen.c), and how
 * decode_and_crop_jpeg uses it: bytes read to their end without an error are known, and a later cropped decode of
 * them gives the same pixels; a corrupt or truncated JPEG is never known, so it fails every time, wherever the window
 * lies; nothing is added without strict or with "recheck". The set grows past its first segments and takes keys
 * from two threads at once. SL_TEST_THREADED */
#include <pthread.h>

#include "test_fns_util.h"

#include "fns/image_int.h"

/* A 4:2:0 JPEG of a size no other test in this file uses, so that its key is new to the process. */
static uint8_t *fresh_jpeg(int w, size_t *n) { return tf_rgb_jpeg(w, 240, TJSAMP_420, n); }

/* decode_and_crop_jpeg with `args` on a copy of j; the decoded bytes in a new malloc'd buffer (*px), or rc. */
static int crop(const uint8_t *j, size_t n, const char *args, uint8_t **px, size_t *pxn) {
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_bytes(&e, "image/encoded", NULL, 0, j, n), 0);
  int rc = tf_run("decode_and_crop_jpeg", args, &e, 7);
  if (!rc && px) {
    int64_t h, w, c;
    const uint8_t *p = tf_image(&e, "image", &h, &w, &c);
    *pxn = (size_t)(h * w * c);
    *px = malloc(*pxn);
    memcpy(*px, p, *pxn);
  }
  sl_elem_clear(&e);
  return rc;
}

#define TOP "{\"crop\": [0, 0, 16, 16]" /* a window at the top: the whole rest of the image lies below it */

static void test_known_after_a_whole_read(void **st) {
  (void)st;
  size_t n;
  uint8_t *j = fresh_jpeg(322, &n);
  uint64_t k = sl__jpeg_key(j, n);
  assert_false(sl__jpeg_seen(k));
  uint8_t *a, *b;
  size_t an, bn;
  assert_int_equal(crop(j, n, TOP "}", &a, &an), 0);
  assert_true(sl__jpeg_seen(k));
  assert_int_equal(crop(j, n, TOP "}", &b, &bn), 0); /* known: the rows below are not read again */
  assert_int_equal(an, bn);
  assert_memory_equal(a, b, an);
  free(a);
  free(b);
  /* the same bytes at another address are the same key; one byte more is another */
  uint8_t *c = malloc(n + 1);
  memcpy(c, j, n);
  c[n] = 0;
  assert_int_equal(sl__jpeg_key(c, n), k);
  assert_int_not_equal(sl__jpeg_key(c, n + 1), k);
  free(c);
  free(j);
}

static void test_never_known_when_not_read_whole(void **st) {
  (void)st;
  size_t n;
  /* without strict, or with recheck, nothing is added */
  uint8_t *j = fresh_jpeg(326, &n);
  assert_int_equal(crop(j, n, TOP ", \"strict\": false}", NULL, NULL), 0);
  assert_false(sl__jpeg_seen(sl__jpeg_key(j, n)));
  assert_int_equal(crop(j, n, TOP ", \"recheck\": true}", NULL, NULL), 0);
  assert_false(sl__jpeg_seen(sl__jpeg_key(j, n)));
  free(j);
  /* truncated below the window: fails each time (never known), and still after the whole file was read */
  j = fresh_jpeg(330, &n);
  size_t cut = n * 3 / 4;
  for (int t = 0; t < 2; t++) {
    assert_int_equal(crop(j, cut, TOP "}", NULL, NULL), SL_ECORRUPT);
    tf_expect_msg("corrupt JPEG");
    assert_false(sl__jpeg_seen(sl__jpeg_key(j, cut)));
  }
  assert_int_equal(crop(j, n, TOP "}", NULL, NULL), 0);
  assert_true(sl__jpeg_seen(sl__jpeg_key(j, n)));
  assert_int_equal(crop(j, cut, TOP "}", NULL, NULL), SL_ECORRUPT);
  /* bytes flipped below the window: the same code as decode_jpeg's, every time */
  uint8_t *m = malloc(n);
  uint64_t r = 5;
  int failed = 0;
  for (int t = 0; t < 30; t++) {
    memcpy(m, j, n);
    for (int q = 0; q < 3; q++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      m[n / 2 + (size_t)((r >> 33) % (n / 2 - 2))] ^= (uint8_t)(1u << ((r >> 20) % 8));
    }
    sl_elem e;
    sl_elem_init(&e);
    assert_int_equal(sl_elem_set_bytes(&e, "image/encoded", NULL, 0, m, n), 0);
    int whole = tf_run("decode_jpeg", "{}", &e, 1);
    sl_elem_clear(&e);
    for (int again = 0; again < 2; again++) assert_int_equal(crop(m, n, TOP "}", NULL, NULL), whole);
    failed += whole != 0;
  }
  assert_true(failed > 0); /* the flips did reach the decoder */
  free(m);
  free(j);
}

/* Keys from two threads at once, overlapping: every one is found, none of another series is, and the set grew past
 * its first segment (4,096 slots). */
enum { NKEYS = 40000 };
static uint64_t key_of(int i, int series) { return ((uint64_t)i + 1) * 0x9E3779B97F4A7C15ull + (uint64_t)series; }
static void *adder(void *arg) {
  int from = *(int *)arg;
  for (int i = from; i < from + NKEYS * 3 / 4; i++) sl__jpeg_seen_add(key_of(i % NKEYS, 11));
  return NULL;
}
static void test_two_threads_and_growth(void **st) {
  (void)st;
  pthread_t t[2];
  int from[2] = {0, NKEYS / 4};
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, adder, &from[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  int missing = 0, stray = 0;
  for (int i = 0; i < NKEYS; i++) {
    missing += !sl__jpeg_seen(key_of(i, 11));
    stray += sl__jpeg_seen(key_of(i, 12));
  }
  assert_int_equal(missing, 0);
  assert_int_equal(stray, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_known_after_a_whole_read),
      cmocka_unit_test(test_never_known_when_not_read_whole),
      cmocka_unit_test(test_two_threads_and_growth),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  tf_release_all();
  return rc;
}
