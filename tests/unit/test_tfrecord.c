#define _GNU_SOURCE
/* test_tfrecord.c: CRC-32C, TFRecord reading and writing, and every kind of damaged file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *g_dir;

static char *fixture(const char *name) {
  char *p;
  assert_true(asprintf(&p, "%s/tests/data/%s", getenv("SL_SRC"), name) > 0);
  return p;
}

static void test_crc32c_known_vectors(void **s) {
  assert_int_equal(sl_crc32c("123456789", 9), 0xE3069283u);
  assert_int_equal(sl_crc32c("", 0), 0);
  unsigned char zeros[32] = {0};
  assert_int_equal(sl_crc32c(zeros, 32), 0x8A9136AAu); /* RFC 3720 B.4 */
  unsigned char ones[32];
  memset(ones, 0xff, 32);
  assert_int_equal(sl_crc32c(ones, 32), 0x62A8AB43u);
  assert_int_equal(sl_crc32c_extend(sl_crc32c("1234", 4), "56789", 5), 0xE3069283u);
}

static int read_all(const char *path, sl_compression comp, int *ncorrupt, size_t *total) {
  sl_tfrecord_reader *r;
  int rc = sl_tfrecord_reader_open(&r, path, comp);
  if (rc) return rc;
  int n = 0;
  *total = 0;
  for (;;) {
    sl_buf *b;
    size_t len;
    rc = sl_tfrecord_reader_next(&b, &len, r);
    if (rc == SL_END) break;
    if (rc == SL_ECORRUPT && ncorrupt) {
      (*ncorrupt)++;
      continue;
    }
    if (rc) break;
    n++;
    *total += len;
    sl_buf_unref(b);
  }
  sl_tfrecord_reader_free(r);
  return rc == SL_END ? n : rc;
}

static void test_reads_independent_files(void **s) {
  char *p = fixture("independent.tfrecord"), *g = fixture("independent.tfrecord.gz");
  size_t t1, t2;
  assert_int_equal(read_all(p, SL_COMPRESSION_NONE, NULL, &t1), 5);
  assert_int_equal(read_all(g, SL_COMPRESSION_GZIP, NULL, &t2), 5);
  assert_int_equal(t1, t2);
  free(p);
  free(g);
}

static void test_round_trip_all_compressions(void **s) {
  const sl_compression comps[] = {SL_COMPRESSION_NONE, SL_COMPRESSION_GZIP, SL_COMPRESSION_ZLIB};
  for (int c = 0; c < 3; c++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/rt%d.tfrecord", g_dir, c);
    sl_tfrecord_writer *w;
    assert_int_equal(sl_tfrecord_writer_open(&w, path, comps[c]), 0);
    char buf[5000];
    for (int i = 0; i < 200; i++) {
      memset(buf, 'a' + i % 26, sizeof buf);
      assert_int_equal(sl_tfrecord_write(w, buf, (size_t)(i * 25)), 0);
    }
    assert_int_equal(sl_tfrecord_writer_close(w), 0);
    sl_tfrecord_reader *r;
    assert_int_equal(sl_tfrecord_reader_open(&r, path, comps[c]), 0);
    for (int i = 0; i < 200; i++) {
      sl_buf *b;
      size_t len;
      assert_int_equal(sl_tfrecord_reader_next(&b, &len, r), 0);
      assert_int_equal(len, (size_t)(i * 25));
      if (len) assert_int_equal(((char *)sl_buf_data(b))[len - 1], 'a' + i % 26);
      sl_buf_unref(b);
    }
    sl_buf *b;
    size_t len;
    assert_int_equal(sl_tfrecord_reader_next(&b, &len, r), SL_END);
    sl_tfrecord_reader_free(r);
  }
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *d = malloc(*n);
  assert_int_equal(fread(d, 1, *n, f), *n);
  fclose(f);
  return d;
}

/* Writes a damaged copy of the independent fixture and reads it back. */
static int damaged(void (*damage)(unsigned char *, size_t *), int *ncorrupt, const char *needle) {
  char *p = fixture("independent.tfrecord");
  size_t n;
  unsigned char *d = slurp(p, &n);
  damage(d, &n);
  char *q = tu_write_file(g_dir, "damaged.tfrecord", d, n);
  size_t total;
  sl_error_clear();
  int rc = read_all(q, SL_COMPRESSION_NONE, ncorrupt, &total);
  if (needle && rc < 0) {
    if (!strstr(sl_error_last(), needle)) fprintf(stderr, "message: %s\n", sl_error_last());
    assert_non_null(strstr(sl_error_last(), needle));
    assert_non_null(strstr(sl_error_last(), "damaged.tfrecord"));
  }
  free(d);
  free(p);
  free(q);
  return rc;
}

static void truncate_mid_data(unsigned char *d, size_t *n) { *n -= 30; }
static void truncate_mid_header(unsigned char *d, size_t *n) {
  /* keep the first record whole and 5 bytes of the second's length */
  uint64_t len;
  memcpy(&len, d, 8);
  *n = 16 + len + 5;
}
static void flip_length_crc(unsigned char *d, size_t *n) { d[9] ^= 0x40; }
static void flip_data_byte(unsigned char *d, size_t *n) { d[20] ^= 0x01; }
static void huge_length(unsigned char *d, size_t *n) {
  uint64_t big = (uint64_t)1 << 38;
  memcpy(d, &big, 8);
  uint32_t c = sl_crc32c_mask(sl_crc32c(d, 8));
  memcpy(d + 8, &c, 4);
}

static void test_truncated_record_is_an_error(void **s) {
  assert_int_equal(damaged(truncate_mid_data, NULL, "truncated"), SL_ECORRUPT);
  assert_int_equal(damaged(truncate_mid_header, NULL, "record 1"), SL_ECORRUPT);
}

static void test_bad_length_crc_is_an_error(void **s) {
  assert_int_equal(damaged(flip_length_crc, NULL, "length CRC"), SL_ECORRUPT);
}

static void test_bad_data_crc_names_the_record_and_can_continue(void **s) {
  assert_int_equal(damaged(flip_data_byte, NULL, "record 0"), SL_ECORRUPT);
  int bad = 0;
  assert_int_equal(damaged(flip_data_byte, &bad, NULL), 4); /* the other 4 records are intact */
  assert_int_equal(bad, 1);
}

static void test_length_beyond_file_allocates_nothing_huge(void **s) {
  assert_int_equal(damaged(huge_length, NULL, "past the end"), SL_ECORRUPT);
}

static void test_garbage_gzip_is_an_error(void **s) {
  char *q = tu_write_file(g_dir, "garbage.gz", "\x1f\x8b\x08\x00garbage-garbage-garbage", 27);
  size_t t;
  int rc = read_all(q, SL_COMPRESSION_GZIP, NULL, &t);
  assert_int_equal(rc, SL_ECORRUPT);
  free(q);
}

static void test_missing_file(void **s) {
  sl_tfrecord_reader *r;
  assert_int_equal(sl_tfrecord_reader_open(&r, "/nonexistent/x.tfrecord", SL_COMPRESSION_NONE), SL_ENOTFOUND);
  assert_non_null(strstr(sl_error_last(), "/nonexistent/x.tfrecord"));
}

static int setup(void **s) {
  g_dir = tu_tmpdir("tfrecord");
  return 0;
}
static int teardown(void **s) {
  tu_rmtree(g_dir);
  free(g_dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crc32c_known_vectors),
      cmocka_unit_test(test_reads_independent_files),
      cmocka_unit_test(test_round_trip_all_compressions),
      cmocka_unit_test(test_truncated_record_is_an_error),
      cmocka_unit_test(test_bad_length_crc_is_an_error),
      cmocka_unit_test(test_bad_data_crc_names_the_record_and_can_continue),
      cmocka_unit_test(test_length_beyond_file_allocates_nothing_huge),
      cmocka_unit_test(test_garbage_gzip_is_an_error),
      cmocka_unit_test(test_missing_file),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
