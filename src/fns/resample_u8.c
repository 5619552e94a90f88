/* fns/resample_u8.c: the uint8 resizer of the image functions' hot path: a separable triangle (bilinear) filter
 * widened by the shrink factor (antialiased, as PIL's and stb's are), pixel centres aligned, edges clamped, in
 * 14-bit fixed point: the vertical pass first (a multiply-add over whole rows: AVX2 with the sums in registers where
 * the CPU has it, else a loop the compiler vectorises), then the horizontal one on the fewer rows left, through a uint8
 * row in between. libyuv and OpenCV were measured first
 * (fns/fn_image.c's header says why they are not used). */
#include <math.h>
#include <string.h>

#include "fns/image_int.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3") /* the row loops are written for the vectoriser */
#endif

enum { PREC = 14, PAD = 16 /* readable bytes after a resampled row */ };
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
  /* The taps from floor(centre - rad) + 1 on: ceil(2 rad) of them cover the support, since the next one lies past
   * centre + rad (weight 0; counting it, as the 2 rad + 1 of the usual bound does, only costs a multiply-add per
   * value: 3 taps for 2 when enlarging). */
  int k = (int)ceil(2 * rad);
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

/* One pixel's three channels (and the next pixel's first byte, ignored: the row has padding) as 4 lanes, through
 * k taps. */
static inline __attribute__((always_inline)) v4i taps3(const uint8_t *s, const int16_t *w, int k) {
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
  return acc;
}

/* Horizontal pass of one row, c channels (the common counts get their own loops for the compiler). */
SL_CLONES static void hrow(const uint8_t *src, uint8_t *dst, int dw, int c, const taps *t) {
  int k = t->ntap;
  for (int o = 0; o < dw; o++) {
    const int16_t *w = t->w + (size_t)o * (size_t)k;
    const uint8_t *s = src + (size_t)t->lo[o] * (size_t)c;
    if (c == 3) {
      v4i acc = taps3(s, w, k);
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

/* hrow for 3 channels with the output pass inside: each pixel is written where the flip puts it, as uint8 or as
 * normalised float32, when it is computed (no second pass over the row). The values are sl__px_row's. */
SL_CLONES static void hrow3_px(const uint8_t *src, void *dst, int dw, const taps *t, const sl__px_out *o) {
  int k = t->ntap;
  const float m0 = o->mul[0], m1 = o->mul[1], m2 = o->mul[2], a0 = o->add[0], a1 = o->add[1], a2 = o->add[2];
  for (int x = 0; x < dw; x++) {
    v4i acc = taps3(src + (size_t)t->lo[x] * 3, t->w + (size_t)x * (size_t)k, k);
    uint8_t r = clamp_round(acc[0]), g = clamp_round(acc[1]), b = clamp_round(acc[2]);
    size_t at = (size_t)(o->flip ? dw - 1 - x : x) * 3;
    if (o->f32) {
      float *d = (float *)dst + at;
      d[0] = (float)r * m0 + a0, d[1] = (float)g * m1 + a1, d[2] = (float)b * m2 + a2;
    } else {
      uint8_t *d = (uint8_t *)dst + at;
      d[0] = r, d[1] = g, d[2] = b;
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define SL_RESAMPLE_AVX2 1
/* The 3-channel horizontal pass in AVX2, two output pixels per 256-bit register (one per 128-bit lane): each pair of
 * taps is 6 source bytes shuffled into int16 (r_j, r_j+1, g_j, g_j+1, b_j, b_j+1, 0, 0) and multiplied-added
 * (pmaddwd) with the pair's weights, so the int32 sums, and every output value, are hrow3_px's. One 16-byte load per
 * pixel serves two tap pairs (two shuffles). `hp` is the row's plan from hplan_make: the source byte offset of each
 * output position, then for each pair of positions and each tap pair one register of weights. Output positions
 * ascend (the plan has the flip in it), each store writing one value past its pixel that the next overwrites; the
 * last two positions go through a small buffer, so nothing past the row is written. The loop is specialised for 1-3
 * tap pairs and for each output type (2-4% less CPU for the fused op than one loop with those as variables). Reads reach 16 bytes past the
 * last tap's first byte: the row needs that padding. */
/* One output pair (positions p, p + 1) into `d` (4 values each, the 4th overwritten by the next or a scratch). */
static inline __attribute__((always_inline, target("avx2"))) void hpair(const uint8_t *src, const int32_t *off,
                                                                        const int32_t *wq, int np, bool f32, __m256 mul,
                                                                        __m256 add, void *d) {
  const __m256i shufa = _mm256_setr_epi8(0, -128, 3, -128, 1, -128, 4, -128, 2, -128, 5, -128, -128, -128, -128, -128,
                                         0, -128, 3, -128, 1, -128, 4, -128, 2, -128, 5, -128, -128, -128, -128, -128);
  const __m256i shufb = _mm256_setr_epi8(6, -128, 9, -128, 7, -128, 10, -128, 8, -128, 11, -128, -128, -128, -128,
                                         -128, 6, -128, 9, -128, 7, -128, 10, -128, 8, -128, 11, -128, -128, -128, -128,
                                         -128);
  const uint8_t *s0 = src + off[0], *s1 = src + off[1];
  __m256i acc = _mm256_setzero_si256();
  for (int j = 0; j < np; j += 2) {
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(s0 + 6 * j))),
                                        _mm_loadu_si128((const __m128i *)(s1 + 6 * j)), 1);
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(v, shufa),
                                                  _mm256_loadu_si256((const __m256i *)(wq + 8 * j))));
    if (j + 1 < np)
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(v, shufb),
                                                    _mm256_loadu_si256((const __m256i *)(wq + 8 * j + 8))));
  }
  acc = _mm256_add_epi32(acc, _mm256_set1_epi32(1 << (PREC - 1)));
  acc = _mm256_max_epi32(_mm256_srai_epi32(acc, PREC), _mm256_setzero_si256());
  acc = _mm256_min_epi32(acc, _mm256_set1_epi32(255));
  if (f32) {
    __m256 f = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(acc), mul), add);
    _mm_storeu_ps((float *)d, _mm256_castps256_ps128(f));
    _mm_storeu_ps((float *)d + 3, _mm256_extractf128_ps(f, 1));
  } else {
    __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(acc, acc), _mm256_setzero_si256());
    int32_t lo = _mm256_extract_epi32(b, 0), hi = _mm256_extract_epi32(b, 4);
    memcpy(d, &lo, 4);
    memcpy((uint8_t *)d + 3, &hi, 4);
  }
}

/* The row loop for one tap-pair count and output type (constants when inlined below: unrolled, no branches). */
static inline __attribute__((always_inline, target("avx2"))) void hrow3_loop(const uint8_t *src, void *dst, int dw,
                                                                             int np, const int32_t *hp, bool f32,
                                                                             __m256 mul, __m256 add) {
  int nq = (dw + 1) / 2, p = 0;
  size_t esz = f32 ? sizeof(float) : 1;
  const int32_t *wq = hp + 2 * nq;
  for (; p + 2 < dw; p += 2, wq += 8 * np)
    hpair(src, hp + p, wq, np, f32, mul, add, (uint8_t *)dst + (size_t)p * 3 * esz);
  /* the last one or two positions: their stores would pass the row's end */
  float tmp[8];
  hpair(src, hp + p, wq, np, f32, mul, add, tmp);
  memcpy((uint8_t *)dst + (size_t)p * 3 * esz, tmp, (size_t)(dw - p) * 3 * esz);
}

__attribute__((target("avx2"))) static void hrow3_avx2(const uint8_t *src, void *dst, int dw, int np,
                                                       const int32_t *hp, const sl__px_out *o) {
  bool f32 = o && o->f32;
  __m256 mul = _mm256_setzero_ps(), add = mul;
  if (f32) {
    mul = _mm256_setr_ps(o->mul[0], o->mul[1], o->mul[2], 0, o->mul[0], o->mul[1], o->mul[2], 0);
    add = _mm256_setr_ps(o->add[0], o->add[1], o->add[2], 0, o->add[0], o->add[1], o->add[2], 0);
  }
#define HROW3(NP)                                                                                                     \
  (f32 ? hrow3_loop(src, dst, dw, NP, hp, true, mul, add) : hrow3_loop(src, dst, dw, NP, hp, false, mul, add))
  switch (np) {
  case 1: HROW3(1); break;
  case 2: HROW3(2); break;
  case 3: HROW3(3); break;
  default: HROW3(np); break;
  }
#undef HROW3
}

/* The vertical pass in AVX2, 32 bytes of the row at a time with the sums in registers: each pair of taps (rows j and
 * j+1) is widened to int16, interleaved and multiplied-added (pmaddwd) with the pair's weights, so the int32 sums, and
 * the bytes out (rounded, clamped by the saturating packs), are vrow's. The bytes past the last multiple of 32 go
 * through the same arithmetic one at a time. */
__attribute__((target("avx2"))) static void vrow_avx2(const uint8_t *src, size_t stride, uint8_t *dst, size_t len,
                                                      const int16_t *w, int k) {
  const __m256i rnd = _mm256_set1_epi32(1 << (PREC - 1));
  size_t x = 0;
  for (; x + 32 <= len; x += 32) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (int j = 0; j < k; j += 2) {
      __m256i r0 = _mm256_loadu_si256((const __m256i *)(src + (size_t)j * stride + x)), r1 = _mm256_setzero_si256();
      uint16_t w1 = 0;
      if (j + 1 < k) {
        r1 = _mm256_loadu_si256((const __m256i *)(src + (size_t)(j + 1) * stride + x));
        w1 = (uint16_t)w[j + 1];
      }
      __m256i wp = _mm256_set1_epi32((int32_t)((uint32_t)(uint16_t)w[j] | (uint32_t)w1 << 16));
      __m256i lo0 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(r0));
      __m256i hi0 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(r0, 1));
      __m256i lo1 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(r1));
      __m256i hi1 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(r1, 1));
      a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi16(lo0, lo1), wp)); /* bytes 0-3, 8-11 */
      a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi16(lo0, lo1), wp)); /* 4-7, 12-15 */
      a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi16(hi0, hi1), wp)); /* 16-19, 24-27 */
      a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi16(hi0, hi1), wp)); /* 20-23, 28-31 */
    }
    a0 = _mm256_srai_epi32(_mm256_add_epi32(a0, rnd), PREC), a1 = _mm256_srai_epi32(_mm256_add_epi32(a1, rnd), PREC);
    a2 = _mm256_srai_epi32(_mm256_add_epi32(a2, rnd), PREC), a3 = _mm256_srai_epi32(_mm256_add_epi32(a3, rnd), PREC);
    /* packs undoes the unpacks' lane order: bytes 0-15, then 16-31; packus puts 0-7, 16-23 | 8-15, 24-31 */
    __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(a2, a3));
    _mm256_storeu_si256((__m256i *)(dst + x), _mm256_permute4x64_epi64(b, 0xd8));
  }
  for (; x < len; x++) {
    int32_t v = 0;
    for (int j = 0; j < k; j++) v += w[j] * src[(size_t)j * stride + x];
    dst[x] = clamp_round(v);
  }
}

/* hrow3_avx2's plan of a row from the horizontal taps: the source byte offset of each output position (the flip
 * applied: position p reads source pixel dw - 1 - p; an odd width repeats the last), then per pair of positions
 * (p, p + 1) and tap pair j one register's worth of int32: (w_j | w_j+1 << 16) of p four times, then of p + 1 (the
 * odd last tap with 0). NULL on allocation failure (the portable loops then run). */
static int32_t *hplan_make(const taps *t, int dw, bool flip, int *np_out) {
  int k = t->ntap, np = (k + 1) / 2, nq = (dw + 1) / 2;
  size_t n;
  if (!sl__mul_ok((size_t)nq, (size_t)np * 8 + 2, &n)) return NULL;
  int32_t *hp = sl__mallocarray(n, sizeof(int32_t));
  if (!hp) return NULL;
  int32_t *wq = hp + 2 * nq;
  for (int p = 0; p < 2 * nq; p++) {
    int q = p < dw ? p : dw - 1, x = flip ? dw - 1 - q : q;
    hp[p] = t->lo[x] * 3;
    for (int j = 0; j < np; j++) {
      const int16_t *w = t->w + (size_t)x * (size_t)k + 2 * j;
      uint16_t a = (uint16_t)w[0], b = 2 * j + 1 < k ? (uint16_t)w[1] : 0;
      int32_t v = (int32_t)((uint32_t)a | (uint32_t)b << 16);
      for (int l = 0; l < 4; l++) wq[(size_t)(p / 2) * (size_t)np * 8 + (size_t)j * 8 + (size_t)(p % 2) * 4 + l] = v;
    }
  }
  *np_out = np;
  return hp;
}
#endif

/* (tests clear it to compare the AVX2 passes with the portable loops) */
bool sl__resample_avx2 = true;

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

SL_CLONES static void px_row(const uint8_t *src, void *dst, int64_t w, int c, const sl__px_out *o) {
  size_t cc = (size_t)c;
  if (!o->f32) {
    uint8_t *d = dst;
    if (!o->flip) memcpy(d, src, (size_t)w * cc);
    else if (c == 3)
      for (int64_t x = 0; x < w; x++) {
        uint8_t *q = d + (size_t)(w - 1 - x) * 3;
        q[0] = src[3 * x], q[1] = src[3 * x + 1], q[2] = src[3 * x + 2];
      }
    else
      for (int64_t x = 0; x < w; x++) memcpy(d + (size_t)(w - 1 - x) * cc, src + (size_t)x * cc, cc);
    return;
  }
  float *d = dst;
  if (c == 3) {
    const float m0 = o->mul[0], m1 = o->mul[1], m2 = o->mul[2], a0 = o->add[0], a1 = o->add[1], a2 = o->add[2];
    if (!o->flip)
      for (int64_t x = 0; x < w; x++) {
        d[3 * x] = (float)src[3 * x] * m0 + a0;
        d[3 * x + 1] = (float)src[3 * x + 1] * m1 + a1;
        d[3 * x + 2] = (float)src[3 * x + 2] * m2 + a2;
      }
    else
      for (int64_t x = 0; x < w; x++) {
        float *q = d + (size_t)(w - 1 - x) * 3;
        q[0] = (float)src[3 * x] * m0 + a0;
        q[1] = (float)src[3 * x + 1] * m1 + a1;
        q[2] = (float)src[3 * x + 2] * m2 + a2;
      }
    return;
  }
  for (int64_t x = 0; x < w; x++) {
    float *q = d + (size_t)(o->flip ? w - 1 - x : x) * cc;
    for (int k = 0; k < c; k++) q[k] = (float)src[(size_t)x * cc + (size_t)k] * o->mul[k] + o->add[k];
  }
}

/* (target_clones makes an ifunc, which -fvisibility=hidden does not hide: the clones stay static) */
void sl__px_row(const uint8_t *src, void *dst, int64_t w, int c, const sl__px_out *o) { px_row(src, dst, w, c, o); }

int sl__resample_u8(const uint8_t *src, int sh, int sw, size_t sstride, uint8_t *dst, int dh, int dw, int c, bool box) {
  return sl__resample_u8_px(src, sh, sw, sstride, dst, dh, dw, c, box, NULL);
}

/* With an output pass, each row is resampled into `row` (in L1) and written out through sl__px_row: one pass from
 * the decoded window to the final tensor. */
int sl__resample_u8_px(const uint8_t *src, int sh, int sw, size_t sstride, void *dst, int dh, int dw, int c, bool box,
                       const sl__px_out *px) {
  taps tv = {0}, th = {0};
  size_t len = (size_t)sw * (size_t)c;
  int rc = taps_make(&tv, sh, dh, box);
  if (!rc) rc = taps_make(&th, sw, dw, box);
  uint8_t *mid = NULL;
  int32_t *acc = NULL, *hp = NULL;
  size_t orow = (size_t)dw * (size_t)c, osz = px && px->f32 ? orow * sizeof(float) : orow;
  if (!rc) {
    /* + the bytes past the last pixel that the 4-lane and AVX2 loops read; then the output row of an output pass */
    mid = sl__malloc(len + PAD + (px ? orow : 0));
    acc = sl__mallocarray(len, sizeof(int32_t));
    if (!mid || !acc) rc = sl__oom("resize rows");
    else memset(mid + len, 0, PAD);
  }
#ifdef SL_RESAMPLE_AVX2
  bool avx2 = sl__resample_avx2 && __builtin_cpu_supports("avx2");
  int np = 0;
  if (!rc && c == 3 && avx2) hp = hplan_make(&th, dw, px && px->flip, &np); /* NULL: the portable loops */
#endif
  if (!rc)
    for (int o = 0; o < dh; o++) {
      const uint8_t *s = src + (size_t)tv.lo[o] * sstride;
      int k = tv.ntap;
      if (tv.lo[o] + k > sh) k = sh - tv.lo[o];
#ifdef SL_RESAMPLE_AVX2
      if (avx2) vrow_avx2(s, sstride, mid, len, tv.w + (size_t)o * (size_t)tv.ntap, k);
      else
#endif
        vrow(s, sstride, acc, mid, len, tv.w + (size_t)o * (size_t)tv.ntap, k);
#ifdef SL_RESAMPLE_AVX2
      if (hp) {
        hrow3_avx2(mid, (uint8_t *)dst + (size_t)o * osz, dw, np, hp, px);
        continue;
      }
#endif
      if (!px) {
        hrow(mid, (uint8_t *)dst + (size_t)o * orow, dw, c, &th);
      } else if (c == 3) {
        hrow3_px(mid, (uint8_t *)dst + (size_t)o * osz, dw, &th, px);
      } else {
        hrow(mid, mid + len + PAD, dw, c, &th);
        px_row(mid + len + PAD, (uint8_t *)dst + (size_t)o * osz, dw, c, px);
      }
    }
  sl__free(mid);
  sl__free(acc);
  sl__free(hp);
  taps_free(&tv);
  taps_free(&th);
  return rc;
}
