/* fns/resample_u8.c: the uint8 resizer of the image functions' hot path: a separable triangle (bilinear) filter
 * widened by the shrink factor (antialiased, as PIL's and stb's are), pixel centres aligned, edges clamped, in
 * 14-bit fixed point: the vertical pass first (a multiply-add over whole rows, which the compiler vectorises), then
 * the horizontal one on the fewer rows left, through a uint8 row in between. libyuv and OpenCV were measured first
 * (fns/fn_image.c's header says why they are not used). */
#include <math.h>
#include <string.h>

#include "fns/image_int.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3") /* the row loops are written for the vectoriser */
#endif

enum { PREC = 14 };
typedef int32_t v4i __attribute__((vector_size(16)));

/* The row loops are also built for AVX2 and picked at load time (the baseline x86-64 has no 32-bit SIMD multiply). */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define SL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SL_CLONES
#endif

/* Filter taps of one axis: for output i, `ntap` weights starting at source index lo[i] (within 0..n-1). */
typedef struct {
  int ntap;
  int *lo;
  int16_t *w; /* m x ntap */
} taps;

static int taps_make(taps *t, int n, int m, bool box) {
  double scale = (double)n / m, rad = scale > 1 ? scale : 1;
  if (box) rad = scale > 1 ? scale / 2 + 0.5 : 1; /* area: a box of the output pixel's footprint, bilinear-edged */
  int k = (int)ceil(2 * rad) + 1;
  if (k > n) k = n; /* every tap reads inside the image */
  t->ntap = k;
  t->lo = sl__mallocarray((size_t)m, sizeof(int));
  t->w = sl__mallocarray((size_t)m * (size_t)k, sizeof(int16_t));
  double *wf = sl__mallocarray((size_t)k, sizeof(double));
  if (!t->lo || !t->w || !wf) {
    sl__free(wf);
    return sl__oom("resize filter");
  }
  for (int o = 0; o < m; o++) {
    double centre = (o + 0.5) * scale - 0.5;
    int first = (int)floor(centre - rad) + 1;
    /* Taps outside the image fold onto the edge pixel (clamped edges). */
    int lo = first < 0 ? 0 : first;
    if (lo > n - k) lo = n - k > 0 ? n - k : 0;
    for (int j = 0; j < k; j++) wf[j] = 0;
    double sum = 0;
    for (int i = first; i < first + k; i++) {
      double d = fabs(i - centre), wgt;
      if (box) wgt = d <= rad - 1 ? 1 : d < rad ? rad - d : 0;
      else wgt = d < rad ? 1 - d / rad : 0;
      if (wgt <= 0) continue;
      int ii = i < 0 ? 0 : i >= n ? n - 1 : i;
      int j = ii - lo;
      if (j < 0) j = 0;
      if (j >= k) j = k - 1;
      wf[j] += wgt;
      sum += wgt;
    }
    int16_t *w = t->w + (size_t)o * (size_t)k;
    int total = 0, big = 0;
    for (int j = 0; j < k; j++) {
      w[j] = (int16_t)lrint(wf[j] / sum * (1 << PREC));
      total += w[j];
      if (w[j] > w[big]) big = j;
    }
    w[big] = (int16_t)(w[big] + ((1 << PREC) - total)); /* weights sum to exactly 1 */
    t->lo[o] = lo;
  }
  sl__free(wf);
  return 0;
}

static void taps_free(taps *t) {
  sl__free(t->lo);
  sl__free(t->w);
}

static inline uint8_t clamp_round(int32_t v) {
  v = (v + (1 << (PREC - 1))) >> PREC;
  return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Horizontal pass of one row, c channels (the common counts get their own loops for the compiler). */
SL_CLONES static void hrow(const uint8_t *src, uint8_t *dst, int dw, int c, const taps *t) {
  int k = t->ntap;
  for (int o = 0; o < dw; o++) {
    const int16_t *w = t->w + (size_t)o * (size_t)k;
    const uint8_t *s = src + (size_t)t->lo[o] * (size_t)c;
    if (c == 3) {
      /* One pixel's three channels (and the next pixel's first byte, ignored: the row has padding) as 4 lanes. */
      v4i acc = {0, 0, 0, 0};
#define TAPS3(K)                                                                                                      \
  for (int j = 0; j < (K); j++) {                                                                                      \
    v4i px = {s[3 * j], s[3 * j + 1], s[3 * j + 2], s[3 * j + 3]};                                                     \
    acc += w[j] * px;                                                                                                  \
  }
      switch (k) { /* constant trip counts unroll */
      case 2: TAPS3(2) break;
      case 3: TAPS3(3) break;
      case 4: TAPS3(4) break;
      case 5: TAPS3(5) break;
      case 6: TAPS3(6) break;
      case 7: TAPS3(7) break;
      default: TAPS3(k) break;
      }
#undef TAPS3
      dst[0] = clamp_round(acc[0]), dst[1] = clamp_round(acc[1]), dst[2] = clamp_round(acc[2]);
      dst += 3;
    } else if (c == 1) {
      int32_t v = 0;
      for (int j = 0; j < k; j++) v += w[j] * s[j];
      *dst++ = clamp_round(v);
    } else {
      for (int ch = 0; ch < c; ch++) {
        int32_t v = 0;
        for (int j = 0; j < k; j++) v += w[j] * s[(size_t)j * (size_t)c + (size_t)ch];
        *dst++ = clamp_round(v);
      }
    }
  }
}

SL_CLONES static void vrow(const uint8_t *src, size_t stride, int32_t *acc, uint8_t *dst, size_t len, const int16_t *w, int k) {
  for (size_t x = 0; x < len; x++) acc[x] = 0;
  for (int j = 0; j < k; j++) {
    const uint8_t *s = src + (size_t)j * stride;
    int32_t wj = w[j];
    if (!wj) continue;
    for (size_t x = 0; x < len; x++) acc[x] += wj * s[x];
  }
  for (size_t x = 0; x < len; x++) dst[x] = clamp_round(acc[x]);
}

int sl__resample_u8(const uint8_t *src, int sh, int sw, size_t sstride, uint8_t *dst, int dh, int dw, int c, bool box) {
  taps tv = {0}, th = {0};
  size_t len = (size_t)sw * (size_t)c;
  int rc = taps_make(&tv, sh, dh, box);
  if (!rc) rc = taps_make(&th, sw, dw, box);
  uint8_t *mid = NULL;
  int32_t *acc = NULL;
  if (!rc) {
    mid = sl__malloc(len + 4); /* + the byte past the last pixel the 4-lane loop reads */
    acc = sl__mallocarray(len, sizeof(int32_t));
    if (!mid || !acc) rc = sl__oom("resize rows");
    else memset(mid + len, 0, 4);
  }
  if (!rc)
    for (int o = 0; o < dh; o++) {
      const uint8_t *s = src + (size_t)tv.lo[o] * sstride;
      int k = tv.ntap;
      if (tv.lo[o] + k > sh) k = sh - tv.lo[o];
      vrow(s, sstride, acc, mid, len, tv.w + (size_t)o * (size_t)tv.ntap, k);
      hrow(mid, dst + (size_t)o * (size_t)dw * (size_t)c, dw, c, &th);
    }
  sl__free(mid);
  sl__free(acc);
  taps_free(&tv);
  taps_free(&th);
  return rc;
}
