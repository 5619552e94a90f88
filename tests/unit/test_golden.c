/* test_golden.c: the versioned file formats stay readable. Each golden file in tests/data/golden/ was written once
 * by sluice (README there says how); loading it with today's code must give the values it was written with. A
 * change that breaks one of these is a format change: bump the format's version and keep a reader for the old one.
 * Here: the trace (v1) and the cache file (SLCACHE1); the predictor's model file is in test_golden_model.c. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

static char *golden(const char *name) {
  const char *src = getenv("SL_SRC");
  assert_non_null(src);
  char *p = NULL;
  assert_true(asprintf(&p, "%s/tests/data/golden/%s", src, name) > 0);
  return p;
}

static void copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  assert_non_null(in);
  assert_non_null(out);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(fwrite(buf, 1, n, out), n);
  fclose(in);
  assert_int_equal(fclose(out), 0);
}

/* trace-v1.json: `sluice trace trace-v1.spec.json -o trace-v1.json --no-disk` (range 1000 -> map spin, 2 workers
 * -> batch 10). */
static void test_trace_v1_loads(void **st) {
  char *path = golden("trace-v1.json");
  sl_trace *t = NULL;
  int rc = sl_trace_load(&t, path);
  if (rc) fprintf(stderr, "%s\n", sl_error_last());
  assert_int_equal(rc, 0);
  assert_int_equal(sl_trace_elements(t), 100);
  assert_true(sl_trace_ended(t));
  assert_float_equal(sl_trace_seconds(t), 0.007495787, 1e-12);
  assert_float_equal(sl_trace_machine(t)->cores, 2.0, 0);
  assert_int_equal(sl_trace_op_count(t), 3);
  sl_op_stats s;
  assert_int_equal(sl_trace_op(&s, t, 0), 0);
  assert_string_equal(s.op, "range");
  assert_int_equal(s.elements_out, 1000);
  assert_int_equal(s.cardinality, 1000);
  assert_int_equal(s.parent, 1);
  assert_int_equal(sl_trace_op(&s, t, 1), 0);
  assert_string_equal(s.op, "map");
  assert_string_equal(s.label, "spin");
  assert_string_equal(s.path, "ops[1]");
  assert_int_equal(s.parallelism, 2);
  assert_int_equal(s.buffer, 16);
  assert_true(s.async);
  assert_int_equal(sl_trace_op(&s, t, 2), 0);
  assert_string_equal(s.op, "batch");
  assert_int_equal(s.elements_out, 100);
  assert_int_equal(s.parent, -1);
  /* Made before ops carried their run-queue delay: unknown (-1), and not written back as measured. */
  assert_true(s.runq_seconds == -1);
  /* It writes itself back in the current version, with what version 1 did not know left unknown (absent). */
  char *js = NULL;
  assert_int_equal(sl_trace_to_json(&js, t), 0);
  assert_non_null(strstr(js, "\"format\": \"sluice-trace\""));
  assert_non_null(strstr(js, "\"version\": 2"));
  assert_null(strstr(js, "runq_seconds"));
  assert_null(strstr(js, "device_read_bytes"));
  sl_free(js);
  sl_trace_free(t);
  free(path);
}

/* cache-v1.slcache: `sluice run cache-v1.spec.json` run in tests/data/golden/ (range 6 -> cache to a file). The
 * same spec is run here on a copy of the file (the cache's fingerprint covers the ops upstream of it and the seed, not
 * the file's name): a file that still matches is read, not rebuilt (a rebuild writes a temporary file and renames
 * it over the old one: a new inode). */
static void test_cache_file_v1_is_read(void **st) {
  char *dir = tu_tmpdir("golden-cache");
  char *cache_src = golden("cache-v1.slcache");
  char *cache = NULL;
  assert_true(asprintf(&cache, "%s/cache-v1.slcache", dir) > 0);
  copy_file(cache_src, cache);
  struct stat before, after;
  assert_int_equal(stat(cache, &before), 0);
  sl_pipeline *p = tu_pipelinef("{\"name\": \"golden-cache\", \"seed\": 7, \"ops\": [{\"op\": \"range\", \"stop\": 6}, "
                                "{\"op\": \"cache\", \"file\": \"%s\"}]}", cache);
  int64_t v[8];
  assert_int_equal(tu_collect_i64(p, "value", v, 8), 6);
  for (int i = 0; i < 6; i++) assert_int_equal(v[i], i);
  sl_pipeline_free(p);
  assert_int_equal(stat(cache, &after), 0);
  if (after.st_ino != before.st_ino || after.st_size != before.st_size)
    fail_msg("the golden cache file was rebuilt, not read: the cache format or its fingerprint changed");
  tu_rmtree(dir);
  free(dir);
  free(cache);
  free(cache_src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trace_v1_loads),
      cmocka_unit_test(test_cache_file_v1_is_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
