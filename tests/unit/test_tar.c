/* test_tar.c: the `tar` reader of WebDataset shards, on shards written here with libarchive (plain and gzip): samples
 * grouped by key as webdataset does (extensions lower-cased, multi-dot extensions, directories in keys, members
 * without an extension and top-level __meta__ files left out), disk bytes counted, and the bad shards (truncated,
 * not a tar, a duplicate extension, a missing component a later op reads), each an error naming the shard and
 * member or sample, or skipped and counted. */
#define _GNU_SOURCE /* asprintf */
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

static char *g_dir;

typedef struct {
  const char *name, *data;
} mem;

/* Writes members to g_dir/file (gzip-compressed when gz); returns the malloc'd path. */
static char *write_tar(const char *file, const mem *m, int n, bool gz) {
  char *p = NULL;
  assert_true(asprintf(&p, "%s/%s", g_dir, file) > 0);
  struct archive *a = archive_write_new();
  assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
  if (gz) assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
  assert_int_equal(archive_write_open_filename(a, p), ARCHIVE_OK);
  for (int i = 0; i < n; i++) {
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, m[i].name);
    size_t len = strlen(m[i].data);
    archive_entry_set_size(e, (la_int64_t)len);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    assert_int_equal(archive_write_data(a, m[i].data, len), (la_ssize_t)len);
    archive_entry_free(e);
  }
  assert_int_equal(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
  return p;
}

static const mem SHARD[] = {
    {"__info.v1__", "{}"},             /* top-level metadata: skipped */
    {"a/s001.jpg", "J1"},              {"a/s001.CLS", "3"},    {"a/s001.seg.png", "P1"},
    {"a/README", "no extension"},      /* skipped */
    {"a/s002.jpg", "J2"},              {"a/s002.cls", "7"},
    {"b/s001.jpg", "J3"},              /* another directory: another key */
    {"b.x/.hidden.jpg", "H"},          /* a leading-dot basename under a dotted directory: skipped */
};
#define NSHARD ((int)(sizeof SHARD / sizeof SHARD[0]))

/* The string value of bytes component `name` of e ("" when absent). */
static const char *str(sl_elem *e, const char *name, char *buf, size_t n) {
  sl_comp *c = sl_elem_get(e, name);
  buf[0] = 0;
  if (c && c->dtype == SL_BYTES && c->size < n) memcpy(buf, sl_comp_data(c), c->size), buf[c->size] = 0;
  return buf;
}

static void check_samples(const char *glob, int nshards) {
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"glob\": \"%s/%s\"}, {\"op\": \"tar\"}]}", g_dir, glob);
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  char b[256];
  static const char *const KEYS[] = {"a/s001", "a/s002", "b/s001"};
  int n = 0, rc;
  while ((rc = sl_iter_next(&e, it)) == 0) {
    int k = n % 3;
    assert_string_equal(str(&e, "__key__", b, sizeof b), KEYS[k]);
    assert_non_null(strstr(str(&e, "__url__", b, sizeof b), g_dir));
    assert_string_equal(str(&e, "jpg", b, sizeof b), k == 0 ? "J1" : k == 1 ? "J2" : "J3");
    if (k == 0) {
      assert_string_equal(str(&e, "cls", b, sizeof b), "3"); /* "CLS" lower-cased */
      assert_string_equal(str(&e, "seg.png", b, sizeof b), "P1");
      assert_int_equal(e.n, 5);
    }
    if (k == 1) assert_int_equal(e.n, 4);
    if (k == 2) assert_int_equal(e.n, 3);
    sl_elem_clear(&e);
    n++;
  }
  assert_int_equal(rc, SL_END);
  assert_int_equal(n, 3 * nshards);
  sl_iter_free(it);
  sl_op_stats s;
  assert_int_equal(sl_pipeline_op_stats(&s, p, 1), 0);
  assert_true(s.disk_bytes > 0);
  sl_pipeline_free(p);
}

static void test_grouping_plain_and_gzip(void **st) {
  free(write_tar("plain.tar", SHARD, NSHARD, false));
  check_samples("plain.tar", 1);
  char *gz = write_tar("shard.tar.gz", SHARD, NSHARD, true);
  check_samples("shard.tar.gz", 1);
  check_samples("*.tar*", 2);
  /* Disk bytes are the compressed file's. */
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tar\"}]}", gz);
  assert_int_equal(tu_count(p, 0), 3);
  sl_op_stats s;
  assert_int_equal(sl_pipeline_op_stats(&s, p, 1), 0);
  struct stat sb;
  assert_int_equal(stat(gz, &sb), 0);
  assert_int_equal(s.disk_bytes, (uint64_t)sb.st_size);
  sl_pipeline_free(p);
  free(gz);
}

static void test_bad_shards(void **st) {
  /* Truncated inside a member's data: the shard and the member are named; skipped and counted on request. */
  char *full = write_tar("t.tar", SHARD, NSHARD, false);
  FILE *f = fopen(full, "rb");
  assert_non_null(f);
  char buf[8192];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  /* Find the data of a/s002.jpg ("J2") and cut the file right after its first byte. */
  char *j2 = NULL;
  for (size_t i = 0; i + 1 < n; i++)
    if (buf[i] == 'J' && buf[i + 1] == '2') j2 = buf + i;
  assert_non_null(j2);
  char *cut = NULL;
  free(tu_write_file(g_dir, "cut.tar", buf, (size_t)(j2 - buf) + 1));
  assert_true(asprintf(&cut, "%s/cut.tar", g_dir) > 0);
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tar\"}]}", cut);
  assert_int_equal(tu_count(p, SL_ECORRUPT), 1); /* a/s001 comes out whole first */
  assert_non_null(strstr(sl_error_last(), cut));
  assert_non_null(strstr(sl_error_last(), "member 'a/s002.jpg'"));
  sl_pipeline_free(p);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\", \"%s\"]}, {\"op\": \"tar\", \"on_corrupt\": "
                   "\"skip\"}]}",
                   cut, full);
  assert_int_equal(tu_count(p, 0), 4); /* a/s001 of the cut shard, then the whole next shard */
  sl_op_stats s;
  assert_int_equal(sl_pipeline_op_stats(&s, p, 1), 0);
  assert_int_equal(s.skipped, 1);
  sl_pipeline_free(p);
  /* Not a tar at all. */
  char *junk = tu_write_file(g_dir, "junk.tar", "this is not a tar archive, just some text that is long enough", 62);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tar\"}]}", junk);
  assert_int_equal(tu_count(p, SL_ECORRUPT), 0);
  assert_non_null(strstr(sl_error_last(), junk));
  assert_non_null(strstr(sl_error_last(), "the first header"));
  sl_pipeline_free(p);
  /* A duplicate extension in one sample. */
  const mem dup[] = {{"x.jpg", "1"}, {"x.JPG", "2"}};
  char *d = write_tar("dup.tar", dup, 2, false);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tar\"}]}", d);
  assert_int_equal(tu_count(p, SL_EINVAL), 0);
  assert_non_null(strstr(sl_error_last(), "member 'x.JPG': a second 'jpg' in sample 'x'"));
  sl_pipeline_free(p);
  /* A sample without the component a later op reads: the error names the shard and the sample's key. */
  const mem miss[] = {{"k1.jpg", "1"}, {"k1.cls", "0"}, {"k2.cls", "1"}};
  char *m = write_tar("miss.tar", miss, 3, false);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tar\"}, {\"op\": \"map\", \"fn\": "
                   "\"decode_image\", \"args\": {\"component\": \"jpg\"}}]}",
                   m);
  assert_int_equal(tu_count(p, SL_EINVAL), 0); /* k1's "1" is no image either: that error names k1 */
  assert_non_null(strstr(sl_error_last(), "sample 'k1'"));
  sl_pipeline_free(p);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tar\"}, {\"op\": \"skip\", \"count\": 1}, "
                   "{\"op\": \"map\", \"fn\": \"decode_image\", \"args\": {\"component\": \"jpg\"}}]}",
                   m);
  assert_int_equal(tu_count(p, SL_EINVAL), 0);
  assert_non_null(strstr(sl_error_last(), "sample 'k2') has no component 'jpg'"));
  assert_non_null(strstr(sl_error_last(), m));
  sl_pipeline_free(p);
  free(m), free(d), free(junk), free(cut), free(full);
}

static int setup(void **st) {
  g_dir = tu_tmpdir("tar");
  return 0;
}
static int teardown(void **st) {
  tu_rmtree(g_dir);
  free(g_dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grouping_plain_and_gzip),
      cmocka_unit_test(test_bad_shards),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
