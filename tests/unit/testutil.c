/* testutil.c: helpers shared by the unit tests. */
#define _GNU_SOURCE
#include "testutil.h"

#include <ftw.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *tu_tmpdir(const char *tag) {
  const char *base = getenv("TMPDIR");
  char tmpl[4096];
  snprintf(tmpl, sizeof tmpl, "%s/sluice-%s-XXXXXX", base && *base ? base : "/tmp", tag);
  char *d = mkdtemp(tmpl);
  assert_non_null(d);
  return strdup(d);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
  return remove(p);
}
void tu_rmtree(const char *path) {
  if (path) nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

char *tu_write_file(const char *dir, const char *name, const void *data, size_t len) {
  char *p = NULL;
  assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  if (len) assert_int_equal(fwrite(data, 1, len, f), len);
  fclose(f);
  return p;
}


/* Allocations left before the failing one; -1: none fails. Atomic: pipelines allocate on worker threads too. */
static atomic_long g_fail_left = -1;
static bool fail_now(void) {
  long v = atomic_load(&g_fail_left);
  while (v > 0 && !atomic_compare_exchange_weak(&g_fail_left, &v, v - 1)) {
  }
  return v == 0;
}
static void *fail_malloc(size_t n, void *p) {
  (void)p;
  return fail_now() ? NULL : malloc(n);
}
static void *fail_realloc(void *q, size_t n, void *p) {
  (void)p;
  return fail_now() ? NULL : realloc(q, n);
}
static void fail_free(void *q, void *p) {
  (void)p;
  free(q);
}
const sl_allocator *tu_failing_allocator(void) {
  static const sl_allocator a = {fail_malloc, fail_realloc, fail_free, NULL};
  return &a;
}
void tu_fail_after(long n) { g_fail_left = n; }
