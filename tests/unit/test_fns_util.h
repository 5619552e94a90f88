/* test_fns_util.h: helpers for the function tests (header-only, included by tests/unit/test_fns_*.c): run one
 * registered function on an element, make test JPEGs with TurboJPEG, compare images. */
#ifndef SL_TEST_FNS_UTIL_H
#define SL_TEST_FNS_UTIL_H

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spng.h>
#include <turbojpeg.h>

#include "core/args_int.h"
#include "fns/fns_int.h"

#include "testutil.h"

/* A function instance made from args JSON text. */
typedef struct {
  sl__fn fn;
  void *state;
  json_t *obj;
  sl_args args;
} tf_fn;

/* Returns the init result; on success *f is ready. */
static inline int tf_open(tf_fn *f, const char *name, const char *args_json) {
  memset(f, 0, sizeof *f);
  assert_int_equal(sl__fn_lookup(name, &f->fn), 0);
  json_error_t err;
  f->obj = json_loads(args_json ? args_json : "{}", 0, &err);
  if (!f->obj) fprintf(stderr, "bad test args: %s\n", err.text);
  assert_non_null(f->obj);
  f->args.obj = f->obj;
  f->args.path = "ops[1].args";
  f->args.schema = f->fn.schema ? f->fn.schema->args : NULL;
  int rc = f->fn.def.init ? f->fn.def.init(&f->state, &f->args, f->fn.payload) : 0;
  if (rc) {
    json_decref(f->obj);
    f->obj = NULL;
  }
  return rc;
}
/* Args JSON of closed functions stays alive until tf_release_all(): component names in elements point into it. */
static json_t *g_tf_keep[8192];
static int g_tf_nkeep;
static inline void tf_close(tf_fn *f) {
  if (f->fn.def.free && f->state) f->fn.def.free(f->state);
  if (f->obj && g_tf_nkeep < 8192) g_tf_keep[g_tf_nkeep++] = f->obj;
  else json_decref(f->obj);
  memset(f, 0, sizeof *f);
}
static inline void tf_release_all(void) {
  while (g_tf_nkeep) json_decref(g_tf_keep[--g_tf_nkeep]);
}
/* Calls the function on e with the given seed and index; *keep gets call.keep when not NULL. */
static inline int tf_call(tf_fn *f, sl_elem *e, uint64_t seed, uint64_t index, bool *keep) {
  sl_fn_call call = {index, seed, true, "ops[7]"};
  sl_error_clear();
  int rc = f->fn.def.call(f->state, e, &call);
  if (keep) *keep = call.keep;
  return rc;
}
/* One-shot: open, call, close; asserts init succeeds. */
static inline int tf_run(const char *name, const char *args_json, sl_elem *e, uint64_t seed) {
  tf_fn f;
  int rc = tf_open(&f, name, args_json);
  if (rc) fprintf(stderr, "init failed: %s\n", sl_error_last());
  assert_int_equal(rc, 0);
  rc = tf_call(&f, e, seed, 0, NULL);
  tf_close(&f);
  return rc;
}
static inline void tf_expect_msg(const char *needle) {
  if (!strstr(sl_error_last(), needle)) fprintf(stderr, "message '%s' lacks '%s'\n", sl_error_last(), needle);
  assert_non_null(strstr(sl_error_last(), needle));
}

/* A smooth-plus-edges RGB test picture. Caller frees. */
static inline uint8_t *tf_picture(int w, int h, unsigned seed) {
  uint8_t *p = malloc((size_t)w * h * 3);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      uint8_t *q = p + ((size_t)y * w + x) * 3;
      int in = (x - w / 3) * (x - w / 3) + (y - h / 2) * (y - h / 2) < (h / 4) * (h / 4);
      q[0] = (uint8_t)((x * 255) / w);
      q[1] = (uint8_t)((y * 255) / h);
      q[2] = (uint8_t)(in ? 220 : (((x / 7 + y / 5 + (int)seed) % 3) * 60 + 30));
    }
  return p;
}
/* Encodes pixels (pf TJPF_RGB, TJPF_GRAY or TJPF_CMYK) to a malloc'd JPEG. */
static int g_tf_jpeg_flags = TJFLAG_ACCURATEDCT; /* tests may add TJFLAG_PROGRESSIVE */
static inline uint8_t *tf_jpeg(const uint8_t *px, int w, int h, int pf, int samp, int quality, size_t *len) {
  tjhandle t = tjInitCompress();
  unsigned char *j = NULL;
  unsigned long n = 0;
  int rc = tjCompress2(t, px, w, 0, h, pf, &j, &n, samp, quality, g_tf_jpeg_flags);
  if (rc) fprintf(stderr, "tjCompress2: %s\n", tjGetErrorStr2(t));
  assert_int_equal(rc, 0);
  tjDestroy(t);
  uint8_t *out = malloc(n);
  memcpy(out, j, n);
  tjFree(j);
  *len = n;
  return out;
}
/* A PNG of w x h pixels in the given colour type and bit depth from raw rows (packed as PNG stores them). */
static inline uint8_t *tf_png_encode(const void *px, size_t pxlen, int w, int h, int ctype, int depth, const struct spng_plte *plte,
                                         size_t *len) {
  spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  assert_non_null(ctx);
  assert_int_equal(spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1), 0);
  struct spng_ihdr ih = {(uint32_t)w, (uint32_t)h, (uint8_t)depth, (uint8_t)ctype, 0, 0, 0};
  assert_int_equal(spng_set_ihdr(ctx, &ih), 0);
  if (plte) assert_int_equal(spng_set_plte(ctx, (struct spng_plte *)plte), 0);
  assert_int_equal(spng_encode_image(ctx, px, pxlen, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE), 0);
  int err = 0;
  uint8_t *out = spng_get_png_buffer(ctx, len, &err);
  assert_int_equal(err, 0);
  spng_ctx_free(ctx);
  return out; /* free() */
}

static inline uint8_t *tf_rgb_jpeg(int w, int h, int samp, size_t *len) {
  uint8_t *p = tf_picture(w, h, 1);
  uint8_t *j = tf_jpeg(p, w, h, TJPF_RGB, samp, 92, len);
  free(p);
  return j;
}
/* Mean and max absolute difference of two byte arrays. */
static inline double tf_mad(const uint8_t *a, const uint8_t *b, size_t n, int *maxd) {
  double s = 0;
  int m = 0;
  for (size_t i = 0; i < n; i++) {
    int d = abs((int)a[i] - (int)b[i]);
    s += d;
    if (d > m) m = d;
  }
  if (maxd) *maxd = m;
  return n ? s / (double)n : 0;
}
/* The uint8 HWC component `name` of e (asserted present). */
static inline const uint8_t *tf_image(sl_elem *e, const char *name, int64_t *h, int64_t *w, int64_t *c) {
  sl_comp *x = sl_elem_get(e, name);
  assert_non_null(x);
  assert_int_equal(x->dtype, SL_UINT8);
  assert_int_equal(x->rank, 3);
  *h = x->shape[0];
  *w = x->shape[1];
  *c = x->shape[2];
  return sl_comp_data(x);
}
#endif
