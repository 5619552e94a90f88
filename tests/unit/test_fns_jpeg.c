/* test_fns_jpeg.c: decode_jpeg and decode_and_crop_jpeg: pixels against a bare TurboJPEG decode, colour spaces,
 * every bad input of the issue (corrupt, truncated, PNG, empty, zero-sized, oversized, crop outside), a mutation
 * fuzz loop (no crash, no leak), and cropped decoding against decode-then-crop. SL_TEST_TIMEOUT(300) */
#include "test_fns_util.h"

#include "fns/image_int.h"

static void set_jpeg(sl_elem *e, const uint8_t *j, size_t n) {
  sl_elem_init(e);
  assert_int_equal(sl_elem_set_bytes(e, "image/encoded", NULL, 0, j, n), 0);
}

/* Reference decode with TurboJPEG (accurate DCT, fancy upsampling: what decode_jpeg uses). */
static uint8_t *ref_decode(const uint8_t *j, size_t n, int *w, int *h) {
  tjhandle t = tjInitDecompress();
  int ss, cs;
  assert_int_equal(tjDecompressHeader3(t, j, n, w, h, &ss, &cs), 0);
  uint8_t *out = malloc((size_t)*w * *h * 3);
  assert_int_equal(tjDecompress2(t, j, n, out, *w, 0, *h, TJPF_RGB, TJFLAG_ACCURATEDCT), 0);
  tjDestroy(t);
  return out;
}

static void test_decode_matches_turbojpeg(void **st) {
  int samps[3] = {TJSAMP_420, TJSAMP_444, TJSAMP_422};
  for (int s = 0; s < 3; s++) {
    size_t n;
    uint8_t *j = tf_rgb_jpeg(203, 117, samps[s], &n);
    sl_elem e;
    set_jpeg(&e, j, n);
    assert_int_equal(tf_run("decode_jpeg", NULL, &e, 1), 0);
    int64_t h, w, c;
    const uint8_t *img = tf_image(&e, "image", &h, &w, &c);
    assert_int_equal(h, 117);
    assert_int_equal(w, 203);
    assert_int_equal(c, 3);
    assert_null(sl_elem_get(&e, "image/encoded")); /* consumed unless keep */
    int rw, rh;
    uint8_t *ref = ref_decode(j, n, &rw, &rh);
    assert_memory_equal(img, ref, (size_t)w * h * 3);
    /* And close to the source pixels. */
    uint8_t *src = tf_picture(203, 117, 1);
    assert_true(tf_mad(img, src, (size_t)w * h * 3, NULL) < 8.0); /* chroma subsampling blurs the blue stripes */
    free(src);
    free(ref);
    free(j);
    sl_elem_clear(&e);
  }
}

static void test_grayscale_and_channels(void **st) {
  uint8_t *g = malloc(64 * 48);
  for (int i = 0; i < 64 * 48; i++) g[i] = (uint8_t)(i % 64 * 4);
  size_t n;
  uint8_t *j = tf_jpeg(g, 64, 48, TJPF_GRAY, TJSAMP_GRAY, 95, &n);
  sl_elem e;
  int64_t h, w, c;
  set_jpeg(&e, j, n);
  assert_int_equal(tf_run("decode_jpeg", "{\"channels\": 0}", &e, 1), 0);
  const uint8_t *img = tf_image(&e, "image", &h, &w, &c);
  assert_int_equal(c, 1);
  assert_true(tf_mad(img, g, 64 * 48, NULL) < 3.0);
  sl_elem_clear(&e);
  set_jpeg(&e, j, n);
  assert_int_equal(tf_run("decode_jpeg", "{\"channels\": 3, \"output\": \"px\"}", &e, 1), 0);
  img = tf_image(&e, "px", &h, &w, &c);
  assert_int_equal(c, 3);
  for (int i = 0; i < 64 * 48; i++) assert_true(img[i * 3] == img[i * 3 + 1] && img[i * 3] == img[i * 3 + 2]);
  sl_elem_clear(&e);
  free(j);
  /* Colour to one channel. */
  j = tf_rgb_jpeg(40, 30, TJSAMP_420, &n);
  set_jpeg(&e, j, n);
  assert_int_equal(tf_run("decode_jpeg", "{\"channels\": 1}", &e, 1), 0);
  tf_image(&e, "image", &h, &w, &c);
  assert_int_equal(c, 1);
  sl_elem_clear(&e);
  free(j);
  free(g);
  tf_fn f;
  assert_int_equal(tf_open(&f, "decode_jpeg", "{\"channels\": 2}"), SL_EINVAL);
  tf_expect_msg("channels");
}

static void test_cmyk(void **st) {
  /* Adobe-style inverted CMYK chosen so that R = C*K/255 etc. gives known colours. */
  int w = 48, h = 32;
  uint8_t *cmyk = malloc((size_t)w * h * 4), *want = malloc((size_t)w * h * 3);
  for (int i = 0; i < w * h; i++) {
    int r = (i % w) * 5, g = 200 - (i / w) * 3, b = 90;
    int k = r > g ? (r > b ? r : b) : (g > b ? g : b);
    cmyk[i * 4] = (uint8_t)(r * 255 / k), cmyk[i * 4 + 1] = (uint8_t)(g * 255 / k), cmyk[i * 4 + 2] = (uint8_t)(b * 255 / k);
    cmyk[i * 4 + 3] = (uint8_t)k;
    want[i * 3] = (uint8_t)r, want[i * 3 + 1] = (uint8_t)g, want[i * 3 + 2] = (uint8_t)b;
  }
  size_t n;
  uint8_t *j = tf_jpeg(cmyk, w, h, TJPF_CMYK, TJSAMP_444, 98, &n);
  sl_elem e;
  set_jpeg(&e, j, n);
  assert_int_equal(tf_run("decode_jpeg", NULL, &e, 1), 0);
  int64_t hh, ww, c;
  const uint8_t *img = tf_image(&e, "image", &hh, &ww, &c);
  assert_int_equal(c, 3);
  double mad = tf_mad(img, want, (size_t)w * h * 3, NULL);
  assert_true(mad < 6.0);
  sl_elem_clear(&e);
  free(j);
  free(cmyk);
  free(want);
}

static void expect_decode_error(const uint8_t *j, size_t n, const char *args, int code, const char *needle) {
  sl_elem e;
  set_jpeg(&e, j, n);
  tf_fn f;
  assert_int_equal(tf_open(&f, "decode_jpeg", args), 0);
  int rc = tf_call(&f, &e, 1, 42, NULL);
  if (rc != code) fprintf(stderr, "got %d: %s\n", rc, sl_error_last());
  assert_int_equal(rc, code);
  tf_expect_msg("ops[7]");
  tf_expect_msg("element 42");
  if (needle) tf_expect_msg(needle);
  assert_null(sl_elem_get(&e, "image"));
  tf_close(&f);
  sl_elem_clear(&e);
}

static void test_bad_inputs(void **st) {
  size_t n;
  uint8_t *j = tf_rgb_jpeg(160, 120, TJSAMP_420, &n);
  /* Truncated: strict (default) fails, strict false decodes what is there. */
  expect_decode_error(j, n / 2, NULL, SL_ECORRUPT, "Premature end");
  sl_elem e;
  set_jpeg(&e, j, n / 2);
  assert_int_equal(tf_run("decode_jpeg", "{\"strict\": false}", &e, 1), 0);
  sl_elem_clear(&e);
  /* Truncated inside the header. */
  expect_decode_error(j, 40, NULL, SL_ECORRUPT, "corrupt JPEG");
  /* A PNG, an empty string, random bytes. */
  static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  expect_decode_error(png, sizeof png, NULL, SL_EINVAL, "PNG");
  expect_decode_error(j, 0, NULL, SL_EINVAL, "empty");
  static const uint8_t junk[] = "GIF89a not a jpeg";
  expect_decode_error(junk, sizeof junk, NULL, SL_EINVAL, "not a JPEG");
  /* Zero height in the frame header. */
  uint8_t *z = malloc(n);
  memcpy(z, j, n);
  size_t sof = 0;
  for (size_t i = 2; i + 8 < n; i++)
    if (z[i] == 0xFF && (z[i + 1] == 0xC0 || z[i + 1] == 0xC2)) {
      sof = i;
      break;
    }
  assert_true(sof > 0);
  z[sof + 5] = 0, z[sof + 6] = 0;
  expect_decode_error(z, n, NULL, SL_ECORRUPT, "Empty JPEG image");
  /* Width 0. */
  memcpy(z, j, n);
  z[sof + 7] = 0, z[sof + 8] = 0;
  expect_decode_error(z, n, NULL, SL_ECORRUPT, NULL);
  /* Corrupt Huffman table segment. */
  memcpy(z, j, n);
  for (size_t i = 2; i + 40 < n; i++)
    if (z[i] == 0xFF && z[i + 1] == 0xC4) {
      memset(z + i + 5, 0xFF, 16);
      break;
    }
  expect_decode_error(z, n, NULL, SL_ECORRUPT, "corrupt JPEG");
  /* Too many pixels for max_pixels. */
  expect_decode_error(j, n, "{\"max_pixels\": 1000}", SL_EINVAL, "max_pixels");
  /* Not a byte string. */
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_i64(&e, "image/encoded", 3), 0);
  assert_int_equal(tf_run("decode_jpeg", NULL, &e, 1), SL_EINVAL);
  sl_elem_clear(&e);
  /* Missing component: a spec mistake (SL_ENOTFOUND), which on_error "skip" does not drop. */
  sl_elem_init(&e);
  assert_int_equal(tf_run("decode_jpeg", "{\"component\": \"nope\"}", &e, 1), SL_ENOTFOUND);
  tf_expect_msg("nope");
  free(z);
  free(j);
}

/* Random byte mutations and truncations: every outcome is success or an error, never a crash or a leak. */
static void test_mutation_fuzz(void **st) {
  size_t n;
  uint8_t *j = tf_rgb_jpeg(96, 64, TJSAMP_420, &n);
  uint8_t *m = malloc(n);
  uint64_t s = 12345;
  int errors = 0;
  tf_fn f, g;
  assert_int_equal(tf_open(&f, "decode_jpeg", NULL), 0);
  assert_int_equal(tf_open(&g, "decode_and_crop_jpeg", "{\"random\": true, \"size\": [24, 24]}"), 0);
  for (int it = 0; it < 400; it++) {
    memcpy(m, j, n);
    int k = 1 + it % 6;
    for (int q = 0; q < k; q++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      size_t pos = (size_t)(s >> 33) % n;
      m[pos] = (uint8_t)(s >> 20);
    }
    size_t len = it % 5 == 0 ? (size_t)(s >> 40) % n : n;
    sl_elem e;
    set_jpeg(&e, m, len);
    int rc = tf_call(it % 2 ? &g : &f, &e, s, (uint64_t)it, NULL);
    assert_true(rc == 0 || rc == SL_ECORRUPT || rc == SL_EINVAL);
    errors += rc != 0;
    sl_elem_clear(&e);
  }
  assert_true(errors > 0);
  tf_close(&f);
  tf_close(&g);
  free(m);
  free(j);
}

/* decode_and_crop_jpeg without a size: the same pixels as a full decode and a crop, for awkward windows. */
static void test_crop_equals_decode_then_crop(void **st) {
  int samps[3] = {TJSAMP_420, TJSAMP_444, TJSAMP_420};
  for (int s = 0; s < 3; s++) {
    size_t n;
    int W = 301, H = 211;
    if (s == 2) g_tf_jpeg_flags |= TJFLAG_PROGRESSIVE; /* progressive files crop the same way */
    uint8_t *j = tf_rgb_jpeg(W, H, samps[s], &n);
    g_tf_jpeg_flags = TJFLAG_ACCURATEDCT;
    int rw, rh;
    uint8_t *full = ref_decode(j, n, &rw, &rh);
    int wins[][4] = {{0, 0, 211, 301}, {0, 0, 17, 33}, {5, 7, 100, 150}, {16, 32, 64, 64}, {37, 101, 173, 199},
                     {210, 300, 1, 1}, {100, 3, 111, 298}, {1, 1, 210, 300}};
    for (size_t k = 0; k < sizeof wins / sizeof wins[0]; k++) {
      char args[200];
      snprintf(args, sizeof args, "{\"crop\": [%d, %d, %d, %d]}", wins[k][0], wins[k][1], wins[k][2], wins[k][3]);
      sl_elem e;
      set_jpeg(&e, j, n);
      assert_int_equal(tf_run("decode_and_crop_jpeg", args, &e, 1), 0);
      int64_t h, w, c;
      const uint8_t *img = tf_image(&e, "image", &h, &w, &c);
      assert_int_equal(h, wins[k][2]);
      assert_int_equal(w, wins[k][3]);
      int maxd = 0;
      double tot = 0;
      for (int y = 0; y < h; y++) {
        const uint8_t *ref = full + ((size_t)(y + wins[k][0]) * W + wins[k][1]) * 3;
        int md;
        tot += tf_mad(img + (size_t)y * w * 3, ref, (size_t)w * 3, &md);
        if (md > maxd) maxd = md;
      }
      if (maxd > 0) fprintf(stderr, "window %zu (samp %d): max diff %d, mean %.3f\n", k, s, maxd, tot / h);
      assert_true(maxd <= 2); /* fancy upsampling at a window edge may round differently */
      assert_true(tot / (double)h < 0.05);
      sl_elem_clear(&e);
    }
    free(full);
    free(j);
  }
}

/* With an output size smaller than the window: DCT-scaled decode + resize against full decode, crop, resize. */
static void test_crop_scaled_close_to_reference(void **st) {
  size_t n;
  int W = 480, H = 360;
  uint8_t *j = tf_rgb_jpeg(W, H, TJSAMP_420, &n);
  int rw, rh;
  uint8_t *full = ref_decode(j, n, &rw, &rh);
  int wins[][4] = {{0, 0, 360, 480}, {20, 40, 300, 300}, {7, 13, 250, 400}, {100, 100, 120, 120}};
  int sizes[][2] = {{112, 112}, {64, 64}, {224, 224}, {50, 80}};
  for (size_t k = 0; k < 4; k++) {
    char args[200];
    snprintf(args, sizeof args, "{\"crop\": [%d, %d, %d, %d], \"size\": [%d, %d]}", wins[k][0], wins[k][1],
             wins[k][2], wins[k][3], sizes[k][0], sizes[k][1]);
    sl_elem e;
    set_jpeg(&e, j, n);
    assert_int_equal(tf_run("decode_and_crop_jpeg", args, &e, 1), 0);
    int64_t h, w, c;
    const uint8_t *img = tf_image(&e, "image", &h, &w, &c);
    assert_int_equal(h, sizes[k][0]);
    assert_int_equal(w, sizes[k][1]);
    uint8_t *ref = malloc((size_t)h * w * 3);
    const uint8_t *src = full + ((size_t)wins[k][0] * W + wins[k][1]) * 3;
    assert_int_equal(sl__resize_u8(src, wins[k][2], wins[k][3], (size_t)W * 3, ref, h, w, 3, SL__RESIZE_BILINEAR), 0);
    int maxd;
    double mad = tf_mad(img, ref, (size_t)h * w * 3, &maxd);
    fprintf(stderr, "scaled window %zu: mean abs diff %.2f, max %d\n", k, mad, maxd);
    assert_true(mad < 3.0);
    free(ref);
    sl_elem_clear(&e);
  }
  free(full);
  free(j);
}

/* Random windows: the fused op samples the same window as random_resized_crop does for a seed. */
static void test_random_crop_matches_random_resized_crop(void **st) {
  size_t n;
  uint8_t *j = tf_rgb_jpeg(400, 350, TJSAMP_420, &n);
  for (uint64_t seed = 1; seed <= 12; seed++) {
    sl_elem a, b;
    set_jpeg(&a, j, n);
    set_jpeg(&b, j, n);
    assert_int_equal(tf_run("decode_and_crop_jpeg", "{\"random\": true, \"size\": [96, 96]}", &a, seed), 0);
    assert_int_equal(tf_run("decode_jpeg", NULL, &b, seed), 0);
    assert_int_equal(tf_run("random_resized_crop", "{\"size\": [96, 96]}", &b, seed), 0);
    int64_t h, w, c, h2, w2, c2;
    const uint8_t *x = tf_image(&a, "image", &h, &w, &c), *y = tf_image(&b, "image", &h2, &w2, &c2);
    assert_int_equal(h, 96);
    assert_int_equal(w2, 96);
    double mad = tf_mad(x, y, 96 * 96 * 3, NULL);
    if (mad >= 3.0) fprintf(stderr, "seed %llu: mean abs diff %.2f\n", (unsigned long long)seed, mad);
    assert_true(mad < 6.0); /* DCT scaling filters differently from the resizer; the test picture has 5-7 px stripes */
    sl_elem_clear(&a);
    sl_elem_clear(&b);
  }
  free(j);
}

static void test_crop_bad_windows_and_args(void **st) {
  size_t n;
  uint8_t *j = tf_rgb_jpeg(64, 48, TJSAMP_420, &n);
  const char *bad[] = {"{\"crop\": [0, 0, 49, 10]}", "{\"crop\": [40, 0, 10, 10]}", "{\"crop\": [0, 60, 10, 10]}",
                       "{\"crop\": [47, 63, 2, 1]}"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    sl_elem e;
    set_jpeg(&e, j, n);
    tf_fn f;
    assert_int_equal(tf_open(&f, "decode_and_crop_jpeg", bad[k]), 0);
    assert_int_equal(tf_call(&f, &e, 1, 3, NULL), SL_EINVAL);
    tf_expect_msg("outside");
    tf_expect_msg("element 3");
    tf_close(&f);
    sl_elem_clear(&e);
  }
  tf_fn f;
  assert_int_equal(tf_open(&f, "decode_and_crop_jpeg", "{\"random\": false}"), SL_EINVAL);
  tf_expect_msg("crop");
  assert_int_equal(tf_open(&f, "decode_and_crop_jpeg", "{\"random\": true}"), 0); /* window-sized output */
  tf_close(&f);
  assert_int_equal(tf_open(&f, "decode_and_crop_jpeg", "{\"random\": true, \"crop\": [0, 0, 2, 2]}"), SL_EINVAL);
  assert_int_equal(tf_open(&f, "decode_and_crop_jpeg", "{\"crop\": [0, 0, 1]}"), SL_EINVAL);
  /* Negative, empty, fractional or absurd windows are refused when the pipeline is built. */
  assert_int_equal(tf_open(&f, "decode_and_crop_jpeg", "{\"crop\": [-1, 0, 10, 10]}"), SL_EINVAL);
  tf_expect_msg("crop[0]");
  assert_int_equal(tf_open(&f, "decode_and_crop_jpeg", "{\"crop\": [0, 0, 0, 10]}"), SL_EINVAL);
  assert_int_equal(tf_open(&f, "decode_and_crop_jpeg", "{\"crop\": [0, 0.5, 1, 10]}"), SL_EINVAL);
  assert_int_equal(tf_open(&f, "decode_and_crop_jpeg", "{\"crop\": [0, 0, 1e30, 10]}"), SL_EINVAL);
  assert_int_equal(tf_open(&f, "decode_and_crop_jpeg", "{\"random\": true, \"size\": [8, 8], \"scale\": [0.5, 2]}"),
                   SL_EINVAL);
  assert_int_equal(tf_open(&f, "decode_and_crop_jpeg", "{\"crop\": [0, 0, 4, 4], \"method\": \"fancy\"}"), SL_EINVAL);
  tf_expect_msg("fancy");
  free(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode_matches_turbojpeg),
      cmocka_unit_test(test_grayscale_and_channels),
      cmocka_unit_test(test_cmyk),
      cmocka_unit_test(test_bad_inputs),
      cmocka_unit_test(test_mutation_fuzz),
      cmocka_unit_test(test_crop_equals_decode_then_crop),
      cmocka_unit_test(test_crop_scaled_close_to_reference),
      cmocka_unit_test(test_random_crop_matches_random_resized_crop),
      cmocka_unit_test(test_crop_bad_windows_and_args),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  tf_release_all();
  return rc;
}
