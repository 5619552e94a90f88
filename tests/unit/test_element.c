/* test_element.c: buffers, components and elements, and the pool of large buffers (threads: SL_TEST_THREADED). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_int.h"
#include "testutil.h"

static void test_inline_scalars_need_no_buffer(void **s) {
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_i64(&e, "x", 42), 0);
  sl_comp *c = sl_elem_get(&e, "x");
  assert_non_null(c);
  assert_null(c->buf);
  int64_t v;
  assert_int_equal(sl_comp_get_i64(&v, c), 0);
  assert_int_equal(v, 42);
  sl_elem_clear(&e);
}

static void test_copy_shares_buffers_and_clear_frees(void **s) {
  sl_elem a, b;
  sl_elem_init(&a);
  sl_elem_init(&b);
  int64_t shape[2] = {10, 10};
  void *d;
  assert_int_equal(sl_elem_new_tensor(&a, "img", SL_FLOAT32, 2, shape, &d), 0);
  memset(d, 0, 400);
  ((float *)d)[5] = 3.5f;
  sl_elem_copy(&b, &a);
  assert_ptr_equal(a.c[0].buf, b.c[0].buf);
  /* a write through the mutable accessor must not change the other holder */
  float *m = sl_comp_mutable_data(&b.c[0]);
  m[5] = 1.0f;
  assert_true(((const float *)sl_comp_data(&a.c[0]))[5] == 3.5f);
  sl_elem_clear(&a);
  sl_elem_clear(&b);
}

static void test_replace_and_remove(void **s) {
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_bytes(&e, "s", NULL, 0, "hello world, this is long", 25), 0);
  assert_int_equal(sl_elem_set_i64(&e, "n", 1), 0);
  assert_int_equal(sl_elem_set_i64(&e, "s", 7), 0); /* replaces, no leak */
  assert_int_equal(e.n, 2);
  assert_int_equal(sl_elem_remove(&e, "s"), 0);
  assert_int_equal(sl_elem_remove(&e, "s"), SL_ENOTFOUND);
  assert_int_equal(e.n, 1);
  sl_elem_clear(&e);
}

static void test_shape_overflow_is_an_error(void **s) {
  int64_t shape[3] = {INT64_MAX / 2, 4, 4};
  int64_t n;
  assert_int_equal(sl_shape_count(&n, 3, shape), SL_EINVAL);
  int64_t neg[1] = {-1};
  assert_int_equal(sl_shape_count(&n, 1, neg), SL_EINVAL);
  sl_elem e;
  sl_elem_init(&e);
  void *d;
  assert_int_equal(sl_elem_new_tensor(&e, "t", SL_FLOAT64, 3, shape, &d), SL_EINVAL);
  assert_int_equal(sl_elem_set_tensor(&e, "t", SL_UINT8, 9, shape, NULL, 0, NULL), SL_EINVAL);
  assert_int_equal(e.n, 0);
}

static void test_too_many_components(void **s) {
  sl_elem e;
  sl_elem_init(&e);
  static char names[SL_MAX_COMPONENTS + 1][8];
  for (int i = 0; i <= SL_MAX_COMPONENTS; i++) {
    snprintf(names[i], sizeof names[i], "c%d", i);
    int rc = sl_elem_set_i64(&e, names[i], i);
    assert_int_equal(rc, i < SL_MAX_COMPONENTS ? 0 : SL_EINVAL);
  }
  assert_non_null(strstr(sl_error_last(), "more than"));
  sl_elem_clear(&e);
}

static void test_dtype_names_round_trip(void **s) {
  for (int i = 0; i <= SL_BYTES; i++) {
    sl_dtype d;
    assert_int_equal(sl_dtype_parse(&d, sl_dtype_name((sl_dtype)i)), 0);
    assert_int_equal(d, i);
  }
  sl_dtype d;
  assert_int_equal(sl_dtype_parse(&d, "complex128"), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "complex128"));
}

static int g_released;
static void on_release(void *data, void *payload) {
  (void)data;
  g_released += *(int *)payload;
}

static void test_wrapped_buffer_release_runs_once(void **s) {
  static char data[64];
  int one = 1;
  g_released = 0;
  sl_buf *b = sl_buf_wrap(data, sizeof data, on_release, &one);
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_bytes(&e, "raw", b, 8, NULL, 32), 0);
  sl_buf_unref(b);
  assert_int_equal(g_released, 0);
  assert_int_equal(sl_elem_set_bytes(&e, "bad", b, 40, NULL, 32), SL_EINVAL); /* overrun */
  sl_elem_clear(&e);
  assert_int_equal(g_released, 1);
}

/* The pool of large buffers: a freed buffer comes back for the next request of its size class. */
static void test_pool_reuses_large_buffers(void **s) {
  sl__bufpool_drain();
  sl_buf *a = sl_buf_alloc(300000);
  assert_non_null(a);
  memset(sl_buf_data(a), 7, 300000);
  void *pa = sl_buf_data(a);
  assert_int_equal(sl__bufpool_idle(), 0);
  sl_buf_unref(a);
  assert_true(sl__bufpool_idle() >= 300000);
  sl_buf *b = sl_buf_alloc(290000); /* same class (320 KiB) */
  assert_ptr_equal(sl_buf_data(b), pa);
  assert_int_equal(sl_buf_size(b), 290000);
  assert_int_equal(sl__bufpool_idle(), 0);
  sl_buf *c = sl_buf_alloc(1000); /* small: never pooled */
  sl_buf_unref(c);
  assert_int_equal(sl__bufpool_idle(), 0);
  sl_buf_unref(b);
  sl__bufpool_drain();
  assert_int_equal(sl__bufpool_idle(), 0);
}

/* Every size gets at least its bytes (ASan checks the writes) and buffers of many classes come back. */
static void test_pool_sizes_across_classes(void **s) {
  sl__bufpool_drain();
  for (size_t n = 65000; n < (6u << 20); n = n * 5 / 4 + 4097) {
    sl_buf *b = sl_buf_alloc(n);
    assert_non_null(b);
    memset(sl_buf_data(b), 1, n);
    sl_buf_unref(b);
    sl_buf *b2 = sl_buf_alloc(n);
    memset(sl_buf_data(b2), 2, n);
    sl_buf_unref(b2);
  }
  sl__bufpool_drain();
}

/* The pool holds at most SLUICE_BUFPOOL_MB (8 in this test binary) idle; the rest is freed. */
static void test_pool_is_bounded(void **s) {
  sl__bufpool_drain();
  sl_buf *b[40];
  for (int i = 0; i < 40; i++) assert_non_null(b[i] = sl_buf_alloc(1 << 20));
  for (int i = 0; i < 40; i++) sl_buf_unref(b[i]);
  assert_true(sl__bufpool_idle() <= (8u << 20));
  assert_true(sl__bufpool_idle() >= (4u << 20));
  sl__bufpool_drain();
}

/* An empty pool asks the allocator; its failure is SL_ENOMEM. Installing an allocator drains the pool. */
static void test_pool_allocation_failure_is_enomem(void **s) {
  sl_buf *a = sl_buf_alloc(1 << 20);
  sl_buf_unref(a);
  assert_true(sl__bufpool_idle() > 0);
  tu_faultsim_install();
  assert_int_equal(sl__bufpool_idle(), 0);
  tu_faultsim_fail(0, false);
  assert_null(sl_buf_alloc(1 << 20));
  assert_int_equal(sl_error_code(), SL_ENOMEM);
  assert_int_equal(tu_faultsim_failures(), 1);
  sl_buf *b = sl_buf_alloc(1 << 20);
  assert_non_null(b);
  sl_buf_unref(b);
  tu_faultsim_uninstall();
  assert_int_equal(sl__bufpool_idle(), 0);
}

/* Threads allocating and freeing the same classes at once (TSan checks the locking). */
static void *pool_worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 200; i++) {
    size_t n = (size_t)(100000 + (i % 7) * 50000);
    sl_buf *b = sl_buf_alloc(n);
    if (!b) return (void *)1;
    memset(sl_buf_data(b), i, n);
    sl_buf *r = sl_buf_ref(b);
    sl_buf_unref(b);
    sl_buf_unref(r);
  }
  return NULL;
}
static void test_pool_threads(void **s) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, pool_worker, NULL), 0);
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    assert_null(r);
  }
  assert_true(sl__bufpool_idle() <= (8u << 20));
  sl__bufpool_drain();
}

int main(void) {
  setenv("SLUICE_BUFPOOL_MB", "8", 1); /* read on the pool's first release */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_inline_scalars_need_no_buffer),
      cmocka_unit_test(test_copy_shares_buffers_and_clear_frees),
      cmocka_unit_test(test_replace_and_remove),
      cmocka_unit_test(test_shape_overflow_is_an_error),
      cmocka_unit_test(test_too_many_components),
      cmocka_unit_test(test_dtype_names_round_trip),
      cmocka_unit_test(test_wrapped_buffer_release_runs_once),
      cmocka_unit_test(test_pool_reuses_large_buffers),
      cmocka_unit_test(test_pool_sizes_across_classes),
      cmocka_unit_test(test_pool_is_bounded),
      cmocka_unit_test(test_pool_allocation_failure_is_enomem),
      cmocka_unit_test(test_pool_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
