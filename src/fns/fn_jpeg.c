/* fns/fn_jpeg.c: `decode_jpeg` and `decode_and_crop_jpeg` (also what the planner fuses decode_jpeg followed by
 * random_resized_crop, center_crop or resize into: plan/plan_fuse.c), on libjpeg-turbo's libjpeg API.
 * libjpeg's default error handler calls exit(); ours longjmps back with the message, and in strict mode warnings
 * (corrupt data, premature end of file) are errors too. The cropped decoder reads the header, picks the window,
 * picks the smallest DCT scale (n/8, n = 1, 2, 4 or 8) that keeps the window at least as large as the requested
 * output, skips the rows above the window (jpeg_skip_scanlines), decodes only the iMCU columns that cover it
 * (jpeg_crop_scanline) and stops after its last row. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE and size_t */

#include "fns/image_int.h"

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
  bool strict;
  char msg[JMSG_LENGTH_MAX];
} jerr_mgr;

static void jerr_exit(j_common_ptr ci) {
  jerr_mgr *e = (jerr_mgr *)ci->err;
  ci->err->format_message(ci, e->msg);
  longjmp(e->jb, 1);
}
static void jerr_emit(j_common_ptr ci, int level) {
  jerr_mgr *e = (jerr_mgr *)ci->err;
  if (level >= 0) return; /* trace messages */
  if (e->strict) {
    ci->err->format_message(ci, e->msg);
    longjmp(e->jb, 2);
  }
  ci->err->num_warnings++;
}
static void jerr_output(j_common_ptr ci) { (void)ci; }

/* CMYK as libjpeg returns it (Adobe files store it inverted) to RGB or gray. */
static void cmyk_row(const uint8_t *src, uint8_t *dst, JDIMENSION w, int channels, bool inverted) {
  for (JDIMENSION x = 0; x < w; x++, src += 4) {
    unsigned c = src[0], m = src[1], y = src[2], k = src[3];
    if (!inverted) {
      c = 255 - c;
      m = 255 - m;
      y = 255 - y;
      k = 255 - k;
    }
    unsigned r = (c * k + 127) / 255, g = (m * k + 127) / 255, b = (y * k + 127) / 255;
    if (channels == 3) {
      *dst++ = (uint8_t)r;
      *dst++ = (uint8_t)g;
      *dst++ = (uint8_t)b;
    } else {
      *dst++ = (uint8_t)((r * 77 + g * 150 + b * 29 + 128) >> 8);
    }
  }
}

/* The smallest n in {1, 2, 4, 8} such that the window scaled by n/8 still covers out_h x out_w. libjpeg-turbo has SIMD
 * IDCTs for those scales only (8x8, and the reduced 4x4 and 2x2; 1x1 is the DC value); at 3/8..7/8 it runs the C
 * IDCTs (and, for 4:2:0 chroma, scaled-up ones: 14x14 at 7/8), which cost more than decoding at the next of those
 * scales and resampling the larger window (measured: 4-8% of the fused op's CPU on generated ImageNet-like images). */
static int pick_scale(const sl__win *w, int64_t oh, int64_t ow) {
  if (oh <= 0 || ow <= 0) return 8;
  for (int n = 1; n < 8; n *= 2)
    if ((w->h * n) / 8 >= oh && (w->w * n) / 8 >= ow) return n;
  return 8;
}

/* The window of the H x W image to decode and the size to resize it to (th, tw; 0: none), or rc, the error. */
typedef struct {
  sl__win win;
  int64_t th, tw;
  int rc;
  bool pad; /* a center crop larger than the image: the window leaves it (padded with 0) */
} jpeg_window;

/* The window as `req` asks: a random crop, a given window, a center crop, a resize of the shorter side, or (req
 * NULL) the whole image; an image of no pixels or more than max_pixels is refused. */
static jpeg_window pick_window(const sl__jpeg_req *req, int64_t H, int64_t W, int64_t max_pixels) {
  jpeg_window r = {{0, 0, H, W}, 0, 0, 0};
  if (H <= 0 || W <= 0) {
    r.rc = sl__err(SL_EINVAL, "zero-sized image (%lldx%lld)", (long long)W, (long long)H);
    return r;
  }
  if (H * W > max_pixels) {
    r.rc = sl__err(SL_EINVAL, "image of %lldx%lld pixels exceeds max_pixels %lld", (long long)W, (long long)H,
                   (long long)max_pixels);
    return r;
  }
  sl__win *win = &r.win;
  int64_t th = req ? req->out_h : 0, tw = req ? req->out_w : 0;
  if (req && req->sample) sl__crop_sample(req->sample, H, W, req->scale, req->ratio, win);
  else if (req && req->win) *win = *req->win;
  else if (req && (req->center_h > 0 || req->center_frac > 0)) {
    int64_t wh = req->center_h, ww = req->center_w;
    if (req->center_frac > 0) {
      wh = (int64_t)llround((double)H * req->center_frac);
      ww = (int64_t)llround((double)W * req->center_frac);
      if (wh < 1) wh = 1;
      if (ww < 1) ww = 1;
    }
    sl__center_window(H, W, wh, ww, win);
    r.pad = wh > H || ww > W;
    th = tw = 0;
  } else if (req && req->shorter > 0) {
    sl__shorter_side(H, W, req->shorter, &th, &tw);
  }
  if (!r.pad && (win->h <= 0 || win->w <= 0 || win->y < 0 || win->x < 0 || win->y + win->h > H || win->x + win->w > W))
    r.rc = sl__err(SL_EINVAL, "crop window [y=%lld, x=%lld, h=%lld, w=%lld] outside the %lldx%lld image (HxW)",
                   (long long)win->y, (long long)win->x, (long long)win->h, (long long)win->w, (long long)H,
                   (long long)W);
  r.th = th;
  r.tw = tw;
  return r;
}

/* The window in pixels scaled by n/8 (rows y0.., columns x0.., ch x cw), and the columns the decoder is told to
 * decode (xoff, xw: libjpeg widens them to whole iMCUs). */
typedef struct {
  int64_t y0, x0, ch, cw;
  JDIMENSION xoff, xw;
} jpeg_cols;

static jpeg_cols crop_columns(struct jpeg_decompress_struct *ci, const sl__win *win, int n) {
  int64_t SH = ci->output_height, SW = ci->output_width;
  int64_t y0 = win->y * n / 8, x0 = win->x * n / 8;
  int64_t y1 = (win->y + win->h) * n / 8 + ((win->y + win->h) * n % 8 != 0);
  int64_t x1 = (win->x + win->w) * n / 8 + ((win->x + win->w) * n % 8 != 0);
  if (y1 > SH) y1 = SH;
  if (x1 > SW) x1 = SW;
  if (y1 <= y0) y1 = y0 + 1;
  if (x1 <= x0) x1 = x0 + 1;
  /* Ask for one more column on each side than the window needs: fancy upsampling replicates the edge column of
   * a cropped region, so without a neighbour the window's border pixels would differ from a full decode. */
  int64_t rx0 = x0 > 0 ? x0 - 1 : 0, rx1 = x1 < SW ? x1 + 1 : SW;
  JDIMENSION xoff = (JDIMENSION)rx0, xw = (JDIMENSION)(rx1 - rx0);
  if (rx1 - rx0 < SW) jpeg_crop_scanline(ci, &xoff, &xw);
  else xoff = 0, xw = (JDIMENSION)SW;
  return (jpeg_cols){y0, x0, y1 - y0, x1 - x0, xoff, xw};
}

/* Rows decoded into scratch (`got` of them, the window `skip` bytes in) to their place from output row `row`: through
 * the CMYK conversion when `cmyk_ci` (its decoder) is given, and through the output pass `px` (rows `orow` bytes
 * apart, `tail` holding a converted row) when given, else copied (rows `crow` bytes apart). */
static void copy_rows(JSAMPROW *rows, JDIMENSION got, size_t skip, uint8_t *dst, int64_t row, size_t crow, size_t orow,
                      int64_t cw, int channels, const struct jpeg_decompress_struct *cmyk_ci, const sl__px_out *px,
                      uint8_t *tail) {
  for (JDIMENSION i = 0; i < got; i++) {
    if (px) { /* straight through the output pass into the output row */
      const uint8_t *r = rows[i] + skip;
      if (cmyk_ci) cmyk_row(r, tail, (JDIMENSION)cw, channels, cmyk_ci->saw_Adobe_marker), r = tail;
      sl__px_row(r, dst + (size_t)(row + i) * orow, cw, channels, px);
      continue;
    }
    uint8_t *d = dst + (size_t)(row + i) * crow;
    if (cmyk_ci) cmyk_row(rows[i] + skip, d, (JDIMENSION)cw, channels, cmyk_ci->saw_Adobe_marker);
    else memcpy(d, rows[i] + skip, crow);
  }
}

/* Resizes the decoded ch x cw window (rows `wstride` bytes apart) to th x tw into `obuf`, through the output pass
 * `px` when there is one: inside the resampler's last pass (`fast`), or after the resize in `tail`. */
static int resize_window(const uint8_t *win0, int64_t ch, int64_t cw, size_t wstride, uint8_t *obuf, int64_t th,
                         int64_t tw, int channels, const sl__jpeg_req *req, const sl__px_out *fast,
                         const sl__px_out *px, uint8_t *tail) {
  if (fast) /* the resampler's last pass is the output pass */
    return sl__resample_u8_px(win0, (int)ch, (int)cw, wstride, obuf, (int)th, (int)tw, channels,
                              req->method == SL__RESIZE_AREA, fast);
  if (!px) return sl__resize_u8(win0, ch, cw, wstride, obuf, th, tw, channels, req->method);
  int rc = sl__resize_u8(win0, ch, cw, wstride, tail, th, tw, channels, req->method);
  size_t orow = (size_t)tw * (size_t)channels * (px->f32 ? sizeof(float) : 1);
  for (int64_t y = 0; !rc && y < th; y++)
    sl__px_row(tail + (size_t)y * (size_t)tw * (size_t)channels, obuf + (size_t)y * orow, tw, channels, px);
  return rc;
}

static int decode_whole_then_crop(const uint8_t *data, size_t len, const sl__jpeg_opts *o, const sl__jpeg_req *req,
                                  sl_buf **out, int64_t *oh, int64_t *ow, int64_t *oc);

int sl__jpeg_decode(const uint8_t *data, size_t len, const sl__jpeg_opts *o, const sl__jpeg_req *req, sl_buf **out,
                    int64_t *oh, int64_t *ow, int64_t *oc) {
  *out = NULL;
  if (len == 0) return sl__err(SL_EINVAL, "empty image data (0 bytes)");
  if (len >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8)) return sl__err(SL_EINVAL, "data is a PNG, not a JPEG");
  if (len >= 2 && !(data[0] == 0xFF && data[1] == 0xD8))
    return sl__err(SL_EINVAL, "not a JPEG (starts with 0x%02x 0x%02x, expected 0xff 0xd8)", data[0], data[1]);
  struct jpeg_decompress_struct ci;
  jerr_mgr jerr;
  /* Everything the error path must release lives in volatile locals (longjmp may skip register copies). */
  sl_buf *volatile buf = NULL;
  uint8_t *volatile scratch = NULL;
  volatile int code = 0; /* set for errors we raise ourselves */
  ci.err = jpeg_std_error(&jerr.pub);
  jerr.pub.error_exit = jerr_exit;
  jerr.pub.emit_message = jerr_emit;
  jerr.pub.output_message = jerr_output;
  jerr.strict = o->strict;
  jerr.msg[0] = 0;
  if (setjmp(jerr.jb)) {
    jpeg_destroy_decompress(&ci);
    sl_buf_unref(buf);
    sl__free(scratch);
    if (code) return code; /* message already set */
    return sl__err(SL_ECORRUPT, "corrupt JPEG: %s", jerr.msg);
  }
  jpeg_create_decompress(&ci);
  jpeg_mem_src(&ci, data, (unsigned long)len);
  jpeg_read_header(&ci, TRUE);
  int64_t H = ci.image_height, W = ci.image_width;
  bool cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
  int channels = o->channels ? o->channels : ci.num_components == 1 ? 1 : 3;
  const jpeg_window jw = pick_window(req, H, W, o->max_pixels);
  if (jw.rc) {
    code = jw.rc;
    longjmp(jerr.jb, 3);
  }
  if (jw.pad) { /* a center crop larger than the image: decoded whole, then padded as the unfused center_crop does */
    jpeg_destroy_decompress(&ci);
    return decode_whole_then_crop(data, len, o, req, out, oh, ow, oc);
  }
  const sl__win win = jw.win;
  const int64_t th = jw.th, tw = jw.tw;
  int n = pick_scale(&win, th, tw);
  ci.scale_num = (unsigned)n;
  ci.scale_denom = 8;
  ci.out_color_space = cmyk ? JCS_CMYK : channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  ci.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&ci);
  const jpeg_cols g = crop_columns(&ci, &win, n);
  const int64_t y0 = g.y0, x0 = g.x0, ch = g.ch, cw = g.cw;
  const JDIMENSION xoff = g.xoff, xw = g.xw;
  int comps = ci.output_components;
  bool resize = th > 0 && tw > 0 && (th != ch || tw != cw);
  /* The output pass: flip and/or float32 normalisation (the planner's folding of random_flip and normalize). */
  const sl__px_out *px = req && req->px && (req->px->flip || req->px->f32) ? req->px : NULL;
  sl__px_out pxv;
  if (px && px->f32) {
    pxv = *px;
    if (!sl__px_norm(&pxv, channels, req->nmean, req->mean, req->nstd, req->std, req->value_scale)) {
      code = sl__err(SL_EINVAL, "the image has %d channel(s) but mean has %d values and std %d", channels, req->nmean,
                     req->nstd);
      longjmp(jerr.jb, 3);
    }
    px = &pxv;
  }
  size_t esz = px && px->f32 ? sizeof(float) : 1;
  bool direct = !px && !cmyk && !resize && (int64_t)xw == cw && comps == channels;
  int64_t fh = resize ? th : ch, fw = resize ? tw : cw;
  size_t outsz, crow = (size_t)cw * (size_t)channels, orow = (size_t)fw * (size_t)channels * esz;
  if (!sl__mul_ok((size_t)fh * (size_t)fw, (size_t)channels * esz, &outsz)) {
    code = sl__err(SL_EINVAL, "decoded image too large");
    longjmp(jerr.jb, 3);
  }
  /* Into the caller's slot of a shared buffer when it is this size (req->into: a slab a batch adopts), else new. */
  size_t ooff = 0;
  if (req && req->into && req->into_size == outsz) buf = sl_buf_ref(req->into), ooff = req->into_off;
  else buf = sl_buf_alloc(outsz);
  /* Rows land in the output directly, or in scratch (wider rows after crop alignment, CMYK, before a resize, or
   * before an output pass: then one row of crow bytes more, or the resized image when the resizer has no pass). */
  size_t srow = (size_t)xw * (size_t)comps;
  bool fast_px = px && resize && (req->method == SL__RESIZE_BILINEAR || req->method == SL__RESIZE_AREA);
  size_t extra = px ? (resize && !fast_px ? (size_t)th * (size_t)tw * (size_t)channels : crow) : 0;
  /* Before a resize, rows as decoded (crop-aligned, wider than the window) go straight into the window buffer and
   * the resizer reads the window out of them: no copy. CMYK and channel changes go through 16 rows of scratch. */
  bool win_direct = resize && !cmyk && comps == channels;
  size_t rowsz = win_direct ? 0 : srow * 16, winsz = resize ? (size_t)ch * (win_direct ? srow : crow) : 0;
  /* (win_direct: plus a row for the strict read of the last row below, which must not land in the window) */
  if (!direct) scratch = sl__malloc(rowsz + winsz + extra + (win_direct ? srow : 0));
  if (!buf || (!direct && !scratch)) {
    code = sl__oom("decoded image");
    longjmp(jerr.jb, 3);
  }
  uint8_t *obuf = (uint8_t *)sl_buf_data(buf) + ooff, *dst = resize ? scratch + rowsz : obuf;
  uint8_t *tail = !direct ? scratch + rowsz + winsz : NULL;
  if (y0 > 0) jpeg_skip_scanlines(&ci, (JDIMENSION)y0);
  int64_t row = 0;
  size_t skip = (size_t)(x0 - (int64_t)xoff) * (size_t)comps;
  while (row < ch) {
    JSAMPROW rows[16];
    int k = (int)(ch - row < 16 ? ch - row : 16);
    for (int i = 0; i < k; i++)
      rows[i] = direct ? dst + (size_t)(row + i) * crow : win_direct ? dst + (size_t)(row + i) * srow : scratch + (size_t)i * srow;
    JDIMENSION got = jpeg_read_scanlines(&ci, rows, (JDIMENSION)k);
    if (got == 0) {
      code = sl__err(SL_ECORRUPT, "corrupt JPEG: decoder returned no rows");
      longjmp(jerr.jb, 3);
    }
    if (!direct && !win_direct)
      copy_rows(rows, got, skip, dst, row, crow, orow, cw, channels, cmyk ? &ci : NULL, resize ? NULL : px, tail);
    row += got;
  }
  /* Strict: the rest of the stream is entropy-decoded too (skipping the IDCT), so that a JPEG corrupt or truncated
   * below the window fails as decode_jpeg fails on it, unless this process has read these very bytes whole without
   * an error before (sl__jpeg_seen: from the second epoch on, that tail is some 12% of the op's CPU). */
  bool memo = req && o->strict && !o->recheck;
  uint64_t key = memo ? sl__jpeg_key(data, len) : 0;
  bool tail_known = memo && ci.output_scanline < ci.output_height && sl__jpeg_seen(key);
  if (ci.output_scanline < ci.output_height && o->strict && !tail_known) {
    /* libjpeg's skip to the very end decodes nothing, hence the last row is read. */
    JDIMENSION left = ci.output_height - ci.output_scanline;
    if (left > 1) jpeg_skip_scanlines(&ci, left - 1);
    if (!scratch && !(scratch = sl__malloc(srow))) {
      code = sl__oom("decoded image");
      longjmp(jerr.jb, 3);
    }
    JSAMPROW last = win_direct ? scratch + rowsz + winsz + extra : scratch;
    if (jpeg_read_scanlines(&ci, &last, 1) != 1) {
      code = sl__err(SL_ECORRUPT, "corrupt JPEG: decoder returned no rows");
      longjmp(jerr.jb, 3);
    }
  }
  if (ci.output_scanline < ci.output_height) {
    jpeg_abort_decompress(&ci);
  } else {
    jpeg_finish_decompress(&ci);
    if (memo) sl__jpeg_seen_add(key); /* read to its end in strict mode: these bytes are sound */
  }
  jpeg_destroy_decompress(&ci);
  int rc = 0;
  if (resize)
    rc = resize_window(win_direct ? dst + skip : dst, ch, cw, win_direct ? srow : crow, obuf, th, tw, channels, req,
                       fast_px ? px : NULL, px, tail);
  sl__free(scratch);
  if (rc) {
    sl_buf_unref(buf);
    return rc;
  }
  *out = buf;
  *oh = fh;
  *ow = fw;
  *oc = channels;
  return 0;
}

/* The window `req` asks for of an already decoded H x W x c uint8 image (a PNG or WebP under "any_format"), resized
 * and through the output pass as sl__jpeg_decode does after its decode: the same window, resizer and pass as the
 * unfused random_resized_crop / center_crop / resize (+ random_flip, normalize) give. */
static int crop_decoded(const uint8_t *img, int64_t H, int64_t W, int c, const sl__jpeg_req *req, int64_t max_pixels,
                        sl_buf **out, int64_t *oh, int64_t *ow) {
  *out = NULL;
  const jpeg_window jw = pick_window(req, H, W, max_pixels);
  if (jw.rc) return jw.rc;
  const sl__win win = jw.win;
  bool resize = jw.th > 0 && jw.tw > 0 && (jw.th != win.h || jw.tw != win.w);
  const sl__px_out *px = req->px && (req->px->flip || req->px->f32) ? req->px : NULL;
  sl__px_out pxv;
  if (px && px->f32) {
    pxv = *px;
    if (!sl__px_norm(&pxv, c, req->nmean, req->mean, req->nstd, req->std, req->value_scale))
      return sl__err(SL_EINVAL, "the image has %d channel(s) but mean has %d values and std %d", c, req->nmean,
                     req->nstd);
    px = &pxv;
  }
  size_t esz = px && px->f32 ? sizeof(float) : 1, outsz;
  int64_t fh = resize ? jw.th : win.h, fw = resize ? jw.tw : win.w;
  size_t stride = (size_t)W * (size_t)c, orow = (size_t)fw * (size_t)c * esz;
  if (!sl__mul_ok((size_t)fh * (size_t)fw, (size_t)c * esz, &outsz)) return sl__err(SL_EINVAL, "decoded image too large");
  size_t ooff = 0;
  sl_buf *buf = req->into && req->into_size == outsz ? sl_buf_ref(req->into) : sl_buf_alloc(outsz);
  if (buf == req->into && buf) ooff = req->into_off;
  bool fast = px && resize && (req->method == SL__RESIZE_BILINEAR || req->method == SL__RESIZE_AREA);
  uint8_t *tail = px && resize && !fast ? sl__malloc((size_t)fh * (size_t)fw * (size_t)c) : NULL;
  if (!buf || (px && resize && !fast && !tail)) {
    sl_buf_unref(buf);
    return sl__oom("decoded image");
  }
  uint8_t *obuf = (uint8_t *)sl_buf_data(buf) + ooff;
  uint8_t *padded = NULL;
  if (jw.pad) { /* the window with its zero border first, then the output pass over it */
    if (!(padded = sl__malloc((size_t)win.h * (size_t)win.w * (size_t)c))) {
      sl_buf_unref(buf);
      sl__free(tail);
      return sl__oom("decoded image");
    }
    sl__copy_window(img, H, W, (size_t)c, &win, padded);
    stride = (size_t)win.w * (size_t)c;
  }
  const uint8_t *src = padded ? padded : img + (size_t)win.y * stride + (size_t)win.x * (size_t)c;
  int rc = 0;
  if (resize) rc = resize_window(src, win.h, win.w, stride, obuf, fh, fw, c, req, fast ? px : NULL, px, tail);
  else
    for (int64_t y = 0; y < fh; y++) {
      if (px) sl__px_row(src + (size_t)y * stride, obuf + (size_t)y * orow, fw, c, px);
      else memcpy(obuf + (size_t)y * orow, src + (size_t)y * stride, orow);
    }
  sl__free(tail);
  sl__free(padded);
  if (rc) {
    sl_buf_unref(buf);
    return rc;
  }
  *out = buf;
  *oh = fh;
  *ow = fw;
  return 0;
}

/* A JPEG decoded whole (its window leaves the image), then windowed and passed through req's output pass. */
static int decode_whole_then_crop(const uint8_t *data, size_t len, const sl__jpeg_opts *o, const sl__jpeg_req *req,
                                  sl_buf **out, int64_t *oh, int64_t *ow, int64_t *oc) {
  sl_buf *full = NULL;
  int64_t H, W, c;
  int rc = sl__jpeg_decode(data, len, o, NULL, &full, &H, &W, &c);
  if (!rc) rc = crop_decoded(sl_buf_data(full), H, W, (int)c, req, o->max_pixels, out, oh, ow);
  if (!rc) *oc = c;
  sl_buf_unref(full);
  return rc;
}

/* ---- the functions ---- */
typedef struct {
  sl__alts comp; /* the component, or alternatives (a fused decode_image's "jpg;png;webp") */
  const char *output;
  bool keep;
  bool any_format; /* decode_and_crop_jpeg: a PNG or WebP is decoded whole, then cropped (fused decode_image) */
  sl__jpeg_opts jo;
  /* decode_and_crop_jpeg */
  bool has_win, random;
  sl__win win;
  double scale[2], ratio[2];
  int64_t out_h, out_w;
  int method;
  int64_t center_h, center_w, shorter; /* the center_crop and resize modes (see sl__jpeg_req) */
  double center_frac;
  /* random_flip and normalize folded in by the planner (or asked for by hand) */
  sl__px_args px;
  sl__slabs slabs;  /* "batch_slab" (image_int.h) */
  size_t slab_item; /* bytes of one output */
} jpeg_state;

static void jpeg_free(void *st) {
  jpeg_state *s = st;
  if (s) sl__slabs_dispose(&s->slabs);
  sl__free(s);
}

static int read_pair(const sl_args *a, const char *key, double *v, bool *given) {
  int n = 0;
  int rc = sl__get_nums(v, &n, a, key, 2);
  if (rc) return rc;
  if (sl_args_has(a, key) && n != 2) return sl__err(SL_EINVAL, "%s.%s: expected two numbers", sl_args_path(a), key);
  if (given) *given = sl_args_has(a, key);
  return 0;
}

static int jpeg_init_common(void **state, const sl_args *a, bool crop) {
  jpeg_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("decode_jpeg");
  int64_t ch, maxpx;
  const char *method;
  int rc;
  if ((rc = sl__get_alts(&s->comp, a, "component")) ||
      (rc = sl__get_str(&s->output, a, "output")) || (rc = sl__get_bool(&s->keep, a, "keep")) ||
      (rc = sl__get_int(&ch, a, "channels")) || (rc = sl__get_bool(&s->jo.strict, a, "strict")) ||
      (rc = sl__get_int(&maxpx, a, "max_pixels")))
    goto fail;
  if (ch != 0 && ch != 1 && ch != 3) {
    rc = sl__err(SL_EINVAL, "%s.channels: expected 0 (as stored), 1 or 3, found %lld", sl_args_path(a), (long long)ch);
    goto fail;
  }
  s->jo.channels = (int)ch;
  s->jo.max_pixels = maxpx;
  if (crop && (rc = sl__get_bool(&s->jo.recheck, a, "recheck"))) goto fail;
  if (crop) {
    if ((rc = sl__get_str(&method, a, "method")) || (rc = sl__resize_method_parse(&s->method, method, sl_args_path(a))))
      goto fail;
    double win[4], size[2], center[2];
    int nw = 0, ns = 0, nc = 0;
    bool full;
    if ((rc = sl__get_nums(win, &nw, a, "crop", 4)) || (rc = sl__get_nums(size, &ns, a, "size", 2)) ||
        (rc = sl__get_nums(center, &nc, a, "center", 2)) ||
        (rc = sl__get_num(&s->center_frac, a, "center_fraction")) ||
        (rc = sl__get_int(&s->shorter, a, "shorter_side")) || (rc = sl__get_bool(&full, a, "full")))
      goto fail;
    bool has_scale, has_ratio, other = nc || s->center_frac > 0 || full;
    if ((rc = read_pair(a, "scale", s->scale, &has_scale)) || (rc = read_pair(a, "ratio", s->ratio, &has_ratio)) ||
        (rc = sl__get_bool_or(&s->random, a, "random", !nw && !other)))
      goto fail;
    if ((nw > 0) + s->random + (nc > 0) + (s->center_frac > 0) + full > 1) {
      rc = sl__err(SL_EINVAL, "%s: give one of \"crop\", \"random\": true, \"center\", \"center_fraction\" and "
                   "\"full\": true", sl_args_path(a));
      goto fail;
    }
    if ((sl_args_has(a, "center") && (nc != 2 || center[0] < 1 || center[1] < 1 || center[0] > 65535 ||
                                      center[1] > 65535 || center[0] != floor(center[0]) ||
                                      center[1] != floor(center[1]))) ||
        s->center_frac < 0 || s->center_frac > 1) {
      rc = sl__err(SL_EINVAL, "%s: \"center\" is [height, width] (integers in 1..65535), \"center_fraction\" in (0, 1]",
                   sl_args_path(a));
      goto fail;
    }
    if ((nc || s->center_frac > 0) && (ns || s->shorter)) {
      rc = sl__err(SL_EINVAL, "%s: a centred crop is not resized (no \"size\" or \"shorter_side\")", sl_args_path(a));
      goto fail;
    }
    if (s->shorter < 0 || s->shorter > 65535 || (s->shorter && (!full || ns))) {
      rc = sl__err(SL_EINVAL, "%s.shorter_side: 1..65535, with \"full\": true and without \"size\"", sl_args_path(a));
      goto fail;
    }
    if (full && !ns && !s->shorter) {
      rc = sl__err(SL_EINVAL, "%s: \"full\": true needs \"size\" or \"shorter_side\"", sl_args_path(a));
      goto fail;
    }
    if (nc) s->center_h = (int64_t)center[0], s->center_w = (int64_t)center[1];
    if (nw && nw != 4) {
      rc = sl__err(SL_EINVAL, "%s.crop: expected [y, x, height, width]", sl_args_path(a));
      goto fail;
    }
    if (nw && s->random) {
      rc = sl__err(SL_EINVAL, "%s: give either a fixed \"crop\" window or \"random\": true, not both", sl_args_path(a));
      goto fail;
    }
    if (!nw && !s->random && !other) {
      rc = sl__err(SL_EINVAL, "%s.crop: required unless \"random\" is true", sl_args_path(a));
      goto fail;
    }
    if (sl_args_has(a, "size") && (ns != 2 || size[0] < 1 || size[1] < 1 || size[0] > 65535 || size[1] > 65535)) {
      rc = sl__err(SL_EINVAL, "%s.size: expected [height, width], each in 1..65535", sl_args_path(a));
      goto fail;
    }
    if (!(s->scale[0] > 0 && s->scale[0] <= s->scale[1] && s->scale[1] <= 1) ||
        !(s->ratio[0] > 0 && s->ratio[0] <= s->ratio[1])) {
      rc = sl__err(SL_EINVAL, "%s: scale must satisfy 0 < min <= max <= 1 and ratio 0 < min <= max", sl_args_path(a));
      goto fail;
    }
    for (int k = 0; k < nw; k++)
      if (!(win[k] >= (k < 2 ? 0 : 1) && win[k] <= 1e9 && win[k] == floor(win[k]))) {
        rc = sl__err(SL_EINVAL, "%s.crop[%d]: expected an integer in %d..1e9", sl_args_path(a), k, k < 2 ? 0 : 1);
        goto fail;
      }
    if (nw) {
      s->has_win = true;
      s->win = (sl__win){(int64_t)win[0], (int64_t)win[1], (int64_t)win[2], (int64_t)win[3]};
    }
    if (ns) s->out_h = (int64_t)size[0], s->out_w = (int64_t)size[1];
    if ((rc = sl__px_args_parse(&s->px, a)) || (rc = sl__get_bool(&s->any_format, a, "any_format"))) goto fail;
    int64_t slab_n;
    if ((rc = sl__get_int(&slab_n, a, "batch_slab"))) goto fail;
    size_t item = 0; /* (the arg table holds batch_slab to 0..16777216: SL__SLAB_ARG) */
    /* Only where every output has one size: a "size" to resize to and a fixed channel count. */
    if (!ns || ch == 0 || !sl__mul_ok((size_t)(s->out_h * s->out_w * ch), s->px.normalize ? sizeof(float) : 1, &item))
      slab_n = 0;
    s->slab_item = item;
    if ((rc = sl__slabs_init(&s->slabs, slab_n, item, "decode_and_crop_jpeg's batch slabs"))) goto fail;
  }
  *state = s;
  return 0;
fail:
  sl__free(s);
  return rc;
}
static int decode_init(void **state, const sl_args *a, void *payload) { return jpeg_init_common(state, a, false); }
static int crop_init(void **state, const sl_args *a, void *payload) { return jpeg_init_common(state, a, true); }

static int jpeg_call_common(const jpeg_state *s, sl_elem *e, sl_fn_call *call, bool crop) {
  sl_comp *c;
  int rc = sl__fn_component_alt(e, call, &s->comp, &c);
  if (rc) return rc;
  if (c->dtype != SL_BYTES || c->rank != 0)
    return sl__err(SL_EINVAL, "%s: element %llu: '%s' is %s rank %d, expected one byte string (encoded JPEG)",
                   call->op_path, (unsigned long long)call->index, c->name, sl_dtype_name(c->dtype), c->rank);
  sl_rng rng;
  sl__jpeg_req req = {0};
  if (crop) {
    req.win = s->has_win ? &s->win : NULL;
    if (s->random) {
      sl_rng_seed(&rng, call->seed);
      req.sample = &rng;
    }
    req.scale = s->scale;
    req.ratio = s->ratio;
    req.out_h = s->out_h;
    req.out_w = s->out_w;
    req.method = s->method;
    req.center_h = s->center_h;
    req.center_w = s->center_w;
    req.center_frac = s->center_frac;
    req.shorter = s->shorter;
  }
  sl__px_out px = {0};
  if (crop && (s->px.has_flip || s->px.normalize)) {
    px = sl__px_draw(&s->px, call);
    req.px = &px;
    req.nmean = s->px.nmean;
    req.nstd = s->px.nstd;
    req.mean = s->px.mean;
    req.std = s->px.std;
    req.value_scale = s->px.value_scale;
  }
  sl_buf *buf;
  size_t off = 0;
  int64_t shape[3];
  if (crop && s->slabs.n) {
    sl__slabs_slot(&((jpeg_state *)s)->slabs, call->index, s->slab_item, &req.into, &req.into_off);
    req.into_size = s->slab_item;
  }
  const uint8_t *d = sl_comp_data(c);
  if (crop && s->any_format && !(c->size >= 2 && d[0] == 0xFF && d[1] == 0xD8)) { /* not a JPEG: whole, then crop */
    sl_buf *full = NULL;
    rc = sl__image_decode_other(d, c->size, s->jo.channels, s->jo.max_pixels, &full, &shape[0], &shape[1], &shape[2]);
    if (!rc) rc = crop_decoded(sl_buf_data(full), shape[0], shape[1], (int)shape[2], &req, s->jo.max_pixels, &buf,
                               &shape[0], &shape[1]);
    sl_buf_unref(full);
  } else {
    rc = sl__jpeg_decode(d, c->size, &s->jo, crop ? &req : NULL, &buf, &shape[0], &shape[1], &shape[2]);
  }
  if (req.into) {
    if (buf == req.into) off = req.into_off;
    sl_buf_unref(req.into);
  }
  char from[2200];
  if (rc)
    return sl__err_wrap(rc, "%s: element %llu%s ('%s', %zu bytes)", call->op_path, (unsigned long long)call->index,
                        sl__fn_origin(e, from, sizeof from), c->name, c->size);
  rc = sl_elem_set_tensor(e, s->output, crop && s->px.normalize ? SL_FLOAT32 : SL_UINT8, 3, shape, buf, off, NULL);
  sl_buf_unref(buf);
  if (rc) return rc;
  if (!s->keep) sl__fn_remove_alts(e, &s->comp, s->output);
  return 0;
}
static int decode_call(void *st, sl_elem *e, sl_fn_call *call) { return jpeg_call_common(st, e, call, false); }
static int crop_call(void *st, sl_elem *e, sl_fn_call *call) { return jpeg_call_common(st, e, call, true); }

/* ---- schemas ---- */
#define JPEG_COMMON_ARGS                                                                                         \
  {"component", SL__ARG_COMP_ALT, "image/encoded", 0, 0, 0, NULL,                                                \
   "the component holding the encoded JPEG, or alternatives (\"jpg;png\": the first the element has)"},            \
      {"output", SL__ARG_COMP, "image", 0, 0, 0, NULL, "the component the decoded image is written to"},              \
      {"keep", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "keep the encoded bytes after decoding"},                        \
      {"channels", SL__ARG_INT, "3", SL__LOHI, 0, 3, NULL, "0 (as stored), 1 (grayscale) or 3 (RGB)"},              \
      {"strict", SL__ARG_BOOL, "true", 0, 0, 0, NULL, "fail on corrupt data (false: decode what can be decoded)"},    \
      {"max_pixels", SL__ARG_INT, "100000000", SL__ARGF_LO, 1, 0, NULL, "refuse images larger than this"}
static const sl__arg DECODE_ARGS[] = {JPEG_COMMON_ARGS, {NULL}};
static const sl__arg CROP_ARGS[] = {
    JPEG_COMMON_ARGS,
    {"recheck", SL__ARG_BOOL, "false", 0, 0, 0, NULL,
     "with strict: entropy-decode the rows below the window every time (false: not for bytes this process has "
     "already read whole without an error)"},
    {"method", SL__ARG_ENUM, "bilinear", 0, 0, 0, "bilinear|area|bicubic|nearest", "the resize method when \"size\" is given"},
    {"crop", SL__ARG_NUMS, NULL, SL__LOHI, 4, 4, NULL, "a fixed window [y, x, height, width] (else \"random\")"},
    {"size", SL__ARG_NUMS, NULL, SL__LOHI, 2, 2, NULL, "resize the crop to [height, width]"},
    {"scale", SL__ARG_NUMS, "[0.08, 1]", SL__LOHI, 2, 2, NULL, "random window area as a fraction of the image [min, max]"},
    {"ratio", SL__ARG_NUMS, "[0.75, 1.3333333333333333]", SL__LOHI, 2, 2, NULL, "random window aspect ratio [min, max] (3/4, 4/3)"},
    {"random", SL__ARG_BOOL, NULL, 0, 0, 0, NULL, "sample the window per element (default: true unless \"crop\" is given)"},
    {"center", SL__ARG_NUMS, NULL, SL__LOHI, 2, 2, NULL, "a centred window [height, width], not resized (center_crop's size)"},
    {"center_fraction", SL__ARG_NUM, NULL, 0, 0, 0, NULL, "a centred window of this fraction of each side (center_crop's fraction)"},
    {"full", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "the whole image, resized to \"size\" or by \"shorter_side\" (what resize does)"},
    {"shorter_side", SL__ARG_INT, NULL, 0, 0, 0, NULL, "with \"full\": resize so the shorter side is this, keeping the aspect ratio"},
    SL__PX_ARGS,
    SL__SLAB_ARG("needs \"size\" and channels 1 or 3"),
    {"any_format", SL__ARG_BOOL, "false", 0, 0, 0, NULL,
     "a PNG or WebP is decoded whole (as decode_image), then windowed as the unfused crop does (a fused decode_image)"},
    {NULL}};
static const sl__fn_io JPEG_READS[] = {{"component", NULL, NULL, SL_BYTES, 0, SL__IO_CONSUMED}, {NULL}};
static const sl__fn_io JPEG_WRITES[] = {{"output", NULL, NULL, SL_UINT8, 3, 0}, {NULL}};
/* [height, width, channels]: channels known unless 0 (as stored), height and width when a crop size is given. */
static int jpeg_infer(sl__struct *s, const sl_args *a, const char *origin) {
  json_t *args = a->obj;
  const char *path = a->path;
  (void)args;
  (void)path;
  (void)path;
  (void)origin;
  const char *out;
  int64_t n;
  int rc;
  if ((rc = sl__get_str(&out, a, "output")) || (rc = sl__get_int(&n, a, "channels"))) return rc;
  sl__comp_desc *c = sl__struct_get(s, out);
  if (!c) return 0;
  json_t *size = json_object_get(args, "size");
  c->dims[2] = n > 0 ? n : SL__DIM_UNKNOWN;
  if (json_is_true(json_object_get(args, "normalize"))) c->dtype = SL_FLOAT32; /* the folded normalize */
  if (json_array_size(size) == 2)
    for (int d = 0; d < 2; d++) c->dims[d] = (int64_t)json_number_value(json_array_get(size, (size_t)d));
  return 0;
}
static const sl__fn_schema DECODE_SCHEMA = {"decodes a JPEG into a uint8 [height, width, channels] image",
                                            DECODE_ARGS, JPEG_READS, JPEG_WRITES, jpeg_infer};
/* A fused op draws only for a random window or a flip: a fixed, centred or full window without a flip (what
 * decode_jpeg + center_crop or resize fuse into) is deterministic, so a cache may sit above it. */
static bool crop_is_random(json_t *args) {
  json_t *fp = json_object_get(args, "flip_prob"), *r = json_object_get(args, "random");
  if (fp && !(json_is_number(fp) && json_number_value(fp) == 0)) return true;
  if (json_is_boolean(r)) return json_is_true(r);
  json_t *cf = json_object_get(args, "center_fraction");
  bool fixed = json_array_size(json_object_get(args, "crop")) > 0 || json_array_size(json_object_get(args, "center")) > 0 ||
               (json_is_number(cf) && json_number_value(cf) > 0) || json_is_true(json_object_get(args, "full"));
  return !fixed;
}

static const sl__fn_schema CROP_SCHEMA = {"decodes only a window of a JPEG (fixed or random), optionally resized",
                                          CROP_ARGS, JPEG_READS, JPEG_WRITES, jpeg_infer, crop_is_random};

const sl__fn_entry sl__fns_jpeg[] = {
    {"decode_jpeg", {SL_FN_DEF_VERSION, 0, decode_init, decode_call, jpeg_free}, &DECODE_SCHEMA},
    {"decode_and_crop_jpeg", {SL_FN_DEF_VERSION, SL_FN_RANDOM, crop_init, crop_call, jpeg_free}, &CROP_SCHEMA},
    {NULL, {0, 0, NULL, NULL, NULL}, NULL},
};
