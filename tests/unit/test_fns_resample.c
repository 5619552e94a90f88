/* test_fns_resample.c: the resizer on the image functions' hot path (fns/resample_u8.c) against a float
 * reference resampler with antialiasing (a separable triangle filter widened by the shrink factor, or for "area" the
 * share of each source pixel under the output pixel, pixel centres aligned), on photo-like generated images: the mean absolute difference per channel stays <= 2 (issue 16's bound),
 * shrinking by less than 2x, by more (the box path), and enlarging; gray and RGB. SL_TEST_TIMEOUT(300) */
#include "test_fns_util.h"

#include "fns/image_int.h"

/* One axis of the reference: weights of the triangle filter of radius max(1, scale) around each output centre. */
static void ref_axis(const float *src, int n, int sstep, float *dst, int m, int dstep, int count, int cstep, bool box) {
  double scale = (double)n / m, rad = scale > 1 ? scale : 1;
  if (box) rad = scale > 1 ? scale / 2 + 0.5 : 1;
  for (int o = 0; o < m; o++) {
    double centre = (o + 0.5) * scale - 0.5;
    int lo = (int)floor(centre - rad), hi = (int)ceil(centre + rad);
    for (int k = 0; k < count; k++) {
      double acc = 0, wsum = 0;
      for (int i = lo; i <= hi; i++) {
        double d = fabs(i - centre);
        /* area: the share of source pixel i under the output pixel's footprint; else the triangle */
        double wgt = box ? (d <= rad - 1 ? 1 : rad - d) : 1 - d / rad;
        if (wgt <= 0) continue;
        int ii = i < 0 ? 0 : i >= n ? n - 1 : i;
        acc += wgt * src[(size_t)ii * sstep + (size_t)k * cstep];
        wsum += wgt;
      }
      dst[(size_t)o * dstep + (size_t)k * cstep] = (float)(acc / wsum);
    }
  }
}

/* Reference resize of an HWC uint8 image (rows `stride` bytes apart) to dh x dw. */
static uint8_t *ref_resize(const uint8_t *src, int sh, int sw, size_t stride, int c, int dh, int dw, bool box) {
  float *in = malloc(sizeof(float) * sh * sw * c), *mid = malloc(sizeof(float) * sh * dw * c),
        *out = malloc(sizeof(float) * dh * dw * c);
  for (int y = 0; y < sh; y++)
    for (int i = 0; i < sw * c; i++) in[(size_t)y * sw * c + i] = src[(size_t)y * stride + i];
  for (int y = 0; y < sh; y++) ref_axis(in + (size_t)y * sw * c, sw, c, mid + (size_t)y * dw * c, dw, c, c, 1, box);
  ref_axis(mid, sh, dw * c, out, dh, dw * c, dw * c, 1, box);
  uint8_t *r = malloc((size_t)dh * dw * c);
  for (size_t i = 0; i < (size_t)dh * dw * c; i++) r[i] = (uint8_t)lrintf(fminf(fmaxf(out[i], 0), 255));
  free(in);
  free(mid);
  free(out);
  return r;
}

/* Decoded generated images (photo-like: smooth regions, objects with hard edges, grain). */
static int load_images(sl_elem *imgs, int max, const char *dir) {
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"glob\": \"%s/train-*\"}, {\"op\": \"interleave\", "
                                "\"source\": [{\"op\": \"tfrecord\"}]}, {\"op\": \"map\", \"fn\": \"parse_example\", "
                                "\"args\": {\"features\": {\"image/encoded\": {\"dtype\": \"bytes\"}}}}, {\"op\": \"map\", "
                                "\"fn\": \"decode_jpeg\"}]}",
                                dir);
  sl_iter *it;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  int n = 0;
  while (n < max) {
    sl_elem_init(&imgs[n]);
    if (sl_iter_next(&imgs[n], it)) break;
    n++;
  }
  sl_iter_free(it);
  sl_pipeline_free(p);
  return n;
}

static void check(const uint8_t *src, int sh, int sw, size_t stride, int c, int dh, int dw, double *worst) {
  uint8_t *got = malloc((size_t)dh * dw * c);
  for (int method = SL__RESIZE_BILINEAR; method <= SL__RESIZE_AREA; method++) {
    uint8_t *ref = ref_resize(src, sh, sw, stride, c, dh, dw, method == SL__RESIZE_AREA);
    assert_int_equal(sl__resize_u8(src, sh, sw, stride, got, dh, dw, c, method), 0);
    for (int k = 0; k < c; k++) {
      double s = 0;
      for (size_t i = (size_t)k; i < (size_t)dh * dw * c; i += (size_t)c) s += abs((int)got[i] - (int)ref[i]);
      double mad = s / ((double)dh * dw);
      if (mad > *worst) *worst = mad;
      if (mad > 2.0)
        fprintf(stderr, "%dx%d -> %dx%d, %d channels, method %d, channel %d: mean abs diff %.2f\n", sh, sw, dh, dw, c,
                method, k, mad);
      assert_true(mad <= 2.0);
    }
    free(ref);
  }
  free(got);
}

static void test_resizer_close_to_antialiased_reference(void **st) {
  char *dir = tu_tmpdir("resample");
  sl_gen_opts o = SL_GEN_OPTS_INIT;
  o.out_dir = dir;
  o.n = 6;
  o.shards = 1;
  o.seed = 11;
  assert_int_equal(sl_gen_run(NULL, &o), 0);
  sl_elem imgs[6];
  int n = load_images(imgs, 6, dir);
  assert_int_equal(n, 6);
  double worst = 0;
  for (int i = 0; i < n; i++) {
    int64_t h, w, c;
    const uint8_t *px = tf_image(&imgs[i], "image", &h, &w, &c);
    size_t stride = (size_t)w * c;
    int H = (int)h, W = (int)w;
    /* Windows as random_resized_crop draws them, to the sizes the recipes use. */
    check(px, H, W, stride, 3, 224, 224, &worst);                                          /* < 2x */
    check(px + (H / 5) * stride + (W / 7) * 3, H * 3 / 5, W / 2, stride, 3, 224, 224, &worst); /* enlarge */
    check(px, H, W, stride, 3, 96, 112, &worst);                                           /* > 2x: box */
    check(px + 10 * stride + 20 * 3, 101, 77, stride, 3, 37, 53, &worst);                  /* odd sizes */
    /* Gray: the first channel as a plane. */
    uint8_t *g = malloc((size_t)H * W);
    for (size_t k = 0; k < (size_t)H * W; k++) g[k] = px[k * 3 + 1];
    check(g, H, W, (size_t)W, 1, 224, 224, &worst);
    check(g, H, W, (size_t)W, 1, 64, 64, &worst);
    free(g);
    sl_elem_clear(&imgs[i]);
  }
  fprintf(stderr, "worst mean abs diff per channel against the reference: %.2f\n", worst);
  tu_rmtree(dir);
  free(dir);
}

/* The AVX2 passes (vertical; horizontal with flip and float32 output) give the portable loops' values exactly: random
 * pixels, rows wider than the image, widths that leave tails, even and odd tap counts, shrinking and enlarging. */
static void test_simd_passes_match_portable(void **st) {
  static const int sizes[][4] = {{224, 224, 224, 224}, {300, 257, 224, 224}, {101, 77, 37, 53}, {60, 45, 224, 224},
                                 {480, 640, 96, 112}, {7, 5, 3, 2}, {1, 33, 4, 17}};
  uint64_t r = 12345;
  for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++)
    for (int c = 1; c <= 4; c++)
      for (int mode = 0; mode < 5; mode++) { /* no pass; uint8 flipped; float32; float32 flipped; area */
        int sh = sizes[t][0], sw = sizes[t][1], dh = sizes[t][2], dw = sizes[t][3];
        size_t stride = (size_t)sw * c + 13, n = (size_t)sh * stride, out = (size_t)dh * dw * c * sizeof(float);
        uint8_t *src = malloc(n), *a = calloc(1, out), *b = calloc(1, out);
        for (size_t i = 0; i < n; i++) r = r * 6364136223846793005u + 1442695040888963407u, src[i] = (uint8_t)(r >> 56);
        sl__px_out px = {mode == 1 || mode == 3, mode == 2 || mode == 3, {0.5f, -1.25f, 2.0f, 0.75f}, {-3, 1, 0.5f, 7}};
        const sl__px_out *o = mode == 0 || mode == 4 ? NULL : &px;
        bool box = mode == 4;
        sl__resample_avx2 = true;
        assert_int_equal(sl__resample_u8_px(src, sh, sw, stride, a, dh, dw, c, box, o), 0);
        sl__resample_avx2 = false;
        assert_int_equal(sl__resample_u8_px(src, sh, sw, stride, b, dh, dw, c, box, o), 0);
        sl__resample_avx2 = true;
        if (memcmp(a, b, out))
          fprintf(stderr, "%dx%d -> %dx%d, %d channels, mode %d: AVX2 and portable differ\n", sh, sw, dh, dw, c, mode);
        assert_memory_equal(a, b, out);
        free(src), free(a), free(b);
      }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resizer_close_to_antialiased_reference),
      cmocka_unit_test(test_simd_passes_match_portable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
