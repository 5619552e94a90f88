/* test_tar.c: the `tar` reader of WebDataset shards, on shards written here with libarchive (plain and gzip): samples
 * grouped by key as webdataset does (extensions lower-cased, multi-dot extensions, directories in keys, members
 * without an extension and top-level __meta__ files left out), disk bytes counted, and the bad shards (truncated,
 * not a tar, a duplicate extension, a missing component a later op reads), each an error naming the shard and
 * member or sample, or skipped and counted; decode_image's WebDataset alternatives ("jpg;png;webp" or a list: the
 * first member a sample has, none a data error naming the shard and key) and parse_int on "cls" members. */
#define _GNU_SOURCE /* asprintf */
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_fns_util.h"

static char *g_dir;

typedef struct {
  const char *name, *data;
  size_t len; /* 0: strlen(data) */
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
    size_t len = m[i].len ? m[i].len : strlen(m[i].data);
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

/* decode_image over samples whose image member is .jpg in some and .png in others (as `convert --to tar` writes
 * them): the first alternative present is decoded, the alternatives go, a sample with none is a data error naming
 * the shard and key, which "on_error": "skip" counts. */
static void test_image_alternatives(void **st) {
  const int w = 8, h = 6;
  uint8_t *px = tf_picture(w, h, 3);
  size_t nj, np;
  uint8_t *jpg = tf_jpeg(px, w, h, TJPF_RGB, TJSAMP_444, 95, &nj);
  uint8_t *png = tf_png_encode(px, (size_t)w * h * 3, w, h, SPNG_COLOR_TYPE_TRUECOLOR, 8, NULL, &np);
  const mem sh[] = {{"k1.jpg", (const char *)jpg, nj}, {"k1.cls", "1\n", 0},  {"k2.png", (const char *)png, np},
                    {"k2.cls", " 2_0 ", 0},               {"k3.cls", "3", 0},   {"k4.PNG", (const char *)png, np},
                    {"k4.cls", "4", 0}};
  char *t = write_tar("alt.tar", sh, (int)(sizeof sh / sizeof sh[0]), false);
  static const char *const FORMS[] = {"\"jpg;png;webp\"", "[\"jpg\", \"png\", \"webp\"]"};
  for (int f = 0; f < 2; f++) {
    /* Without skip: k3 ends the run, named with its shard and key and the alternatives. */
    sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tar\"}, {\"op\": \"map\", "
                                  "\"fn\": \"decode_image\", \"args\": {\"component\": %s}}]}", t, FORMS[f]);
    assert_int_equal(tu_count(p, SL_EINVAL), 2);
    tf_expect_msg("sample 'k3') has none of the components 'jpg;png;webp' (it has: cls, __key__, __url__)");
    tf_expect_msg(t);
    sl_pipeline_free(p);
    p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tar\"}, {\"op\": \"map\", "
                     "\"fn\": \"decode_image\", \"args\": {\"component\": %s}, \"on_error\": \"skip\"}, {\"op\": \"map\", "
                     "\"fn\": \"parse_int\"}]}", t, FORMS[f]);
    sl_iter *it;
    assert_int_equal(sl_pipeline_iter(&it, p), 0);
    sl_elem e;
    sl_elem_init(&e);
    static const int64_t LABELS[] = {1, 20, 4};
    int n = 0, rc;
    while ((rc = sl_iter_next(&e, it)) == 0) {
      int64_t gh, gw, gc;
      const uint8_t *img = tf_image(&e, "image", &gh, &gw, &gc);
      assert_int_equal(gh, h);
      assert_int_equal(gw, w);
      assert_int_equal(gc, 3);
      if (n > 0) assert_memory_equal(img, px, (size_t)w * h * 3); /* the PNGs: exact */
      assert_null(sl_elem_get(&e, "jpg"));
      assert_null(sl_elem_get(&e, "png"));
      sl_comp *c = sl_elem_get(&e, "cls");
      assert_int_equal(c->dtype, SL_INT64);
      assert_int_equal(*(const int64_t *)sl_comp_data(c), LABELS[n]);
      sl_elem_clear(&e);
      n++;
    }
    assert_int_equal(rc, SL_END);
    assert_int_equal(n, 3);
    sl_iter_free(it);
    sl_op_stats s;
    assert_int_equal(sl_pipeline_op_stats(&s, p, 2), 0);
    assert_int_equal(s.skipped, 1);
    sl_pipeline_free(p);
  }
  /* The fused decoder takes the same alternatives (the planner copies decode_image's component into it). */
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tar\"}, {\"op\": \"map\", "
                                "\"fn\": \"decode_and_crop_jpeg\", \"args\": {\"component\": \"jpg;png\", \"any_format\": true, "
                                "\"center\": [4, 4]}, \"on_error\": \"skip\"}]}", t);
  assert_int_equal(tu_count(p, 0), 3);
  sl_pipeline_free(p);
  /* Checked when built: where the structure is known, one alternative must be there; bad forms name the arg. */
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 2}, {\"op\": \"map\", \"fn\": \"decode_image\", \"args\": "
                       "{\"component\": \"jpg;png\"}}]}", SL_EINVAL, "reads one of the components 'jpg;png'");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 2}, {\"op\": \"map\", \"fn\": \"decode_image\", \"args\": "
                       "{\"component\": \"jpg;;png\"}}]}", SL_EINVAL, "ops[1].args.component: \"jpg;;png\": an empty component name");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 2}, {\"op\": \"map\", \"fn\": \"decode_image\", \"args\": "
                       "{\"component\": [\"jpg;png\"]}}]}", SL_EINVAL, "not both");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 2}, {\"op\": \"map\", \"fn\": \"decode_image\", \"args\": "
                       "{\"component\": []}}]}", SL_EINVAL, "0 component names");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 2}, {\"op\": \"map\", \"fn\": \"decode_image\", \"args\": "
                       "{\"component\": [\"jpg\", 3]}}]}", SL_EINVAL, "ops[1].args.component[1]: expected a component name");
  tf_release_all();
  free(t), free(jpg), free(png), free(px);
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
      cmocka_unit_test(test_image_alternatives),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
