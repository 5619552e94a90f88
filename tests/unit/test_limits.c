/* test_limits.c: buffers allocate as they fill, not by their capacity (issue 34 row 7): through a counting
 * allocator, the largest single allocation of a deep prefetch, of deep interleave buffers, of a deep parallel map
 * and of a huge batch size over short streams stays small (an element slot is 2 KB: capacity-sized, they were
 * 134 MB, 2 MB per source, 134 MB and 34 GB).
 * SL_TEST_THREADED */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static atomic_size_t g_largest;
static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void note(size_t size) {
  size_t cur = atomic_load(&g_largest);
  while (size > cur && !atomic_compare_exchange_weak(&g_largest, &cur, size)) {
  }
}
static void *count_malloc(size_t size, void *payload) {
  (void)payload;
  note(size);
  return malloc(size);
}
static void *count_realloc(void *p, size_t size, void *payload) {
  (void)payload;
  note(size);
  return realloc(p, size);
}
static void count_free(void *p, void *payload) {
  (void)payload;
  free(p);
}

/* Runs `spec` to its end; returns the number of elements and leaves the largest allocation in g_largest. */
static int run_counted(const char *spec) {
  atomic_store(&g_largest, 0);
  sl_pipeline *p;
  assert_int_equal(sl_pipeline_from_json(&p, spec, strlen(spec), "limits"), 0);
  int n = (int)tu_count(p, 0);
  sl_pipeline_free(p);
  return n;
}

#define SMALL (1u << 20)

static void test_a_deep_prefetch_over_a_short_stream_stays_small(void **s) {
  (void)s;
  assert_int_equal(
      run_counted("{\"ops\": [{\"op\": \"range\", \"stop\": 100}, {\"op\": \"prefetch\", \"buffer\": 65536}]}"), 100);
  assert_true(atomic_load(&g_largest) < SMALL);
}

static void test_a_huge_batch_size_over_a_short_stream_stays_small(void **s) {
  (void)s;
  /* 16 MB (and a buffer header): the most a batch tensor is allocated whole when its batch starts (128 MB here) */
  assert_int_equal(
      run_counted("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"batch\", \"size\": 16777216}]}"), 1);
  assert_true(atomic_load(&g_largest) < (17u << 20));
  assert_int_equal(run_counted("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"padded_batch\", \"size\": "
                               "16777216}]}"), 1);
  assert_true(atomic_load(&g_largest) < SMALL);
}

static void test_deep_interleave_buffers_over_short_sources_stay_small(void **s) {
  (void)s;
  assert_int_equal(run_counted("{\"ops\": [{\"op\": \"range\", \"stop\": 10}, {\"op\": \"interleave\", "
                               "\"parallelism\": 2, \"cycle_length\": 64, \"buffer\": 1024, \"source\": "
                               "[{\"op\": \"range\", \"stop\": 3}]}]}"), 30);
  assert_true(atomic_load(&g_largest) < SMALL);
}

static void test_a_deep_parallel_map_over_a_short_stream_stays_small(void **s) {
  (void)s;
  assert_int_equal(run_counted("{\"ops\": [{\"op\": \"range\", \"stop\": 100}, {\"op\": \"map\", \"fn\": "
                               "\"spin\", \"args\": {\"us\": 1}, \"parallelism\": 2, \"buffer\": 65536}]}"), 100);
  assert_true(atomic_load(&g_largest) < SMALL);
}

/* Workers faster than their consumer (a sequential spin after them) fill the ring, which grows to the buffer while
 * it runs: every element comes once, in order (and once each, unordered). */
static void test_a_parallel_map_ring_grows_and_keeps_its_order(void **s) {
  (void)s;
  enum { N = 20000 };
  static int64_t v[N];
  for (int det = 1; det >= 0; det--) {
    sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": %d}, {\"op\": \"map\", \"fn\": "
                                  "\"spin\", \"args\": {\"us\": 0}, \"parallelism\": 2, \"buffer\": 4096, "
                                  "\"deterministic\": %s}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": "
                                  "{\"us\": 5}}]}", N, det ? "true" : "false");
    assert_int_equal(tu_collect_i64(p, "value", v, N), N);
    if (!det) qsort(v, N, sizeof v[0], cmp_i64);
    for (int64_t i = 0; i < N; i++) assert_int_equal(v[i], i);
    sl_pipeline_free(p);
  }
}

/* Sources that fill their buffers grow them to the op's buffer, the order kept (deterministic, block 1: the two
 * sources alternate). */
static void test_interleave_buffers_grow_in_order(void **s) {
  (void)s;
  enum { N = 20000 };
  static int64_t v[2 * N];
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": 2}, {\"op\": \"interleave\", "
                                "\"parallelism\": 2, \"cycle_length\": 2, \"buffer\": 1024, \"source\": "
                                "[{\"op\": \"range\", \"stop\": %d}]}, {\"op\": \"map\", \"fn\": \"spin\", "
                                "\"args\": {\"us\": 1}}]}", N);
  assert_int_equal(tu_collect_i64(p, "value", v, 2 * N), 2 * N);
  for (int64_t i = 0; i < 2 * N; i++) assert_int_equal(v[i], i / 2);
  sl_pipeline_free(p);
}

/* A full deep prefetch still holds what it was asked to: the ring grows to its depth. */
static void test_a_deep_prefetch_fills_to_its_depth(void **s) {
  (void)s;
  assert_int_equal(run_counted("{\"ops\": [{\"op\": \"range\", \"stop\": 100000}, {\"op\": \"prefetch\", \"buffer\": "
                               "4096}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 1}}]}"), 100000);
}

int main(void) {
  sl_allocator a = {count_malloc, count_realloc, count_free, NULL};
  sl_set_allocator(&a);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_deep_prefetch_over_a_short_stream_stays_small),
      cmocka_unit_test(test_a_huge_batch_size_over_a_short_stream_stays_small),
      cmocka_unit_test(test_a_deep_prefetch_fills_to_its_depth),
      cmocka_unit_test(test_a_deep_parallel_map_over_a_short_stream_stays_small),
      cmocka_unit_test(test_a_parallel_map_ring_grows_and_keeps_its_order),
      cmocka_unit_test(test_deep_interleave_buffers_over_short_sources_stay_small),
      cmocka_unit_test(test_interleave_buffers_grow_in_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
