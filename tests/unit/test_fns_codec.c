/* test_fns_codec.c: decode_image (PNG and lossless WebP encoded here by libspng and libwebp, decoded exactly; JPEG as
 * decode_jpeg decodes it; gray, palette, 16-bit and alpha layouts; the bad-input table, each error naming the format
 * and the file), read_file (bytes, errors naming the file) and parse_int (values, bounds, bad text). */
#include <webp/encode.h>

#include "test_fns_util.h"

static void set_bytes(sl_elem *e, const void *d, size_t n, const char *file) {
  sl_elem_init(e);
  assert_int_equal(sl_elem_set_bytes(e, "image/encoded", NULL, 0, d, n), 0);
  if (file) assert_int_equal(sl_elem_set_bytes(e, "filename", NULL, 0, file, strlen(file)), 0);
}

/* Decodes d with decode_image (args) and checks the result is h x w x c and equal to want. */
static void expect_pixels(const void *d, size_t n, const char *args, int h, int w, int c, const uint8_t *want) {
  sl_elem e;
  set_bytes(&e, d, n, NULL);
  int rc = tf_run("decode_image", args, &e, 1);
  if (rc) fprintf(stderr, "decode_image: %s\n", sl_error_last());
  assert_int_equal(rc, 0);
  int64_t gh, gw, gc;
  const uint8_t *img = tf_image(&e, "image", &gh, &gw, &gc);
  assert_int_equal(gh, h);
  assert_int_equal(gw, w);
  assert_int_equal(gc, c);
  assert_memory_equal(img, want, (size_t)h * w * c);
  assert_null(sl_elem_get(&e, "image/encoded")); /* consumed, as decode_jpeg does */
  sl_elem_clear(&e);
}

static void test_png_layouts(void **st) {
  const int w = 37, h = 23;
  uint8_t *rgb = tf_picture(w, h, 3);
  size_t n;
  uint8_t *png = tf_png_encode(rgb, (size_t)w * h * 3, w, h, SPNG_COLOR_TYPE_TRUECOLOR, 8, NULL, &n);
  expect_pixels(png, n, NULL, h, w, 3, rgb);
  expect_pixels(png, n, "{\"channels\": 0}", h, w, 3, rgb); /* as stored */
  /* RGBA out of RGB: alpha 255. */
  uint8_t *rgba = malloc((size_t)w * h * 4), *gray = malloc((size_t)w * h);
  for (int i = 0; i < w * h; i++) {
    memcpy(rgba + i * 4, rgb + i * 3, 3);
    rgba[i * 4 + 3] = 255;
    gray[i] = (uint8_t)((rgb[i * 3] * 77u + rgb[i * 3 + 1] * 150u + rgb[i * 3 + 2] * 29u + 128u) >> 8);
  }
  expect_pixels(png, n, "{\"channels\": 4}", h, w, 4, rgba);
  expect_pixels(png, n, "{\"channels\": 1}", h, w, 1, gray);
  free(png);
  /* With alpha: kept with 4 and as stored, dropped with 3. */
  for (int i = 0; i < w * h; i++) rgba[i * 4 + 3] = (uint8_t)(i * 7);
  png = tf_png_encode(rgba, (size_t)w * h * 4, w, h, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, 8, NULL, &n);
  expect_pixels(png, n, "{\"channels\": 4}", h, w, 4, rgba);
  expect_pixels(png, n, "{\"channels\": 0}", h, w, 4, rgba);
  expect_pixels(png, n, NULL, h, w, 3, rgb);
  free(png);
  /* Grayscale: one channel as stored, replicated to RGB. */
  png = tf_png_encode(gray, (size_t)w * h, w, h, SPNG_COLOR_TYPE_GRAYSCALE, 8, NULL, &n);
  expect_pixels(png, n, "{\"channels\": 0}", h, w, 1, gray);
  uint8_t *g3 = malloc((size_t)w * h * 3);
  for (int i = 0; i < w * h; i++) g3[i * 3] = g3[i * 3 + 1] = g3[i * 3 + 2] = gray[i];
  expect_pixels(png, n, NULL, h, w, 3, g3);
  free(png);
  /* 16-bit gray (big-endian samples in the file) scaled to 8 bits: v16 = v8 * 257 gives back v8. */
  uint8_t *g16 = malloc((size_t)w * h * 2);
  for (int i = 0; i < w * h; i++) g16[i * 2] = g16[i * 2 + 1] = gray[i];
  png = tf_png_encode(g16, (size_t)w * h * 2, w, h, SPNG_COLOR_TYPE_GRAYSCALE, 16, NULL, &n);
  expect_pixels(png, n, "{\"channels\": 0}", h, w, 1, gray);
  expect_pixels(png, n, NULL, h, w, 3, g3);
  free(png);
  /* A palette of 4 colours, expanded. */
  struct spng_plte plte = {4, {{255, 0, 0, 0}, {0, 255, 0, 0}, {0, 0, 255, 0}, {9, 99, 199, 0}}};
  uint8_t *idx = malloc((size_t)w * h), *exp = malloc((size_t)w * h * 3);
  for (int i = 0; i < w * h; i++) {
    idx[i] = (uint8_t)(i % 4);
    exp[i * 3] = plte.entries[i % 4].red, exp[i * 3 + 1] = plte.entries[i % 4].green;
    exp[i * 3 + 2] = plte.entries[i % 4].blue;
  }
  png = tf_png_encode(idx, (size_t)w * h, w, h, SPNG_COLOR_TYPE_INDEXED, 8, &plte, &n);
  expect_pixels(png, n, NULL, h, w, 3, exp);
  expect_pixels(png, n, "{\"channels\": 0}", h, w, 3, exp);
  free(png);
  free(idx), free(exp), free(g16), free(g3), free(gray), free(rgba), free(rgb);
}

static void test_webp_lossless_exact(void **st) {
  const int w = 41, h = 19;
  uint8_t *rgb = tf_picture(w, h, 5), *out = NULL;
  size_t n = WebPEncodeLosslessRGB(rgb, w, h, w * 3, &out);
  assert_true(n > 0);
  expect_pixels(out, n, NULL, h, w, 3, rgb);
  expect_pixels(out, n, "{\"channels\": 0}", h, w, 3, rgb);
  WebPFree(out);
  uint8_t *rgba = malloc((size_t)w * h * 4);
  for (int i = 0; i < w * h; i++) memcpy(rgba + i * 4, rgb + i * 3, 3), rgba[i * 4 + 3] = (uint8_t)(255 - i % 200);
  n = WebPEncodeLosslessRGBA(rgba, w, h, w * 4, &out);
  assert_true(n > 0);
  expect_pixels(out, n, "{\"channels\": 4}", h, w, 4, rgba);
  expect_pixels(out, n, "{\"channels\": 0}", h, w, 4, rgba);
  expect_pixels(out, n, NULL, h, w, 3, rgb);
  WebPFree(out);
  free(rgba);
  free(rgb);
}

/* A JPEG through decode_image is decode_jpeg's image. */
static void test_jpeg_as_decode_jpeg(void **st) {
  size_t n;
  uint8_t *j = tf_rgb_jpeg(53, 29, TJSAMP_420, &n);
  for (int c = 1; c <= 3; c += 2) {
    char args[64];
    snprintf(args, sizeof args, "{\"channels\": %d}", c);
    sl_elem e;
    set_bytes(&e, j, n, NULL);
    assert_int_equal(tf_run("decode_jpeg", args, &e, 1), 0);
    int64_t h, w, ch;
    const uint8_t *ref = tf_image(&e, "image", &h, &w, &ch);
    expect_pixels(j, n, args, (int)h, (int)w, (int)ch, ref);
    if (c == 3) { /* and RGBA with an opaque alpha */
      uint8_t *rgba = malloc((size_t)h * w * 4);
      for (int64_t i = 0; i < h * w; i++) memcpy(rgba + i * 4, ref + i * 3, 3), rgba[i * 4 + 3] = 255;
      expect_pixels(j, n, "{\"channels\": 4}", (int)h, (int)w, 4, rgba);
      free(rgba);
    }
    sl_elem_clear(&e);
  }
  free(j);
}

/* Each bad input: an error (no crash), naming the format, what was wrong and the file. */
static void expect_bad(const void *d, size_t n, const char *args, int code, const char *needle) {
  sl_elem e;
  set_bytes(&e, d, n, "/data/cls/img_7.png");
  int rc = tf_run("decode_image", args, &e, 1);
  if (rc != code) fprintf(stderr, "rc %d (%s), expected %d\n", rc, sl_error_last(), code);
  assert_int_equal(rc, code);
  tf_expect_msg(needle);
  tf_expect_msg("'/data/cls/img_7.png'");
  tf_expect_msg("ops[7]: element 0");
  sl_elem_clear(&e);
}

static void test_bad_inputs(void **st) {
  const int w = 32, h = 16;
  uint8_t *rgb = tf_picture(w, h, 1);
  size_t n;
  uint8_t *png = tf_png_encode(rgb, (size_t)w * h * 3, w, h, SPNG_COLOR_TYPE_TRUECOLOR, 8, NULL, &n);
  expect_bad(png, n / 2, NULL, SL_ECORRUPT, "corrupt PNG");
  expect_bad(png, 20, NULL, SL_ECORRUPT, "corrupt PNG");
  uint8_t *bad = malloc(n);
  memcpy(bad, png, n);
  bad[n - 20] ^= 0x55; /* inside IDAT: its CRC no longer matches */
  expect_bad(bad, n, NULL, SL_ECORRUPT, "corrupt PNG");
  memcpy(bad, png, n);
  bad[16] = 0xff; /* the IHDR's width: 4 billion-ish, over max_pixels or refused by the header check */
  sl_elem e;
  set_bytes(&e, bad, n, "/x.png");
  assert_true(tf_run("decode_image", NULL, &e, 1) < 0);
  sl_elem_clear(&e);
  expect_bad(png, n, "{\"max_pixels\": 100}", SL_EINVAL, "exceeds max_pixels 100");
  free(bad);
  free(png);
  uint8_t *wp = NULL;
  n = WebPEncodeLosslessRGB(rgb, w, h, w * 3, &wp);
  expect_bad(wp, n - 10, NULL, SL_ECORRUPT, "WebP");
  expect_bad(wp, 14, NULL, SL_ECORRUPT, "WebP");
  expect_bad(wp, n, "{\"max_pixels\": 100}", SL_EINVAL, "WebP of 32x16 pixels exceeds max_pixels 100");
  WebPFree(wp);
  uint8_t *j = tf_rgb_jpeg(w, h, TJSAMP_420, &n);
  expect_bad(j, n / 2, NULL, SL_ECORRUPT, "corrupt JPEG");
  free(j);
  expect_bad("GIF89a......", 12, NULL, SL_EINVAL, "data is a GIF");
  expect_bad("hello world", 11, NULL, SL_EINVAL, "not a JPEG, PNG or WebP image (starts with 0x68 0x65 0x6c 0x6c)");
  expect_bad("", 0, NULL, SL_EINVAL, "empty image data");
  /* A component that is no byte string. */
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_i64(&e, "image/encoded", 3), 0);
  assert_int_equal(tf_run("decode_image", NULL, &e, 1), SL_EINVAL);
  tf_expect_msg("expected one byte string");
  sl_elem_clear(&e);
  tf_fn f;
  assert_int_equal(tf_open(&f, "decode_image", "{\"channels\": 2}"), SL_EINVAL);
  tf_expect_msg("channels");
  free(rgb);
}

/* Random mutations of a PNG and a WebP: an image or a clean error, never a crash (ASan/valgrind builds catch leaks). */
static void test_mutation(void **st) {
  const int w = 24, h = 24;
  uint8_t *rgb = tf_picture(w, h, 2), *wp = NULL;
  size_t np, nw;
  uint8_t *png = tf_png_encode(rgb, (size_t)w * h * 3, w, h, SPNG_COLOR_TYPE_TRUECOLOR, 8, NULL, &np);
  nw = WebPEncodeLosslessRGB(rgb, w, h, w * 3, &wp);
  uint64_t x = 88172645463325252ull;
  tf_fn f;
  assert_int_equal(tf_open(&f, "decode_image", "{\"max_pixels\": 1000000}"), 0);
  for (int it = 0; it < 400; it++) {
    const uint8_t *src = it & 1 ? wp : png;
    size_t n = it & 1 ? nw : np;
    uint8_t *m = malloc(n);
    memcpy(m, src, n);
    for (int k = 0; k < 1 + it % 4; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      m[x % n] ^= (uint8_t)(x >> 32);
    }
    sl_elem e;
    set_bytes(&e, m, (size_t)(x >> 40) % n + 1, NULL);
    (void)tf_call(&f, &e, 1, (uint64_t)it, NULL);
    sl_elem_clear(&e);
    free(m);
  }
  tf_close(&f);
  free(png);
  WebPFree(wp);
  free(rgb);
}

static void test_read_file(void **st) {
  char *dir = tu_tmpdir("codec");
  const char body[] = "\x00\x01binary\xff";
  char *p = tu_write_file(dir, "a.bin", body, sizeof body);
  sl_elem e;
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_bytes(&e, "filename", NULL, 0, p, strlen(p)), 0);
  assert_int_equal(tf_run("read_file", NULL, &e, 1), 0);
  sl_comp *c = sl_elem_get(&e, "image/encoded");
  assert_non_null(c);
  assert_int_equal(c->size, sizeof body);
  assert_memory_equal(sl_comp_data(c), body, sizeof body);
  assert_non_null(sl_elem_get(&e, "filename")); /* kept: later errors name the file */
  assert_int_equal(tf_run("read_file", "{\"max_bytes\": 3}", &e, 1), SL_EINVAL);
  tf_expect_msg("more than max_bytes 3");
  tf_expect_msg(p);
  sl_elem_clear(&e);
  /* Missing file, a directory. */
  char missing[4096];
  snprintf(missing, sizeof missing, "%s/none.jpg", dir);
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_bytes(&e, "filename", NULL, 0, missing, strlen(missing)), 0);
  assert_int_equal(tf_run("read_file", NULL, &e, 1), SL_ENOTFOUND);
  tf_expect_msg(missing);
  tf_expect_msg("ops[7]: element 0");
  sl_elem_clear(&e);
  sl_elem_init(&e);
  assert_int_equal(sl_elem_set_bytes(&e, "filename", NULL, 0, dir, strlen(dir)), 0);
  assert_int_equal(tf_run("read_file", NULL, &e, 1), SL_EINVAL);
  tf_expect_msg("not a regular file");
  sl_elem_clear(&e);
  free(p);
  tu_rmtree(dir);
  free(dir);
}

/* EXIF orientation: a 64x32 JPEG of four coloured quadrants with an APP1 orientation k, decoded with "orient":
 * the output's size and the colours at its four corners as the EXIF spec describes each orientation. */
static void test_exif_orientation(void **st) {
  const int W = 64, H = 32;
  static const uint8_t COL[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}}; /* R G B W */
  uint8_t *px = malloc((size_t)W * H * 3);
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) memcpy(px + ((size_t)y * W + x) * 3, COL[(y >= H / 2) * 2 + (x >= W / 2)], 3);
  size_t n;
  uint8_t *j = tf_jpeg(px, W, H, TJPF_RGB, TJSAMP_444, 95, &n);
  /* the corners' colours (top-left, top-right, bottom-left, bottom-right) as indices into COL, per orientation */
  static const int WANT[9][4] = {{0}, {0, 1, 2, 3}, {1, 0, 3, 2}, {3, 2, 1, 0}, {2, 3, 0, 1},
                                 {0, 2, 1, 3}, {2, 0, 3, 1}, {3, 1, 2, 0}, {1, 3, 0, 2}};
  for (int k = 1; k <= 8; k++) {
    static const uint8_t APP1[] = {0xFF, 0xE1, 0, 34, 'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1,
                                   0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    uint8_t *e = malloc(n + sizeof APP1);
    memcpy(e, j, 2);
    memcpy(e + 2, APP1, sizeof APP1);
    e[2 + 29] = (uint8_t)k; /* the SHORT value, big-endian */
    memcpy(e + 2 + sizeof APP1, j + 2, n - 2);
    sl_elem el;
    set_bytes(&el, e, n + sizeof APP1, NULL);
    assert_int_equal(tf_run("decode_image", "{\"orient\": true}", &el, 1), 0);
    int64_t h, w, c;
    const uint8_t *img = tf_image(&el, "image", &h, &w, &c);
    assert_int_equal(h, k >= 5 ? W : H);
    assert_int_equal(w, k >= 5 ? H : W);
    const int64_t at[4][2] = {{3, 3}, {3, w - 4}, {h - 4, 3}, {h - 4, w - 4}};
    for (int q = 0; q < 4; q++)
      for (int ch = 0; ch < 3; ch++) {
        int v = img[((size_t)at[q][0] * (size_t)w + (size_t)at[q][1]) * 3 + (size_t)ch];
        if (abs(v - COL[WANT[k][q]][ch]) > 40) fprintf(stderr, "orientation %d corner %d channel %d: %d\n", k, q, ch, v);
        assert_true(abs(v - COL[WANT[k][q]][ch]) <= 40);
      }
    sl_elem_clear(&el);
    /* Without "orient": as stored. */
    set_bytes(&el, e, n + sizeof APP1, NULL);
    assert_int_equal(tf_run("decode_image", NULL, &el, 1), 0);
    tf_image(&el, "image", &h, &w, &c);
    assert_int_equal(h, H);
    sl_elem_clear(&el);
    free(e);
  }
  free(j);
  free(px);
}

static void test_parse_int(void **st) {
  static const struct {
    const char *text;
    int64_t v;
  } OK[] = {{"0", 0}, {"7\n", 7}, {" -12 ", -12}, {"+3", 3}, {"9223372036854775807", INT64_MAX},
            {"-9223372036854775808", INT64_MIN},
            /* as Python's int(bytes), which webdataset's "cls" decoder calls */
            {"1_000", 1000}, {"007\r\n", 7}, {"\v5\f", 5}, {"-0", 0}};
  for (size_t i = 0; i < sizeof OK / sizeof OK[0]; i++) {
    sl_elem e;
    sl_elem_init(&e);
    assert_int_equal(sl_elem_set_bytes(&e, "cls", NULL, 0, OK[i].text, strlen(OK[i].text)), 0);
    assert_int_equal(tf_run("parse_int", NULL, &e, 1), 0);
    sl_comp *c = sl_elem_get(&e, "cls"); /* in place by default */
    assert_int_equal(c->dtype, SL_INT64);
    assert_int_equal(c->rank, 0);
    assert_int_equal(*(const int64_t *)sl_comp_data(c), OK[i].v);
    sl_elem_clear(&e);
  }
  static const char *const BAD[] = {"", " ", "-", "1.5", "12a", "9223372036854775808", "0x10", "-9223372036854775809",
                                     "1__0", "_1", "1_", "+_1", "1 2", "--1", "\xd9\xa3"};
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    sl_elem e;
    sl_elem_init(&e);
    assert_int_equal(sl_elem_set_bytes(&e, "label", NULL, 0, BAD[i], strlen(BAD[i])), 0);
    assert_int_equal(sl_elem_set_bytes(&e, "__key__", NULL, 0, "k9", 2), 0);
    assert_int_equal(sl_elem_set_bytes(&e, "__url__", NULL, 0, "s.tar", 5), 0);
    assert_int_equal(tf_run("parse_int", "{\"component\": \"label\", \"output\": \"y\"}", &e, 1), SL_EINVAL);
    tf_expect_msg("(shard 's.tar', sample 'k9')");
    tf_expect_msg("not an ASCII decimal integer");
    assert_null(sl_elem_get(&e, "y"));
    sl_elem_clear(&e);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_png_layouts),       cmocka_unit_test(test_webp_lossless_exact),
      cmocka_unit_test(test_jpeg_as_decode_jpeg), cmocka_unit_test(test_bad_inputs),
      cmocka_unit_test(test_mutation),          cmocka_unit_test(test_read_file),
      cmocka_unit_test(test_parse_int),         cmocka_unit_test(test_exif_orientation),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  tf_release_all();
  return rc;
}
