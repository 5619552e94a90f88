#define _GNU_SOURCE
/* testutil_pipe.c: pipeline helpers for the unit tests. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sl_pipeline *tu_pipeline(const char *json) {
  sl_pipeline *p = NULL;
  int rc = sl_pipeline_from_json(&p, json, strlen(json), "test");
  if (rc) fprintf(stderr, "spec error: %s\n", sl_error_last());
  assert_int_equal(rc, 0);
  return p;
}

sl_pipeline *tu_pipelinef(const char *fmt, ...) {
  char *js;
  va_list ap;
  va_start(ap, fmt);
  assert_true(vasprintf(&js, fmt, ap) > 0);
  va_end(ap);
  sl_pipeline *p = tu_pipeline(js);
  free(js);
  return p;
}

int64_t tu_count(sl_pipeline *p, int want_rc) {
  sl_iter *it = NULL;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  int64_t n = 0;
  sl_elem e;
  sl_elem_init(&e);
  int rc;
  while ((rc = sl_iter_next(&e, it)) == 0) {
    n++;
    sl_elem_clear(&e);
  }
  if (want_rc == 0) {
    if (rc != SL_END) fprintf(stderr, "unexpected error: %s\n", sl_error_last());
    assert_int_equal(rc, SL_END);
  } else {
    assert_int_equal(rc, want_rc);
  }
  sl_iter_free(it);
  return n;
}

int64_t tu_collect_i64(sl_pipeline *p, const char *name, int64_t *out, int64_t max) {
  sl_iter *it = NULL;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  int64_t n = 0;
  sl_elem e;
  sl_elem_init(&e);
  int rc;
  while (n < max && (rc = sl_iter_next(&e, it)) == 0) {
    sl_comp *c = sl_elem_get(&e, name);
    assert_non_null(c);
    assert_int_equal(sl_comp_get_i64(&out[n], c), 0);
    n++;
    sl_elem_clear(&e);
  }
  sl_iter_free(it);
  return n;
}

void tu_expect_spec_error(const char *json, int code, const char *needle) {
  sl_pipeline *p = NULL;
  int rc = sl_pipeline_from_json(&p, json, strlen(json), "test");
  if (rc != code || !strstr(sl_error_last(), needle))
    fprintf(stderr, "expected %d containing '%s', got %d: '%s'\n", code, needle, rc, sl_error_last());
  assert_int_equal(rc, code);
  assert_non_null(strstr(sl_error_last(), needle));
  assert_null(p);
}
