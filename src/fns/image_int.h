/* fns/image_int.h: what the image functions share: HWC uint8 image views, the random-resized-crop window sampler
 * (used by both `random_resized_crop` and `decode_and_crop_jpeg`, so the two agree on a window for a seed),
 * the resizer (stb_image_resize) and the JPEG decoder core. Not public. */
#ifndef SL_FNS_IMAGE_H
#define SL_FNS_IMAGE_H

#include <pthread.h>

#include "fns/fns_int.h"

/* A crop window in pixels: rows [y, y+h), columns [x, x+w). */
typedef struct sl__win {
  int64_t y, x, h, w;
} sl__win;

/* resize's "shorter_side" output size for an h x w image (torchvision's Resize(int): the longer side truncated). */
void sl__shorter_side(int64_t h, int64_t w, int64_t shorter, int64_t *oh, int64_t *ow);
/* center_crop's ch x cw window of an H x W image, as torchvision's CenterCrop places it: top = int(round((H - ch) /
 * 2.0)) with Python's rounding (halves to even: an odd margin of 3 puts 2 rows above), left likewise; a crop larger
 * than the image starts half the excess (rounded down) above or left of it, the rest below or right (y or x < 0;
 * sl__copy_window pads with 0, as torchvision pads before cropping). */
void sl__center_window(int64_t H, int64_t W, int64_t ch, int64_t cw, sl__win *out);
/* Copies window `win` of the H x W image src (px bytes a pixel, rows packed) into dst (win->h x win->w pixels, rows
 * packed), zero where the window lies outside the image. */
void sl__copy_window(const uint8_t *src, int64_t H, int64_t W, size_t px, const sl__win *win, uint8_t *dst);

/* Samples a random-resized-crop window of an H x W image, as the ImageNet recipes do (Inception's
 * sample_distorted_bounding_box, torchvision's RandomResizedCrop): up to 10 tries of an area fraction uniform in
 * scale[0..1] and an aspect ratio (w/h) log-uniform in ratio[0..1]; if none fits, the largest centred window
 * whose ratio is within range. Always returns a window inside the image with h, w >= 1. */
void sl__crop_sample(sl_rng *r, int64_t H, int64_t W, const double scale[2], const double ratio[2], sl__win *out);

enum { SL__RESIZE_BILINEAR = 0, SL__RESIZE_AREA = 1, SL__RESIZE_BICUBIC = 2, SL__RESIZE_NEAREST = 3 };
/* Parses "bilinear", "area", "bicubic", "nearest". */
int sl__resize_method_parse(int *out, const char *name, const char *path);
/* Resizes an interleaved uint8 image with `c` channels (rows `sstride` bytes apart) to dh x dw (tightly packed).
 * SL_ENOMEM when the resizer's scratch cannot be allocated. */
int sl__resize_u8(const uint8_t *src, int64_t sh, int64_t sw, size_t sstride, uint8_t *dst, int64_t dh, int64_t dw,
                  int c, int method);
/* The resizer behind sl__resize_u8's bilinear (triangle filter) and area (`box`) methods (resample_u8.c):
 * antialiased when shrinking, fixed point, sizes >= 1. SL_ENOMEM when its filter tables cannot be allocated. */
int sl__resample_u8(const uint8_t *src, int sh, int sw, size_t sstride, uint8_t *dst, int dh, int dw, int c, bool box);
/* What the fused op's output pass does besides resampling (fn_jpeg.c, when the planner folded random_flip and
 * normalize into decode_and_crop_jpeg): a left-right flip, and float32 output ((x * scale - mean) / std per channel,
 * as `normalize` computes it, given as mul/add for up to 4 channels). */
typedef struct sl__px_out {
  bool flip, f32;
  float mul[4], add[4];
} sl__px_out;
/* The output pass's args: "flip_prob" (random_flip's prob) and "normalize" with "mean", "std", "value_scale"
 * (normalize's mean, std and scale, with its defaults), as the planner folds random_flip and normalize into
 * decode_and_crop_jpeg and random_resized_crop (plan_fuse.c), or as written by hand. */
typedef struct sl__px_args {
  bool has_flip, normalize;
  double flip_prob, value_scale;
  int nmean, nstd;
  double mean[4], std[4];
} sl__px_args;
/* Their schema entries (sl__arg). */
#define SL__PX_ARGS                                                                                                   \
  {"flip_prob", SL__ARG_NUM, NULL, SL__LOHI, 0, 1, NULL, "flip left-right with this probability in the output pass (random_flip's prob)"}, \
      {"normalize", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "float32 output (x * value_scale - mean) / std per channel, as normalize (false: as the input)"}, \
      {"mean", SL__ARG_NUMS, NULL, SL__LOHI, 1, 4, NULL, "with normalize: per-channel mean (default ImageNet's RGB, 0..255)"}, \
      {"std", SL__ARG_NUMS, NULL, SL__LOHI, 1, 4, NULL, "with normalize: per-channel divisor (default ImageNet's with the default mean, else 1)"}, \
      {"value_scale", SL__ARG_NUM, "1", 0, 0, 0, NULL, "with normalize: multiplies each value first (normalize's scale)"}
/* Parses them from a (SL_EINVAL naming the arg when one is wrong). */
int sl__px_args_parse(sl__px_args *s, const sl_args *a);
/* The element's output pass from s: the flip drawn from the folded random_flip's own seed (call->seeds[1]; written
 * by hand, one derived from the op's), float32 when normalising (mul/add are set by sl__px_norm). */
sl__px_out sl__px_draw(const sl__px_args *s, const sl_fn_call *call);
/* normalize's arithmetic as o's mul/add for c channels; false when c > 4 or mean/std fit neither 1 nor c. */
bool sl__px_norm(sl__px_out *o, int c, int nmean, const double *mean, int nstd, const double *std, double value_scale);
/* One output row of w pixels of c channels (c <= 4 when f32) from uint8 src to dst (uint8, or float32 when o->f32),
 * mirrored when o->flip. Each value is the uint8 value times mul plus add, exactly as normalize does. */
void sl__px_row(const uint8_t *src, void *dst, int64_t w, int c, const sl__px_out *o);
/* sl__resample_u8 whose output rows go through sl__px_row (dst then holds dh x dw pixels of o's type). */
int sl__resample_u8_px(const uint8_t *src, int sh, int sw, size_t sstride, void *dst, int dh, int dw, int c, bool box,
                       const sl__px_out *o);
/* true (the default): the resampler's passes run in AVX2 where the CPU has it; false: its portable loops (the same
 * values; tests compare the two). Not to be changed while a resize runs. */
extern bool sl__resample_avx2;
/* The same for float32 images. */
int sl__resize_f32(const float *src, int64_t sh, int64_t sw, size_t sstride, float *dst, int64_t dh, int64_t dw,
                   int c, int method);

/* "batch_slab": the outputs of n consecutive elements (by call->index) share one buffer, slot i % n of slab i / n,
 * so that a batch of n right after adopts it instead of copying (op_batch.c). The few slabs being filled (a map's
 * parallel calls run close in index) are kept here; a slot already handed out, or a slab evicted, falls back to a
 * buffer of the element's own. Shared by a map's threads (its own mutex). */
enum { SL__NSLAB = 4 };
typedef struct sl__slabs {
  int64_t n;   /* 0: off */
  size_t item; /* bytes of one output; 0 until the first output fixes it */
  pthread_mutex_t mu;
  struct {
    uint64_t no;
    sl_buf *buf;     /* the slab's reference held here while slots remain; NULL when the entry is free */
    uint64_t *given; /* n bits: slots handed out */
    int64_t left;
  } e[SL__NSLAB];
} sl__slabs;
/* n < 2: off (0, nothing allocated). item: every output's size, or 0 when the first output's size is to fix it.
 * SL_ENOMEM naming `what`. */
int sl__slabs_init(sl__slabs *s, int64_t n, size_t item, const char *what);
void sl__slabs_dispose(sl__slabs *s);
/* The slot for element `index`, whose output is `item` bytes: a new reference to its slab in *buf and its byte
 * offset; *buf NULL when the element gets its own buffer (off, another size, slot taken before, no memory). */
void sl__slabs_slot(sl__slabs *s, uint64_t index, size_t item, sl_buf **buf, size_t *off);
#define SL__SLAB_ARG(needs)                                                                                       \
  {"batch_slab", SL__ARG_INT, "0", SL__LOHI, 0, 16777216, NULL, "write the outputs of this many consecutive elements " \
   "into one buffer, which a batch of that size right after takes without copying (0: off; " needs ")"}

/* Reads an image component (uint8 or float32, rank 3 HWC or rank 2 HW) into h, w, c. */
/* normalize's defaults, for it and the fused op that folds it in: without "mean", ImageNet's RGB mean and std in
 * 0..255 units (the std only when "std" is absent too); without any std value, 1. */
void sl__normalize_defaults(const sl_args *a, double *mean, int *nmean, double *std, int *nstd);
int sl__image_dims(const sl_comp *img, const sl_fn_call *call, int64_t *h, int64_t *w, int64_t *c);

/* JPEG decoding (fn_jpeg.c). */
typedef struct sl__jpeg_opts {
  int channels;       /* 0: as stored (1 for grayscale, 3 otherwise); 1 or 3 */
  bool strict;        /* libjpeg warnings (corrupt data, premature end) are errors */
  int64_t max_pixels; /* refuse images larger than this */
  bool recheck;       /* strict, cropped: read below the window even for bytes sl__jpeg_seen knows */
} sl__jpeg_opts;

/* What to decode: the full image (win NULL), or a window of it, at a reduced DCT scale when `out_h`/`out_w` (> 0)
 * are smaller than the window. When `sample` is set the window is drawn with sl__crop_sample once the image size
 * is known. */
typedef struct sl__jpeg_req {
  const sl__win *win;
  sl_rng *sample;
  const double *scale, *ratio;
  int64_t out_h, out_w;
  int method; /* resize method for the final resize to out_h x out_w */
  /* What `center_crop` and `resize` would do after a full decode (the planner's fusion, plan_fuse.c): a centred
   * window of center_h x center_w or of center_frac of each side (no resize), or the whole image resized so its
   * shorter side is `shorter`. Each > 0 when used; the unfused functions' own arithmetic. */
  int64_t center_h, center_w, shorter;
  double center_frac;
  /* The output pass (flip, float32 normalisation), or NULL: uint8 as decoded. With f32, mul/add are computed here
   * from mean/std/scale once the channel count is known (nmean, nstd: 1 or the channel count). */
  const sl__px_out *px;
  int nmean, nstd;
  const double *mean, *std;
  double value_scale;
  /* When set and the output is exactly into_size bytes, it is written at into_off in `into` (and *out is another
   * reference to `into`): one slot of a shared slab. */
  sl_buf *into;
  size_t into_off, into_size;
} sl__jpeg_req;

/* Decodes `len` bytes of JPEG into a new HWC buffer (*out, caller unrefs) of *h x *w x *c, uint8 (float32 when
 * req->px->f32). Errors: SL_EINVAL
 * for data that is not a JPEG, SL_ECORRUPT for a corrupt or truncated one, with libjpeg's message; the caller
 * prefixes the op and element. Thread-safe (no shared state). */
int sl__jpeg_decode(const uint8_t *data, size_t len, const sl__jpeg_opts *o, const sl__jpeg_req *req, sl_buf **out,
                    int64_t *h, int64_t *w, int64_t *c);
/* The JPEGs a strict cropped decode has read to their end without an error, by content (jpeg_seen.c): the same bytes
 * decode the same way, so a later cropped decode of them need not entropy-decode what lies below its window to know
 * it would fail. Process-wide and insert-only (epochs are usually new pipelines over the same files), bounded at
 * 64 MiB (some 4 million images; past that, nothing is added). Any thread: lookups take no lock. */
uint64_t sl__jpeg_key(const uint8_t *data, size_t len);
bool sl__jpeg_seen(uint64_t key);
void sl__jpeg_seen_add(uint64_t key);

/* Decodes a PNG or a WebP (fn_codec.c, decode_image's decoders) into a new uint8 HWC buffer (*out, caller unrefs)
 * of channels 1, 3 or 4 (0: as stored); SL_EINVAL for a JPEG or an unknown format, SL_ECORRUPT for a corrupt image,
 * with a message naming the format. What decode_and_crop_jpeg's "any_format" decodes before its window. */
/* The format of encoded image bytes (image_decode.c). */
enum { SL__IMG_JPEG, SL__IMG_PNG, SL__IMG_WEBP, SL__IMG_UNKNOWN };
int sl__image_sniff(const uint8_t *d, size_t n);
/* The EXIF orientation (1..8) in TIFF-structured EXIF data (an optional "Exif\0\0" first), or 1 when there is none or
 * it cannot be read; reads only within tn. */
int sl__exif_tiff_orientation(const uint8_t *t, size_t tn);
/* The same from a PNG's eXIf chunk or a WebP's EXIF chunk (1 for other formats, or none). */
int sl__image_exif_orientation(const uint8_t *d, size_t n);
/* A uint8 image buffer of h x w x c, its size checked (image_decode.c). */
int sl__image_buf(sl_buf **out, int64_t h, int64_t w, int c);
int sl__image_decode_other(const uint8_t *data, size_t len, int channels, int64_t max_pixels, sl_buf **out, int64_t *h,
                           int64_t *w, int64_t *c);

#endif
