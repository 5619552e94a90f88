/* testutil_faultsim.c: the one fault-simulation harness of the unit tests (after SQLite's faultsim): an allocator,
 * installed through sl_set_allocator, that counts every allocation and fails the Nth one (and, when asked, every one
 * after it). test_faults, test_fns_faults, test_plan_fault, test_prov_oom and test_report drive it. */
#include <stdatomic.h>
#include <stdlib.h>

#include "testutil.h"

/* Atomics: pipelines allocate on worker threads too. g_fail_at < 0: nothing fails. */
static atomic_long g_count, g_fail_at = -1, g_failures;
static atomic_bool g_persist;

static bool fail_now(void) {
  long i = atomic_fetch_add(&g_count, 1);
  long at = atomic_load(&g_fail_at);
  if (at < 0 || i < at || (i > at && !atomic_load(&g_persist))) return false;
  atomic_fetch_add(&g_failures, 1);
  return true;
}
static void *fs_malloc(size_t n, void *p) {
  (void)p;
  return fail_now() ? NULL : malloc(n);
}
static void *fs_realloc(void *q, size_t n, void *p) {
  (void)p;
  return fail_now() ? NULL : realloc(q, n);
}
static void fs_free(void *q, void *p) {
  (void)p;
  free(q);
}

void tu_faultsim_install(void) {
  static const sl_allocator a = {fs_malloc, fs_realloc, fs_free, NULL};
  tu_faultsim_reset();
  sl_set_allocator(&a);
}

void tu_faultsim_uninstall(void) {
  sl_set_allocator(NULL);
  tu_faultsim_reset();
}

void tu_faultsim_fail(long n, bool persist) {
  atomic_store(&g_fail_at, -1);
  atomic_store(&g_count, 0);
  atomic_store(&g_failures, 0);
  atomic_store(&g_persist, persist);
  atomic_store(&g_fail_at, n);
}

void tu_faultsim_reset(void) { tu_faultsim_fail(-1, false); }

long tu_faultsim_count(void) { return atomic_load(&g_count); }

long tu_faultsim_failures(void) { return atomic_load(&g_failures); }
