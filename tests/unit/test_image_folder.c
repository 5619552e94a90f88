/* test_image_folder.c: the `image_folder` source: classes, labels and sample order as torchvision's ImageFolder gives
 * them (the expected lists written out here from its rules: sorted class folders including hidden ones and symlinked
 * ones, files walked recursively and sorted by directory then name, extensions case-insensitive), the optional
 * knobs, shuffling, the bad trees (each an error naming the path, or skipped and counted), and decoding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static char *g_dir; /* the test's temporary folder */

static void mk(const char *rel) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", g_dir, rel);
  assert_int_equal(mkdir(p, 0755), 0);
}
/* A file whose bytes are its own relative name, so that image/encoded can be checked against filename. */
static void put(const char *rel) { free(tu_write_file(g_dir, rel, rel, strlen(rel))); }

/* root/... as in the header comment; see EXPECTED. */
static void make_tree(void) {
  mk("root");
  mk("root/dog");
  put("root/dog/b.JPG");
  put("root/dog/a0.png");
  put("root/dog/a b.webp");
  put("root/dog/notes.txt"); /* not an image extension */
  mk("root/dog/a");
  put("root/dog/a/q.png"); /* after a0.png: directories sort before their contents, not by full path */
  mk("root/dog/a/deeper");
  put("root/dog/a/deeper/r.Jpeg");
  mk("root/cat");
  put("root/cat/x.jpg");
  mk("root/Bird"); /* upper case sorts first */
  put("root/Bird/y.tif");
  mk("root/.hidden"); /* ImageFolder lists hidden folders too */
  put("root/.hidden/h.bmp");
  put("root/stray.jpg"); /* a file at the root is no class */
  mk("elsewhere");
  put("elsewhere/i.ppm");
  char a[4096], b[4096];
  snprintf(a, sizeof a, "%s/elsewhere", g_dir);
  snprintf(b, sizeof b, "%s/root/linked", g_dir);
  assert_int_equal(symlink(a, b), 0); /* a symlinked class folder, followed */
}

static const struct {
  const char *rel;
  int64_t label;
} EXPECTED[] = {
    {"root/.hidden/h.bmp", 0}, {"root/Bird/y.tif", 1},        {"root/cat/x.jpg", 2},
    {"root/dog/a b.webp", 3},  {"root/dog/a0.png", 3},        {"root/dog/b.JPG", 3},
    {"root/dog/a/q.png", 3},   {"root/dog/a/deeper/r.Jpeg", 3}, {"root/linked/i.ppm", 4},
};
#define NEXP ((int)(sizeof EXPECTED / sizeof EXPECTED[0]))

/* Runs p to the end: the filenames (relative to g_dir, malloc'd) and labels of its elements; checks that
 * image/encoded holds the file's bytes. Returns the count. */
static int collect(sl_pipeline *p, char **names, int64_t *labels, int max) {
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  int n = 0, rc;
  size_t dl = strlen(g_dir) + 1;
  while ((rc = sl_iter_next(&e, it)) == 0) {
    assert_true(n < max);
    sl_comp *f = sl_elem_get(&e, "filename"), *l = sl_elem_get(&e, "label"), *b = sl_elem_get(&e, "image/encoded");
    assert_non_null(f);
    assert_non_null(l);
    assert_non_null(b);
    assert_int_equal(l->dtype, SL_INT64);
    assert_int_equal(l->rank, 0);
    names[n] = strndup((const char *)sl_comp_data(f) + dl, f->size - dl);
    labels[n] = *(const int64_t *)sl_comp_data(l);
    /* The bytes are the relative name the file was written under (the symlinked class's under elsewhere/). */
    const char *want = strncmp(names[n], "root/linked/", 12) ? names[n] : "elsewhere/i.ppm";
    assert_int_equal(b->size, strlen(want));
    assert_memory_equal(sl_comp_data(b), want, b->size);
    sl_elem_clear(&e);
    n++;
  }
  if (rc != SL_END) fprintf(stderr, "run: %s\n", sl_error_last());
  assert_int_equal(rc, SL_END);
  sl_iter_free(it);
  return n;
}
static void free_names(char **names, int n) {
  for (int i = 0; i < n; i++) free(names[i]);
}

static void test_order_as_imagefolder(void **st) {
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"image_folder\", \"root\": \"%s/root\"}]}", g_dir);
  char *names[32];
  int64_t labels[32];
  int n = collect(p, names, labels, 32);
  assert_int_equal(n, NEXP);
  for (int i = 0; i < n; i++) {
    if (strcmp(names[i], EXPECTED[i].rel)) fprintf(stderr, "sample %d: %s, expected %s\n", i, names[i], EXPECTED[i].rel);
    assert_string_equal(names[i], EXPECTED[i].rel);
    assert_int_equal(labels[i], EXPECTED[i].label);
  }
  free_names(names, n);
  /* The cardinality is known before the run; a trailing slash on root changes nothing. */
  sl_op_stats s;
  assert_int_equal(sl_pipeline_op_stats(&s, p, 0), 0);
  assert_int_equal(s.cardinality, NEXP);
  sl_pipeline_free(p);
  p = tu_pipelinef("{\"ops\": [{\"op\": \"image_folder\", \"root\": \"%s/root/\"}]}", g_dir);
  n = collect(p, names, labels, 32);
  assert_int_equal(n, NEXP);
  assert_string_equal(names[0], EXPECTED[0].rel);
  free_names(names, n);
  sl_pipeline_free(p);
}

static void test_classes_extensions_shuffle(void **st) {
  /* A fixed class list: its order is the label order. */
  sl_pipeline *p =
      tu_pipelinef("{\"ops\": [{\"op\": \"image_folder\", \"root\": \"%s/root\", \"classes\": [\"dog\", \"cat\"]}]}", g_dir);
  char *names[32];
  int64_t labels[32];
  int n = collect(p, names, labels, 32);
  assert_int_equal(n, 6);
  assert_string_equal(names[0], "root/dog/a b.webp");
  assert_int_equal(labels[0], 0);
  assert_string_equal(names[5], "root/cat/x.jpg");
  assert_int_equal(labels[5], 1);
  free_names(names, n);
  sl_pipeline_free(p);
  /* Other extensions (case-insensitive): the .txt only; the classes without one are an error unless skipped. */
  tu_expect_spec_error(
      "{\"ops\": [{\"op\": \"image_folder\", \"root\": \"/nonexistent-root-for-test\"}]}", SL_ENOTFOUND,
      "root '/nonexistent-root-for-test' is not a directory");
  p = tu_pipelinef("{\"ops\": [{\"op\": \"image_folder\", \"root\": \"%s/root\", \"extensions\": [\".TXT\"], "
                   "\"on_error\": \"skip\"}]}",
                   g_dir);
  n = collect(p, names, labels, 32);
  assert_int_equal(n, 1);
  assert_string_equal(names[0], "root/dog/notes.txt");
  assert_int_equal(labels[0], 3); /* the empty classes keep their indices */
  free_names(names, n);
  sl_pipeline_free(p);
  /* Shuffled: a permutation of the same samples, the same for the same seed. */
  char *a[32], *b[32];
  int64_t la[32], lb[32];
  const char *spec = "{\"ops\": [{\"op\": \"image_folder\", \"root\": \"%s/root\", \"shuffle\": true, \"seed\": 7}]}";
  p = tu_pipelinef(spec, g_dir);
  int na = collect(p, a, la, 32);
  sl_pipeline_free(p);
  p = tu_pipelinef(spec, g_dir);
  int nb = collect(p, b, lb, 32);
  sl_pipeline_free(p);
  assert_int_equal(na, NEXP);
  assert_int_equal(nb, NEXP);
  bool moved = false;
  for (int i = 0; i < NEXP; i++) {
    assert_string_equal(a[i], b[i]);
    moved |= strcmp(a[i], EXPECTED[i].rel) != 0;
    int found = 0;
    for (int j = 0; j < NEXP; j++) found += !strcmp(a[i], EXPECTED[j].rel) && la[i] == EXPECTED[j].label;
    assert_int_equal(found, 1);
  }
  assert_true(moved);
  free_names(a, na);
  free_names(b, nb);
}

static void test_bad_trees(void **st) {
  char spec[8192];
  /* An empty class folder: an error naming it, or skipped. */
  mk("bad");
  mk("bad/full");
  put("bad/full/ok.png");
  mk("bad/empty");
  put("bad/empty/readme.md");
  snprintf(spec, sizeof spec, "{\"ops\": [{\"op\": \"image_folder\", \"root\": \"%s/bad\"}]}", g_dir);
  char want[4096];
  snprintf(want, sizeof want, "class folder '%s/bad/empty' has no file with an image extension", g_dir);
  tu_expect_spec_error(spec, SL_ENOTFOUND, want);
  tu_expect_spec_error(spec, SL_ENOTFOUND, "ops[0]");
  /* An unreadable file (a dangling symlink with an image name): the build fails naming it, or skips and counts it. */
  char a[4096], b[4096];
  snprintf(a, sizeof a, "%s/bad/nowhere", g_dir);
  snprintf(b, sizeof b, "%s/bad/full/gone.jpg", g_dir);
  assert_int_equal(symlink(a, b), 0);
  snprintf(spec, sizeof spec, "{\"ops\": [{\"op\": \"image_folder\", \"root\": \"%s/bad\", \"classes\": [\"full\"]}]}",
           g_dir);
  /* The listing checks each file's type (issue 47: a FIFO is never waited on), so the build fails naming it. */
  tu_expect_spec_error(spec, SL_ENOTFOUND, b);
  snprintf(spec, sizeof spec, "{\"ops\": [{\"op\": \"image_folder\", \"root\": \"%s/bad\", \"on_error\": \"skip\"}]}",
           g_dir);
  sl_pipeline *p = tu_pipeline(spec);
  assert_int_equal(tu_count(p, 0), 1);
  sl_op_stats s;
  assert_int_equal(sl_pipeline_op_stats(&s, p, 0), 0);
  assert_int_equal(s.skipped, 1);
  sl_pipeline_free(p);
  /* A root without class folders; a class named that is no folder. */
  mk("flat");
  put("flat/a.jpg");
  snprintf(spec, sizeof spec, "{\"ops\": [{\"op\": \"image_folder\", \"root\": \"%s/flat\"}]}", g_dir);
  snprintf(want, sizeof want, "'%s/flat' has no class folders", g_dir);
  tu_expect_spec_error(spec, SL_ENOTFOUND, want);
  snprintf(spec, sizeof spec, "{\"ops\": [{\"op\": \"image_folder\", \"root\": \"%s/root\", \"classes\": [\"cow\"]}]}",
           g_dir);
  tu_expect_spec_error(spec, SL_ENOTFOUND, "/root/cow' (classes[0]) is not a directory");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"image_folder\"}]}", SL_EINVAL, "root");
  snprintf(spec, sizeof spec, "{\"ops\": [{\"op\": \"image_folder\", \"root\": \"%s/root\", \"extensions\": [3]}]}", g_dir);
  tu_expect_spec_error(spec, SL_EINVAL, "extensions");
}

static int setup(void **st) {
  g_dir = tu_tmpdir("folder");
  make_tree();
  return 0;
}
static int teardown(void **st) {
  tu_rmtree(g_dir);
  free(g_dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order_as_imagefolder),
      cmocka_unit_test(test_classes_extensions_shuffle),
      cmocka_unit_test(test_bad_trees),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
