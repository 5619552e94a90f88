/* test_fns_faults.c: allocation-failure injection through sluice's allocator hooks: with the Nth allocation failing,
 * for every N until a call goes through, each function returns SL_ENOMEM (or succeeds) and leaks nothing (the
 * ASan build checks the leaks). */
#define _GNU_SOURCE
#include "test_fns_util.h"

typedef void (*make_elem)(sl_elem *e, void *ctx);

/* Runs fn (opened with args) on elements made by make, failing the 0th, 1st, ... allocation inside the call. */
static void sweep(const char *fn, const char *args, make_elem make, void *ctx) {
  tf_fn f;
  assert_int_equal(tf_open(&f, fn, args), 0);
  tu_faultsim_install();
  int n;
  for (n = 0; n < 200; n++) {
    sl_elem e;
    sl_elem_init(&e);
    make(&e, ctx);
    tu_faultsim_fail(n, true);
    int rc = tf_call(&f, &e, 3, 0, NULL);
    tu_faultsim_reset();
    if (rc != 0 && rc != SL_ENOMEM) fprintf(stderr, "%s: allocation %d failing gave %d: %s\n", fn, n, rc, sl_error_last());
    assert_true(rc == 0 || rc == SL_ENOMEM);
    sl_elem_clear(&e);
    if (rc == 0) break;
  }
  assert_true(n < 200); /* it succeeds once allocations do (n = 0: it allocates nothing, e.g. an in-place flip) */
  tu_faultsim_uninstall();
  tf_close(&f);
}

typedef struct {
  const void *data;
  size_t len;
} bytes;
static void make_jpeg(sl_elem *e, void *ctx) {
  bytes *b = ctx;
  sl_elem_set_bytes(e, "image/encoded", NULL, 0, b->data, b->len);
}
static void make_image(sl_elem *e, void *ctx) {
  int64_t shape[3] = {37, 53, 3};
  void *d;
  assert_int_equal(sl_elem_new_tensor(e, "image", SL_UINT8, 3, shape, &d), 0);
  memset(d, 9, 37 * 53 * 3);
}
static void make_line(sl_elem *e, void *ctx) {
  const char *s = ctx;
  sl_elem_set_bytes(e, "line", NULL, 0, s, strlen(s));
}

static void test_image_functions_oom(void **st) {
  size_t n;
  uint8_t *j = tf_rgb_jpeg(120, 90, TJSAMP_420, &n);
  bytes b = {j, n};
  sweep("decode_jpeg", NULL, make_jpeg, &b);
  sweep("decode_and_crop_jpeg", "{\"random\": true, \"size\": [32, 32]}", make_jpeg, &b);
  /* PNG: libspng allocates through sluice's allocator, and its out-of-memory is SL_ENOMEM, not a corrupt image. */
  uint8_t px[24 * 16 * 3];
  for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 7);
  size_t pn;
  uint8_t *png = tf_png_encode(px, sizeof px, 24, 16, SPNG_COLOR_TYPE_TRUECOLOR, 8, NULL, &pn);
  bytes pb = {png, pn};
  sweep("decode_image", NULL, make_jpeg, &pb);
  sweep("decode_image", "{\"channels\": 1}", make_jpeg, &pb);
  free(png);
  sweep("decode_and_crop_jpeg", "{\"crop\": [3, 5, 40, 50]}", make_jpeg, &b);
  sweep("random_resized_crop", "{\"size\": [20, 20]}", make_image, NULL);
  sweep("resize", "{\"size\": [20, 70], \"method\": \"area\"}", make_image, NULL);
  sweep("center_crop", "{\"size\": [20, 20]}", make_image, NULL);
  sweep("random_flip", "{\"prob\": 1}", make_image, NULL);
  sweep("normalize", NULL, make_image, NULL);
  sweep("cast", "{\"dtype\": \"float32\"}", make_image, NULL);
  free(j);
}

static void test_text_tabular_oom(void **st) {
  char *dir = tu_tmpdir("fnoom");
  char *vocab = tu_write_file(dir, "v.txt", "a\nb\nc\n", 6);
  char args[512];
  snprintf(args, sizeof args, "{\"vocab\": \"%s\"}", vocab);
  sweep("tokenize", args, make_line, "a b c d, e a b c d e a b c");
  /* Vocabulary loading under failing allocations: an error, never a crash. */
  sl__fn fn;
  assert_int_equal(sl__fn_lookup("tokenize", &fn), 0);
  json_t *obj = json_loads(args, 0, NULL);
  sl_args a = {obj, "ops[1].args", fn.schema->args, NULL};
  for (int k = 0; k < 20; k++) {
    void *state = NULL;
    tu_faultsim_install();
    tu_faultsim_fail(k, true);
    int rc = fn.def.init(&state, &a, NULL);
    tu_faultsim_uninstall();
    assert_true(rc == 0 || rc == SL_ENOMEM);
    if (rc == 0) {
      fn.def.free(state);
      break;
    }
  }
  json_decref(obj);
  sweep("parse_csv",
        "{\"columns\": [{\"name\": \"a\", \"dtype\": \"int64\"}, {\"name\": \"b\", \"dtype\": \"bytes\", \"count\": 2}, "
        "{\"name\": \"c\", \"dtype\": \"float32\", \"count\": 2}]}",
        make_line, "1,xx,\"y,y\",2.5,3");
  free(vocab);
  tu_rmtree(dir);
  free(dir);
}

/* parse_example moves a large bytes value (an encoded image) out of the unpacked message instead of copying it: the
 * same bytes, and under failing allocations SL_ENOMEM and no leak whichever allocation fails. */
static void make_record(sl_elem *e, void *ctx) {
  sl_elem_set_bytes(e, "record", (sl_buf *)ctx, 0, NULL, sl_buf_size((sl_buf *)ctx));
}
static void test_parse_example_large_bytes(void **st) {
  static uint8_t big[10000];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 7 + 3);
  const void *v[2] = {big, "small"};
  size_t len[2] = {sizeof big, 5};
  int64_t label = 4;
  sl_example *ex = sl_example_new();
  assert_int_equal(sl_example_add_bytes(ex, "image/encoded", &v[0], &len[0], 1), 0);
  assert_int_equal(sl_example_add_bytes(ex, "name", &v[1], &len[1], 1), 0);
  assert_int_equal(sl_example_add_int64(ex, "label", &label, 1), 0);
  sl_buf *rec;
  assert_int_equal(sl_example_serialize(&rec, ex), 0);
  sl_example_free(ex);
  const char *args = "{\"features\": {\"image/encoded\": {\"dtype\": \"bytes\"}, \"name\": {\"dtype\": \"bytes\"}, "
                     "\"label\": {\"dtype\": \"int64\"}}}";
  sl_elem e;
  sl_elem_init(&e);
  make_record(&e, rec);
  assert_int_equal(tf_run("parse_example", args, &e, 1), 0);
  sl_comp *c = sl_elem_get(&e, "image/encoded"), *n = sl_elem_get(&e, "name");
  assert_non_null(c);
  assert_int_equal(c->size, sizeof big);
  assert_memory_equal(sl_comp_data(c), big, sizeof big);
  assert_int_equal(n->size, 5);
  assert_memory_equal(sl_comp_data(n), "small", 5);
  sl_elem_clear(&e);
  sweep("parse_example", args, make_record, rec);
  sl_buf_unref(rec);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_image_functions_oom),
      cmocka_unit_test(test_text_tabular_oom),
      cmocka_unit_test(test_parse_example_large_bytes),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  tf_release_all();
  return rc;
}
