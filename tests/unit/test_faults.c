/* test_faults.c: allocation failure injection. An allocator that fails the Nth allocation is driven over
 * N = 1, 2, ... through spec parsing, pipeline start-up and iteration: every failure must surface as SL_ENOMEM
 * (or, for a failure inside a worker, as an error), with nothing leaked and no crash (ASan checks the leaks).
 * SL_TEST_THREADED SL_TEST_TIMEOUT(600) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Runs spec to the end with the Nth allocation (1-based) failing, and only that one. Returns 0 (ran clean), or the
 * error code; *calls is the number of allocations the run made. */
static int run_with_failure(const char *spec, long n, int64_t *count, long *calls) {
  tu_faultsim_fail(n - 1, false);
  sl_pipeline *p = NULL;
  int rc = sl_pipeline_from_json(&p, spec, strlen(spec), "fault");
  *count = 0;
  if (rc) return rc;
  sl_iter *it = NULL;
  rc = sl_pipeline_iter(&it, p);
  if (!rc) {
    sl_elem e;
    sl_elem_init(&e);
    while ((rc = sl_iter_next(&e, it)) == 0) {
      (*count)++;
      sl_elem_clear(&e);
    }
    if (rc == SL_END) rc = 0;
  }
  sl_iter_free(it);
  sl_pipeline_free(p);
  *calls = tu_faultsim_count();
  tu_faultsim_reset();
  return rc;
}

static void sweep(const char *spec, int64_t want, bool threaded) {
  tu_faultsim_install();
  long n, failed_runs = 0;
  int clean_runs = 0;
  for (n = 1; n < 20000 && clean_runs < 3; n++) {
    int64_t count;
    long calls;
    int rc = run_with_failure(spec, n, &count, &calls);
    if (rc == 0) {
      /* the failing allocation was never reached (or was an optional one): the output must be complete */
      assert_int_equal(count, want);
      if (calls < n) clean_runs++;
      continue;
    }
    if (rc != SL_ENOMEM && !(threaded && rc < 0)) {
      fprintf(stderr, "allocation %ld: rc %d (%s): %s\n", n, rc, sl_strerror(rc), sl_error_last());
      fail();
    }
    failed_runs++;
  }
  tu_faultsim_uninstall();
  assert_true(clean_runs == 3);
  printf("# %ld allocations swept, %ld runs failed cleanly\n", n - 1, failed_runs);
  assert_true(failed_runs > 10); /* the harness did inject: the spec allocates, and its failures surfaced */
}

static void test_sync_pipeline_survives_every_allocation_failure(void **s) {
  sweep("{\"seed\": 1, \"ops\": [{\"op\": \"range\", \"stop\": 40}, {\"op\": \"map\", \"fn\": \"identity\"}, "
        "{\"op\": \"shuffle\", \"buffer\": 8}, {\"op\": \"batch\", \"size\": 6}, {\"op\": \"padded_batch\", "
        "\"size\": 2}, {\"op\": \"cache\"}, {\"op\": \"repeat\", \"count\": 2}]}",
        8, false);
}

static void test_threaded_pipeline_survives_every_allocation_failure(void **s) {
  sweep("{\"ops\": [{\"op\": \"range\", \"stop\": 12}, {\"op\": \"interleave\", \"cycle_length\": 2, "
        "\"parallelism\": 2, \"source\": [{\"op\": \"repeat\", \"count\": 2}]}, {\"op\": \"map\", \"fn\": "
        "\"identity\", \"parallelism\": 2}, {\"op\": \"batch\", \"size\": 5}, {\"op\": \"prefetch\", \"buffer\": 2}]}",
        5, true);
}

static void test_reader_survives_every_allocation_failure(void **s) {
  char *src;
  assert_true(asprintf(&src, "{\"ops\": [{\"op\": \"files\", \"list\": [\"%s/tests/data/independent.tfrecord.gz\"]}, "
                             "{\"op\": \"tfrecord\", \"compression\": \"GZIP\"}, {\"op\": \"map\", \"fn\": "
                             "\"parse_example\", \"args\": {\"features\": {\"label\": {\"dtype\": \"int64\"}, \"name\": "
                             "{\"dtype\": \"bytes\"}}}}, {\"op\": \"batch\", \"size\": 5}]}",
                      getenv("SL_SRC")) > 0);
  sweep(src, 1, false);
  free(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sync_pipeline_survives_every_allocation_failure),
      cmocka_unit_test(test_threaded_pipeline_survives_every_allocation_failure),
      cmocka_unit_test(test_reader_survives_every_allocation_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
