/* gen/gen_image.c: photo-like synthetic images for the imagenet and ssd datasets. A picture is a smooth
 * background (two octaves of value noise over a small random palette: sky, walls, out-of-focus regions), a few
 * to twenty objects (ellipses and rectangles with their own shading gradient and texture: hard edges), and fine
 * sensor-like grain. The grain amplitude sets the JPEG size: at quality 90 the images average about 110 KB at
 * about 400x350, like ImageNet's. Encoding is TurboJPEG at the options' quality with
 * 4:4:4 chroma (as camera JPEGs often are; 4:2:0 cannot reach ImageNet's bytes per pixel without the content
 * turning into noise). */
#include <math.h>
#include <string.h>
#include <turbojpeg.h>

#include "gen/gen_int.h"

/* Texture amplitudes, tuned so that images average about 110 KB at quality 90 (4:4:4). */
enum { CLUT_MIN = 250, CLUT_SPAN = 350 };
static const float FINE3 = 20.0f, FINE2 = 20.0f, GRAIN = 2.7f, CLUT_AMP = 35.0f, CHROMA = 1.8f;

static double pr_range(sl_rng *r, double a, double b) { return a + (b - a) * sl_rng_uniform(r); }

static inline float smooth(float t) { return t * t * (3.0f - 2.0f * t); }
static inline uint8_t clamp8(float v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5f); }

/* Adds an octave of value noise (cell px, amplitude amp per channel, colours from the palette when pal != NULL). */
static void value_noise(sl_rng *r, float *acc, int w, int h, int cell, float amp, const float (*pal)[3], int npal) {
  int gw = w / cell + 2, gh = h / cell + 2;
  float *g = sl__mallocarray((size_t)gw * (size_t)gh * 3, sizeof(float));
  if (!g) return; /* content quality only; never fails the generator */
  for (int i = 0; i < gw * gh; i++) {
    if (pal) {
      const float *c = pal[sl_rng_u64(r) % (uint64_t)npal];
      for (int k = 0; k < 3; k++) g[i * 3 + k] = c[k] + (float)pr_range(r, -amp, amp);
    } else {
      float l = (float)pr_range(r, -amp, amp);
      for (int k = 0; k < 3; k++) g[i * 3 + k] = l + (float)pr_range(r, -amp * 0.3, amp * 0.3);
    }
  }
  for (int y = 0; y < h; y++) {
    int gy = y / cell;
    float ty = smooth((float)(y % cell) / (float)cell);
    const float *r0 = g + (size_t)gy * gw * 3, *r1 = r0 + (size_t)gw * 3;
    float *row = acc + (size_t)y * w * 3;
    for (int x = 0; x < w; x++) {
      int gx = x / cell;
      float tx = smooth((float)(x % cell) / (float)cell);
      for (int k = 0; k < 3; k++) {
        float a = r0[gx * 3 + k] + (r0[gx * 3 + 3 + k] - r0[gx * 3 + k]) * tx;
        float b = r1[gx * 3 + k] + (r1[gx * 3 + 3 + k] - r1[gx * 3 + k]) * tx;
        row[x * 3 + k] += a + (b - a) * ty;
      }
    }
  }
  sl__free(g);
}

void sl__gen_picture(uint64_t seed, uint8_t *rgb, int w, int h, int nobj, float *boxes) {
  sl_rng r;
  sl_rng_seed(&r, seed);
  float *acc = sl__calloc((size_t)w * (size_t)h * 3, sizeof(float));
  float pal[4][3];
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 3; k++) pal[i][k] = (float)pr_range(&r, 20, 235);
  if (acc) {
    value_noise(&r, acc, w, h, 64 + (int)(sl_rng_u64(&r) % 96), 25.0f, (const float(*)[3])pal, 4);
    value_noise(&r, acc, w, h, 10 + (int)(sl_rng_u64(&r) % 14), 14.0f, NULL, 0);
  }
  for (int o = 0; o < nobj; o++) {
    /* An object: box of 8%..60% of each side, an ellipse or a rectangle, shaded along a random direction. */
    double bw = pr_range(&r, 0.08, 0.6) * w, bh = pr_range(&r, 0.08, 0.6) * h;
    double x0 = pr_range(&r, -0.1 * bw, w - 0.9 * bw), y0 = pr_range(&r, -0.1 * bh, h - 0.9 * bh);
    int ellipse = (int)(sl_rng_u64(&r) & 1);
    float col[3], grad[3], tex = (float)pr_range(&r, 4, 30);
    for (int k = 0; k < 3; k++) col[k] = (float)pr_range(&r, 10, 245), grad[k] = (float)pr_range(&r, -60, 60);
    double ang = pr_range(&r, 0, 6.283185307179586), ca = cos(ang), sa = sin(ang);
    int ix0 = (int)(x0 < 0 ? 0 : x0), iy0 = (int)(y0 < 0 ? 0 : y0);
    int ix1 = (int)(x0 + bw > w ? w : x0 + bw), iy1 = (int)(y0 + bh > h ? h : y0 + bh);
    if (ix1 <= ix0) ix1 = ix0 + 1 <= w ? ix0 + 1 : w;
    if (iy1 <= iy0) iy1 = iy0 + 1 <= h ? iy0 + 1 : h;
    double cx = x0 + bw / 2, cy = y0 + bh / 2;
    int minx = w, miny = h, maxx = -1, maxy = -1;
    uint64_t hs = sl_rng_u64(&r);
    for (int y = iy0; y < iy1; y++)
      for (int x = ix0; x < ix1; x++) {
        double dx = (x + 0.5 - cx) / (bw / 2), dy = (y + 0.5 - cy) / (bh / 2);
        if (ellipse && dx * dx + dy * dy > 1.0) continue;
        if (x < minx) minx = x;
        if (x > maxx) maxx = x;
        if (y < miny) miny = y;
        if (y > maxy) maxy = y;
        float t = (float)(dx * ca + dy * sa);
        hs = hs * 6364136223846793005ull + 1442695040888963407ull;
        float n = ((float)((hs >> 33) & 255) - 127.5f) / 127.5f * tex;
        float *p = acc ? acc + ((size_t)y * w + x) * 3 : NULL;
        if (p)
          for (int k = 0; k < 3; k++) p[k] = col[k] + grad[k] * t + n;
      }
    if (boxes) {
      if (maxx < 0) minx = ix0, maxx = ix0, miny = iy0, maxy = iy0;
      boxes[o * 4 + 0] = (float)miny / (float)h;
      boxes[o * 4 + 1] = (float)minx / (float)w;
      boxes[o * 4 + 2] = (float)(maxy + 1) / (float)h;
      boxes[o * 4 + 3] = (float)(maxx + 1) / (float)w;
    }
  }
  /* Clutter: many small blobs (leaves, pebbles, print) whose edges carry the detail a photo has. */
  int nclutter = CLUT_MIN + (int)(sl_rng_u64(&r) % (uint64_t)CLUT_SPAN);
  for (int k = 0; acc && k < nclutter; k++) {
    int rad = 2 + (int)(sl_rng_u64(&r) % 9), cx = (int)(sl_rng_u64(&r) % (uint64_t)w), cy = (int)(sl_rng_u64(&r) % (uint64_t)h);
    float d[3];
    for (int c = 0; c < 3; c++) d[c] = (float)pr_range(&r, -CLUT_AMP, CLUT_AMP);
    for (int y = cy - rad; y <= cy + rad; y++)
      for (int x = cx - rad; x <= cx + rad; x++) {
        if (x < 0 || y < 0 || x >= w || y >= h || (x - cx) * (x - cx) + (y - cy) * (y - cy) > rad * rad) continue;
        float *p = acc + ((size_t)y * w + x) * 3;
        for (int c = 0; c < 3; c++) p[c] += d[c];
      }
  }
  /* Fine texture over everything (objects included), then grain. */
  if (acc) {
    value_noise(&r, acc, w, h, 3, FINE3, NULL, 0);
    value_noise(&r, acc, w, h, 2, FINE2, NULL, 0);
  }
  /* Grain: triangular noise of about +-12 per pixel and channel, luminance-correlated. */
  uint64_t hs = sl_rng_u64(&r) | 1;
  for (size_t i = 0; i < (size_t)w * h; i++) {
    hs ^= hs << 13, hs ^= hs >> 7, hs ^= hs << 17;
    float l = (float)((int)(hs & 15) + (int)((hs >> 4) & 15) - 15) * GRAIN;
    for (int k = 0; k < 3; k++) {
      float c = (float)((int)((hs >> (8 + 4 * k)) & 7) - 4) * CHROMA;
      rgb[i * 3 + k] = clamp8((acc ? acc[i * 3 + k] : 128.0f) + l + c);
    }
  }
  sl__free(acc);
}

int sl__gen_image(const sl_gen_opts *o, int64_t i, sl__gen_rec *rec) {
  sl_rng r;
  sl_rng_seed(&r, sl__mix64(o->seed ^ 0x696d616765ull) ^ sl__mix64((uint64_t)i));
  int w = (int)lround(400 + 70 * sl__rng_normal(&r)), h = (int)lround(350 + 55 * sl__rng_normal(&r));
  if (w < 160) w = 160;
  if (w > 800) w = 800;
  if (h < 140) h = 140;
  if (h > 700) h = 700;
  bool ssd = o->kind == SL_GEN_SSD;
  int nobj = ssd ? 1 + (int)(sl_rng_u64(&r) % 20) : 2 + (int)(sl_rng_u64(&r) % 9);
  int64_t label = (int64_t)(sl_rng_u64(&r) % (uint64_t)o->classes);
  float boxes[20 * 4];
  uint8_t *rgb = sl__mallocarray((size_t)w * (size_t)h, 3);
  if (!rgb) return sl__oom("generated image");
  sl__gen_picture(sl_rng_u64(&r), rgb, w, h, nobj, ssd ? boxes : NULL);
  tjhandle tj = tjInitCompress();
  unsigned char *jpeg = NULL;
  unsigned long jlen = 0;
  int rc = 0;
  if (!tj) rc = sl__err(SL_ENOMEM, "TurboJPEG: cannot create a compressor");
  else if (tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &jpeg, &jlen, o->chroma == 420 ? TJSAMP_420 : TJSAMP_444, o->quality, TJFLAG_ACCURATEDCT))
    rc = sl__err(SL_ERROR, "TurboJPEG: %s", tjGetErrorStr2(tj));
  sl__free(rgb);
  if (tj) tjDestroy(tj);
  if (rc) {
    tjFree(jpeg);
    return rc;
  }
  rec->jpeg = sl_buf_alloc(jlen);
  sl_example *ex = sl_example_new();
  if (!rec->jpeg || !ex) {
    tjFree(jpeg);
    sl_example_free(ex);
    return sl__oom("generated record");
  }
  memcpy(sl_buf_data(rec->jpeg), jpeg, jlen);
  tjFree(jpeg);
  const void *v[1] = {sl_buf_data(rec->jpeg)};
  size_t l[1] = {jlen};
  const void *fmt[1] = {"jpeg"};
  size_t fl[1] = {4};
  int64_t hh = h, ww = w;
  rc = sl_example_add_bytes(ex, "image/encoded", v, l, 1);
  if (!rc) rc = sl_example_add_bytes(ex, "image/format", fmt, fl, 1);
  if (!rc) rc = sl_example_add_int64(ex, "image/class/label", &label, 1);
  if (!rc) rc = sl_example_add_int64(ex, "image/height", &hh, 1);
  if (!rc) rc = sl_example_add_int64(ex, "image/width", &ww, 1);
  if (!rc && ssd) {
    float c[4][20];
    int64_t labels[20];
    for (int b = 0; b < nobj; b++) {
      for (int k = 0; k < 4; k++) c[k][b] = boxes[b * 4 + k];
      labels[b] = 1 + (int64_t)(sl_rng_u64(&r) % 90);
    }
    rc = sl_example_add_float(ex, "image/object/bbox/ymin", c[0], (size_t)nobj);
    if (!rc) rc = sl_example_add_float(ex, "image/object/bbox/xmin", c[1], (size_t)nobj);
    if (!rc) rc = sl_example_add_float(ex, "image/object/bbox/ymax", c[2], (size_t)nobj);
    if (!rc) rc = sl_example_add_float(ex, "image/object/bbox/xmax", c[3], (size_t)nobj);
    if (!rc) rc = sl_example_add_int64(ex, "image/object/class/label", labels, (size_t)nobj);
    rec->boxes = nobj;
  }
  sl_buf *ser = NULL;
  if (!rc) rc = sl_example_serialize(&ser, ex);
  sl_example_free(ex);
  if (!rc) rc = sl__str_append(&rec->data, sl_buf_data(ser), sl_buf_size(ser));
  sl_buf_unref(ser);
  rec->w = w;
  rec->h = h;
  rec->label = label;
  return rc;
}
