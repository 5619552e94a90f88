/* testutil.h: helpers for the cmocka unit tests: temp dirs, file writing, running specs. */
#ifndef SL_TESTUTIL_H
#define SL_TESTUTIL_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sluice.h"

/* A fresh temporary directory under $TMPDIR (removed by tu_rmtree). Returns a static-lifetime malloc'd path. */
char *tu_tmpdir(const char *tag);
void tu_rmtree(const char *path);
/* Writes bytes to dir/name; returns the malloc'd full path. */
char *tu_write_file(const char *dir, const char *name, const void *data, size_t len);
/* Builds a pipeline from JSON text, asserting success. */
sl_pipeline *tu_pipeline(const char *json);
/* The same from a printf-style format. */
sl_pipeline *tu_pipelinef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Runs a spec to the end and returns the element count; asserts rc on error equals `want_rc` (0 = expect END). */
int64_t tu_count(sl_pipeline *p, int want_rc);
/* Collects scalar int64 component `name` of up to `max` elements into out; returns how many. */
int64_t tu_collect_i64(sl_pipeline *p, const char *name, int64_t *out, int64_t max);
/* Asserts that building `json` fails with `code` and a message containing `needle`. */
void tu_expect_spec_error(const char *json, int code, const char *needle);
/* Fault injection: an allocator (install it with sl_set_allocator) whose calls succeed until the one tu_fail_after(n)
 * names, the nth from then (0: the next one), which fails; n < 0: none fails. */
const sl_allocator *tu_failing_allocator(void);
void tu_fail_after(long n);
#endif
