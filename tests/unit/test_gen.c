/* test_gen.c: sl_gen_run for each dataset at a tiny size: files, record contents, determinism across thread
 * counts, option errors. SL_TEST_THREADED SL_TEST_TIMEOUT(300) */
#define _GNU_SOURCE
#include "testutil.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  rewind(f);
  char *b = malloc((size_t)len + 1);
  assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
  b[len] = 0;
  fclose(f);
  *n = (size_t)len;
  return b;
}

static void gen(sl_gen_kind kind, const char *dir, int64_t n, int shards, int threads, sl_gen_report *r) {
  sl_gen_opts o = SL_GEN_OPTS_INIT;
  o.kind = kind;
  o.out_dir = dir;
  o.n = n;
  o.shards = shards;
  o.seed = 5;
  o.threads = threads;
  o.vocab_size = 500;
  int rc = sl_gen_run(r, &o);
  if (rc) fprintf(stderr, "%s\n", sl_error_last());
  assert_int_equal(rc, 0);
}

static void test_imagenet_and_threads(void **st) {
  char *dir = tu_tmpdir("gen"), *a = NULL, *b = NULL;
  assert_true(asprintf(&a, "%s/a", dir) > 0 && asprintf(&b, "%s/b/c", dir) > 0);
  sl_gen_report r1, r2;
  gen(SL_GEN_IMAGENET, a, 6, 2, 1, &r1);
  gen(SL_GEN_IMAGENET, b, 6, 2, 3, &r2);
  assert_int_equal(r1.records, 6);
  assert_int_equal(r1.files, 2);
  assert_true(r1.mean_image_bytes > 20000 && r1.mean_width > 100 && r1.decode_us > 0);
  for (int s = 0; s < 2; s++) {
    char *pa = NULL, *pb = NULL;
    assert_true(asprintf(&pa, "%s/train-%05d-of-00002.tfrecord", a, s) > 0);
    assert_true(asprintf(&pb, "%s/train-%05d-of-00002.tfrecord", b, s) > 0);
    size_t na, nb;
    char *da = read_all(pa, &na), *db = read_all(pb, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(da, db, na);
    free(da), free(db), free(pa), free(pb);
  }
  /* The records parse and decode. */
  char spec[1024];
  snprintf(spec, sizeof spec,
           "{\"ops\": [{\"op\": \"files\", \"glob\": \"%s/train-*.tfrecord\"}, {\"op\": \"interleave\", \"source\": "
           "[{\"op\": \"tfrecord\"}]}, {\"op\": \"map\", \"fn\": \"parse_example\", \"args\": {\"features\": "
           "{\"image/encoded\": {\"dtype\": \"bytes\"}, \"image/class/label\": {\"dtype\": \"int64\"}, \"image/height\": "
           "{\"dtype\": \"int64\"}, \"image/width\": {\"dtype\": \"int64\"}, \"image/format\": {\"dtype\": \"bytes\"}}}}, "
           "{\"op\": \"map\", \"fn\": \"decode_jpeg\"}]}",
           a);
  sl_pipeline *p = tu_pipeline(spec);
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  int n = 0, rc;
  while ((rc = sl_iter_next(&e, it)) == 0) {
    int64_t h, w, label;
    sl_comp_get_i64(&h, sl_elem_get(&e, "image/height"));
    sl_comp_get_i64(&w, sl_elem_get(&e, "image/width"));
    sl_comp_get_i64(&label, sl_elem_get(&e, "image/class/label"));
    sl_comp *img = sl_elem_get(&e, "image");
    assert_int_equal(img->shape[0], h);
    assert_int_equal(img->shape[1], w);
    assert_true(label >= 0 && label < 1000);
    n++;
    sl_elem_clear(&e);
  }
  assert_int_equal(rc, SL_END);
  assert_int_equal(n, 6);
  sl_iter_free(it);
  sl_pipeline_free(p);
  free(a), free(b);
  tu_rmtree(dir);
  free(dir);
}

static void test_ssd_boxes(void **st) {
  char *dir = tu_tmpdir("genssd");
  sl_gen_report r;
  gen(SL_GEN_SSD, dir, 5, 1, 2, &r);
  assert_true(r.boxes >= 5 && r.boxes <= 100);
  char spec[2048];
  snprintf(spec, sizeof spec,
           "{\"ops\": [{\"op\": \"files\", \"glob\": \"%s/*.tfrecord\"}, {\"op\": \"interleave\", \"source\": [{\"op\": "
           "\"tfrecord\"}]}, {\"op\": \"map\", \"fn\": \"parse_example\", \"args\": {\"features\": {\"image/encoded\": "
           "{\"dtype\": \"bytes\"}, \"image/object/bbox/ymin\": {\"dtype\": \"float32\", \"shape\": [-1]}, "
           "\"image/object/bbox/xmin\": {\"dtype\": \"float32\", \"shape\": [-1]}, \"image/object/bbox/ymax\": {\"dtype\": "
           "\"float32\", \"shape\": [-1]}, \"image/object/bbox/xmax\": {\"dtype\": \"float32\", \"shape\": [-1]}, "
           "\"image/object/class/label\": {\"dtype\": \"int64\", \"shape\": [-1]}}}}, {\"op\": \"map\", \"fn\": "
           "\"pad_boxes\", \"args\": {\"max\": 20}}]}",
           dir);
  sl_pipeline *p = tu_pipeline(spec);
  int64_t nb[8];
  assert_int_equal(tu_collect_i64(p, "num_boxes", nb, 8), 5);
  int64_t total = 0;
  for (int i = 0; i < 5; i++) {
    assert_true(nb[i] >= 1 && nb[i] <= 20);
    total += nb[i];
  }
  assert_int_equal(total, r.boxes);
  sl_pipeline_free(p);
  tu_rmtree(dir);
  free(dir);
}

static void test_text_and_tabular(void **st) {
  char *dir = tu_tmpdir("gentext"), *t = NULL, *c = NULL;
  assert_true(asprintf(&t, "%s/text", dir) > 0 && asprintf(&c, "%s/tab", dir) > 0);
  sl_gen_report r;
  gen(SL_GEN_TEXT, t, 300, 3, 2, &r);
  assert_int_equal(r.vocab_size, 508);
  assert_int_equal(r.files, 4);
  assert_true(r.mean_tokens >= 5 && r.mean_tokens <= 300);
  /* Every sentence tokenizes to 5..300 known tokens. */
  char spec[1024];
  snprintf(spec, sizeof spec,
           "{\"ops\": [{\"op\": \"files\", \"glob\": \"%s/train-*.txt\"}, {\"op\": \"interleave\", \"source\": [{\"op\": "
           "\"lines\"}]}, {\"op\": \"map\", \"fn\": \"tokenize\", \"args\": {\"vocab\": \"%s/vocab.txt\", \"unknown_id\": "
           "-1}}, {\"op\": \"filter\", \"fn\": \"length\", \"args\": {\"component\": \"tokens\", \"min\": 5, \"max\": "
           "300}}]}",
           t, t);
  sl_pipeline *p = tu_pipeline(spec);
  assert_int_equal(tu_count(p, 0), 300);
  sl_pipeline_free(p);
  gen(SL_GEN_TABULAR, c, 200, 2, 1, &r);
  snprintf(spec, sizeof spec,
           "{\"ops\": [{\"op\": \"files\", \"glob\": \"%s/train-*.csv\"}, {\"op\": \"interleave\", \"source\": [{\"op\": "
           "\"lines\"}]}, {\"op\": \"map\", \"fn\": \"parse_csv\", \"args\": {\"columns\": [{\"name\": \"label\", "
           "\"dtype\": \"int64\"}, {\"name\": \"dense\", \"dtype\": \"float32\", \"count\": 13, \"default\": 0}, "
           "{\"name\": \"cat\", \"dtype\": \"bytes\", \"count\": 26, \"default\": \"\"}]}}]}",
           c);
  p = tu_pipeline(spec);
  assert_int_equal(tu_count(p, 0), 200);
  sl_pipeline_free(p);
  /* Some fields are empty. */
  char *path = NULL;
  assert_true(asprintf(&path, "%s/train-00000-of-00002.csv", c) > 0);
  size_t n;
  char *body = read_all(path, &n);
  assert_non_null(strstr(body, ",,"));
  free(body), free(path), free(t), free(c);
  tu_rmtree(dir);
  free(dir);
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.' || (e->d_name[1] && strcmp(e->d_name, ".."));
  if (d) closedir(d);
  return n;
}

static volatile sig_atomic_t g_cancel;
/* Asks for the stop after the 40th record: the run ends at its next chunk, in the middle of the second shard. */
static void cancel_at_40(int64_t done, int64_t total, void *payload) {
  if (done == 40) g_cancel = 1;
}

/* Files take their final names only when complete: a cancelled run keeps the finished shards and leaves no
 * partial or temporary file; a version 1 options struct (without `cancel`) still runs. */
static void test_cancel_leaves_whole_files(void **st) {
  char *dir = tu_tmpdir("gencancel");
  sl_gen_opts o = SL_GEN_OPTS_INIT;
  o.kind = SL_GEN_TABULAR;
  o.out_dir = dir;
  o.n = 200;
  o.shards = 5; /* 40 records each; the stop comes after the first chunk (32) of the second shard */
  o.progress = cancel_at_40;
  o.cancel = &g_cancel;
  g_cancel = 0;
  assert_int_equal(sl_gen_run(NULL, &o), SL_ECANCELED);
  assert_non_null(strstr(sl_error_last(), "cancelled after 64 records; 1 complete shards kept"));
  assert_int_equal(count_entries(dir), 1); /* train-00000-of-00005.csv, and nothing hidden */
  char *path = NULL;
  assert_true(asprintf(&path, "%s/train-00000-of-00005.csv", dir) > 0);
  size_t n;
  char *body = read_all(path, &n);
  int lines = 0;
  for (size_t i = 0; i < n; i++) lines += body[i] == '\n';
  assert_int_equal(lines, 40);
  free(body), free(path);
  o.version = 1;
  o.progress = NULL;
  assert_int_equal(sl_gen_run(NULL, &o), 0); /* `cancel` is not read from a version 1 struct */
  assert_int_equal(count_entries(dir), 5);
  tu_rmtree(dir);
  free(dir);
}

static void test_bad_options(void **st) {
  sl_gen_opts o = SL_GEN_OPTS_INIT;
  o.out_dir = "/tmp";
  o.n = -1; /* 0 would be the default, 1000 */
  assert_int_equal(sl_gen_run(NULL, &o), SL_EINVAL);
  o.n = 3;
  o.shards = 4;
  assert_int_equal(sl_gen_run(NULL, &o), SL_EINVAL);
  o.shards = 1;
  o.quality = 101;
  assert_int_equal(sl_gen_run(NULL, &o), SL_EINVAL);
  o.quality = 90;
  o.out_dir = NULL;
  assert_int_equal(sl_gen_run(NULL, &o), SL_EINVAL);
  o.out_dir = "/proc/sluice-cannot-write-here";
  assert_true(sl_gen_run(NULL, &o) < 0);
  sl_gen_kind k;
  assert_int_equal(sl_gen_kind_parse(&k, "mnist"), SL_EINVAL);
  assert_int_equal(sl_gen_kind_parse(&k, "ssd"), 0);
  assert_int_equal(k, SL_GEN_SSD);
  assert_string_equal(sl_gen_kind_name(SL_GEN_TABULAR), "tabular");
}

/* Image files under dir/<class>/ (hidden names counted apart), each checked to be a whole JPEG (SOI ... EOI). */
static int count_folder_jpegs(const char *dir, int *hidden) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char *sub = NULL;
    assert_true(asprintf(&sub, "%s/%s", dir, e->d_name) > 0);
    DIR *c = opendir(sub);
    assert_non_null(c); /* only class folders at the top */
    struct dirent *f;
    while ((f = readdir(c))) {
      if (f->d_name[0] == '.') {
        *hidden += strcmp(f->d_name, ".") && strcmp(f->d_name, "..");
        continue;
      }
      char *path = NULL;
      assert_true(asprintf(&path, "%s/%s", sub, f->d_name) > 0);
      size_t len;
      unsigned char *b = (unsigned char *)read_all(path, &len);
      assert_true(len > 4 && b[0] == 0xFF && b[1] == 0xD8 && b[len - 2] == 0xFF && b[len - 1] == 0xD9);
      free(b), free(path);
      n++;
    }
    closedir(c);
    free(sub);
  }
  closedir(d);
  return n;
}

/* The folder layout is written file by file: a cancelled run keeps the images it finished, each whole, and no
 * temporary; a version 2 struct (before `format`) still writes TFRecord shards; bad layouts are refused. */
static void test_layouts(void **st) {
  char *dir = tu_tmpdir("genlayout");
  sl_gen_opts o = SL_GEN_OPTS_INIT;
  o.out_dir = dir;
  o.n = 80;
  o.classes = 3;
  o.format = SL_GEN_FOLDER;
  o.progress = cancel_at_40;
  o.cancel = &g_cancel;
  g_cancel = 0;
  assert_int_equal(sl_gen_run(NULL, &o), SL_ECANCELED);
  assert_non_null(strstr(sl_error_last(), "cancelled after 64 records; 64 complete files kept"));
  int hidden = 0;
  assert_int_equal(count_folder_jpegs(dir, &hidden), 64);
  assert_int_equal(hidden, 0);
  assert_int_equal(count_entries(dir), 3); /* 3 classes: 64 images draw every one */
  tu_rmtree(dir);
  free(dir);
  dir = tu_tmpdir("genlayout2");
  o.out_dir = dir;
  o.n = 4;
  o.shards = 2;
  o.progress = NULL;
  g_cancel = 0;
  o.format = SL_GEN_TAR;
  o.version = 2; /* format and classes are not read: TFRecord shards */
  sl_gen_report r;
  assert_int_equal(sl_gen_run(&r, &o), 0);
  assert_int_equal(r.files, 2);
  char *path = NULL;
  assert_true(asprintf(&path, "%s/train-00001-of-00002.tfrecord", dir) > 0);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  free(path);
  o.version = SL_GEN_OPTS_VERSION;
  o.classes = 0;
  o.kind = SL_GEN_SSD;
  assert_int_equal(sl_gen_run(NULL, &o), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "folder and tar are for imagenet"));
  o.kind = SL_GEN_IMAGENET;
  o.classes = 100001;
  assert_int_equal(sl_gen_run(NULL, &o), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "classes: must be in 1..100000"));
  sl_gen_format f;
  assert_int_equal(sl_gen_format_parse(&f, "zip"), SL_EINVAL);
  assert_int_equal(sl_gen_format_parse(&f, "folder"), 0);
  assert_int_equal(f, SL_GEN_FOLDER);
  tu_rmtree(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_imagenet_and_threads),
      cmocka_unit_test(test_ssd_boxes),
      cmocka_unit_test(test_text_and_tabular),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_cancel_leaves_whole_files),
      cmocka_unit_test(test_layouts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
