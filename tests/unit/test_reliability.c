/* test_reliability.c: faults from outside: a data file truncated or deleted while it is read, a cache file whose
 * disk fills up mid-write (a file-size limit), a cache left half-written by a killed writer.
 * SL_TEST_TIMEOUT(120) */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char *g_dir;


static char *write_records(const char *name, int n, size_t size) {
  char *path;
  assert_true(asprintf(&path, "%s/%s", g_dir, name) > 0);
  sl_tfrecord_writer *w;
  assert_int_equal(sl_tfrecord_writer_open(&w, path, SL_COMPRESSION_NONE), 0);
  char *buf = malloc(size);
  for (int i = 0; i < n; i++) {
    memset(buf, i & 0xff, size);
    assert_int_equal(sl_tfrecord_write(w, buf, size), 0);
  }
  free(buf);
  assert_int_equal(sl_tfrecord_writer_close(w), 0);
  return path;
}

static void test_file_truncated_while_read(void **s) {
  char *path = write_records("shrink.tfrecord", 2000, 1000);
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tfrecord\"}]}", path);
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  for (int i = 0; i < 10; i++) {
    assert_int_equal(sl_iter_next(&e, it), 0);
    sl_elem_clear(&e);
  }
  assert_int_equal(truncate(path, 1500000), 0); /* cut in the middle of record ~1477 */
  int rc, n = 10;
  while ((rc = sl_iter_next(&e, it)) == 0) {
    sl_elem_clear(&e);
    n++;
  }
  assert_int_equal(rc, SL_ECORRUPT);
  assert_true(n < 2000);
  assert_non_null(strstr(sl_error_last(), "shrink.tfrecord"));
  sl_iter_free(it);
  sl_pipeline_free(p);
  free(path);
}

static void test_file_deleted_while_read_is_read_to_its_end(void **s) {
  /* POSIX keeps an open file's data until it is closed: a deleted file reads to its end. The next run fails
   * cleanly, naming the file. */
  char *path = write_records("gone.tfrecord", 500, 1000);
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tfrecord\"}]}", path);
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_iter_next(&e, it), 0);
  sl_elem_clear(&e);
  assert_int_equal(unlink(path), 0);
  int rc, n = 1;
  while ((rc = sl_iter_next(&e, it)) == 0) {
    sl_elem_clear(&e);
    n++;
  }
  assert_int_equal(rc, SL_END);
  assert_int_equal(n, 500);
  sl_iter_free(it);
  assert_int_equal(tu_count(p, SL_ENOTFOUND), 0);
  assert_non_null(strstr(sl_error_last(), "gone.tfrecord"));
  sl_pipeline_free(p);
  free(path);
}

/* In a child with a file-size limit, fill a cache file past the limit. */
static void test_cache_disk_full_is_an_error_and_never_used(void **s) {
  char *cache;
  assert_true(asprintf(&cache, "%s/full.cache", g_dir) > 0);
  /* padded to 4096 int64 = 32 KiB per element: 2000 elements = 64 MiB, against a 1 MiB file-size limit */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {1 << 20, 1 << 20};
    setrlimit(RLIMIT_FSIZE, &rl);
    char *js;
    if (asprintf(&js, "{\"ops\": [{\"op\": \"range\", \"stop\": 2000}, {\"op\": \"batch\", \"size\": 1}, "
                      "{\"op\": \"padded_batch\", \"size\": 1, \"padded_shapes\": {\"value\": [4096]}}, "
                      "{\"op\": \"cache\", \"file\": \"%s\"}]}", cache) < 0)
      _exit(10);
    sl_pipeline *p;
    if (sl_pipeline_from_json(&p, js, strlen(js), "t")) _exit(11);
    sl_iter *it;
    if (sl_pipeline_iter(&it, p)) _exit(12);
    sl_elem e;
    sl_elem_init(&e);
    int rc;
    while ((rc = sl_iter_next(&e, it)) == 0) sl_elem_clear(&e);
    sl_iter_free(it);
    sl_pipeline_free(p);
    if (rc != SL_EIO) _exit(13);
    if (!strstr(sl_error_last(), "full.cache")) _exit(14);
    _exit(0);
  }
  int st;
  waitpid(pid, &st, 0);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  struct stat sb;
  assert_int_equal(stat(cache, &sb), -1); /* no complete cache was published */
  free(cache);
}

static void test_killed_cache_writer_leaves_nothing_usable(void **s) {
  char *cache;
  assert_true(asprintf(&cache, "%s/killed.cache", g_dir) > 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char *js;
    if (asprintf(&js, "{\"ops\": [{\"op\": \"range\"}, {\"op\": \"cache\", \"file\": \"%s\"}]}", cache) < 0) _exit(1);
    sl_pipeline *p;
    sl_iter *it;
    if (sl_pipeline_from_json(&p, js, strlen(js), "t") || sl_pipeline_iter(&it, p)) _exit(2);
    sl_elem e;
    sl_elem_init(&e);
    for (;;) { /* infinite: killed mid-write */
      if (sl_iter_next(&e, it)) _exit(3);
      sl_elem_clear(&e);
    }
  }
  usleep(200000);
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
  struct stat sb;
  assert_int_equal(stat(cache, &sb), -1); /* only the temporary file exists */
  /* a finite pipeline with the same cache path builds a fresh, correct cache */
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 100}, {\"op\": \"cache\", \"file\": \"%s\"}]}", cache);
  assert_int_equal(tu_count(p, 0), 100);
  assert_int_equal(tu_count(p, 0), 100);
  sl_pipeline_free(p);
  assert_int_equal(stat(cache, &sb), 0);
  free(cache);
}

static int setup(void **s) {
  g_dir = tu_tmpdir("reliability");
  return 0;
}
static int teardown(void **s) {
  tu_rmtree(g_dir);
  free(g_dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_file_truncated_while_read),
      cmocka_unit_test(test_file_deleted_while_read_is_read_to_its_end),
      cmocka_unit_test(test_cache_disk_full_is_an_error_and_never_used),
      cmocka_unit_test(test_killed_cache_writer_leaves_nothing_usable),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
