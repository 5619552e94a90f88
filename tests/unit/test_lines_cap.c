/* test_lines_cap.c: `lines` (issue 47 row 10) reports an allocation failure as SL_ENOMEM naming the file and line,
 * never as the end of the file (getline's -1 with ENOMEM once ended the stream with "ok" and lost the rest), and
 * refuses a line longer than max_line_bytes naming the file and line. An allocator that refuses any block over
 * 1 MiB stands in for a process out of memory. And it reads its file in blocks: over stdio's unbuffered FILE it
 * made one read(2) per byte, 35x slower on the bench's tabular pipeline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static bool g_cap;
static void *cap_malloc(size_t size, void *payload) {
  (void)payload;
  return g_cap && size > (1u << 20) ? NULL : malloc(size);
}
static void *cap_realloc(void *p, size_t size, void *payload) {
  (void)payload;
  return g_cap && size > (1u << 20) ? NULL : realloc(p, size);
}
static void cap_free(void *p, void *payload) {
  (void)payload;
  free(p);
}

static char *g_dir, *g_file;

static int setup(void **s) {
  (void)s;
  g_dir = tu_tmpdir("lines-cap");
  size_t big = 4u << 20; /* line 2: 4 MiB */
  char *text = malloc(big + 64);
  if (!text) return -1;
  size_t n = (size_t)sprintf(text, "first\n");
  memset(text + n, 'a', big);
  n += big;
  n += (size_t)sprintf(text + n, "\nthird\n");
  g_file = tu_write_file(g_dir, "big.txt", text, n);
  free(text);
  return 0;
}
static int teardown(void **s) {
  (void)s;
  g_cap = false; /* after a failed assertion too */
  tu_rmtree(g_dir);
  free(g_dir);
  free(g_file);
  return 0;
}

/* The first line comes, then the second fails with `code` and a message holding `needle`. */
static void second_line_fails(const char *knob, int code, const char *needle) {
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"lines\"%s}]}", g_file,
                                knob);
  assert_int_equal(tu_count(p, code), 1);
  assert_non_null(strstr(sl_error_last(), needle));
  sl_pipeline_free(p);
}

static void test_out_of_memory_is_enomem_not_the_end(void **s) {
  (void)s;
  g_cap = true;
  second_line_fails(", \"max_line_bytes\": 1073741824", SL_ENOMEM, "big.txt: line 2");
  g_cap = false;
}

static void test_a_line_past_max_line_bytes_is_named(void **s) {
  (void)s;
  second_line_fails(", \"max_line_bytes\": 1000000", SL_EINVAL,
                    "big.txt: line 2: a line longer than max_line_bytes 1000000");
  /* the default (64 MiB) reads it, and the lines around it */
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"lines\"}]}", g_file);
  assert_int_equal(tu_count(p, 0), 3);
  sl_pipeline_free(p);
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 1}, {\"op\": \"lines\", \"max_line_bytes\": 0}]}",
                       SL_EINVAL, "max_line_bytes");
}

/* The read(2) calls this process has made so far (/proc/self/io's syscr). */
static long long read_calls(void) {
  FILE *f = fopen("/proc/self/io", "r");
  assert_non_null(f);
  char key[64];
  long long v, found = -1;
  while (fscanf(f, "%63[^:]: %lld\n", key, &v) == 2)
    if (!strcmp(key, "syscr")) found = v;
  fclose(f);
  assert_true(found >= 0);
  return found;
}

static void test_a_file_is_read_in_blocks(void **s) {
  (void)s;
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"lines\"}]}", g_file);
  long long before = read_calls();
  assert_int_equal(tu_count(p, 0), 3);
  long long calls = read_calls() - before;
  sl_pipeline_free(p);
  /* 4 MiB in 64 KiB blocks is 65 reads; the pipeline's other reads (its machine probe) are a few dozen */
  if (calls > 1000) fail_msg("reading 4 MiB of lines took %lld read(2) calls", calls);
}

int main(void) {
  sl_allocator a = {cap_malloc, cap_realloc, cap_free, NULL};
  sl_set_allocator(&a);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_out_of_memory_is_enomem_not_the_end, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_line_past_max_line_bytes_is_named, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_file_is_read_in_blocks, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
