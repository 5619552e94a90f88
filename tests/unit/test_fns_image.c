/* test_fns_image.c: random_resized_crop, resize, center_crop, random_flip (with boxes), normalize, cast,
 * pad_boxes; bad inputs (zero-sized images, crop windows outside, boxes outside [0, 1]); and a pipeline whose output
 * is the same whatever the map parallelism. SL_TEST_THREADED SL_TEST_TIMEOUT(300) */
#define _GNU_SOURCE
#include "test_fns_util.h"

#include "fns/image_int.h"

static void set_image(sl_elem *e, const char *name, const uint8_t *px, int64_t h, int64_t w, int64_t c) {
  int64_t shape[3] = {h, w, c};
  assert_int_equal(sl_elem_set_tensor(e, name, SL_UINT8, 3, shape, NULL, 0, px), 0);
}

/* Runs fn(args) on the h x w RGB image px and checks the output's height and width. */
static void expect_size(const char *fn, const char *args, const uint8_t *px, int64_t h, int64_t w, int64_t oh,
                        int64_t ow) {
  sl_elem e;
  sl_elem_init(&e);
  set_image(&e, "image", px, h, w, 3);
  assert_int_equal(tf_run(fn, args, &e, 0), 0);
  int64_t gh, gw, gc;
  tf_image(&e, "image", &gh, &gw, &gc);
  assert_int_equal(gh, oh);
  assert_int_equal(gw, ow);
  sl_elem_clear(&e);
}

static void test_sampler_bounds(void **st) {
  double scale[2] = {0.08, 1.0}, ratio[2] = {0.75, 4.0 / 3.0};
  int fallback = 0;
  for (uint64_t s = 0; s < 5000; s++) {
    sl_rng r;
    sl_rng_seed(&r, s);
    int64_t H = 100 + (int64_t)(s % 400), W = 80 + (int64_t)((s * 7) % 500);
    sl__win w;
    sl__crop_sample(&r, H, W, scale, ratio, &w);
    assert_true(w.h >= 1 && w.w >= 1 && w.y >= 0 && w.x >= 0 && w.y + w.h <= H && w.x + w.w <= W);
    double area = (double)(w.h * w.w) / (double)(H * W), ar = (double)w.w / (double)w.h;
    if (area > 1.0001 || area < 0.07 || ar < 0.7 || ar > 1.4) fallback++;
  }
  assert_true(fallback < 100);
  /* A very thin image falls back to a centred crop inside it. */
  sl_rng r;
  sl_rng_seed(&r, 1);
  sl__win w;
  sl__crop_sample(&r, 2, 1000, scale, ratio, &w);
  assert_true(w.h >= 1 && w.h <= 2 && w.x + w.w <= 1000);
}

static void test_random_resized_crop(void **st) {
  uint8_t *px = tf_picture(120, 90, 3);
  sl_elem a, b, c;
  sl_elem_init(&a), sl_elem_init(&b), sl_elem_init(&c);
  set_image(&a, "image", px, 90, 120, 3);
  set_image(&b, "image", px, 90, 120, 3);
  set_image(&c, "image", px, 90, 120, 3);
  const char *args = "{\"size\": [32, 48]}";
  assert_int_equal(tf_run("random_resized_crop", args, &a, 7), 0);
  assert_int_equal(tf_run("random_resized_crop", args, &b, 7), 0);
  assert_int_equal(tf_run("random_resized_crop", args, &c, 8), 0);
  int64_t h, w, ch;
  const uint8_t *x = tf_image(&a, "image", &h, &w, &ch), *y = tf_image(&b, "image", &h, &w, &ch),
                *z = tf_image(&c, "image", &h, &w, &ch);
  assert_int_equal(h, 32);
  assert_int_equal(w, 48);
  assert_memory_equal(x, y, 32 * 48 * 3);
  assert_memory_not_equal(x, z, 32 * 48 * 3);
  sl_elem_clear(&a), sl_elem_clear(&b), sl_elem_clear(&c);
  /* float32 images too. */
  float *f = malloc(90 * 120 * 3 * sizeof(float));
  for (int i = 0; i < 90 * 120 * 3; i++) f[i] = 0.5f;
  int64_t shape[3] = {90, 120, 3};
  sl_elem_init(&a);
  assert_int_equal(sl_elem_set_tensor(&a, "image", SL_FLOAT32, 3, shape, NULL, 0, f), 0);
  assert_int_equal(tf_run("random_resized_crop", args, &a, 1), 0);
  const float *o = sl_comp_data(sl_elem_get(&a, "image"));
  for (int i = 0; i < 32 * 48 * 3; i++) assert_true(fabsf(o[i] - 0.5f) < 1e-4f);
  sl_elem_clear(&a);
  free(f);
  tf_fn fn;
  assert_int_equal(tf_open(&fn, "random_resized_crop", "{}"), SL_EINVAL);
  tf_expect_msg("size");
  assert_int_equal(tf_open(&fn, "random_resized_crop", "{\"size\": [8, 8], \"scale\": [0, 1]}"), SL_EINVAL);
  assert_int_equal(tf_open(&fn, "random_resized_crop", "{\"size\": [8, 8], \"ratio\": [2, 1]}"), SL_EINVAL);
  /* the output pass's args (random_flip and normalize folded in): each wrong one named */
  assert_int_equal(tf_open(&fn, "random_resized_crop", "{\"size\": [8, 8], \"flip_prob\": 1.5}"), SL_EINVAL);
  tf_expect_msg("flip_prob");
  assert_int_equal(tf_open(&fn, "random_resized_crop", "{\"size\": [8, 8], \"mean\": [1, 2, 3]}"), SL_EINVAL);
  tf_expect_msg("need \"normalize\": true");
  assert_int_equal(tf_open(&fn, "random_resized_crop", "{\"size\": [8, 8], \"normalize\": true, \"std\": [0]}"), SL_EINVAL);
  tf_expect_msg("std[0]");
  /* a normalize folded in whose mean fits neither 1 nor the image's 3 channels: the element's error names it */
  sl_elem_init(&a);
  set_image(&a, "image", px, 90, 120, 3);
  assert_int_equal(tf_run("random_resized_crop", "{\"size\": [8, 8], \"normalize\": true, \"mean\": [1, 2]}", &a, 1),
                   SL_EINVAL);
  tf_expect_msg("mean has 2 values");
  sl_elem_clear(&a);
  free(px);
}

static void test_resize(void **st) {
  uint8_t *px = malloc(50 * 80 * 3);
  memset(px, 77, 50 * 80 * 3);
  const char *methods[] = {"bilinear", "area", "bicubic", "nearest"};
  for (int m = 0; m < 4; m++) {
    char args[128];
    snprintf(args, sizeof args, "{\"size\": [33, 21], \"method\": \"%s\"}", methods[m]);
    sl_elem e;
    sl_elem_init(&e);
    set_image(&e, "image", px, 50, 80, 3);
    assert_int_equal(tf_run("resize", args, &e, 0), 0);
    int64_t h, w, c;
    const uint8_t *o = tf_image(&e, "image", &h, &w, &c);
    assert_int_equal(h, 33);
    assert_int_equal(w, 21);
    for (int i = 0; i < 33 * 21 * 3; i++) assert_int_equal(o[i], 77);
    sl_elem_clear(&e);
  }
  sl_elem e;
  sl_elem_init(&e);
  set_image(&e, "image", px, 50, 80, 3);
  assert_int_equal(tf_run("resize", "{\"shorter_side\": 25, \"output\": \"small\"}", &e, 0), 0);
  int64_t h, w, c;
  tf_image(&e, "small", &h, &w, &c);
  assert_int_equal(h, 25);
  assert_int_equal(w, 40);
  tf_image(&e, "image", &h, &w, &c); /* input kept under its own name */
  assert_int_equal(h, 50);
  sl_elem_clear(&e);
  /* The longer side truncated, as torchvision's Resize(25) makes it: 50 * 25 / 37 = 33.8 -> 33 */
  expect_size("resize", "{\"shorter_side\": 25}", px, 37, 50, 25, 33);
  /* antialias false: the 2x2 pixels around (i + 0.5) * in / out - 0.5, rounded halves to even (torch's
   * interpolate, then torchvision's round): 1x4 -> 1x2 averages pixels 0,1 and 2,3; 1x4 -> 1x3 (scale 4/3) takes
   * source points 0.17, 1.5 (121 / 2 = 60.5 -> 60) and 2.83 */
  {
    const uint8_t row[4] = {10, 21, 100, 200};
    static const struct {
      int dw;
      uint8_t want[3];
    } R[] = {{2, {16, 150, 0}}, {3, {12, 60, 183}}};
    for (int k = 0; k < 2; k++) {
      sl_elem_init(&e);
      set_image(&e, "image", row, 1, 4, 1);
      char args[96];
      snprintf(args, sizeof args, "{\"size\": [1, %d], \"antialias\": false}", R[k].dw);
      assert_int_equal(tf_run("resize", args, &e, 0), 0);
      const uint8_t *o = tf_image(&e, "image", &h, &w, &c);
      assert_int_equal(w, R[k].dw);
      assert_memory_equal(o, R[k].want, (size_t)R[k].dw);
      sl_elem_clear(&e);
    }
  }
  /* Zero-sized image. */
  sl_elem_init(&e);
  set_image(&e, "image", px, 0, 80, 3);
  tf_fn f;
  assert_int_equal(tf_open(&f, "resize", "{\"size\": [4, 4]}"), 0);
  assert_int_equal(tf_call(&f, &e, 0, 5, NULL), SL_EINVAL);
  tf_expect_msg("zero-sized");
  tf_expect_msg("element 5");
  tf_close(&f);
  sl_elem_clear(&e);
  /* Wrong dtype. */
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_bytes(&e, "image", NULL, 0, "abc", 3), 0);
  assert_int_equal(tf_run("resize", "{\"size\": [4, 4]}", &e, 0), SL_EINVAL);
  sl_elem_clear(&e);
  assert_int_equal(tf_open(&f, "resize", "{\"size\": [4, 4], \"shorter_side\": 3}"), SL_EINVAL);
  assert_int_equal(tf_open(&f, "resize", "{}"), SL_EINVAL);
  assert_int_equal(tf_open(&f, "resize", "{\"size\": [0, 4]}"), SL_EINVAL);
  assert_int_equal(tf_open(&f, "resize", "{\"size\": [4, 4], \"antialias\": false, \"method\": \"area\"}"), SL_EINVAL);
  tf_expect_msg("antialias: false is for method \"bilinear\"");
  free(px);
}

static void test_center_crop(void **st) {
  uint8_t *px = tf_picture(40, 30, 2);
  sl_elem e;
  sl_elem_init(&e);
  set_image(&e, "image", px, 30, 40, 3);
  assert_int_equal(tf_run("center_crop", "{\"size\": [10, 20]}", &e, 0), 0);
  int64_t h, w, c;
  const uint8_t *o = tf_image(&e, "image", &h, &w, &c);
  assert_int_equal(h, 10);
  assert_int_equal(w, 20);
  for (int y = 0; y < 10; y++) assert_memory_equal(o + y * 20 * 3, px + ((y + 10) * 40 + 10) * 3, 20 * 3);
  sl_elem_clear(&e);
  expect_size("center_crop", "{\"fraction\": 0.5}", px, 30, 40, 15, 20);
  /* As torchvision's CenterCrop: top = int(round((H - ch) / 2.0)), Python rounding halves to even (margins 3 -> 2,
   * 5 -> 2, 7 -> 4, 1 -> 0); a crop larger than the image pads it with 0, half the excess (rounded down) above or
   * left. Expected tops and lefts worked out by hand from torchvision 0.14's F.center_crop. */
  static const struct {
    int ch, cw, top, left;
  } C[] = {{27, 35, 2, 2}, {23, 33, 4, 4}, {29, 39, 0, 0}, {33, 43, -1, -1}, {31, 20, 0, 10}, {10, 41, 10, 0},
           {34, 47, -2, -3}};
  for (size_t k = 0; k < sizeof C / sizeof C[0]; k++) {
    sl_elem_init(&e);
    set_image(&e, "image", px, 30, 40, 3);
    char args[64];
    snprintf(args, sizeof args, "{\"size\": [%d, %d]}", C[k].ch, C[k].cw);
    assert_int_equal(tf_run("center_crop", args, &e, 0), 0);
    o = tf_image(&e, "image", &h, &w, &c);
    assert_int_equal(h, C[k].ch);
    assert_int_equal(w, C[k].cw);
    for (int y = 0; y < C[k].ch; y++)
      for (int x = 0; x < C[k].cw; x++) {
        int sy = y + C[k].top, sx = x + C[k].left;
        for (int ci = 0; ci < 3; ci++) {
          int want = sy < 0 || sy >= 30 || sx < 0 || sx >= 40 ? 0 : px[(sy * 40 + sx) * 3 + ci];
          assert_int_equal(o[(y * C[k].cw + x) * 3 + ci], want);
        }
      }
    sl_elem_clear(&e);
  }
  tf_fn f;
  assert_int_equal(tf_open(&f, "center_crop", "{\"fraction\": 1.5}"), SL_EINVAL);
  free(px);
}

static void set_boxes(sl_elem *e, const float *b, int64_t n) {
  int64_t shape[2] = {n, 4};
  assert_int_equal(sl_elem_set_tensor(e, "boxes", SL_FLOAT32, 2, shape, NULL, 0, b), 0);
}

static void test_random_flip(void **st) {
  uint8_t px[2 * 3 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
  const float boxes[8] = {0.1f, 0.2f, 0.5f, 0.3f, 0.0f, 0.0f, 1.0f, 1.0f};
  sl_elem e;
  sl_elem_init(&e);
  set_image(&e, "image", px, 2, 3, 3);
  set_boxes(&e, boxes, 2);
  assert_int_equal(tf_run("random_flip", "{\"prob\": 1, \"boxes\": \"boxes\"}", &e, 0), 0);
  int64_t h, w, c;
  const uint8_t *o = tf_image(&e, "image", &h, &w, &c);
  const uint8_t want[18] = {7, 8, 9, 4, 5, 6, 1, 2, 3, 16, 17, 18, 13, 14, 15, 10, 11, 12};
  assert_memory_equal(o, want, 18);
  const float *b = sl_comp_data(sl_elem_get(&e, "boxes"));
  assert_true(fabsf(b[1] - 0.7f) < 1e-6f && fabsf(b[3] - 0.8f) < 1e-6f && b[0] == 0.1f && b[2] == 0.5f);
  assert_true(b[5] == 0.0f && b[7] == 1.0f);
  sl_elem_clear(&e);
  /* prob 0: unchanged. */
  sl_elem_init(&e);
  set_image(&e, "image", px, 2, 3, 3);
  assert_int_equal(tf_run("random_flip", "{\"prob\": 0}", &e, 0), 0);
  assert_memory_equal(tf_image(&e, "image", &h, &w, &c), px, 18);
  sl_elem_clear(&e);
  /* A shared buffer is copied before flipping (the other reference keeps its pixels). */
  sl_elem_init(&e);
  sl_buf *shared = sl_buf_alloc(18);
  memcpy(sl_buf_data(shared), px, 18);
  int64_t shape[3] = {2, 3, 3};
  assert_int_equal(sl_elem_set_tensor(&e, "image", SL_UINT8, 3, shape, shared, 0, NULL), 0);
  assert_int_equal(tf_run("random_flip", "{\"prob\": 1}", &e, 0), 0);
  assert_memory_equal(sl_buf_data(shared), px, 18);
  sl_buf_unref(shared);
  sl_elem_clear(&e);
  /* Boxes outside [0, 1]: an error naming the box, or clipped on request. */
  const float bad[4] = {0.1f, -0.2f, 0.5f, 0.3f};
  sl_elem_init(&e);
  set_image(&e, "image", px, 2, 3, 3);
  set_boxes(&e, bad, 1);
  tf_fn f;
  assert_int_equal(tf_open(&f, "random_flip", "{\"boxes\": \"boxes\"}"), 0);
  assert_int_equal(tf_call(&f, &e, 0, 9, NULL), SL_EINVAL);
  tf_expect_msg("outside [0, 1]");
  tf_expect_msg("element 9");
  tf_close(&f);
  assert_int_equal(tf_run("random_flip", "{\"boxes\": \"boxes\", \"on_invalid_box\": \"clip\", \"prob\": 0}", &e, 0), 0);
  b = sl_comp_data(sl_elem_get(&e, "boxes"));
  assert_true(b[1] == 0.0f);
  sl_elem_clear(&e);
  /* num_boxes limits the boxes checked and flipped (padding rows untouched). */
  const float padded[8] = {0.1f, 0.2f, 0.5f, 0.3f, -1, -1, -1, -1};
  sl_elem_init(&e);
  set_image(&e, "image", px, 2, 3, 3);
  set_boxes(&e, padded, 2);
  assert_int_equal(sl_elem_set_i64(&e, "n", 1), 0);
  assert_int_equal(tf_run("random_flip", "{\"boxes\": \"boxes\", \"num_boxes\": \"n\", \"prob\": 1}", &e, 0), 0);
  b = sl_comp_data(sl_elem_get(&e, "boxes"));
  assert_true(fabsf(b[1] - 0.7f) < 1e-6f && b[5] == -1.0f);
  sl_elem_clear(&e);
  /* Over many seeds about half flip. */
  int flips = 0;
  assert_int_equal(tf_open(&f, "random_flip", NULL), 0);
  for (uint64_t s = 0; s < 400; s++) {
    sl_elem_init(&e);
    set_image(&e, "image", px, 2, 3, 3);
    assert_int_equal(tf_call(&f, &e, s * 7919, s, NULL), 0);
    flips += tf_image(&e, "image", &h, &w, &c)[0] == 7;
    sl_elem_clear(&e);
  }
  tf_close(&f);
  assert_true(flips > 150 && flips < 250);
}

static void test_normalize_cast(void **st) {
  uint8_t px[6] = {0, 128, 255, 10, 20, 30};
  sl_elem e;
  sl_elem_init(&e);
  set_image(&e, "image", px, 1, 2, 3);
  assert_int_equal(tf_run("normalize", "{\"mean\": [0, 128, 255], \"std\": [1, 2, 255]}", &e, 0), 0);
  sl_comp *c = sl_elem_get(&e, "image");
  assert_int_equal(c->dtype, SL_FLOAT32);
  const float *f = sl_comp_data(c);
  assert_true(f[0] == 0.0f && f[1] == 0.0f && f[2] == 0.0f && f[3] == 10.0f && fabsf(f[4] + 54.0f) < 1e-5f);
  sl_elem_clear(&e);
  sl_elem_init(&e);
  set_image(&e, "image", px, 1, 2, 3);
  assert_int_equal(tf_run("normalize", NULL, &e, 0), 0); /* ImageNet defaults */
  f = sl_comp_data(sl_elem_get(&e, "image"));
  assert_true(fabsf(f[0] - (float)((0 - 123.675) / 58.395)) < 1e-5f);
  sl_elem_clear(&e);
  sl_elem_init(&e);
  set_image(&e, "image", px, 1, 2, 3);
  assert_int_equal(tf_run("normalize", "{\"mean\": [0, 0], \"std\": [1, 1]}", &e, 0), SL_EINVAL);
  tf_expect_msg("channels");
  sl_elem_clear(&e);
  tf_fn fn;
  assert_int_equal(tf_open(&fn, "normalize", "{\"std\": [0]}"), SL_EINVAL);
  /* cast: saturating to uint8, scale to float. */
  float vals[4] = {-3.0f, 1.4f, 300.0f, 254.6f};
  int64_t shape[1] = {4};
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_tensor(&e, "x", SL_FLOAT32, 1, shape, NULL, 0, vals), 0);
  assert_int_equal(tf_run("cast", "{\"component\": \"x\", \"dtype\": \"uint8\"}", &e, 0), 0);
  const uint8_t *u = sl_comp_data(sl_elem_get(&e, "x"));
  assert_true(u[0] == 0 && u[1] == 1 && u[2] == 255 && u[3] == 255);
  assert_int_equal(tf_run("cast", "{\"component\": \"x\", \"dtype\": \"float32\", \"scale\": 0.5}", &e, 0), 0);
  f = sl_comp_data(sl_elem_get(&e, "x"));
  assert_true(f[2] == 127.5f);
  sl_elem_clear(&e);
  assert_int_equal(tf_open(&fn, "cast", "{\"dtype\": \"bytes\"}"), SL_EINVAL);
  assert_int_equal(tf_open(&fn, "cast", "{}"), SL_EINVAL);
}

static void set_list(sl_elem *e, const char *name, const float *v, int64_t n) {
  int64_t shape[1] = {n};
  assert_int_equal(sl_elem_set_tensor(e, name, SL_FLOAT32, 1, shape, NULL, 0, v), 0);
}

static void test_pad_boxes(void **st) {
  const float ymin[3] = {0.1f, 0.2f, 0.3f}, xmin[3] = {0.0f, 0.1f, 0.2f}, ymax[3] = {0.5f, 0.6f, 0.7f},
              xmax[3] = {0.4f, 0.5f, 1.0f};
  const int64_t labels[3] = {5, 6, 7};
  sl_elem e;
  sl_elem_init(&e);
  set_list(&e, "image/object/bbox/ymin", ymin, 3);
  set_list(&e, "image/object/bbox/xmin", xmin, 3);
  set_list(&e, "image/object/bbox/ymax", ymax, 3);
  set_list(&e, "image/object/bbox/xmax", xmax, 3);
  int64_t shape[1] = {3};
  assert_int_equal(sl_elem_set_tensor(&e, "image/object/class/label", SL_INT64, 1, shape, NULL, 0, labels), 0);
  assert_int_equal(tf_run("pad_boxes", "{\"max\": 5}", &e, 0), 0);
  sl_comp *b = sl_elem_get(&e, "boxes"), *l = sl_elem_get(&e, "labels"), *n = sl_elem_get(&e, "num_boxes");
  assert_non_null(b);
  assert_non_null(l);
  assert_non_null(n);
  assert_int_equal(b->shape[0], 5);
  assert_int_equal(b->shape[1], 4);
  const float *bf = sl_comp_data(b);
  assert_true(bf[4] == 0.2f && bf[5] == 0.1f && bf[6] == 0.6f && bf[7] == 0.5f && bf[12] == 0.0f);
  const int64_t *li = sl_comp_data(l);
  assert_true(li[2] == 7 && li[3] == -1);
  int64_t nb;
  sl_comp_get_i64(&nb, n);
  assert_int_equal(nb, 3);
  assert_null(sl_elem_get(&e, "image/object/bbox/ymin"));
  /* Truncation when there are more boxes than max. */
  assert_int_equal(tf_run("pad_boxes", "{\"max\": 2, \"boxes\": \"boxes\", \"output\": \"b2\", \"labels\": \"\", "
                          "\"num_output\": \"n2\"}", &e, 0), 0);
  assert_int_equal(sl_elem_get(&e, "b2")->shape[0], 2);
  sl_comp_get_i64(&nb, sl_elem_get(&e, "n2"));
  assert_int_equal(nb, 2);
  sl_elem_clear(&e);
  /* Boxes outside [0, 1]; lists of different lengths. */
  const float out[3] = {0.1f, 1.5f, 0.2f};
  sl_elem_init(&e);
  set_list(&e, "image/object/bbox/ymin", ymin, 3);
  set_list(&e, "image/object/bbox/xmin", xmin, 3);
  set_list(&e, "image/object/bbox/ymax", ymax, 3);
  set_list(&e, "image/object/bbox/xmax", out, 3);
  assert_int_equal(tf_run("pad_boxes", NULL, &e, 0), SL_EINVAL);
  tf_expect_msg("outside [0, 1]");
  set_list(&e, "image/object/bbox/xmax", xmax, 2);
  assert_int_equal(tf_run("pad_boxes", NULL, &e, 0), SL_EINVAL);
  tf_expect_msg("differ in length");
  sl_elem_clear(&e);
  tf_fn f;
  assert_int_equal(tf_open(&f, "pad_boxes", "{\"max\": 0}"), SL_EINVAL);
}

/* A TFRecord of JPEG examples through decode -> random_resized_crop -> random_flip -> normalize: the same bytes
 * with map parallelism 1, 2 and 3. The last (non-random) map may also hand off out of order: outputs are compared
 * as a multiset keyed by label. (A random op downstream of an unordered hand-off sees another input order, hence
 * other per-element seeds: that is the engine's documented contract, as in tf.data.) */
static char *write_images(const char *dir, int n) {
  char *path = NULL;
  assert_true(asprintf(&path, "%s/img.tfrecord", dir) > 0);
  sl_tfrecord_writer *w;
  assert_int_equal(sl_tfrecord_writer_open(&w, path, SL_COMPRESSION_NONE), 0);
  for (int i = 0; i < n; i++) {
    size_t len;
    uint8_t *px = tf_picture(64 + i * 3, 48 + i, (unsigned)i);
    uint8_t *j = tf_jpeg(px, 64 + i * 3, 48 + i, TJPF_RGB, TJSAMP_420, 90, &len);
    sl_example *ex = sl_example_new();
    const void *v[1] = {j};
    int64_t label = i;
    assert_int_equal(sl_example_add_bytes(ex, "image/encoded", v, &len, 1), 0);
    assert_int_equal(sl_example_add_int64(ex, "label", &label, 1), 0);
    sl_buf *b;
    assert_int_equal(sl_example_serialize(&b, ex), 0);
    assert_int_equal(sl_tfrecord_write(w, sl_buf_data(b), sl_buf_size(b)), 0);
    sl_buf_unref(b);
    sl_example_free(ex);
    free(j);
    free(px);
  }
  assert_int_equal(sl_tfrecord_writer_close(w), 0);
  return path;
}

static uint64_t run_hash(const char *path, int par, const char *det, int64_t *count) {
  char spec[2048];
  snprintf(spec, sizeof spec,
           "{\"name\": \"t\", \"seed\": 9, \"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"interleave\", "
           "\"source\": [{\"op\": \"tfrecord\"}]}, {\"op\": \"map\", \"fn\": \"parse_example\", \"args\": {\"features\": "
           "{\"image/encoded\": {\"dtype\": \"bytes\"}, \"label\": {\"dtype\": \"int64\"}}}}, {\"op\": \"map\", \"fn\": "
           "\"decode_jpeg\", \"parallelism\": %d}, {\"op\": \"map\", \"fn\": \"random_resized_crop\", "
           "\"args\": {\"size\": [24, 24]}, \"parallelism\": %d}, {\"op\": \"map\", \"fn\": "
           "\"random_flip\", \"parallelism\": %d}, {\"op\": \"map\", \"fn\": \"normalize\", \"parallelism\": %d, "
           "\"deterministic\": %s}]}",
           path, par, par, par, par, det);
  sl_pipeline *p = tu_pipeline(spec);
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  uint64_t h = 0;
  int64_t n = 0;
  int rc;
  while ((rc = sl_iter_next(&e, it)) == 0) {
    int64_t label;
    sl_comp_get_i64(&label, sl_elem_get(&e, "label"));
    sl_comp *img = sl_elem_get(&e, "image");
    assert_non_null(img);
    /* Order-independent: sum of per-element hashes keyed by label. */
    uint64_t x = 1469598103934665603ull ^ (uint64_t)label;
    const uint8_t *d = sl_comp_data(img);
    for (size_t i = 0; i < img->size; i++) x = (x ^ d[i]) * 1099511628211ull;
    h += x;
    n++;
    sl_elem_clear(&e);
  }
  assert_int_equal(rc, SL_END);
  sl_iter_free(it);
  sl_pipeline_free(p);
  *count = n;
  return h;
}

static void test_parallel_determinism(void **st) {
  char *dir = tu_tmpdir("fnimg");
  char *path = write_images(dir, 24);
  int64_t n1, n2, n3;
  uint64_t a = run_hash(path, 1, "true", &n1), b = run_hash(path, 3, "true", &n2), c = run_hash(path, 2, "false", &n3);
  assert_int_equal(n1, 24);
  assert_int_equal(n2, 24);
  assert_int_equal(n3, 24);
  assert_true(a == b);
  assert_true(a == c);
  free(path);
  tu_rmtree(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sampler_bounds),     cmocka_unit_test(test_random_resized_crop),
      cmocka_unit_test(test_resize),             cmocka_unit_test(test_center_crop),
      cmocka_unit_test(test_random_flip),        cmocka_unit_test(test_normalize_cast),
      cmocka_unit_test(test_pad_boxes),          cmocka_unit_test(test_parallel_determinism),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  tf_release_all();
  return rc;
}
