/* fns/fn_image.c: image functions on decoded HWC tensors: `random_resized_crop`, `resize`, `random_flip`,
 * `center_crop`, `normalize`, `cast`, `pad_boxes`; plus the crop-window sampler and the resizer they share with
 * the JPEG decoder. Bilinear and area resizing of uint8 images is resample_u8.c's fixed-point filter (2-2.7x
 * stb_image_resize's CPU on 224x224 crops). libyuv was measured first: 10x faster still, but its RGB scaler is plain
 * bilinear below 2x and has no box filter above, so on our grainy photo-like images it lands 6-11 levels (mean)
 * from an antialiased reference, where the bound is 2; OpenCV's INTER_AREA was no faster than stb, INTER_LINEAR
 * aliases too. Bicubic and float32 stay on stb_image_resize (v0.97, Debian's libstb-dev), a separable polyphase
 * filter with antialiasing, its allocations routed through sluice's allocator. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fns/image_int.h"

#define STBIR_MALLOC(size, ctx) ((void)(ctx), sl__malloc(size))
#define STBIR_FREE(ptr, ctx) ((void)(ctx), sl__free(ptr))
/* v0.97's debug asserts include a coefficient-sum check that trips on some legitimate ratios (e.g. 31 -> 24 with the
 * triangle filter) just before it renormalises those coefficients anyway (fixed in stb's 2.x rewrite); sizes are
 * validated before every call (dims_ok), so the asserts are compiled out. */
#define STBIR_ASSERT(x) ((void)sizeof(x))
#define STB_IMAGE_RESIZE_IMPLEMENTATION
#define STB_IMAGE_RESIZE_STATIC
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("O3") /* stb's scanline loops gain ~10-20% from vectorisation */
#endif
#include <stb/stb_image_resize.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop

/* ---------------- shared pieces ---------------- */

void sl__crop_sample(sl_rng *r, int64_t H, int64_t W, const double scale[2], const double ratio[2], sl__win *out) {
  double area = (double)H * (double)W, lr0 = log(ratio[0]), lr1 = log(ratio[1]);
  for (int attempt = 0; attempt < 10; attempt++) {
    double target = area * (scale[0] + (scale[1] - scale[0]) * sl_rng_uniform(r));
    double ar = exp(lr0 + (lr1 - lr0) * sl_rng_uniform(r));
    int64_t w = (int64_t)llround(sqrt(target * ar)), h = (int64_t)llround(sqrt(target / ar));
    if (w > 0 && h > 0 && w <= W && h <= H) {
      out->h = h;
      out->w = w;
      out->y = (int64_t)(sl_rng_u64(r) % (uint64_t)(H - h + 1));
      out->x = (int64_t)(sl_rng_u64(r) % (uint64_t)(W - w + 1));
      return;
    }
  }
  /* Fallback: a centred crop of the whole image, its ratio clamped into range. */
  double in_ratio = (double)W / (double)H;
  int64_t w = W, h = H;
  if (in_ratio < ratio[0]) h = (int64_t)llround((double)w / ratio[0]);
  else if (in_ratio > ratio[1]) w = (int64_t)llround((double)h * ratio[1]);
  if (h < 1) h = 1;
  if (w < 1) w = 1;
  if (h > H) h = H;
  if (w > W) w = W;
  out->h = h;
  out->w = w;
  out->y = (H - h) / 2;
  out->x = (W - w) / 2;
}

int sl__resize_method_parse(int *out, const char *name, const char *path) {
  static const char *const names[] = {"bilinear", "area", "bicubic", "nearest"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(name, names[i])) {
      *out = i;
      return 0;
    }
  return sl__err(SL_EINVAL, "%s.method: unknown resize method '%s' (bilinear, area, bicubic, nearest)", path, name);
}

static stbir_filter stb_filter(int method) {
  switch (method) {
  case SL__RESIZE_AREA: return STBIR_FILTER_BOX;
  case SL__RESIZE_BICUBIC: return STBIR_FILTER_CATMULLROM;
  default: return STBIR_FILTER_TRIANGLE;
  }
}

static void nearest(const uint8_t *src, int64_t sh, int64_t sw, size_t sstride, uint8_t *dst, int64_t dh, int64_t dw,
                    size_t esz) {
  for (int64_t y = 0; y < dh; y++) {
    const uint8_t *row = src + (size_t)((y * sh + sh / 2) / dh < sh ? (y * sh + sh / 2) / dh : sh - 1) * sstride;
    for (int64_t x = 0; x < dw; x++) {
      int64_t sx = (x * sw + sw / 2) / dw;
      if (sx >= sw) sx = sw - 1;
      memcpy(dst, row + (size_t)sx * esz, esz);
      dst += esz;
    }
  }
}

/* stb takes int sizes and strides: every row, in and out, must stay below 2 GiB. */
static int dims_ok(int64_t sh, int64_t sw, int64_t dh, int64_t dw, size_t sstride, size_t px) {
  if (sh < 1 || sw < 1 || dh < 1 || dw < 1 || sh > INT32_MAX / 4 || sw > INT32_MAX / 4 || dh > INT32_MAX / 4 ||
      dw > INT32_MAX / 4 || sstride > INT32_MAX / 2 || (size_t)dw * px > INT32_MAX / 2 || (size_t)sw * px > sstride)
    return sl__err(SL_EINVAL, "resize: bad size %lldx%lld -> %lldx%lld", (long long)sh, (long long)sw, (long long)dh,
                   (long long)dw);
  return 0;
}

int sl__resize_u8(const uint8_t *src, int64_t sh, int64_t sw, size_t sstride, uint8_t *dst, int64_t dh, int64_t dw,
                  int c, int method) {
  int rc = dims_ok(sh, sw, dh, dw, sstride, (size_t)c);
  if (rc) return rc;
  if (method == SL__RESIZE_NEAREST) {
    nearest(src, sh, sw, sstride, dst, dh, dw, (size_t)c);
    return 0;
  }
  if (method == SL__RESIZE_BILINEAR || method == SL__RESIZE_AREA)
    return sl__resample_u8(src, (int)sh, (int)sw, sstride, dst, (int)dh, (int)dw, c, method == SL__RESIZE_AREA);
  if (!stbir_resize_uint8_generic(src, (int)sw, (int)sh, (int)sstride, dst, (int)dw, (int)dh, 0, c,
                                  STBIR_ALPHA_CHANNEL_NONE, 0, STBIR_EDGE_CLAMP, stb_filter(method),
                                  STBIR_COLORSPACE_LINEAR, NULL))
    return sl__oom("resize scratch");
  return 0;
}

int sl__resize_f32(const float *src, int64_t sh, int64_t sw, size_t sstride, float *dst, int64_t dh, int64_t dw,
                   int c, int method) {
  int rc = dims_ok(sh, sw, dh, dw, sstride, (size_t)c * sizeof(float));
  if (rc) return rc;
  if (method == SL__RESIZE_NEAREST) {
    nearest((const uint8_t *)src, sh, sw, sstride, (uint8_t *)dst, dh, dw, (size_t)c * sizeof(float));
    return 0;
  }
  if (!stbir_resize_float_generic(src, (int)sw, (int)sh, (int)sstride, dst, (int)dw, (int)dh, 0, c,
                                  STBIR_ALPHA_CHANNEL_NONE, 0, STBIR_EDGE_CLAMP, stb_filter(method),
                                  STBIR_COLORSPACE_LINEAR, NULL))
    return sl__oom("resize scratch");
  return 0;
}

static int elem_err(const sl_fn_call *call, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int elem_err(const sl_fn_call *call, int code, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return sl__err(code, "%s: element %llu: %s", call->op_path, (unsigned long long)call->index, msg);
}

void sl__normalize_defaults(const sl_args *a, double *mean, int *nmean, double *std, int *nstd) {
  if (!sl_args_has(a, "mean")) {
    static const double m[3] = {123.675, 116.28, 103.53}, d[3] = {58.395, 57.12, 57.375};
    memcpy(mean, m, sizeof m);
    *nmean = 3;
    if (!sl_args_has(a, "std")) {
      memcpy(std, d, sizeof d);
      *nstd = 3;
    }
  }
  if (*nstd == 0) {
    std[0] = 1.0;
    *nstd = 1;
  }
}

int sl__px_args_parse(sl__px_args *s, const sl_args *a) {
  int rc;
  s->has_flip = sl_args_has(a, "flip_prob");
  s->nmean = s->nstd = 0;
  if ((rc = sl__get_num_or(&s->flip_prob, a, "flip_prob", 0.5)) || (rc = sl__get_bool(&s->normalize, a, "normalize")) ||
      (rc = sl__get_num(&s->value_scale, a, "value_scale")) ||
      (rc = sl__get_nums(s->mean, &s->nmean, a, "mean", 4)) || (rc = sl__get_nums(s->std, &s->nstd, a, "std", 4)))
    return rc;
  if (!(s->flip_prob >= 0 && s->flip_prob <= 1))
    return sl__err(SL_EINVAL, "%s.flip_prob: must be in [0, 1]", sl_args_path(a));
  bool any = sl_args_has(a, "mean") || sl_args_has(a, "std") || sl_args_has(a, "value_scale");
  if (any && !s->normalize)
    return sl__err(SL_EINVAL, "%s: \"mean\", \"std\" and \"value_scale\" need \"normalize\": true", sl_args_path(a));
  sl__normalize_defaults(a, s->mean, &s->nmean, s->std, &s->nstd);
  if (s->nmean < 1) return sl__err(SL_EINVAL, "%s.mean: needs at least one value", sl_args_path(a));
  for (int i = 0; i < s->nstd; i++)
    if (s->std[i] == 0) return sl__err(SL_EINVAL, "%s.std[%d]: must not be 0", sl_args_path(a), i);
  return 0;
}

sl__px_out sl__px_draw(const sl__px_args *s, const sl_fn_call *call) {
  sl__px_out px = {0};
  if (s->has_flip) { /* random_flip's draw: one uniform against prob */
    sl_rng fr;
    sl_rng_seed(&fr, call->nseeds >= 2 && call->seeds ? call->seeds[1] : sl__mix64(call->seed ^ 0xf11bu));
    px.flip = sl_rng_uniform(&fr) < s->flip_prob;
  }
  px.f32 = s->normalize;
  return px;
}

bool sl__px_norm(sl__px_out *o, int c, int nmean, const double *mean, int nstd, const double *std, double value_scale) {
  if (c < 1 || c > 4 || (nmean != 1 && nmean != c) || (nstd != 1 && nstd != c)) return false;
  for (int k = 0; k < c; k++) { /* normalize's own arithmetic (norm_call) */
    double m = mean[nmean == 1 ? 0 : k], d = std[nstd == 1 ? 0 : k];
    o->mul[k] = (float)(value_scale / d);
    o->add[k] = (float)(-m / d);
  }
  return true;
}

int sl__image_dims(const sl_comp *img, const sl_fn_call *call, int64_t *h, int64_t *w, int64_t *c) {
  if ((img->dtype != SL_UINT8 && img->dtype != SL_FLOAT32) || (img->rank != 3 && img->rank != 2))
    return elem_err(call, SL_EINVAL, "'%s' is %s rank %d; expected an image (uint8 or float32, HWC or HW)",
                    img->name, sl_dtype_name(img->dtype), img->rank);
  *h = img->shape[0];
  *w = img->shape[1];
  *c = img->rank == 3 ? img->shape[2] : 1;
  if (*h < 1 || *w < 1 || *c < 1)
    return elem_err(call, SL_EINVAL, "'%s' is a zero-sized image (%lldx%lldx%lld)", img->name, (long long)*h,
                    (long long)*w, (long long)*c);
  return 0;
}

/* A reference-holding copy of a component, so that an output of the same name may replace it. */
static void comp_hold(sl_comp *dst, const sl_comp *src) {
  *dst = *src;
  if (dst->buf) sl_buf_ref(dst->buf);
  if (dst->offs) sl_buf_ref(dst->offs);
}
static void comp_release(sl_comp *c) {
  sl_buf_unref(c->buf);
  sl_buf_unref(c->offs);
}

/* Crops `win` out of img and resizes it to dh x dw into a new component `out` of the same dtype and rank. */
static int crop_resize(sl_elem *e, const char *out, const sl_comp *img, int64_t c, const sl__win *win, int64_t dh,
                       int64_t dw, int method) {
  sl_comp src;
  comp_hold(&src, img);
  int64_t shape[3] = {dh, dw, c};
  void *data;
  int rc = sl_elem_new_tensor(e, out, src.dtype, src.rank, shape, &data);
  if (!rc) {
    size_t esz = sl_dtype_size(src.dtype), stride = (size_t)src.shape[1] * (size_t)c * esz;
    const uint8_t *p = (const uint8_t *)sl_comp_data(&src) + (size_t)win->y * stride + (size_t)win->x * (size_t)c * esz;
    if (win->h == dh && win->w == dw) {
      for (int64_t y = 0; y < dh; y++)
        memcpy((uint8_t *)data + (size_t)y * (size_t)dw * (size_t)c * esz, p + (size_t)y * stride,
               (size_t)dw * (size_t)c * esz);
    } else if (src.dtype == SL_UINT8) {
      rc = sl__resize_u8(p, win->h, win->w, stride, data, dh, dw, (int)c, method);
    } else {
      rc = sl__resize_f32((const float *)p, win->h, win->w, stride, data, dh, dw, (int)c, method);
    }
    if (rc) sl_elem_remove(e, out);
  }
  comp_release(&src);
  return rc;
}

/* Common args: {"component": "image", "output": same as component}. */
typedef struct {
  const char *comp, *output;
  int method;
  int64_t h, w, shorter;
  bool antialias; /* resize: false samples 2x2 pixels as torch's interpolate(antialias=False) */
  double fraction;
  double scale[2], ratio[2];
  double prob;
  const char *boxes, *num_boxes;
  bool clip;
  sl__px_args px; /* random_resized_crop: random_flip and normalize folded in */
  sl__slabs slabs; /* random_resized_crop: "batch_slab" */
} img_state;

static void img_free(void *st) { sl__free(st); } /* also the other functions' states */
static void rrc_free(void *st) {
  img_state *s = st;
  if (s) sl__slabs_dispose(&s->slabs);
  sl__free(s);
}

static int img_state_new(img_state **out, const sl_args *a, const char *defcomp, const char *what) {
  img_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom(what);
  int rc;
  const char *method;
  if ((rc = sl__get_str(&s->comp, a, "component")) ||
      (rc = sl__get_str_or(&s->output, a, "output", s->comp)) ||
      (rc = sl__get_str(&method, a, "method")) ||
      (rc = sl__resize_method_parse(&s->method, method, sl_args_path(a)))) {
    sl__free(s);
    return rc;
  }
  *out = s;
  return 0;
}

static int read_size(const sl_args *a, img_state *s, bool required) {
  double v[2];
  int n = 0;
  int rc = sl__get_nums(v, &n, a, "size", 2);
  if (rc) return rc;
  if (!sl_args_has(a, "size")) {
    if (required) return sl__err(SL_EINVAL, "%s.size: required ([height, width])", sl_args_path(a));
    return 0;
  }
  if (n != 2 || v[0] < 1 || v[1] < 1 || v[0] > 65535 || v[1] > 65535 || v[0] != floor(v[0]) || v[1] != floor(v[1]))
    return sl__err(SL_EINVAL, "%s.size: expected [height, width], integers in 1..65535", sl_args_path(a));
  s->h = (int64_t)v[0];
  s->w = (int64_t)v[1];
  return 0;
}

static int get_image(const img_state *s, sl_elem *e, sl_fn_call *call, sl_comp **img, int64_t *h, int64_t *w,
                     int64_t *c) {
  int rc = sl__fn_component(e, call, s->comp, img);
  return rc ? rc : sl__image_dims(*img, call, h, w, c);
}

static int norm_write(sl_elem *e, const char *output, const sl_comp *img, const float *mul, const float *add,
                      sl__slabs *slabs, uint64_t index, bool chw);
static void flip_rows(uint8_t *p, int64_t h, int64_t w, size_t px);

/* random_resized_crop with random_flip and normalize folded in (plan_fuse.c, or by hand): the values the three ops
 * give in turn, in one op (no hand-offs between them). A uint8 image resized bilinear or area goes through the
 * resampler's output pass (one pass from the window to the flipped float32 tensor); otherwise the window is
 * resized as unfused, then flipped and normalised by the two ops' own loops. */
static int crop_resize_px(sl_elem *e, const img_state *s, const sl_fn_call *call, const sl_comp *img, int64_t c,
                          const sl__win *win) {
  sl__px_out px = sl__px_draw(&s->px, call);
  if (px.f32 && !sl__px_norm(&px, (int)c, s->px.nmean, s->px.mean, s->px.nstd, s->px.std, s->px.value_scale))
    return elem_err(call, SL_EINVAL, "'%s' has %lld channel(s) but mean has %d values and std %d", s->comp,
                    (long long)c, s->px.nmean, s->px.nstd);
  int rc = 0;
  if (img->dtype == SL_UINT8 && c <= 4 && (win->h != s->h || win->w != s->w) &&
      (s->method == SL__RESIZE_BILINEAR || s->method == SL__RESIZE_AREA)) {
    sl_comp src;
    comp_hold(&src, img);
    int64_t shape[3] = {s->h, s->w, c};
    sl_dtype dt = px.f32 ? SL_FLOAT32 : SL_UINT8;
    void *data = NULL;
    size_t stride = (size_t)src.shape[1] * (size_t)c, off = 0;
    sl_buf *slab = NULL; /* the element's slot in a slab the batch after takes whole ("batch_slab") */
    rc = dims_ok(win->h, win->w, s->h, s->w, stride, (size_t)c);
    if (!rc) {
      sl__slabs_slot(&((img_state *)s)->slabs, call->index, (size_t)(s->h * s->w * c) * sl_dtype_size(dt), &slab, &off);
      if (slab) data = (uint8_t *)sl_buf_data(slab) + off;
      else rc = sl_elem_new_tensor(e, s->output, dt, src.rank, shape, &data);
    }
    if (!rc) {
      const uint8_t *p = (const uint8_t *)sl_comp_data(&src) + (size_t)win->y * stride + (size_t)win->x * (size_t)c;
      rc = sl__resample_u8_px(p, (int)win->h, (int)win->w, stride, data, (int)s->h, (int)s->w, (int)c,
                              s->method == SL__RESIZE_AREA, px.flip || px.f32 ? &px : NULL);
      if (!rc && slab) rc = sl_elem_set_tensor(e, s->output, dt, src.rank, shape, slab, off, NULL);
      else if (rc && !slab) sl_elem_remove(e, s->output);
    }
    sl_buf_unref(slab);
    comp_release(&src);
  } else {
    rc = crop_resize(e, s->output, img, c, win, s->h, s->w, s->method);
    sl_comp *out = rc ? NULL : sl_elem_get(e, s->output);
    if (!rc && px.flip) {
      size_t pxb = (size_t)c * sl_dtype_size(out->dtype);
      uint8_t *p = sl_comp_mutable_data(out);
      if (!p) rc = sl__oom("random_resized_crop");
      else if (pxb > 64) rc = elem_err(call, SL_EINVAL, "'%s' has too many channels (%lld)", s->comp, (long long)c);
      else flip_rows(p, s->h, s->w, pxb);
    }
    if (!rc && px.f32) rc = norm_write(e, s->output, out, px.mul, px.add, NULL, 0, false);
  }
  return rc ? sl__err_wrap(rc, "%s: element %llu", call->op_path, (unsigned long long)call->index) : 0;
}

/* ---------------- random_resized_crop ---------------- */
static int rrc_init(void **state, const sl_args *a, void *payload) {
  img_state *s = NULL;
  int rc = img_state_new(&s, a, "image", "random_resized_crop");
  if (rc) return rc;
  int ns = 0, nr = 0;
  if ((rc = read_size(a, s, true)) || (rc = sl__get_nums(s->scale, &ns, a, "scale", 2)) ||
      (rc = sl__get_nums(s->ratio, &nr, a, "ratio", 2)) || (rc = sl__px_args_parse(&s->px, a)))
    goto fail;
  int64_t slab_n;
  if ((rc = sl__get_int(&slab_n, a, "batch_slab"))) goto fail; /* 0..16777216 by the arg table */
  if (ns != 2 || nr != 2 ||
      !(s->scale[0] > 0 && s->scale[0] <= s->scale[1] && s->scale[1] <= 1) ||
      !(s->ratio[0] > 0 && s->ratio[0] <= s->ratio[1])) {
    rc = sl__err(SL_EINVAL, "%s: scale must be [min, max] with 0 < min <= max <= 1, ratio [min, max] with 0 < min <= max",
                 sl_args_path(a));
    goto fail;
  }
  /* the channel count comes with the first image: its output's size fixes the slabs' */
  if ((rc = sl__slabs_init(&s->slabs, slab_n, 0, "random_resized_crop's batch slabs"))) goto fail;
  *state = s;
  return 0;
fail:
  sl__free(s);
  return rc;
}
static int rrc_call(void *st, sl_elem *e, sl_fn_call *call) {
  const img_state *s = st;
  sl_comp *img;
  int64_t h, w, c;
  int rc = get_image(s, e, call, &img, &h, &w, &c);
  if (rc) return rc;
  sl_rng rng;
  sl_rng_seed(&rng, call->seed);
  sl__win win;
  sl__crop_sample(&rng, h, w, s->scale, s->ratio, &win);
  if (s->px.has_flip || s->px.normalize || s->slabs.n) return crop_resize_px(e, s, call, img, c, &win);
  rc = crop_resize(e, s->output, img, c, &win, s->h, s->w, s->method);
  return rc ? sl__err_wrap(rc, "%s: element %llu", call->op_path, (unsigned long long)call->index) : 0;
}

/* ---------------- resize ---------------- */
void sl__shorter_side(int64_t h, int64_t w, int64_t shorter, int64_t *oh, int64_t *ow) {
  /* torchvision's Resize(int): the long side is int(shorter * long / short), truncated (an integer division gives
   * the same: the quotient of small integers is never within a double's rounding of the next integer) */
  if (h <= w) *oh = shorter, *ow = w * shorter / h;
  else *ow = shorter, *oh = h * shorter / w;
  if (*oh < 1) *oh = 1;
  if (*ow < 1) *ow = 1;
}

/* torch's bilinear interpolate with antialias=False (align_corners=False), which torchvision's Resize of a tensor
 * with antialias=False calls: output pixel i takes source coordinate (i + 0.5) * in / out - 0.5 (0 below 0) and
 * mixes the two pixels around it, rows after columns, in float as torch computes it; a uint8 image is rounded as
 * torchvision rounds the float result (halves to even). Each output reads 2x2 pixels, so a large downscale aliases
 * (that is what antialias=False asks for). */
typedef struct {
  int64_t i0, i1;
  float l0, l1;
} lin_tap;
static void lin_taps(lin_tap *t, int64_t in, int64_t out) {
  float scale = (float)in / (float)out;
  for (int64_t i = 0; i < out; i++) {
    float src = scale * ((float)i + 0.5f) - 0.5f;
    if (src < 0) src = 0;
    t[i].i0 = (int64_t)src;
    t[i].i1 = t[i].i0 + (t[i].i0 < in - 1 ? 1 : 0);
    float l1 = src - (float)t[i].i0;
    t[i].l1 = l1 < 0 ? 0 : l1 > 1 ? 1 : l1;
    t[i].l0 = 1.0f - t[i].l1;
  }
}
static int resize_plain(sl_elem *e, const char *out, const sl_comp *img, int64_t c, int64_t dh, int64_t dw) {
  int64_t h = img->shape[0], w = img->shape[1];
  int rc = dims_ok(h, w, dh, dw, (size_t)w * (size_t)c * sl_dtype_size(img->dtype), (size_t)c * sl_dtype_size(img->dtype));
  if (rc) return rc;
  lin_tap *ty = sl__malloc(sizeof *ty * (size_t)dh), *tx = sl__malloc(sizeof *tx * (size_t)dw);
  if (!ty || !tx) {
    sl__free(ty), sl__free(tx);
    return sl__oom("resize taps");
  }
  lin_taps(ty, h, dh);
  lin_taps(tx, w, dw);
  sl_comp src;
  comp_hold(&src, img);
  int64_t shape[3] = {dh, dw, c};
  void *data;
  if (!(rc = sl_elem_new_tensor(e, out, src.dtype, src.rank, shape, &data))) {
    bool u8 = src.dtype == SL_UINT8;
    const uint8_t *s8 = sl_comp_data(&src);
    const float *sf = sl_comp_data(&src);
    for (int64_t y = 0; y < dh; y++)
      for (int64_t x = 0; x < dw; x++)
        for (int64_t k = 0; k < c; k++) {
          size_t a = ((size_t)ty[y].i0 * (size_t)w + (size_t)tx[x].i0) * (size_t)c + (size_t)k,
                 b = ((size_t)ty[y].i0 * (size_t)w + (size_t)tx[x].i1) * (size_t)c + (size_t)k,
                 d = ((size_t)ty[y].i1 * (size_t)w + (size_t)tx[x].i0) * (size_t)c + (size_t)k,
                 f = ((size_t)ty[y].i1 * (size_t)w + (size_t)tx[x].i1) * (size_t)c + (size_t)k;
          float t0 = u8 ? (float)s8[a] * tx[x].l0 + (float)s8[b] * tx[x].l1 : sf[a] * tx[x].l0 + sf[b] * tx[x].l1;
          float t1 = u8 ? (float)s8[d] * tx[x].l0 + (float)s8[f] * tx[x].l1 : sf[d] * tx[x].l0 + sf[f] * tx[x].l1;
          float v = t0 * ty[y].l0 + t1 * ty[y].l1;
          size_t o = ((size_t)y * (size_t)dw + (size_t)x) * (size_t)c + (size_t)k;
          if (u8) {
            float r = nearbyintf(v);
            ((uint8_t *)data)[o] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
          } else {
            ((float *)data)[o] = v;
          }
        }
  }
  comp_release(&src);
  sl__free(ty), sl__free(tx);
  return rc;
}

static int resize_init(void **state, const sl_args *a, void *payload) {
  img_state *s = NULL;
  int rc = img_state_new(&s, a, "image", "resize");
  if (rc) return rc;
  if ((rc = read_size(a, s, false)) || (rc = sl__get_int(&s->shorter, a, "shorter_side")) ||
      (rc = sl__get_bool(&s->antialias, a, "antialias")))
    goto fail;
  if (!s->antialias && s->method != SL__RESIZE_BILINEAR) {
    rc = sl__err(SL_EINVAL, "%s.antialias: false is for method \"bilinear\" (torch's interpolate without "
                 "antialiasing)", sl_args_path(a));
    goto fail;
  }
  if ((s->h > 0) == (s->shorter > 0)) {
    rc = sl__err(SL_EINVAL, "%s: give exactly one of \"size\" ([height, width]) and \"shorter_side\" (> 0)",
                 sl_args_path(a));
    goto fail;
  }
  if (s->shorter > 65535) {
    rc = sl__err(SL_EINVAL, "%s.shorter_side: at most 65535", sl_args_path(a));
    goto fail;
  }
  *state = s;
  return 0;
fail:
  sl__free(s);
  return rc;
}
static int resize_call(void *st, sl_elem *e, sl_fn_call *call) {
  const img_state *s = st;
  sl_comp *img;
  int64_t h, w, c;
  int rc = get_image(s, e, call, &img, &h, &w, &c);
  if (rc) return rc;
  int64_t dh = s->h, dw = s->w;
  if (s->shorter) sl__shorter_side(h, w, s->shorter, &dh, &dw);
  sl__win all = {0, 0, h, w};
  if (!s->antialias) rc = resize_plain(e, s->output, img, c, dh, dw);
  else rc = crop_resize(e, s->output, img, c, &all, dh, dw, s->method);
  return rc ? sl__err_wrap(rc, "%s: element %llu", call->op_path, (unsigned long long)call->index) : 0;
}

/* ---------------- center_crop ---------------- */
static int64_t center_off(int64_t n, int64_t c) {
  if (c > n) return -((c - n) / 2);
  int64_t m = n - c, k = m / 2;
  return (m & 1) && (k & 1) ? k + 1 : k; /* round(m / 2.0): a half goes to the even neighbour */
}

void sl__center_window(int64_t H, int64_t W, int64_t ch, int64_t cw, sl__win *out) {
  *out = (sl__win){center_off(H, ch), center_off(W, cw), ch, cw};
}

void sl__copy_window(const uint8_t *src, int64_t H, int64_t W, size_t px, const sl__win *win, uint8_t *dst) {
  size_t orow = (size_t)win->w * px;
  int64_t x0 = win->x < 0 ? -win->x : 0, x1 = W - win->x < win->w ? W - win->x : win->w; /* columns inside */
  for (int64_t y = 0; y < win->h; y++) {
    uint8_t *d = dst + (size_t)y * orow;
    int64_t sy = win->y + y;
    if (sy < 0 || sy >= H || x1 <= x0) {
      memset(d, 0, orow);
      continue;
    }
    memset(d, 0, (size_t)x0 * px);
    memcpy(d + (size_t)x0 * px, src + ((size_t)sy * (size_t)W + (size_t)(win->x + x0)) * px, (size_t)(x1 - x0) * px);
    memset(d + (size_t)x1 * px, 0, (size_t)(win->w - x1) * px);
  }
}

static int cc_init(void **state, const sl_args *a, void *payload) {
  img_state *s = NULL;
  int rc = img_state_new(&s, a, "image", "center_crop");
  if (rc) return rc;
  if ((rc = read_size(a, s, false)) || (rc = sl__get_num(&s->fraction, a, "fraction"))) goto fail;
  if ((s->h > 0) == (s->fraction > 0) || s->fraction > 1) {
    rc = sl__err(SL_EINVAL, "%s: give exactly one of \"size\" ([height, width]) and \"fraction\" (0 < f <= 1)",
                 sl_args_path(a));
    goto fail;
  }
  *state = s;
  return 0;
fail:
  sl__free(s);
  return rc;
}
static int cc_call(void *st, sl_elem *e, sl_fn_call *call) {
  const img_state *s = st;
  sl_comp *img;
  int64_t h, w, c;
  int rc = get_image(s, e, call, &img, &h, &w, &c);
  if (rc) return rc;
  int64_t ch = s->h, cw = s->w;
  if (s->fraction > 0) {
    ch = (int64_t)llround((double)h * s->fraction);
    cw = (int64_t)llround((double)w * s->fraction);
    if (ch < 1) ch = 1;
    if (cw < 1) cw = 1;
  }
  sl__win win;
  sl__center_window(h, w, ch, cw, &win);
  if (ch <= h && cw <= w) return crop_resize(e, s->output, img, c, &win, ch, cw, s->method);
  /* Smaller than the crop: padded with 0, as torchvision does */
  sl_comp src;
  comp_hold(&src, img);
  int64_t shape[3] = {ch, cw, c};
  void *data;
  if (!(rc = sl_elem_new_tensor(e, s->output, src.dtype, src.rank, shape, &data)))
    sl__copy_window(sl_comp_data(&src), h, w, (size_t)c * sl_dtype_size(src.dtype), &win, data);
  comp_release(&src);
  return rc;
}

/* ---------------- random_flip (horizontal; boxes follow) ---------------- */
static int flip_init(void **state, const sl_args *a, void *payload) {
  img_state *s = NULL;
  int rc = img_state_new(&s, a, "image", "random_flip");
  if (rc) return rc;
  const char *inv;
  if ((rc = sl__get_num(&s->prob, a, "prob")) || (rc = sl__get_str(&s->boxes, a, "boxes")) ||
      (rc = sl__get_str(&s->num_boxes, a, "num_boxes")) ||
      (rc = sl__get_str(&inv, a, "on_invalid_box")))
    goto fail;
  if (!(s->prob >= 0 && s->prob <= 1)) {
    rc = sl__err(SL_EINVAL, "%s.prob: must be in [0, 1]", sl_args_path(a));
    goto fail;
  }
  if (strcmp(inv, "error") && strcmp(inv, "clip")) {
    rc = sl__err(SL_EINVAL, "%s.on_invalid_box: expected \"error\" or \"clip\"", sl_args_path(a));
    goto fail;
  }
  s->clip = !strcmp(inv, "clip");
  *state = s;
  return 0;
fail:
  sl__free(s);
  return rc;
}

/* Checks (or clips) n boxes [ymin, xmin, ymax, xmax] in [0, 1]. */
static int check_boxes(float *b, int64_t n, bool clip, const sl_fn_call *call, const char *name) {
  for (int64_t i = 0; i < n; i++) {
    float *r = b + i * 4;
    for (int k = 0; k < 4; k++) {
      if (r[k] >= 0.0f && r[k] <= 1.0f) continue;
      if (!clip || isnan(r[k]))
        return elem_err(call, SL_EINVAL, "box %lld of '%s' has coordinate %d = %g outside [0, 1] (set "
                        "\"on_invalid_box\": \"clip\" to clip)", (long long)i, name, k, (double)r[k]);
      r[k] = r[k] < 0 ? 0.0f : 1.0f;
    }
    if (r[0] > r[2] || r[1] > r[3])
      return elem_err(call, SL_EINVAL, "box %lld of '%s' has min > max ([%g, %g, %g, %g])", (long long)i, name,
                      (double)r[0], (double)r[1], (double)r[2], (double)r[3]);
  }
  return 0;
}

static int flip_call(void *st, sl_elem *e, sl_fn_call *call) {
  const img_state *s = st;
  sl_comp *img;
  int64_t h, w, c;
  int rc = get_image(s, e, call, &img, &h, &w, &c);
  if (rc) return rc;
  sl_comp *boxes = NULL;
  int64_t nb = 0;
  if (s->boxes) {
    if ((rc = sl__fn_component(e, call, s->boxes, &boxes))) return rc;
    if (boxes->dtype != SL_FLOAT32 || boxes->rank != 2 || boxes->shape[1] != 4)
      return elem_err(call, SL_EINVAL, "'%s' is %s rank %d; expected float32 [n, 4] boxes (ymin, xmin, ymax, xmax)",
                      s->boxes, sl_dtype_name(boxes->dtype), boxes->rank);
    nb = boxes->shape[0];
    if (s->num_boxes) {
      sl_comp *nc;
      int64_t v;
      if ((rc = sl__fn_component(e, call, s->num_boxes, &nc)) || (rc = sl_comp_get_i64(&v, nc))) return rc;
      if (v < 0 || v > nb) return elem_err(call, SL_EINVAL, "'%s' = %lld outside 0..%lld", s->num_boxes, (long long)v, (long long)nb);
      nb = v;
    }
  }
  sl_rng rng;
  sl_rng_seed(&rng, call->seed);
  bool flip = sl_rng_uniform(&rng) < s->prob;
  if (s->output != s->comp && strcmp(s->output, s->comp)) {
    sl_comp src;
    comp_hold(&src, img);
    rc = sl_elem_set_tensor(e, s->output, src.dtype, src.rank, src.shape, src.buf, src.off, sl_comp_data(&src));
    comp_release(&src);
    if (rc) return rc;
    img = sl_elem_get(e, s->output);
  }
  if (boxes) {
    boxes = sl_elem_get(e, s->boxes);
    float *b = sl_comp_mutable_data(boxes);
    if (!b) return sl__oom("random_flip boxes");
    if ((rc = check_boxes(b, nb, s->clip, call, s->boxes))) return rc;
    if (flip)
      for (int64_t i = 0; i < nb; i++) {
        float xmin = b[i * 4 + 1], xmax = b[i * 4 + 3];
        b[i * 4 + 1] = 1.0f - xmax;
        b[i * 4 + 3] = 1.0f - xmin;
      }
  }
  if (!flip) return 0;
  uint8_t *p = sl_comp_mutable_data(img);
  if (!p) return sl__oom("random_flip");
  size_t px = (size_t)c * sl_dtype_size(img->dtype);
  if (px > 64) return elem_err(call, SL_EINVAL, "'%s' has too many channels (%lld)", s->comp, (long long)c);
  flip_rows(p, h, w, px);
  return 0;
}

/* Mirrors h rows of w pixels of px (<= 64) bytes each, in place. */
static void flip_rows(uint8_t *p, int64_t h, int64_t w, size_t px) {
  uint8_t tmp[64];
  size_t stride = (size_t)w * px;
  for (int64_t y = 0; y < h; y++) {
    uint8_t *row = p + (size_t)y * stride;
    for (int64_t x = 0; x < w / 2; x++) {
      uint8_t *l = row + (size_t)x * px, *r = row + (size_t)(w - 1 - x) * px;
      memcpy(tmp, l, px);
      memcpy(l, r, px);
      memcpy(r, tmp, px);
    }
  }
}

/* ---------------- normalize: (x * scale - mean) / std per channel, to float32 ---------------- */
typedef struct {
  const char *comp, *output;
  double scale;
  int nmean, nstd;
  double mean[64], std[64];
  sl__slabs slabs; /* "batch_slab" */
  bool chw;        /* "layout": "CHW": channels first (PyTorch's order), written in this pass */
} norm_state;
static void norm_free(void *st) {
  norm_state *s = st;
  if (s) sl__slabs_dispose(&s->slabs);
  sl__free(s);
}
static int norm_init(void **state, const sl_args *a, void *payload) {
  norm_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("normalize");
  int rc;
  if ((rc = sl__get_str(&s->comp, a, "component")) ||
      (rc = sl__get_str_or(&s->output, a, "output", s->comp)) || (rc = sl__get_num(&s->scale, a, "scale")) ||
      (rc = sl__get_nums(s->mean, &s->nmean, a, "mean", 64)) ||
      (rc = sl__get_nums(s->std, &s->nstd, a, "std", 64)))
    goto fail;
  const char *layout;
  if ((rc = sl__get_str(&layout, a, "layout"))) goto fail;
  s->chw = !strcmp(layout, "CHW");
  sl__normalize_defaults(a, s->mean, &s->nmean, s->std, &s->nstd);
  for (int i = 0; i < s->nstd; i++)
    if (s->std[i] == 0) {
      rc = sl__err(SL_EINVAL, "%s.std[%d]: must not be 0", sl_args_path(a), i);
      goto fail;
    }
  if (s->nmean < 1 || s->nstd < 1) {
    rc = sl__err(SL_EINVAL, "%s: mean and std need at least one value", sl_args_path(a));
    goto fail;
  }
  int64_t slab_n;
  if ((rc = sl__get_int(&slab_n, a, "batch_slab")) ||
      (rc = sl__slabs_init(&s->slabs, slab_n, 0, "normalize's batch slabs")))
    goto fail;
  *state = s;
  return 0;
fail:
  sl__free(s);
  return rc;
}
static int norm_call(void *st, sl_elem *e, sl_fn_call *call) {
  const norm_state *s = st;
  sl_comp *img;
  int rc = sl__fn_component(e, call, s->comp, &img);
  if (rc) return rc;
  if (img->dtype == SL_BYTES || img->rank < 1)
    return elem_err(call, SL_EINVAL, "'%s' is %s rank %d; expected a numeric tensor with channels last", s->comp,
                    sl_dtype_name(img->dtype), img->rank);
  int64_t c = img->shape[img->rank - 1];
  if ((s->nmean != 1 && s->nmean != c) || (s->nstd != 1 && s->nstd != c))
    return elem_err(call, SL_EINVAL, "'%s' has %lld channels but mean has %d values and std %d", s->comp,
                    (long long)c, s->nmean, s->nstd);
  float mul[64], add[64];
  if (c > 64) return elem_err(call, SL_EINVAL, "'%s' has more than 64 channels", s->comp);
  for (int64_t k = 0; k < c; k++) {
    double m = s->mean[s->nmean == 1 ? 0 : k], d = s->std[s->nstd == 1 ? 0 : k];
    mul[k] = (float)(s->scale / d);
    add[k] = (float)(-m / d);
  }
  if (s->chw && img->rank != 3)
    return elem_err(call, SL_EINVAL, "'%s' has rank %d; \"layout\": \"CHW\" needs an image [height, width, channels]",
                    s->comp, img->rank);
  return norm_write(e, s->output, img, mul, add, &((norm_state *)s)->slabs, call->index, s->chw);
}

/* The float32 tensor `output` of img's values times mul plus add per channel (the last dimension); in element
 * `index`'s slot of a slab when slabs (may be NULL) gives one. `chw`: a rank-3 image [H, W, C] is written channels
 * first, [C, H, W], in the same pass. */
static int norm_write(sl_elem *e, const char *output, const sl_comp *img, const float *mul, const float *add,
                      sl__slabs *slabs, uint64_t index, bool chw) {
  int64_t c = img->shape[img->rank - 1], n = sl_comp_count(img);
  sl_comp src;
  comp_hold(&src, img);
  int64_t shape[SL_MAX_RANK];
  memcpy(shape, src.shape, sizeof shape);
  if (chw) {
    shape[0] = c;
    shape[1] = src.shape[0];
    shape[2] = src.shape[1];
  }
  float *out = NULL;
  sl_buf *slab = NULL;
  size_t off = 0, item;
  if (slabs && sl__mul_ok((size_t)n, sizeof(float), &item)) sl__slabs_slot(slabs, index, item, &slab, &off);
  int rc = 0;
  if (slab) out = (float *)(void *)((uint8_t *)sl_buf_data(slab) + off);
  else rc = sl_elem_new_tensor(e, output, SL_FLOAT32, src.rank, shape, (void **)&out);
  if (!rc && chw) {
    const void *in = sl_comp_data(&src);
    int64_t plane = n / (c ? c : 1);
    for (int64_t i = 0; i < plane; i++)
      for (int64_t k = 0; k < c; k++) {
        int64_t at = i * c + k;
        double v = sl__num_at(in, src.dtype, at);
        out[k * plane + i] = (float)v * mul[k] + add[k];
      }
  } else if (!rc) {
    const void *in = sl_comp_data(&src);
    if (src.dtype == SL_UINT8 && c == 3) {
      const uint8_t *p = in;
      for (int64_t i = 0; i < n; i += 3) {
        out[i] = (float)p[i] * mul[0] + add[0];
        out[i + 1] = (float)p[i + 1] * mul[1] + add[1];
        out[i + 2] = (float)p[i + 2] * mul[2] + add[2];
      }
    } else {
      for (int64_t i = 0, k = 0; i < n; i++) {
        double v = sl__num_at(in, src.dtype, i);
        out[i] = (float)v * mul[k] + add[k];
        if (++k == c) k = 0;
      }
    }
  }
  if (!rc && slab) rc = sl_elem_set_tensor(e, output, SL_FLOAT32, src.rank, shape, slab, off, NULL);
  sl_buf_unref(slab);
  comp_release(&src);
  return rc;
}

/* ---------------- cast ---------------- */
typedef struct {
  const char *comp, *output;
  sl_dtype dt;
  double scale;
} cast_state;
static int cast_init(void **state, const sl_args *a, void *payload) {
  cast_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("cast");
  const char *dt;
  int rc;
  if ((rc = sl__get_str(&s->comp, a, "component")) ||
      (rc = sl__get_str_or(&s->output, a, "output", s->comp)) || (rc = sl__get_str(&dt, a, "dtype")) ||
      (rc = sl__get_num(&s->scale, a, "scale")))
    goto fail;
  if (!dt) {
    rc = sl__err(SL_EINVAL, "%s.dtype: required (uint8, int32, int64, float32, float64)", sl_args_path(a));
    goto fail;
  }
  if ((rc = sl_dtype_parse(&s->dt, dt)) || s->dt == SL_BYTES) {
    rc = sl__err(SL_EINVAL, "%s.dtype: '%s' is not a numeric dtype", sl_args_path(a), dt);
    goto fail;
  }
  *state = s;
  return 0;
fail:
  sl__free(s);
  return rc;
}
static void store_num(void *p, sl_dtype dt, int64_t i, double v) {
  switch (dt) {
  case SL_UINT8: ((uint8_t *)p)[i] = (uint8_t)(isnan(v) ? 0 : v < 0 ? 0 : v > 255 ? 255 : lrint(v)); break;
  case SL_INT32: {
    int32_t x;
    if (isnan(v)) x = 0;
    else if (v <= -0x1p31) x = INT32_MIN;
    else if (v >= 0x1p31) x = INT32_MAX;
    else x = (int32_t)v;
    ((int32_t *)p)[i] = x;
    break;
  }
  case SL_INT64: {
    int64_t x;
    if (isnan(v)) x = 0;
    else if (v <= -0x1p63) x = INT64_MIN;
    else if (v >= 0x1p63) x = INT64_MAX;
    else x = (int64_t)v;
    ((int64_t *)p)[i] = x;
    break;
  }
  case SL_FLOAT32: ((float *)p)[i] = (float)v; break;
  default: ((double *)p)[i] = v; break;
  }
}
static int cast_call(void *st, sl_elem *e, sl_fn_call *call) {
  const cast_state *s = st;
  sl_comp *c;
  int rc = sl__fn_component(e, call, s->comp, &c);
  if (rc) return rc;
  if (c->dtype == SL_BYTES) return elem_err(call, SL_EINVAL, "'%s' is bytes; cast needs a numeric tensor", s->comp);
  if (c->dtype == s->dt && s->scale == 1.0 && !strcmp(s->comp, s->output)) return 0;
  sl_comp src;
  comp_hold(&src, c);
  void *out;
  rc = sl_elem_new_tensor(e, s->output, s->dt, src.rank, src.shape, &out);
  if (!rc) {
    const void *in = sl_comp_data(&src);
    int64_t n = sl_comp_count(&src);
    if (src.dtype == SL_UINT8 && s->dt == SL_FLOAT32) {
      float k = (float)s->scale;
      for (int64_t i = 0; i < n; i++) ((float *)out)[i] = (float)((const uint8_t *)in)[i] * k;
    } else {
      for (int64_t i = 0; i < n; i++) store_num(out, s->dt, i, sl__num_at(in, src.dtype, i) * s->scale);
    }
  }
  comp_release(&src);
  return rc;
}

/* ---------------- pad_boxes ---------------- */
typedef struct {
  const char *boxes, *coord[4], *labels, *output, *labels_output, *num_output;
  int64_t max;
  double pad, label_pad;
  bool clip, keep;
} pad_state;
static int pad_init(void **state, const sl_args *a, void *payload) {
  pad_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("pad_boxes");
  static const char *const keys[4] = {"ymin", "xmin", "ymax", "xmax"};
  const char *inv;
  int rc;
  if ((rc = sl__get_str(&s->boxes, a, "boxes")) ||
      (rc = sl__get_str(&s->labels, a, "labels")) ||
      (rc = sl__get_str(&s->output, a, "output")) ||
      (rc = sl__get_str(&s->labels_output, a, "labels_output")) ||
      (rc = sl__get_str(&s->num_output, a, "num_output")) || (rc = sl__get_int(&s->max, a, "max")) ||
      (rc = sl__get_num(&s->pad, a, "pad_value")) || (rc = sl__get_num(&s->label_pad, a, "label_pad_value")) ||
      (rc = sl__get_str(&inv, a, "on_invalid_box")) || (rc = sl__get_bool(&s->keep, a, "keep")))
    goto fail;
  for (int k = 0; k < 4 && !rc; k++) rc = sl__get_str(&s->coord[k], a, keys[k]);
  if (rc) goto fail;
  if (strcmp(inv, "error") && strcmp(inv, "clip")) {
    rc = sl__err(SL_EINVAL, "%s.on_invalid_box: expected \"error\" or \"clip\"", sl_args_path(a));
    goto fail;
  }
  if (!(fabs(s->label_pad) < 0x1p62)) {
    rc = sl__err(SL_EINVAL, "%s.label_pad_value: out of range", sl_args_path(a));
    goto fail;
  }
  s->clip = !strcmp(inv, "clip");
  if (s->labels[0] == 0) s->labels = NULL;
  *state = s;
  return 0;
fail:
  sl__free(s);
  return rc;
}
static int pad_call(void *st, sl_elem *e, sl_fn_call *call) {
  const pad_state *s = st;
  int rc;
  sl_comp *in[4] = {NULL, NULL, NULL, NULL}, *lab = NULL;
  int64_t n;
  if (s->boxes) {
    if ((rc = sl__fn_component(e, call, s->boxes, &in[0]))) return rc;
    if (in[0]->dtype != SL_FLOAT32 || in[0]->rank != 2 || in[0]->shape[1] != 4)
      return elem_err(call, SL_EINVAL, "'%s' is %s rank %d; expected float32 [n, 4]", s->boxes,
                      sl_dtype_name(in[0]->dtype), in[0]->rank);
    n = in[0]->shape[0];
  } else {
    n = -1;
    for (int k = 0; k < 4; k++) {
      if ((rc = sl__fn_component(e, call, s->coord[k], &in[k]))) return rc;
      if (in[k]->dtype != SL_FLOAT32 || in[k]->rank > 1)
        return elem_err(call, SL_EINVAL, "'%s' is %s rank %d; expected float32 [n]", s->coord[k],
                        sl_dtype_name(in[k]->dtype), in[k]->rank);
      int64_t m = sl_comp_count(in[k]);
      if (n >= 0 && m != n)
        return elem_err(call, SL_EINVAL, "box coordinate lists differ in length ('%s' has %lld, '%s' %lld)",
                        s->coord[0], (long long)n, s->coord[k], (long long)m);
      n = m;
    }
  }
  if (s->labels && (lab = sl_elem_get(e, s->labels))) {
    if (lab->dtype == SL_BYTES || sl_comp_count(lab) != n)
      return elem_err(call, SL_EINVAL, "'%s' must hold %lld numeric labels, one per box", s->labels, (long long)n);
  }
  int64_t keep = n < s->max ? n : s->max;
  /* Build the outputs in a scratch element first, so the inputs stay readable. */
  sl_elem out;
  sl_elem_init(&out);
  float *b;
  int64_t bshape[2] = {s->max, 4}, lshape[1] = {s->max};
  int32_t nb = (int32_t)keep;
  if ((rc = sl_elem_new_tensor(&out, s->output, SL_FLOAT32, 2, bshape, (void **)&b))) goto done;
  for (int64_t i = 0; i < keep; i++)
    for (int k = 0; k < 4; k++)
      b[i * 4 + k] = s->boxes ? ((const float *)sl_comp_data(in[0]))[i * 4 + k] : ((const float *)sl_comp_data(in[k]))[i];
  if ((rc = check_boxes(b, keep, s->clip, call, s->boxes ? s->boxes : "image/object/bbox/*"))) goto done;
  for (int64_t i = keep * 4; i < s->max * 4; i++) b[i] = (float)s->pad;
  if (lab) {
    int64_t *l;
    if ((rc = sl_elem_new_tensor(&out, s->labels_output, SL_INT64, 1, lshape, (void **)&l))) goto done;
    for (int64_t i = 0; i < s->max; i++) {
      if (i >= keep) l[i] = (int64_t)s->label_pad;
      else if (lab->dtype == SL_INT64) l[i] = ((const int64_t *)sl_comp_data(lab))[i];
      else l[i] = (int64_t)fmax(fmin(sl__num_at(sl_comp_data(lab), lab->dtype, i), 0x1p62), -0x1p62);
    }
  }
  if ((rc = sl_elem_set_tensor(&out, s->num_output, SL_INT32, 0, NULL, NULL, 0, &nb))) goto done;
  if (!s->keep) {
    if (s->boxes) sl_elem_remove(e, s->boxes);
    else
      for (int k = 0; k < 4; k++) sl_elem_remove(e, s->coord[k]);
    if (lab) sl_elem_remove(e, s->labels);
  }
  for (int i = 0; i < out.n && !rc; i++) {
    sl_comp *c = &out.c[i];
    rc = sl_elem_set_tensor(e, c->name, c->dtype, c->rank, c->shape, c->buf, c->off, sl_comp_data(c));
  }
done:
  sl_elem_clear(&out);
  return rc;
}

/* ---- schemas ---- */
#define IMG_IO_ARGS                                                                                              \
  {"component", SL__ARG_COMP, "image", 0, 0, 0, NULL, "the image component ([height, width, channels])"},             \
      {"output", SL__ARG_COMP, NULL, 0, 0, 0, NULL, "the component written (default: the component, replaced)"}
#define IMG_METHOD_ARG                                                                                           \
  {"method", SL__ARG_ENUM, "bilinear", 0, 0, 0, "bilinear|area|bicubic|nearest", "the resize method"}
static const sl__fn_io IMG_READS[] = {{"component", NULL, NULL, SL__DT_ANY, 3, 0}, {NULL}};
static const sl__fn_io IMG_WRITES[] = {{"output", NULL, "component", SL__DT_SAME, SL__RANK_SAME, 0}, {NULL}};
/* The component an image function writes: "output", else its "component" (the tables give their defaults). */
static int out_name(const char **out, const sl_args *a) {
  const char *comp;
  int rc = sl__get_str(&comp, a, "component");
  return rc ? rc : sl__get_str_or(out, a, "output", comp);
}
/* The output's height and width when "size" fixes them. */
static int size_infer(sl__struct *s, const sl_args *a, const char *origin) {
  json_t *args = a->obj;
  const char *path = a->path;
  (void)args;
  (void)path;
  (void)path;
  (void)origin;
  json_t *size = json_object_get(args, "size");
  const char *name;
  int rc = out_name(&name, a);
  if (rc) return rc;
  sl__comp_desc *d = sl__struct_get(s, name);
  if (!d) return 0;
  if (json_array_size(size) == 2 && d->rank == 3)
    for (int k = 0; k < 2; k++) d->dims[k] = (int64_t)json_number_value(json_array_get(size, (size_t)k));
  else if (d->rank == 3)
    d->dims[0] = d->dims[1] = SL__DIM_UNKNOWN;
  return 0;
}

static const sl__arg RRC_ARGS[] = {
    IMG_IO_ARGS,
    IMG_METHOD_ARG,
    {"size", SL__ARG_NUMS, NULL, SL__ARGF_REQUIRED | SL__LOHI, 2, 2, NULL, "the output [height, width]"},
    {"scale", SL__ARG_NUMS, "[0.08, 1]", SL__LOHI, 2, 2, NULL, "crop area as a fraction of the image [min, max]"},
    {"ratio", SL__ARG_NUMS, "[0.75, 1.3333333333333333]", SL__LOHI, 2, 2, NULL, "crop aspect ratio [min, max] (3/4, 4/3)"},
    SL__PX_ARGS,
    SL__SLAB_ARG("the first output's size fixes the slot's: an output of another size gets its own buffer"),
    {NULL}};
/* size_infer, and float32 with normalize folded in. */
static int rrc_infer(sl__struct *s, const sl_args *a, const char *origin) {
  json_t *args = a->obj;
  const char *path = a->path;
  (void)args;
  (void)path;
  const char *name;
  int rc = size_infer(s, a, origin);
  if (!rc) rc = out_name(&name, a);
  sl__comp_desc *d = rc ? NULL : sl__struct_get(s, name);
  if (!rc && d && json_is_true(json_object_get(args, "normalize"))) d->dtype = SL_FLOAT32;
  return rc;
}
static const sl__fn_schema RRC_SCHEMA = {"crops a random window (area and aspect in ranges) and resizes it",
                                         RRC_ARGS, IMG_READS, IMG_WRITES, rrc_infer};
static const sl__arg RESIZE_ARGS[] = {
    IMG_IO_ARGS,
    IMG_METHOD_ARG,
    {"size", SL__ARG_NUMS, NULL, SL__LOHI, 2, 2, NULL, "the output [height, width] (or give shorter_side)"},
    {"shorter_side", SL__ARG_INT, "0", SL__LOHI, 0, 65535, NULL,
     "scale so the shorter side has this length; the longer becomes int(shorter_side * longer / shorter), truncated, "
     "as torchvision's Resize(int) makes it"},
    {"antialias", SL__ARG_BOOL, "true", 0, 0, 0, NULL,
     "false (method bilinear only): each output pixel mixes the 2x2 source pixels around its centre, as torch's "
     "interpolate(antialias=False) and torchvision's Resize of a tensor with antialias=False do (a large downscale "
     "aliases)"},
    {NULL}};
static const sl__fn_schema RESIZE_SCHEMA = {"resizes an image to a size, or its shorter side to a length",
                                            RESIZE_ARGS, IMG_READS, IMG_WRITES, size_infer};
static const sl__arg CC_ARGS[] = {
    IMG_IO_ARGS,
    IMG_METHOD_ARG,
    {"size", SL__ARG_NUMS, NULL, SL__LOHI, 2, 2, NULL, "the crop's [height, width] (or give fraction)"},
    {"fraction", SL__ARG_NUM, "0", SL__LOHI, 0, 1, NULL, "the crop's side as a fraction of the image's"},
    {NULL}};
static const sl__fn_schema CC_SCHEMA = {
    "crops the central window of an image as torchvision's CenterCrop does: an odd margin puts round(margin / 2) "
    "(halves to even) above or left; an image smaller than the crop is padded with 0 around it",
    CC_ARGS, IMG_READS, IMG_WRITES, size_infer};
static const sl__arg FLIP_ARGS[] = {
    IMG_IO_ARGS,
    IMG_METHOD_ARG,
    {"prob", SL__ARG_NUM, "0.5", SL__LOHI, 0, 1, NULL, "the probability of a flip"},
    {"boxes", SL__ARG_COMP, NULL, 0, 0, 0, NULL, "float32 [n, 4] boxes flipped with the image"},
    {"num_boxes", SL__ARG_COMP, NULL, 0, 0, 0, NULL, "the number of valid boxes (the rest is padding)"},
    {"on_invalid_box", SL__ARG_ENUM, "error", 0, 0, 0, "error|clip", "a box outside [0, 1] fails, or is clipped"},
    {NULL}};
static const sl__fn_io FLIP_READS[] = {{"component", NULL, NULL, SL__DT_ANY, 3, 0},
                                       {"boxes", NULL, NULL, SL_FLOAT32, 2, SL__IO_OPTIONAL},
                                       {"num_boxes", NULL, NULL, SL__DT_ANY, 0, SL__IO_OPTIONAL},
                                       {NULL}};
static const sl__fn_schema FLIP_SCHEMA = {"flips an image left-right at random (and its boxes)", FLIP_ARGS,
                                          FLIP_READS, IMG_WRITES, NULL};
static const sl__arg NORM_ARGS[] = {
    IMG_IO_ARGS,
    {"scale", SL__ARG_NUM, "1", 0, 0, 0, NULL, "multiplies each value first"},
    {"mean", SL__ARG_NUMS, NULL, SL__LOHI, 1, 64, NULL, "per-channel mean subtracted (default ImageNet's RGB, 0..255)"},
    {"std", SL__ARG_NUMS, NULL, SL__LOHI, 1, 64, NULL, "per-channel divisor (default ImageNet's with the default mean, else 1)"},
    {"layout", SL__ARG_ENUM, "HWC", 0, 0, 0, "HWC|CHW", "the output's order: channels last, or first (PyTorch's NCHW "
     "batches, written in this pass)"},
    SL__SLAB_ARG("the first output's size fixes the slot's: an output of another size gets its own buffer"),
    {NULL}};
static const sl__fn_io NORM_READS[] = {{"component", NULL, NULL, SL__DT_ANY, -1, 0}, {NULL}};
static const sl__fn_io NORM_WRITES[] = {{"output", NULL, "component", SL_FLOAT32, SL__RANK_SAME, 0}, {NULL}};
/* "layout": "CHW" moves the channels first: an image of rank 3 only. */
static int norm_infer(sl__struct *s, const sl_args *a, const char *origin) {
  (void)origin;
  json_t *layout = json_object_get(a->obj, "layout");
  if (!json_is_string(layout) || strcmp(json_string_value(layout), "CHW")) return 0;
  const char *name;
  int rc = out_name(&name, a);
  sl__comp_desc *d = rc ? NULL : sl__struct_get(s, name);
  if (rc || !d || d->rank < 0) return rc;
  if (d->rank != 3)
    return sl__err(SL_EINVAL, "%s.layout: \"CHW\" needs an image [height, width, channels]; '%s' has rank %d", a->path,
                   name, d->rank);
  int64_t h = d->dims[0], w = d->dims[1];
  d->dims[0] = d->dims[2];
  d->dims[1] = h;
  d->dims[2] = w;
  return 0;
}
static const sl__fn_schema NORM_SCHEMA = {"(x * scale - mean) / std per channel, as float32", NORM_ARGS,
                                          NORM_READS, NORM_WRITES, norm_infer};
static const sl__arg CAST_ARGS[] = {
    IMG_IO_ARGS,
    {"dtype", SL__ARG_ENUM, NULL, SL__ARGF_REQUIRED, 0, 0, "uint8|int32|int64|float32|float64", "the dtype cast to"},
    {"scale", SL__ARG_NUM, "1", 0, 0, 0, NULL, "multiplies each value"},
    {NULL}};
/* The output's dtype is the one named. */
static int cast_infer(sl__struct *s, const sl_args *a, const char *origin) {
  json_t *args = a->obj;
  const char *path = a->path;
  (void)args;
  (void)path;
  (void)path;
  (void)origin;
  const char *name;
  int rc = out_name(&name, a);
  if (rc) return rc;
  sl__comp_desc *d = sl__struct_get(s, name);
  sl_dtype dt;
  const char *dn = json_string_value(json_object_get(args, "dtype"));
  if (d && dn && !sl_dtype_parse(&dt, dn)) d->dtype = (int)dt;
  sl_error_clear();
  return 0;
}
static const sl__fn_schema CAST_SCHEMA = {"casts a numeric component to another dtype (times scale)", CAST_ARGS,
                                          NORM_READS, IMG_WRITES, cast_infer};

static const sl__arg PAD_ARGS[] = {
    {"boxes", SL__ARG_COMP, NULL, 0, 0, 0, NULL, "float32 [n, 4] boxes (else the four coordinate lists)"},
    {"ymin", SL__ARG_COMP, "image/object/bbox/ymin", 0, 0, 0, NULL, "the boxes' ymin list"},
    {"xmin", SL__ARG_COMP, "image/object/bbox/xmin", 0, 0, 0, NULL, "the boxes' xmin list"},
    {"ymax", SL__ARG_COMP, "image/object/bbox/ymax", 0, 0, 0, NULL, "the boxes' ymax list"},
    {"xmax", SL__ARG_COMP, "image/object/bbox/xmax", 0, 0, 0, NULL, "the boxes' xmax list"},
    {"labels", SL__ARG_COMP, "image/object/class/label", 0, 0, 0, NULL, "the boxes' labels, padded alongside (\"\": none)"},
    {"output", SL__ARG_COMP, "boxes", 0, 0, 0, NULL, "the float32 [max, 4] boxes written"},
    {"labels_output", SL__ARG_COMP, "labels", 0, 0, 0, NULL, "the int64 [max] labels written"},
    {"num_output", SL__ARG_COMP, "num_boxes", 0, 0, 0, NULL, "the int32 count of valid boxes written"},
    {"max", SL__ARG_INT, "100", SL__LOHI, 1, 1000000, NULL, "boxes kept (the rest is padding)"},
    {"pad_value", SL__ARG_NUM, "0", 0, 0, 0, NULL, "the padding boxes' coordinates"},
    {"label_pad_value", SL__ARG_NUM, "-1", 0, 0, 0, NULL, "the padding boxes' label"},
    {"on_invalid_box", SL__ARG_ENUM, "error", 0, 0, 0, "error|clip", "a box outside [0, 1] fails, or is clipped"},
    {"keep", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "keep the input box components"},
    {NULL}};
/* Reads the boxes (or the four coordinate lists) and, when present, the labels; writes fixed-size boxes, labels
 * and a count. */
static int pad_infer(sl__struct *s, const sl_args *a, const char *origin) {
  json_t *args = a->obj;
  const char *path = a->path;
  (void)args;
  (void)path;
  static const char *const keys[4] = {"ymin", "xmin", "ymax", "xmax"};
  const char *boxes, *labels, *out, *labels_out, *num_out, *need[4];
  int64_t max;
  bool keep;
  int rc, nneed = 0;
  if ((rc = sl__get_str(&boxes, a, "boxes")) || (rc = sl__get_str(&labels, a, "labels")) ||
      (rc = sl__get_str(&out, a, "output")) || (rc = sl__get_str(&labels_out, a, "labels_output")) ||
      (rc = sl__get_str(&num_out, a, "num_output")) || (rc = sl__get_int(&max, a, "max")) ||
      (rc = sl__get_bool(&keep, a, "keep")))
    return rc;
  if (boxes) need[nneed++] = boxes;
  else
    for (int k = 0; k < 4; k++)
      if ((rc = sl__get_str(&need[nneed++], a, keys[k]))) return rc;
  for (int k = 0; k < nneed && !s->open; k++)
    if (!sl__struct_get(s, need[k])) {
      sl__str have = {0};
      if (sl__struct_names(&have, s)) return SL_ENOMEM;
      rc = sl__err(SL_EINVAL, "%s: reads component '%s', which no earlier op makes (the element has: %s)", path,
                       need[k], have.s);
      sl__str_dispose(&have);
      return rc;
    }
  bool has_labels = labels[0] && (sl__struct_get(s, labels) || s->open);
  if (!keep) {
    for (int k = 0; k < nneed; k++) sl__struct_remove(s, need[k]);
    if (has_labels) sl__struct_remove(s, labels);
  }
  sl__comp_desc *c;
  rc = sl__struct_put(s, out, SL_FLOAT32, 2, origin, &c);
  if (rc) return rc;
  c->dims[0] = max;
  c->dims[1] = 4;
  if (has_labels) {
    if ((rc = sl__struct_put(s, labels_out, SL_INT64, 1, origin, &c))) return rc;
    c->dims[0] = max;
  }
  return sl__struct_put(s, num_out, SL_INT32, 0, origin, NULL);
}
static const sl__fn_schema PAD_SCHEMA = {"pads an element's boxes (and labels) to a fixed number, with a count",
                                         PAD_ARGS, NULL, NULL, pad_infer};

const sl__fn_entry sl__fns_image[] = {
    {"random_resized_crop", {SL_FN_DEF_VERSION, SL_FN_RANDOM, rrc_init, rrc_call, rrc_free}, &RRC_SCHEMA},
    {"resize", {SL_FN_DEF_VERSION, 0, resize_init, resize_call, img_free}, &RESIZE_SCHEMA},
    {"center_crop", {SL_FN_DEF_VERSION, 0, cc_init, cc_call, img_free}, &CC_SCHEMA},
    {"random_flip", {SL_FN_DEF_VERSION, SL_FN_RANDOM, flip_init, flip_call, img_free}, &FLIP_SCHEMA},
    {"normalize", {SL_FN_DEF_VERSION, 0, norm_init, norm_call, norm_free}, &NORM_SCHEMA},
    {"cast", {SL_FN_DEF_VERSION, 0, cast_init, cast_call, img_free}, &CAST_SCHEMA},
    {"pad_boxes", {SL_FN_DEF_VERSION, 0, pad_init, pad_call, img_free}, &PAD_SCHEMA},
    {NULL, {0, 0, NULL, NULL, NULL}, NULL},
};
