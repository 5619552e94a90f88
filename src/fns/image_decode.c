/* fns/image_decode.c: the image decoders besides JPEG (fn_jpeg.c's): PNG through libspng and WebP through libwebp,
 * into uint8 [h, w, channels], and the format sniffed from the bytes. decode_image (fn_codec.c) and the fused crop
 * (fn_jpeg.c) both call them; they call neither. */
#include <stdio.h>
#include <string.h>

#include <spng.h>
#include <webp/decode.h>
#include <webp/demux.h>

#include "fns/image_int.h"

/* ---- the decoders below share: out of RGBA8 rows (src, w pixels) into c = 1, 3 or 4 channels ---- */
static void rgba_to(const uint8_t *src, uint8_t *dst, size_t npx, int c) {
  for (size_t i = 0; i < npx; i++, src += 4) {
    if (c == 4) memcpy(dst, src, 4), dst += 4;
    else if (c == 3) *dst++ = src[0], *dst++ = src[1], *dst++ = src[2];
    else *dst++ = (uint8_t)((src[0] * 77u + src[1] * 150u + src[2] * 29u + 128u) >> 8); /* as fn_jpeg's CMYK */
  }
}

typedef struct {
  int channels; /* 0: as stored (1 gray, 3 colour, 4 with alpha); 1, 3 or 4 */
  int64_t max_pixels;
} img_opts;

static int check_size(int64_t h, int64_t w, int64_t max_pixels, const char *fmt) {
  if (h <= 0 || w <= 0) return sl__err(SL_EINVAL, "zero-sized %s (%lldx%lld)", fmt, (long long)w, (long long)h);
  if (h * w > max_pixels)
    return sl__err(SL_EINVAL, "%s of %lldx%lld pixels exceeds max_pixels %lld", fmt, (long long)w, (long long)h,
                   (long long)max_pixels);
  return 0;
}

/* A buffer of h x w x c bytes, or SL_ENOMEM. */
int sl__image_buf(sl_buf **out, int64_t h, int64_t w, int c) {
  size_t n;
  if (!sl__mul_ok((size_t)h * (size_t)w, (size_t)c, &n)) return sl__err(SL_EINVAL, "decoded image too large");
  *out = sl_buf_alloc(n);
  return *out ? 0 : sl__oom("decoded image");
}

/* libspng (and the zlib stream it allocates through the same hooks) allocates through sluice's allocator
 * (sl_set_allocator), as we do. A failed allocation is noted for this thread: libspng reports one inside zlib as a
 * stream error (SPNG_EIDAT_STREAM), which must be SL_ENOMEM, never a corrupt image that on_error "skip" drops. */
static _Thread_local bool png_oom;
static void *png_malloc(size_t n) {
  void *p = sl__malloc(n);
  if (!p) png_oom = true;
  return p;
}
static void *png_realloc(void *q, size_t n) {
  void *p = sl__realloc(q, n);
  if (!p) png_oom = true;
  return p;
}
static void *png_calloc(size_t n, size_t size) {
  void *p = sl__calloc(n, size);
  if (!p) png_oom = true;
  return p;
}
/* libspng (0.7.3) stores at most 1,000 ancillary chunks and refuses a PNG with more, and its SPNG_CHUNK_COUNT_LIMIT
 * cannot be raised (spng_set_option refuses every value): a PNG with more than PNG_KEEP_CHUNKS of them is decoded
 * from a copy without its ancillary chunks but tRNS (the one that changes the pixels). */
enum { PNG_KEEP_CHUNKS = 900 };
static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static bool png_dropped(const uint8_t *type) { return (type[0] & 0x20) && memcmp(type, "tRNS", 4); }

/* Walks the chunks of d (n bytes, past the signature) to IEND or the first that does not fit, copying those kept
 * to o (when not NULL) and counting those dropped; the bytes after the walk are copied as they are (libspng judges
 * them). Returns the bytes written. */
static size_t png_walk(const uint8_t *d, size_t n, uint8_t *o, size_t *dropped) {
  size_t at = 8, w = 8;
  if (o) memcpy(o, d, 8);
  *dropped = 0;
  while (at + 12 <= n) {
    uint32_t len = be32(d + at);
    if (len > n - at - 12) break;
    const uint8_t *type = d + at + 4;
    if (png_dropped(type)) ++*dropped;
    else if (o) memcpy(o + w, d + at, 12 + (size_t)len), w += 12 + (size_t)len;
    else w += 12 + (size_t)len;
    at += 12 + (size_t)len;
    if (!memcmp(type, "IEND", 4)) break;
  }
  if (o) memcpy(o + w, d + at, n - at);
  return w + (n - at);
}

/* The PNG to decode: data itself, or (more than PNG_KEEP_CHUNKS ancillary chunks) a copy without them in *copy. */
static int png_source(const uint8_t **data, size_t *len, uint8_t **copy) {
  *copy = NULL;
  size_t dropped;
  if (*len < 8 || (png_walk(*data, *len, NULL, &dropped), dropped <= PNG_KEEP_CHUNKS)) return 0;
  if (!(*copy = sl__malloc(*len))) return sl__oom("a PNG without its ancillary chunks");
  *len = png_walk(*data, *len, *copy, &dropped);
  *data = *copy;
  return 0;
}

static spng_ctx *png_ctx(void) {
  static struct spng_alloc a = {png_malloc, png_realloc, png_calloc, sl__free};
  png_oom = false;
  return spng_ctx_new2(&a, 0);
}
static int png_err(int src) {
  return src == SPNG_EMEM || png_oom ? sl__oom("a PNG decoder")
                                     : sl__err(SL_ECORRUPT, "corrupt PNG: %s", spng_strerror(src));
}

/* A chunk error, the limits named. */
static int png_chunks_err(int src) {
  if (src == SPNG_ECHUNK_LIMITS)
    return sl__err(SL_ECORRUPT, "corrupt PNG: more than 16 MiB of ancillary chunks (%s)", spng_strerror(src));
  return png_err(src);
}

static int png_decode(const uint8_t *data, size_t len, const img_opts *o, sl_buf **out, int64_t *oh, int64_t *ow,
                      int64_t *oc) {
  uint8_t *copy;
  int rc = png_source(&data, &len, &copy);
  if (rc) return rc;
  spng_ctx *ctx = png_ctx();
  if (!ctx) {
    sl__free(copy);
    return sl__oom("a PNG decoder");
  }
  uint8_t *rgba = NULL;
  struct spng_ihdr ih;
  size_t need = 0;
  int src = spng_set_png_buffer(ctx, data, len);
  /* Ancillary chunks are kept to 16 MiB (text, ICC; their count: png_source): the image data itself is bounded by
   * max_pixels below. A critical chunk with a wrong CRC is an error, an ancillary one is skipped. */
  if (!src) src = spng_set_chunk_limits(ctx, 16u << 20, 16u << 20);
  if (!src) src = spng_set_crc_action(ctx, SPNG_CRC_ERROR, SPNG_CRC_DISCARD);
  if (!src) src = spng_get_ihdr(ctx, &ih);
  if (src) {
    rc = png_err(src);
    goto done;
  }
  if ((rc = check_size(ih.height, ih.width, o->max_pixels, "PNG"))) goto done;
  bool gray = ih.color_type == SPNG_COLOR_TYPE_GRAYSCALE || ih.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA;
  struct spng_trns trns;
  int trc = spng_get_trns(ctx, &trns); /* reads the chunks before the image data: their errors are this PNG's */
  if (trc && trc != SPNG_ECHUNKAVAIL) {
    rc = png_chunks_err(trc);
    goto done;
  }
  bool alpha = ih.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA || ih.color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ||
               trc == 0;
  int c = o->channels ? o->channels : alpha ? 4 : gray ? 1 : 3;
  /* Every layout (palette, gray, 16-bit: scaled) straight into the output as RGB8 or RGBA8 (libspng drops or adds
   * alpha), or to one channel through RGBA8. */
  int fmt = c == 3 ? SPNG_FMT_RGB8 : SPNG_FMT_RGBA8;
  if ((src = spng_decoded_image_size(ctx, fmt, &need))) {
    rc = png_err(src);
    goto done;
  }
  if ((rc = sl__image_buf(out, ih.height, ih.width, c))) goto done;
  uint8_t *dst = sl_buf_data(*out);
  if (c == 1 && !(rgba = sl__malloc(need))) {
    rc = sl__oom("decoded PNG");
    goto done;
  }
  if ((src = spng_decode_image(ctx, c == 1 ? rgba : dst, need, fmt, SPNG_DECODE_TRNS))) {
    rc = png_err(src);
    goto done;
  }
  /* The image data's last chunk ends with a CRC that the decode stops short of: the chunks after it are read so
   * that it is checked (a missing IEND after whole image data is let pass, as other decoders do). */
  if ((src = spng_decode_chunks(ctx)) && src != SPNG_EOF) {
    rc = png_chunks_err(src);
    goto done;
  }
  if (c == 1) rgba_to(rgba, dst, (size_t)ih.height * ih.width, 1);
  *oh = ih.height, *ow = ih.width, *oc = c;
done:
  if (rc) {
    sl_buf_unref(*out);
    *out = NULL;
  }
  sl__free(rgba);
  sl__free(copy);
  spng_ctx_free(ctx);
  return rc;
}

static int webp_decode(const uint8_t *data, size_t len, const img_opts *o, sl_buf **out, int64_t *oh, int64_t *ow,
                       int64_t *oc) {
  WebPBitstreamFeatures f;
  VP8StatusCode st = WebPGetFeatures(data, len, &f);
  if (st != VP8_STATUS_OK) return sl__err(SL_ECORRUPT, "corrupt WebP: header unreadable (libwebp status %d)", (int)st);
  int rc = check_size(f.height, f.width, o->max_pixels, "WebP");
  if (rc) return rc;
  if (f.has_animation) return sl__err(SL_EINVAL, "animated WebP: decode_image reads still images only");
  int c = o->channels ? o->channels : f.has_alpha ? 4 : 3;
  size_t npx = (size_t)f.width * (size_t)f.height;
  if ((rc = sl__image_buf(out, f.height, f.width, c))) return rc;
  uint8_t *dst = sl_buf_data(*out), *tmp = NULL;
  bool ok;
  if (c == 4) ok = WebPDecodeRGBAInto(data, len, dst, npx * 4, f.width * 4) != NULL;
  else if (c == 3) ok = WebPDecodeRGBInto(data, len, dst, npx * 3, f.width * 3) != NULL;
  else {
    if (!(tmp = sl__malloc(npx * 4))) {
      sl_buf_unref(*out);
      *out = NULL;
      return sl__oom("decoded WebP");
    }
    ok = WebPDecodeRGBAInto(data, len, tmp, npx * 4, f.width * 4) != NULL;
    if (ok) rgba_to(tmp, dst, npx, 1);
    sl__free(tmp);
  }
  if (!ok) {
    sl_buf_unref(*out);
    *out = NULL;
    return sl__err(SL_ECORRUPT, "corrupt or truncated WebP (%zu bytes, %dx%d declared)", len, f.width, f.height);
  }
  *oh = f.height, *ow = f.width, *oc = c;
  return 0;
}

int sl__image_sniff(const uint8_t *d, size_t n) {
  if (n >= 2 && d[0] == 0xFF && d[1] == 0xD8) return SL__IMG_JPEG;
  if (n >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8)) return SL__IMG_PNG;
  if (n >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4)) return SL__IMG_WEBP;
  return SL__IMG_UNKNOWN;
}

/* What an unknown format is, for the message. */
static int unknown_format(const uint8_t *d, size_t n);

int sl__image_decode_other(const uint8_t *data, size_t len, int channels, int64_t max_pixels, sl_buf **out, int64_t *h,
                           int64_t *w, int64_t *c) {
  img_opts o = {channels, max_pixels};
  *out = NULL;
  switch (sl__image_sniff(data, len)) {
  case SL__IMG_PNG: return png_decode(data, len, &o, out, h, w, c);
  case SL__IMG_WEBP: return webp_decode(data, len, &o, out, h, w, c);
  case SL__IMG_JPEG: return sl__err(SL_EINVAL, "a JPEG: decode it with sl__jpeg_decode");
  default: return unknown_format(data, len);
  }
}

/* What an unknown format is, for the message. */
static int unknown_format(const uint8_t *d, size_t n) {
  if (n == 0) return sl__err(SL_EINVAL, "empty image data (0 bytes)");
  const char *what = n >= 4 && !memcmp(d, "GIF8", 4)                          ? "a GIF"
                     : n >= 2 && d[0] == 'B' && d[1] == 'M'                      ? "a BMP"
                     : n >= 4 && (!memcmp(d, "II*", 4) || !memcmp(d, "MM\0*", 4)) ? "a TIFF"
                                                                                 : NULL;
  if (what) return sl__err(SL_EINVAL, "data is %s; decode_image reads JPEG, PNG and WebP", what);
  uint8_t b[4] = {0};
  memcpy(b, d, n < 4 ? n : 4);
  return sl__err(SL_EINVAL, "not a JPEG, PNG or WebP image (starts with 0x%02x 0x%02x 0x%02x 0x%02x)", b[0], b[1],
                 b[2], b[3]);
}


int sl__exif_tiff_orientation(const uint8_t *t, size_t tn) {
  if (tn >= 6 && !memcmp(t, "Exif\0\0", 6)) { /* WebP writers differ on this prefix */
    t += 6;
    tn -= 6;
  }
  if (tn < 8) return 1;
  bool le = t[0] == 'I' && t[1] == 'I';
  if (!le && !(t[0] == 'M' && t[1] == 'M')) return 1;
#define RD16(q) (le ? (unsigned)(q)[0] | (unsigned)(q)[1] << 8 : (unsigned)(q)[0] << 8 | (unsigned)(q)[1])
#define RD32(q) (le ? (uint32_t)RD16(q) | (uint32_t)RD16((q) + 2) << 16 : (uint32_t)RD16(q) << 16 | RD16((q) + 2))
  uint32_t ifd = RD32(t + 4);
  if (ifd > tn || tn - ifd < 2) return 1;
  unsigned cnt = RD16(t + ifd);
  for (unsigned i = 0; i < cnt && ifd + 2 + (size_t)(i + 1) * 12 <= tn; i++) {
    const uint8_t *e = t + ifd + 2 + (size_t)i * 12;
    if (RD16(e) == 0x0112) {
      unsigned v = RD16(e + 8);
      return v >= 1 && v <= 8 ? (int)v : 1;
    }
  }
#undef RD32
#undef RD16
  return 1;
}

int sl__image_exif_orientation(const uint8_t *d, size_t n) {
  int o = 1;
  switch (sl__image_sniff(d, n)) {
  case SL__IMG_PNG: { /* the eXIf chunk, through libspng */
    spng_ctx *ctx = png_ctx();
    struct spng_exif ex;
    if (ctx && !spng_set_png_buffer(ctx, d, n) && !spng_set_chunk_limits(ctx, 16u << 20, 16u << 20) &&
        !spng_get_exif(ctx, &ex))
      o = sl__exif_tiff_orientation((const uint8_t *)ex.data, ex.length);
    spng_ctx_free(ctx);
    break;
  }
  case SL__IMG_WEBP: { /* the EXIF chunk, through libwebp's demuxer */
    WebPData wd = {d, n};
    WebPDemuxer *dm = WebPDemux(&wd);
    WebPChunkIterator it;
    if (dm && WebPDemuxGetChunk(dm, "EXIF", 1, &it)) {
      o = sl__exif_tiff_orientation(it.chunk.bytes, it.chunk.size);
      WebPDemuxReleaseChunkIterator(&it);
    }
    WebPDemuxDelete(dm);
    break;
  }
  default:
    break;
  }
  return o;
}
