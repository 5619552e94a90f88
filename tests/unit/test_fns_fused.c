/* test_fns_fused.c: decode_and_crop_jpeg as the planner's fused op (plan/plan_fuse.c) against what it replaces:
 * decode_jpeg then random_resized_crop, center_crop or resize. The same windows for the same seeds, pixels within
 * the documented bound (docs/functions.md: mean absolute difference about 2 on photo-like pictures, <= 6 on this
 * file's striped test picture), exact where the DCT
 * scale is 1 and nothing is resampled; odd sizes, borders, images smaller than the output, grayscale, CMYK, 4:2:0,
 * 4:4:4, progressive; a corrupt or truncated JPEG fails with decode_jpeg's error code. SL_TEST_TIMEOUT(300) */
#include "test_fns_util.h"

#include "fns/image_int.h"

static void set_jpeg(sl_elem *e, const uint8_t *j, size_t n) {
  sl_elem_init(e);
  assert_int_equal(sl_elem_set_bytes(e, "image/encoded", NULL, 0, j, n), 0);
}

/* Runs decode_jpeg(dargs) + crop_fn(cargs) on one copy and decode_and_crop_jpeg(fargs) on another, same seed.
 * Returns the mean abs difference (max in *maxd); asserts the shapes agree. rc of both runs in *rc (equal). */
static double compare(const uint8_t *j, size_t n, const char *dargs, const char *crop_fn, const char *cargs,
                      const char *fargs, uint64_t seed, int *maxd) {
  sl_elem a, b;
  set_jpeg(&a, j, n);
  set_jpeg(&b, j, n);
  int ra = tf_run("decode_jpeg", dargs, &a, seed);
  if (!ra) ra = tf_run(crop_fn, cargs, &a, seed);
  int rb = tf_run("decode_and_crop_jpeg", fargs, &b, seed);
  if (ra != rb) fprintf(stderr, "unfused rc %d, fused rc %d: %s\n", ra, rb, sl_error_last());
  assert_int_equal(ra, rb);
  double mad = -1;
  if (!ra) {
    int64_t h, w, c, h2, w2, c2;
    const uint8_t *x = tf_image(&a, "image", &h, &w, &c), *y = tf_image(&b, "image", &h2, &w2, &c2);
    assert_int_equal(h, h2);
    assert_int_equal(w, w2);
    assert_int_equal(c, c2);
    mad = tf_mad(x, y, (size_t)(h * w * c), maxd);
  }
  sl_elem_clear(&a);
  sl_elem_clear(&b);
  return mad;
}

/* Test pictures: photo-like (smooth plus edges) in the colour spaces and subsamplings of the issue. */
typedef struct {
  const char *name;
  uint8_t *j;
  size_t n;
  int w, h;
} pic;

static pic make(const char *name, int w, int h, int pf, int samp, bool progressive) {
  uint8_t *px = tf_picture(w, h, 3);
  uint8_t *in = px;
  if (pf == TJPF_GRAY || pf == TJPF_CMYK) {
    int ch = pf == TJPF_GRAY ? 1 : 4;
    in = malloc((size_t)w * h * ch);
    for (int i = 0; i < w * h; i++) {
      const uint8_t *q = px + i * 3;
      if (ch == 1) in[i] = (uint8_t)((q[0] * 77 + q[1] * 150 + q[2] * 29) >> 8);
      else {
        int k = q[0] > q[1] ? (q[0] > q[2] ? q[0] : q[2]) : (q[1] > q[2] ? q[1] : q[2]);
        if (k == 0) k = 1;
        in[i * 4] = (uint8_t)(q[0] * 255 / k), in[i * 4 + 1] = (uint8_t)(q[1] * 255 / k);
        in[i * 4 + 2] = (uint8_t)(q[2] * 255 / k), in[i * 4 + 3] = (uint8_t)k;
      }
    }
  }
  int saved = g_tf_jpeg_flags;
  if (progressive) g_tf_jpeg_flags |= TJFLAG_PROGRESSIVE;
  pic p = {name, NULL, 0, w, h};
  p.j = tf_jpeg(in, w, h, pf, pf == TJPF_GRAY ? TJSAMP_GRAY : samp, 92, &p.n);
  g_tf_jpeg_flags = saved;
  if (in != px) free(in);
  free(px);
  return p;
}

static int make_all(pic *p) {
  int k = 0;
  p[k++] = make("444", 400, 350, TJPF_RGB, TJSAMP_444, false);
  p[k++] = make("420 odd", 333, 251, TJPF_RGB, TJSAMP_420, false);
  p[k++] = make("gray", 301, 199, TJPF_GRAY, 0, false);
  p[k++] = make("cmyk", 161, 121, TJPF_CMYK, TJSAMP_444, false);
  p[k++] = make("progressive 420", 400, 300, TJPF_RGB, TJSAMP_420, true);
  p[k++] = make("small", 50, 41, TJPF_RGB, TJSAMP_420, false);
  return k;
}
static void free_all(pic *p, int n) {
  for (int i = 0; i < n; i++) free(p[i].j);
}

/* random_resized_crop: the same seed gives the same window; the pixels differ by the resampling only. */
static void test_rrc_fused_within_bound(void **st) {
  pic p[8];
  int np = make_all(p);
  const char *sizes[] = {"[224, 224]", "[96, 96]", "[37, 53]"};
  for (int i = 0; i < np; i++)
    for (int s = 0; s < 3; s++) {
      char cargs[96], fargs[128];
      snprintf(cargs, sizeof cargs, "{\"size\": %s}", sizes[s]);
      snprintf(fargs, sizeof fargs, "{\"random\": true, \"size\": %s, \"channels\": 0}", sizes[s]);
      double worst = 0;
      for (uint64_t seed = 1; seed <= 8; seed++) {
        int maxd;
        double mad = compare(p[i].j, p[i].n, "{\"channels\": 0}", "random_resized_crop", cargs, fargs, seed, &maxd);
        if (mad > worst) worst = mad;
      }
      fprintf(stderr, "rrc %-16s %-10s worst mean abs diff %.2f\n", p[i].name, sizes[s], worst);
      assert_true(worst <= 6.0);
    }
  free_all(p, np);
}

/* A picture whose red and green encode x and y: a window off by a few pixels would shift them by as many levels. */
static void test_rrc_same_windows(void **st) {
  int w = 255, h = 255;
  uint8_t *px = malloc((size_t)w * h * 3);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) px[(y * w + x) * 3] = (uint8_t)x, px[(y * w + x) * 3 + 1] = (uint8_t)y, px[(y * w + x) * 3 + 2] = 128;
  size_t n;
  uint8_t *j = tf_jpeg(px, w, h, TJPF_RGB, TJSAMP_444, 98, &n);
  for (uint64_t seed = 1; seed <= 40; seed++) {
    int maxd;
    double mad = compare(j, n, NULL, "random_resized_crop", "{\"size\": [64, 64]}",
                         "{\"random\": true, \"size\": [64, 64]}", seed, &maxd);
    if (mad > 1.0) fprintf(stderr, "seed %llu: mean abs diff %.2f on the gradient\n", (unsigned long long)seed, mad);
    assert_true(mad <= 1.0);
  }
  free(j);
  free(px);
}

/* center_crop (never resized) and resize to the image's own size: the fused op decodes at scale 1, so it is exact. */
static void test_exact_at_scale_one(void **st) {
  pic p[8];
  int np = make_all(p);
  for (int i = 0; i < np; i++) {
    int ch = p[i].h * 3 / 4, cw = p[i].w / 2 + 1;
    char cargs[96], fargs[96];
    int maxd;
    snprintf(cargs, sizeof cargs, "{\"size\": [%d, %d]}", ch, cw);
    snprintf(fargs, sizeof fargs, "{\"center\": [%d, %d], \"channels\": 0}", ch, cw);
    assert_true(compare(p[i].j, p[i].n, "{\"channels\": 0}", "center_crop", cargs, fargs, 1, &maxd) == 0.0);
    assert_int_equal(maxd, 0);
    assert_true(compare(p[i].j, p[i].n, "{\"channels\": 0}", "center_crop", "{\"fraction\": 0.875}",
                        "{\"center_fraction\": 0.875, \"channels\": 0}", 1, &maxd) == 0.0);
    assert_int_equal(maxd, 0);
    snprintf(cargs, sizeof cargs, "{\"size\": [%d, %d]}", p[i].h, p[i].w);
    snprintf(fargs, sizeof fargs, "{\"full\": true, \"size\": [%d, %d], \"channels\": 0}", p[i].h, p[i].w);
    assert_true(compare(p[i].j, p[i].n, "{\"channels\": 0}", "resize", cargs, fargs, 1, &maxd) == 0.0);
    /* Windows at every border, decoded at scale 1 without a resize. */
    int wins[4][2] = {{0, 0}, {0, p[i].w - cw}, {p[i].h - ch, 0}, {p[i].h - ch, p[i].w - cw}};
    for (int k = 0; k < 4; k++) {
      sl_elem a, b;
      set_jpeg(&a, p[i].j, p[i].n);
      set_jpeg(&b, p[i].j, p[i].n);
      snprintf(fargs, sizeof fargs, "{\"crop\": [%d, %d, %d, %d], \"channels\": 0}", wins[k][0], wins[k][1], ch, cw);
      assert_int_equal(tf_run("decode_and_crop_jpeg", fargs, &a, 1), 0);
      assert_int_equal(tf_run("decode_jpeg", "{\"channels\": 0}", &b, 1), 0);
      int64_t h, w, c, h2, w2, c2;
      const uint8_t *x = tf_image(&a, "image", &h, &w, &c), *y = tf_image(&b, "image", &h2, &w2, &c2);
      for (int r = 0; r < ch; r++)
        assert_memory_equal(x + (size_t)r * cw * c, y + ((size_t)(wins[k][0] + r) * w2 + wins[k][1]) * c2, (size_t)cw * c);
      sl_elem_clear(&a);
      sl_elem_clear(&b);
    }
  }
  free_all(p, np);
}

/* resize fused: scaled decode then the resizer, against a full decode then the resizer. */
static void test_resize_fused_within_bound(void **st) {
  pic p[8];
  int np = make_all(p);
  for (int i = 0; i < np; i++) {
    int maxd;
    double a = compare(p[i].j, p[i].n, NULL, "resize", "{\"size\": [64, 80]}", "{\"full\": true, \"size\": [64, 80]}", 1, &maxd);
    double b = compare(p[i].j, p[i].n, NULL, "resize", "{\"shorter_side\": 33}", "{\"full\": true, \"shorter_side\": 33}", 1, &maxd);
    fprintf(stderr, "resize %-16s mean abs diff %.2f (size), %.2f (shorter_side)\n", p[i].name, a, b);
    assert_true(a <= 6.0 && b <= 6.0);
  }
  free_all(p, np);
}

/* Errors: the fused op fails where decode_jpeg + the crop fails, with the same code. */
static void test_errors_match(void **st) {
  pic p = make("420", 320, 240, TJPF_RGB, TJSAMP_420, false);
  /* Truncated at several points (the window may lie wholly above the cut). */
  for (int cut = 30; cut <= 95; cut += 13) {
    size_t m = p.n * (size_t)cut / 100;
    int maxd;
    compare(p.j, m, NULL, "random_resized_crop", "{\"size\": [32, 32]}", "{\"random\": true, \"size\": [32, 32]}", 3, &maxd);
    compare(p.j, m, NULL, "center_crop", "{\"size\": [16, 16]}", "{\"center\": [16, 16]}", 3, &maxd);
    sl_elem e;
    set_jpeg(&e, p.j, m);
    assert_int_equal(tf_run("decode_and_crop_jpeg", "{\"crop\": [0, 0, 16, 16]}", &e, 1), SL_ECORRUPT);
    tf_expect_msg("corrupt JPEG");
    sl_elem_clear(&e);
  }
  /* Bytes flipped in the entropy-coded data: both fail or both succeed, with the same code. */
  uint8_t *m = malloc(p.n);
  uint64_t r = 99;
  for (int t = 0; t < 60; t++) {
    memcpy(m, p.j, p.n);
    for (int k = 0; k < 3; k++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      size_t at = p.n / 3 + (size_t)((r >> 33) % (p.n * 2 / 3 - 2));
      m[at] ^= (uint8_t)(1u << ((r >> 20) % 8));
    }
    int maxd;
    compare(m, p.n, NULL, "random_resized_crop", "{\"size\": [32, 32]}", "{\"random\": true, \"size\": [32, 32]}",
            (uint64_t)t, &maxd);
  }
  free(m);
  /* Not a JPEG; a centred window larger than the image. */
  int maxd;
  compare((const uint8_t *)"GIF89a..", 8, NULL, "center_crop", "{\"size\": [4, 4]}", "{\"center\": [4, 4]}", 1, &maxd);
  /* A centred window larger than the image (240 x 320): padded with 0 by both, the same pixels. */
  assert_true(compare(p.j, p.n, NULL, "center_crop", "{\"size\": [241, 10]}", "{\"center\": [241, 10]}", 1, &maxd) == 0.0);
  assert_true(compare(p.j, p.n, NULL, "center_crop", "{\"size\": [243, 323]}", "{\"center\": [243, 323]}", 1, &maxd) == 0.0);
  free(p.j);
}

/* Runs f on e with the seeds a fused op's call carries ([crop, flip]). */
static int call_seeds(tf_fn *f, sl_elem *e, uint64_t crop_seed, uint64_t flip_seed) {
  uint64_t seeds[2] = {crop_seed, flip_seed};
  sl_fn_call call = {0, crop_seed, true, "ops[7]", seeds, 2};
  sl_error_clear();
  return f->fn.def.call(f->state, e, &call);
}

/* The output pass (random_flip and normalize folded in): the same values as decode_and_crop_jpeg then random_flip
 * (seeded with the flip's seed) then normalize, on every picture kind and every decode path (resampled with the
 * pass inside the resampler, resized by another method, not resized, CMYK); uint8 when normalize is off. A corrupt
 * JPEG fails alike with and without the pass. */
static void test_output_pass_equals_flip_normalize(void **st) {
  pic p[8];
  int np = make_all(p);
  const char *modes[] = {"\"random\": true, \"size\": [40, 56]", "\"random\": true, \"size\": [33, 31], \"method\": \"area\"",
                         "\"random\": true, \"size\": [24, 24], \"method\": \"bicubic\"", "\"center\": [30, 20]",
                         "\"crop\": [3, 5, 17, 29]", "\"full\": true, \"size\": [64, 64], \"method\": \"nearest\""};
  int flips = 0, calls = 0;
  for (int i = 0; i < np; i++)
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++)
      for (int norm = 0; norm < 2; norm++) {
        bool gray = !strcmp(p[i].name, "gray");
        const char *nargs = gray ? "\"mean\": [100], \"std\": [50], \"value_scale\": 2" : "";
        char plain[256], fused[512], normargs[128];
        snprintf(plain, sizeof plain, "{%s}", modes[m]);
        snprintf(fused, sizeof fused, "{%s, \"flip_prob\": 0.5%s%s%s}", modes[m], norm ? ", \"normalize\": true" : "",
                 norm && gray ? ", " : "", norm ? nargs : "");
        snprintf(normargs, sizeof normargs, "{%s}", gray ? "\"mean\": [100], \"std\": [50], \"scale\": 2" : "");
        tf_fn dec, fl, nm, fu;
        assert_int_equal(tf_open(&dec, "decode_and_crop_jpeg", plain), 0);
        assert_int_equal(tf_open(&fl, "random_flip", "{\"prob\": 0.5}"), 0);
        assert_int_equal(tf_open(&nm, "normalize", normargs), 0);
        if (tf_open(&fu, "decode_and_crop_jpeg", fused)) fprintf(stderr, "%s: %s\n", fused, sl_error_last());
        for (uint64_t seed = 1; seed <= 6; seed++) {
          uint64_t fseed = sl__mix64(seed + 1000);
          sl_elem a, b, c;
          set_jpeg(&a, p[i].j, p[i].n);
          set_jpeg(&b, p[i].j, p[i].n);
          set_jpeg(&c, p[i].j, p[i].n);
          assert_int_equal(tf_call(&dec, &a, seed, 0, NULL), 0);
          assert_int_equal(tf_call(&fl, &a, fseed, 0, NULL), 0);
          if (norm) assert_int_equal(tf_call(&nm, &a, 0, 0, NULL), 0);
          int rc = call_seeds(&fu, &b, seed, fseed);
          if (rc) fprintf(stderr, "%s %s: %s\n", p[i].name, fused, sl_error_last());
          assert_int_equal(rc, 0);
          assert_int_equal(tf_call(&dec, &c, seed, 0, NULL), 0); /* unflipped, to count the flips */
          sl_comp *x = sl_elem_get(&a, "image"), *y = sl_elem_get(&b, "image"), *z = sl_elem_get(&c, "image");
          assert_int_equal(x->dtype, y->dtype);
          assert_int_equal(y->dtype, norm ? SL_FLOAT32 : SL_UINT8);
          assert_int_equal(x->rank, 3);
          for (int d = 0; d < 3; d++) assert_int_equal(x->shape[d], y->shape[d]);
          if (norm) {
            const float *u = sl_comp_data(x), *v = sl_comp_data(y);
            for (int64_t k = 0; k < sl_comp_count(x); k++) assert_true(fabsf(u[k] - v[k]) <= 1e-5f * (1 + fabsf(u[k])));
          } else {
            assert_memory_equal(sl_comp_data(x), sl_comp_data(y), x->size);
            flips += memcmp(sl_comp_data(y), sl_comp_data(z), z->size) != 0;
            calls++;
          }
          sl_elem_clear(&a);
          sl_elem_clear(&b);
          sl_elem_clear(&c);
        }
        tf_close(&dec);
        tf_close(&fl);
        tf_close(&nm);
        tf_close(&fu);
      }
  /* Both decisions were taken (a flip of a symmetric crop could hide one, not a third of them). */
  assert_true(flips > calls / 4 && flips < calls * 3 / 4);
  /* Errors: a truncated JPEG fails with the pass as without; 3 mean values on a gray image are refused. */
  for (int i = 0; i < np; i++) {
    sl_elem e;
    set_jpeg(&e, p[i].j, p[i].n / 2);
    tf_fn fu;
    assert_int_equal(tf_open(&fu, "decode_and_crop_jpeg", "{\"crop\": [0, 0, 8, 8], \"flip_prob\": 1, \"normalize\": true}"), 0);
    assert_int_equal(call_seeds(&fu, &e, 1, 2), SL_ECORRUPT);
    tf_close(&fu);
    sl_elem_clear(&e);
  }
  sl_elem e;
  set_jpeg(&e, p[2].j, p[2].n);
  tf_fn fu;
  assert_int_equal(tf_open(&fu, "decode_and_crop_jpeg", "{\"crop\": [0, 0, 8, 8], \"normalize\": true, \"channels\": 0}"), 0);
  assert_int_equal(call_seeds(&fu, &e, 1, 2), SL_EINVAL);
  tf_expect_msg("mean has 3 values");
  tf_close(&fu);
  sl_elem_clear(&e);
  const char *bad[] = {"{\"random\": true, \"flip_prob\": 1.5}", "{\"random\": true, \"mean\": [1, 2, 3]}",
                       "{\"random\": true, \"normalize\": true, \"std\": [1, 0, 1]}"};
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    assert_int_equal(tf_open(&fu, "decode_and_crop_jpeg", bad[k]), SL_EINVAL);
    tf_expect_msg("ops[1].args");
  }
  free_all(p, np);
}

static void test_mode_args(void **st) {
  tf_fn f;
  const char *bad[] = {"{\"random\": true, \"center\": [4, 4]}", "{\"center\": [4, 4], \"size\": [4, 4]}",
                       "{\"full\": true}", "{\"shorter_side\": 10}", "{\"center_fraction\": 1.5}",
                       "{\"full\": true, \"size\": [4, 4], \"shorter_side\": 4}", "{\"center\": [0, 4]}"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(tf_open(&f, "decode_and_crop_jpeg", bad[i]), SL_EINVAL);
    tf_expect_msg("ops[1].args");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rrc_fused_within_bound), cmocka_unit_test(test_rrc_same_windows),
      cmocka_unit_test(test_exact_at_scale_one),     cmocka_unit_test(test_resize_fused_within_bound),
      cmocka_unit_test(test_errors_match),           cmocka_unit_test(test_mode_args),
      cmocka_unit_test(test_output_pass_equals_flip_normalize),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  tf_release_all();
  return rc;
}
