/* testutil.h: helpers for the cmocka unit tests: temp dirs, file writing, running specs. */
#ifndef SL_TESTUTIL_H
#define SL_TESTUTIL_H
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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
/* Fault simulation (testutil_faultsim.c), the one allocation-failure harness of the suite. tu_faultsim_install()
 * puts its allocator in place (sl_set_allocator) with nothing armed; tu_faultsim_uninstall() restores the C library's.
 * tu_faultsim_fail(n, persist) zeroes the count and makes the allocation with index n from now fail (0: the next
 * one), and with `persist` every one after it too; n < 0: none fails. tu_faultsim_count() is the number of
 * allocations (malloc and realloc calls) since then, tu_faultsim_failures() how many were failed;
 * tu_faultsim_reset() is tu_faultsim_fail(-1, false). Safe from the library's worker threads. */
void tu_faultsim_install(void);
void tu_faultsim_uninstall(void);
void tu_faultsim_fail(long n, bool persist);
void tu_faultsim_reset(void);
long tu_faultsim_count(void);
long tu_faultsim_failures(void);
#endif
