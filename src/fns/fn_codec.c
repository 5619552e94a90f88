/* fns/fn_codec.c: `decode_image` (JPEG through fn_jpeg.c's decoder, PNG and WebP through image_decode.c, the
 * format sniffed from the bytes), `read_file` (a filename component -> the file's bytes) and `parse_int` (ASCII
 * decimal, a WebDataset "cls" -> int64), so that folders and shards of mixed images read without a Python function. Errors name the format, the element and where the element came
 * from (its file, or its tar shard and sample: sl__fn_origin). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "io/stream_int.h"
#include "fns/image_int.h"

typedef struct {
  int channels; /* 0: as stored (1 gray, 3 colour, 4 with alpha); 1, 3 or 4 */
  int64_t max_pixels;
} img_opts;

/* JPEG through fn_jpeg.c (1 or 3 channels; 4 adds an opaque alpha). */
static int jpeg_any(const uint8_t *data, size_t len, const img_opts *o, bool strict, sl_buf **out, int64_t *oh,
                    int64_t *ow, int64_t *oc) {
  sl__jpeg_opts jo = {.channels = o->channels == 4 ? 3 : o->channels, .strict = strict, .max_pixels = o->max_pixels};
  int rc = sl__jpeg_decode(data, len, &jo, NULL, out, oh, ow, oc);
  if (rc || o->channels != 4) return rc;
  sl_buf *rgb = *out, *rgba;
  size_t npx = (size_t)*oh * (size_t)*ow;
  if ((rc = sl__image_buf(&rgba, *oh, *ow, 4))) {
    sl_buf_unref(rgb);
    *out = NULL;
    return rc;
  }
  const uint8_t *s = sl_buf_data(rgb);
  uint8_t *d = sl_buf_data(rgba);
  for (size_t i = 0; i < npx; i++, s += 3, d += 4) d[0] = s[0], d[1] = s[1], d[2] = s[2], d[3] = 255;
  sl_buf_unref(rgb);
  *out = rgba;
  *oc = 4;
  return 0;
}

/* The EXIF orientation (1..8) in a JPEG's APP1 segment, or 1 (as stored) when there is none or it cannot be read.
 * Reads only within len; markers up to the first scan. */
static int jpeg_orientation(const uint8_t *d, size_t len) {
  size_t p = 2;
  while (p + 4 <= len && d[p] == 0xFF) {
    unsigned m = d[p + 1];
    size_t seg = (size_t)d[p + 2] << 8 | d[p + 3];
    if (m == 0xDA || seg < 2 || p + 2 + seg > len) break; /* the scan, or a bad length */
    const uint8_t *x = d + p + 4;
    size_t n = seg - 2;
    if (m == 0xE1 && n >= 14 && !memcmp(x, "Exif\0\0", 6)) return sl__exif_tiff_orientation(x + 6, n - 6);
    p += 2 + seg;
  }
  return 1;
}

/* The image (h x w x c) as EXIF orientation `o` says to show it, in a new buffer: 2 mirrored, 3 turned 180
 * degrees, 4 flipped, 5 transposed, 6 turned 90 degrees clockwise, 7 transversed, 8 turned 90 counter-clockwise. */
static int orient_image(sl_buf **img, int64_t *h, int64_t *w, int64_t c, int o) {
  int64_t H = *h, W = *w, oh = o >= 5 ? W : H, ow = o >= 5 ? H : W;
  sl_buf *dst;
  int rc = sl__image_buf(&dst, oh, ow, (int)c);
  if (rc) return rc;
  const uint8_t *s = sl_buf_data(*img);
  uint8_t *d = sl_buf_data(dst);
  for (int64_t y = 0; y < oh; y++)
    for (int64_t x = 0; x < ow; x++) {
      int64_t sy, sx;
      switch (o) {
      case 2: sy = y, sx = W - 1 - x; break;
      case 3: sy = H - 1 - y, sx = W - 1 - x; break;
      case 4: sy = H - 1 - y, sx = x; break;
      case 5: sy = x, sx = y; break;
      case 6: sy = H - 1 - x, sx = y; break;
      case 7: sy = H - 1 - x, sx = W - 1 - y; break;
      default: sy = x, sx = W - 1 - y; break; /* 8 */
      }
      memcpy(d + ((size_t)y * (size_t)ow + (size_t)x) * (size_t)c, s + ((size_t)sy * (size_t)W + (size_t)sx) * (size_t)c,
             (size_t)c);
    }
  sl_buf_unref(*img);
  *img = dst;
  *h = oh, *w = ow;
  return 0;
}

typedef struct {
  sl__alts comp; /* the component, or WebDataset-style alternatives ("jpg;png;webp"): the first present is read */
  const char *output;
  bool keep, strict, orient;
  img_opts o;
} dimg_state;

static int dimg_init(void **state, const sl_args *a, void *payload) {
  dimg_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("decode_image");
  int64_t ch;
  int rc;
  if ((rc = sl__get_alts(&s->comp, a, "component")) || (rc = sl__get_str(&s->output, a, "output")) ||
      (rc = sl__get_bool(&s->keep, a, "keep")) || (rc = sl__get_int(&ch, a, "channels")) ||
      (rc = sl__get_bool(&s->strict, a, "strict")) || (rc = sl__get_int(&s->o.max_pixels, a, "max_pixels")) ||
      (rc = sl__get_bool(&s->orient, a, "orient"))) {
    sl__free(s);
    return rc;
  }
  if (ch == 2) { /* (the table's range is 0..4) */
    sl__free(s);
    return sl__err(SL_EINVAL, "%s.channels: expected 0 (as stored), 1, 3 or 4, found 2", sl_args_path(a));
  }
  s->o.channels = (int)ch;
  *state = s;
  return 0;
}

static int dimg_call(void *st, sl_elem *e, sl_fn_call *call) {
  const dimg_state *s = st;
  sl_comp *c;
  int rc = sl__fn_component_alt(e, call, &s->comp, &c);
  if (rc) return rc;
  char from[2200];
  const char *name = c->name;
  if (c->dtype != SL_BYTES || c->rank != 0)
    return sl__err(SL_EINVAL, "%s: element %llu%s: '%s' is %s rank %d, expected one byte string (an encoded image)",
                   call->op_path, (unsigned long long)call->index, sl__fn_origin(e, from, sizeof from), name,
                   sl_dtype_name(c->dtype), c->rank);
  const uint8_t *d = sl_comp_data(c);
  sl_buf *buf = NULL;
  int64_t shape[3];
  switch (sl__image_sniff(d, c->size)) {
  case SL__IMG_JPEG:
    rc = jpeg_any(d, c->size, &s->o, s->strict, &buf, &shape[0], &shape[1], &shape[2]);
    int o = rc || !s->orient ? 1 : jpeg_orientation(d, c->size);
    if (o != 1 && (rc = orient_image(&buf, &shape[0], &shape[1], shape[2], o))) sl_buf_unref(buf);
    break;
  default: {
    rc = sl__image_decode_other(d, c->size, s->o.channels, s->o.max_pixels, &buf, &shape[0], &shape[1], &shape[2]);
    int po = rc || !s->orient ? 1 : sl__image_exif_orientation(d, c->size);
    if (po != 1 && (rc = orient_image(&buf, &shape[0], &shape[1], shape[2], po))) sl_buf_unref(buf);
  }
  }
  if (rc)
    return sl__err_wrap(rc, "%s: element %llu%s ('%s', %zu bytes)", call->op_path, (unsigned long long)call->index,
                        sl__fn_origin(e, from, sizeof from), name, c->size);
  rc = sl_elem_set_tensor(e, s->output, SL_UINT8, 3, shape, buf, 0, NULL);
  sl_buf_unref(buf);
  if (rc) return rc;
  if (!s->keep) sl__fn_remove_alts(e, &s->comp, s->output); /* every alternative: samples keep one structure */
  return 0;
}

static void free_state(void *st) { sl__free(st); }

/* ---- read_file ---- */
typedef struct {
  const char *comp, *output;
  int64_t max_bytes;
} rf_state;

static int rf_init(void **state, const sl_args *a, void *payload) {
  rf_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("read_file");
  int rc;
  if ((rc = sl__get_str(&s->comp, a, "component")) || (rc = sl__get_str(&s->output, a, "output")) ||
      (rc = sl__get_int(&s->max_bytes, a, "max_bytes"))) {
    sl__free(s);
    return rc;
  }
  *state = s;
  return 0;
}

/* A remote object read whole: one stream, its blocks in flight as the stream's defaults say. */
static int read_whole_url(const char *path, int64_t max_bytes, sl_buf **out, size_t *len) {
  sl__stream *s;
  int rc = sl__stream_open(&s, path, NULL);
  if (rc) return rc;
  uint64_t n = sl__stream_size(s);
  sl_buf *b = NULL;
  if (n > (uint64_t)max_bytes)
    rc = sl__err(SL_EINVAL, "'%s': %llu bytes, more than max_bytes %lld", sl__stream_name(s), (unsigned long long)n,
                 (long long)max_bytes);
  else if (!(b = sl_buf_alloc(n ? (size_t)n : 1)))
    rc = sl__oom("an object's bytes");
  size_t got = 0;
  if (!rc && n && !(rc = sl__stream_read(s, sl_buf_data(b), (size_t)n, &got)) && got != n)
    rc = sl__err(SL_EIO, "'%s': %zu bytes of %llu read", sl__stream_name(s), got, (unsigned long long)n);
  sl__stream_free(s);
  if (rc) {
    sl_buf_unref(b);
    return rc;
  }
  *out = b;
  *len = (size_t)n;
  return 0;
}

int sl__read_whole_file(const char *path, int64_t max_bytes, sl_buf **out, size_t *len) {
  *out = NULL;
  if (sl__is_url(path)) return read_whole_url(path, max_bytes, out, len);
  FILE *f;
  int rc = sl__fopen_regular(&f, path); /* a FIFO or a device is refused, never waited on */
  if (rc) return rc;
  struct stat st;
  if (fstat(fileno(f), &st)) rc = sl__err(SL_EIO, "'%s': %s", path, strerror(errno));
  else if (!S_ISREG(st.st_mode)) rc = sl__err(SL_EINVAL, "'%s': not a regular file", path);
  else if ((int64_t)st.st_size > max_bytes)
    rc = sl__err(SL_EINVAL, "'%s': %lld bytes, more than max_bytes %lld", path, (long long)st.st_size,
                 (long long)max_bytes);
  size_t n = rc ? 0 : (size_t)st.st_size;
  sl_buf *b = rc ? NULL : sl_buf_alloc(n ? n : 1);
  if (!rc && !b) rc = sl__oom("a file's bytes");
  if (!rc && n && fread(sl_buf_data(b), 1, n, f) != n)
    rc = sl__err(SL_EIO, "'%s': %s", path, ferror(f) ? strerror(errno) : "file shorter than its size (changed while read)");
  fclose(f);
  if (rc) {
    sl_buf_unref(b);
    return rc;
  }
  *out = b;
  *len = n;
  return 0;
}

static int rf_call(void *st, sl_elem *e, sl_fn_call *call) {
  const rf_state *s = st;
  sl_comp *c;
  int rc = sl__fn_component(e, call, s->comp, &c);
  if (rc) return rc;
  char path[4096];
  if (c->dtype != SL_BYTES || c->rank != 0 || c->size >= sizeof path || memchr(sl_comp_data(c), 0, c->size))
    return sl__err(SL_EINVAL, "%s: element %llu: '%s' is not a file name (one byte string without NUL, under %zu bytes)",
                   call->op_path, (unsigned long long)call->index, s->comp, sizeof path);
  memcpy(path, sl_comp_data(c), c->size);
  path[c->size] = 0;
  sl_buf *b;
  size_t n;
  if ((rc = sl__read_whole_file(path, s->max_bytes, &b, &n)))
    return sl__err_wrap(rc, "%s: element %llu", call->op_path, (unsigned long long)call->index);
  /* its op's disk_bytes: the planner weighs them against what the device delivered (an object fetched over the
   * network is no disk read) */
  if (!sl__is_url(path)) call->read_bytes += n;
  rc = sl_elem_set_bytes(e, s->output, b, 0, NULL, n);
  sl_buf_unref(b);
  return rc;
}

/* ---- parse_int ---- */
typedef struct {
  const char *comp, *output;
} pi_state;

static int pi_init(void **state, const sl_args *a, void *payload) {
  pi_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("parse_int");
  int rc;
  if ((rc = sl__get_str(&s->comp, a, "component")) || (rc = sl__get_str_or(&s->output, a, "output", s->comp))) {
    sl__free(s);
    return rc;
  }
  *state = s;
  return 0;
}

/* Python's int(bytes), which webdataset's decoders call on a "cls" (and "cls2", "index", "inx", "id"): ASCII
 * whitespace around (space, \t \n \v \f \r: "cls" files end in a newline), an optional sign, decimal digits with
 * single underscores between them ("1_000"), leading zeros allowed. False for anything else (webdataset's int()
 * raises there) or a value outside int64. */
static bool ws(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static bool parse_decimal(const char *p, size_t n, int64_t *out) {
  size_t i = 0, e = n;
  while (i < e && ws(p[i])) i++;
  while (e > i && ws(p[e - 1])) e--;
  bool neg = i < e && p[i] == '-';
  if (i < e && (p[i] == '-' || p[i] == '+')) i++;
  if (i == e || p[i] == '_' || p[e - 1] == '_') return false;
  uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (; i < e; i++) {
    if (p[i] == '_' && p[i + 1] != '_') continue; /* between digits: the ends were checked */
    if (p[i] < '0' || p[i] > '9') return false;
    unsigned d = (unsigned)(p[i] - '0');
    if (v > (lim - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return true;
}

static int pi_call(void *st, sl_elem *e, sl_fn_call *call) {
  const pi_state *s = st;
  sl_comp *c;
  int rc = sl__fn_component(e, call, s->comp, &c);
  if (rc) return rc;
  char from[2200];
  int64_t v;
  if (c->dtype != SL_BYTES || c->rank != 0 || !parse_decimal(sl_comp_data(c), c->size, &v))
    return sl__err(SL_EINVAL, "%s: element %llu%s: '%s' is not an ASCII decimal integer in the int64 range (%s, %zu "
                   "bytes: \"%.*s\")", call->op_path, (unsigned long long)call->index, sl__fn_origin(e, from, sizeof from),
                   s->comp, sl_dtype_name(c->dtype), c->size, c->dtype == SL_BYTES ? (int)(c->size < 24 ? c->size : 24) : 0,
                   (const char *)sl_comp_data(c));
  return sl_elem_set_i64(e, s->output, v);
}

/* ---- schemas ---- */
static const sl__arg DIMG_ARGS[] = {
    {"component", SL__ARG_COMP_ALT, "image/encoded", 0, 0, 0, NULL,
     "the component holding the encoded image, or alternatives as WebDataset's to_tuple takes them (\"jpg;png;webp\" "
     "or [\"jpg\", \"png\", \"webp\"]): the first the element has is decoded; a sample with none is a data error "
     "naming its shard and key (\"on_error\": \"skip\" drops it)"},
    {"output", SL__ARG_COMP, "image", 0, 0, 0, NULL, "the component the decoded image is written to"},
    {"keep", SL__ARG_BOOL, "false", 0, 0, 0, NULL,
     "keep the encoded bytes after decoding (false: the component, and every alternative the element has, goes)"},
    {"channels", SL__ARG_INT, "3", SL__LOHI, 0, 4, NULL,
     "0 (as stored: 1 gray, 3 colour, 4 with alpha), 1 (grayscale), 3 (RGB, alpha dropped) or 4 (RGBA)"},
    {"strict", SL__ARG_BOOL, "true", 0, 0, 0, NULL, "JPEG: fail on corrupt data (false: decode what can be decoded)"},
    {"max_pixels", SL__ARG_INT, "100000000", SL__ARGF_LO, 1, 0, NULL, "refuse images larger than this"},
    {"orient", SL__ARG_BOOL, "false", 0, 0, 0, NULL,
     "turn the image as its EXIF orientation says (a JPEG's APP1, a PNG's eXIf, a WebP's EXIF chunk; as PIL's "
     "exif_transpose; false: as stored)"},
    {NULL}};
static const sl__fn_io DIMG_READS[] = {{"component", NULL, NULL, SL_BYTES, 0, SL__IO_CONSUMED}, {NULL}};
static const sl__fn_io DIMG_WRITES[] = {{"output", NULL, NULL, SL_UINT8, 3, 0}, {NULL}};
static int dimg_infer(sl__struct *st, const sl_args *a, const char *origin) {
  (void)origin;
  const char *out;
  int64_t n;
  int rc;
  if ((rc = sl__get_str(&out, a, "output")) || (rc = sl__get_int(&n, a, "channels"))) return rc;
  sl__comp_desc *c = sl__struct_get(st, out);
  if (c) c->dims[2] = n > 0 ? n : SL__DIM_UNKNOWN;
  return 0;
}
static const sl__fn_schema DIMG_SCHEMA = {
    "decodes a JPEG, PNG or WebP (sniffed from the bytes) into a uint8 [height, width, channels] image; 16-bit PNGs "
    "are scaled to 8 bits, palettes and grayscale expanded",
    DIMG_ARGS, DIMG_READS, DIMG_WRITES, dimg_infer};

static const sl__arg RF_ARGS[] = {
    {"component", SL__ARG_COMP, "filename", 0, 0, 0, NULL, "the component holding the file's name"},
    {"output", SL__ARG_COMP, "image/encoded", 0, 0, 0, NULL, "the component the file's bytes are written to"},
    {"max_bytes", SL__ARG_INT, "1073741824", SL__ARGF_LO, 0, 0, NULL, "refuse files larger than this"},
    {NULL}};
static const sl__fn_io RF_READS[] = {{"component", NULL, NULL, SL_BYTES, 0, 0}, {NULL}};
static const sl__fn_io RF_WRITES[] = {{"output", NULL, NULL, SL_BYTES, 0, 0}, {NULL}};
static const sl__fn_schema RF_SCHEMA = {"reads the file a component names (as `files` yields it) into a byte string",
                                        RF_ARGS, RF_READS, RF_WRITES, NULL};

static const sl__arg PI_ARGS[] = {
    {"component", SL__ARG_COMP, "cls", 0, 0, 0, NULL, "the component holding the decimal text"},
    {"output", SL__ARG_COMP, NULL, 0, 0, 0, NULL, "the component the int64 is written to (default: in place)"},
    {NULL}};
static const sl__fn_io PI_READS[] = {{"component", NULL, NULL, SL_BYTES, 0, 0}, {NULL}};
static const sl__fn_io PI_WRITES[] = {{"output", NULL, "component", SL_INT64, 0, 0}, {NULL}};
static const sl__fn_schema PI_SCHEMA = {"turns an ASCII decimal byte string (a WebDataset \"cls\") into an int64 scalar, as webdataset's decoder "
                                        "does (Python's int(): whitespace around, a sign, underscores between digits); "
                                        "anything else is a data error naming the element and where it came from",
                                        PI_ARGS, PI_READS, PI_WRITES, NULL};

const sl__fn_entry sl__fns_codec[] = {
    {"decode_image", {SL_FN_DEF_VERSION, 0, dimg_init, dimg_call, free_state}, &DIMG_SCHEMA},
    {"read_file", {SL_FN_DEF_VERSION, 0, rf_init, rf_call, free_state}, &RF_SCHEMA},
    {"parse_int", {SL_FN_DEF_VERSION, 0, pi_init, pi_call, free_state}, &PI_SCHEMA},
    {NULL, {0, 0, NULL, NULL, NULL}, NULL},
};
