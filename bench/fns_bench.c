/* bench/fns_bench.c: the JPEG figures of issue 3, on the images of a `sluice gen imagenet` folder, one core:
 *   1. decode_jpeg (the registered function, element in and tensor out) against a bare libjpeg-turbo loop
 *      (TurboJPEG, one handle and one output buffer reused: the fastest a caller can do) over the same files;
 *   2. decode_and_crop_jpeg against decode_jpeg then the crop, over random-resized-crop windows, both with the
 *      resize to 224x224 the imagenet pipeline does and with the bare crop (no resize: partial decoding alone).
 * Rates are images per CPU-second of this thread. Runs alternate A B A B ...; medians of `--runs` (default 5).
 * Prints a readable table, then the same figures as one JSON line (the last line: bench/run reads it).
 * Usage: fns_bench DIR [--runs N] [--max-images N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "sluice.h"
#include "fns/image_int.h"

typedef struct {
  sl_buf **jpeg;
  int n;
} corpus;

static int load(corpus *c, const char *dir, int max) {
  char spec[1024];
  snprintf(spec, sizeof spec,
           "{\"ops\": [{\"op\": \"files\", \"glob\": \"%s/train-*.tfrecord\"}, {\"op\": \"interleave\", \"source\": "
           "[{\"op\": \"tfrecord\"}]}, {\"op\": \"map\", \"fn\": \"parse_example\", \"args\": {\"features\": "
           "{\"image/encoded\": {\"dtype\": \"bytes\"}}}}, {\"op\": \"take\", \"count\": %d}]}",
           dir, max);
  sl_pipeline *p;
  sl_iter *it;
  if (sl_pipeline_from_json(&p, spec, strlen(spec), "fns_bench") || sl_pipeline_iter(&it, p)) {
    fprintf(stderr, "fns_bench: %s\n", sl_error_last());
    return -1;
  }
  c->jpeg = calloc((size_t)max, sizeof *c->jpeg);
  sl_elem e;
  sl_elem_init(&e);
  while (c->n < max && sl_iter_next(&e, it) == 0) {
    sl_comp *x = sl_elem_get(&e, "image/encoded");
    c->jpeg[c->n] = sl_buf_alloc(x->size);
    memcpy(sl_buf_data(c->jpeg[c->n]), sl_comp_data(x), x->size);
    c->n++;
    sl_elem_clear(&e);
  }
  sl_iter_free(it);
  sl_pipeline_free(p);
  return c->n > 0 ? 0 : -1;
}

typedef struct {
  sl__fn fn;
  void *state;
  json_t *obj;
  sl_args args;
} fn_inst;

static int fn_open(fn_inst *f, const char *name, const char *args) {
  memset(f, 0, sizeof *f);
  if (sl__fn_lookup(name, &f->fn)) return -1;
  f->obj = json_loads(args, 0, NULL);
  f->args.obj = f->obj;
  f->args.path = "bench.args";
  f->args.schema = f->fn.schema ? f->fn.schema->args : NULL;
  return f->fn.def.init ? f->fn.def.init(&f->state, &f->args, f->fn.payload) : 0;
}
static void fn_close(fn_inst *f) {
  if (f->fn.def.free) f->fn.def.free(f->state);
  json_decref(f->obj);
}
static int fn_call(fn_inst *f, sl_elem *e, uint64_t seed, uint64_t index) {
  sl_fn_call call = {index, seed, true, "bench"};
  int rc = f->fn.def.call(f->state, e, &call);
  if (rc) fprintf(stderr, "fns_bench: %s\n", sl_error_last());
  return rc;
}

/* One timed pass; returns images per CPU-second, and the output bytes' checksum in *sum. */
typedef enum { BARE, DECODE, DECODE_RRC, FUSED_RRC, DECODE_CROP, FUSED_CROP } mode;

static double pass(const corpus *c, mode m, fn_inst *fns, uint64_t *sum) {
  tjhandle tj = tjInitDecompress();
  uint8_t *out = NULL;
  size_t cap = 0;
  uint64_t t0 = sl__cpu_ns(), s = 0;
  for (int i = 0; i < c->n; i++) {
    sl_buf *j = c->jpeg[i];
    if (m == BARE) {
      int w, h, ss, cs;
      if (tjDecompressHeader3(tj, sl_buf_data(j), sl_buf_size(j), &w, &h, &ss, &cs)) abort();
      size_t need = (size_t)w * h * 3;
      if (need > cap) {
        free(out);
        out = malloc(need);
        cap = need;
      }
      if (tjDecompress2(tj, sl_buf_data(j), sl_buf_size(j), out, w, 0, h, TJPF_RGB, TJFLAG_ACCURATEDCT)) abort();
      s += out[need / 2];
      continue;
    }
    sl_elem e;
    sl_elem_init(&e);
    sl_elem_set_bytes(&e, "image/encoded", j, 0, NULL, sl_buf_size(j));
    uint64_t seed = sl__mix64((uint64_t)i);
    switch (m) {
    case DECODE: fn_call(&fns[0], &e, seed, (uint64_t)i); break;
    case DECODE_RRC: fn_call(&fns[0], &e, seed, (uint64_t)i), fn_call(&fns[1], &e, seed, (uint64_t)i); break;
    case FUSED_RRC: fn_call(&fns[2], &e, seed, (uint64_t)i); break;
    case DECODE_CROP: fn_call(&fns[0], &e, seed, (uint64_t)i), fn_call(&fns[3], &e, seed, (uint64_t)i); break;
    case FUSED_CROP: fn_call(&fns[4], &e, seed, (uint64_t)i); break;
    default: break;
    }
    sl_comp *img = sl_elem_get(&e, "image");
    s += ((const uint8_t *)sl_comp_data(img))[img->size / 2];
    sl_elem_clear(&e);
  }
  double sec = (double)(sl__cpu_ns() - t0) / 1e9;
  free(out);
  tjDestroy(tj);
  *sum = s;
  return (double)c->n / sec;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* "crop_only": decode_jpeg then a crop of the random window, as a function (the unfused path without resize).
 * Built from decode_and_crop_jpeg's sampler so both crop the same windows. */
typedef struct {
  double scale[2], ratio[2];
} crop_only_state;
static int crop_only_call(void *st, sl_elem *e, sl_fn_call *call) {
  const crop_only_state *s = st;
  sl_comp *img = sl_elem_get(e, "image");
  sl_rng r;
  sl_rng_seed(&r, call->seed);
  sl__win w;
  sl__crop_sample(&r, img->shape[0], img->shape[1], s->scale, s->ratio, &w);
  int64_t shape[3] = {w.h, w.w, 3};
  sl_buf *src = sl_buf_ref(img->buf);
  const uint8_t *p = (const uint8_t *)sl_buf_data(src) + img->off;
  size_t stride = (size_t)img->shape[1] * 3;
  uint8_t *d;
  int rc = sl_elem_new_tensor(e, "image", SL_UINT8, 3, shape, (void **)&d);
  for (int64_t y = 0; !rc && y < w.h; y++) memcpy(d + (size_t)y * w.w * 3, p + (size_t)(y + w.y) * stride + (size_t)w.x * 3, (size_t)w.w * 3);
  sl_buf_unref(src);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: fns_bench DIR [--runs N] [--max-images N]\n");
    return 2;
  }
  int runs = 5, max = 400;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--max-images")) max = atoi(argv[i + 1]);
  }
  if (runs < 1 || runs > 99 || max < 1) return 2;
  corpus c = {0};
  if (load(&c, argv[1], max)) return 1;
  static crop_only_state cos = {{0.08, 1.0}, {0.75, 4.0 / 3.0}};
  sl_fn_def cdef = {SL_FN_DEF_VERSION, SL_FN_RANDOM, NULL, crop_only_call, NULL};
  sl_fn_register("bench_crop_only", &cdef, NULL);
  fn_inst fns[5];
  if (fn_open(&fns[0], "decode_jpeg", "{}") || fn_open(&fns[1], "random_resized_crop", "{\"size\": [224, 224]}") ||
      fn_open(&fns[2], "decode_and_crop_jpeg", "{\"random\": true, \"size\": [224, 224]}") ||
      fn_open(&fns[3], "bench_crop_only", "{}") ||
      fn_open(&fns[4], "decode_and_crop_jpeg", "{\"random\": true}")) {
    fprintf(stderr, "fns_bench: %s\n", sl_error_last());
    return 1;
  }
  fns[3].state = &cos;
  double bytes = 0, px = 0;
  for (int i = 0; i < c.n; i++) bytes += (double)sl_buf_size(c.jpeg[i]);
  /* Pixel agreement of the fused and unfused paths over the corpus (same windows, same seeds). */
  double mad_rrc = 0, mad_crop = 0, below = 0;
  int maxd_crop = 0;
  for (int i = 0; i < c.n; i++) {
    sl_elem a, b;
    for (int k = 0; k < 2; k++) {
      sl_elem_init(&a), sl_elem_init(&b);
      sl_elem_set_bytes(&a, "image/encoded", c.jpeg[i], 0, NULL, sl_buf_size(c.jpeg[i]));
      sl_elem_set_bytes(&b, "image/encoded", c.jpeg[i], 0, NULL, sl_buf_size(c.jpeg[i]));
      uint64_t seed = sl__mix64((uint64_t)i);
      fn_call(&fns[0], &a, seed, 0);
      sl_comp *full = sl_elem_get(&a, "image");
      double area = (double)(full->shape[0] * full->shape[1]);
      if (k) {
        sl_rng r;
        sl_rng_seed(&r, seed);
        sl__win w;
        sl__crop_sample(&r, full->shape[0], full->shape[1], cos.scale, cos.ratio, &w);
        below += (double)(full->shape[0] - w.y - w.h) / (double)full->shape[0];
      }
      fn_call(&fns[k ? 3 : 1], &a, seed, 0);
      fn_call(&fns[k ? 4 : 2], &b, seed, 0);
      sl_comp *x = sl_elem_get(&a, "image"), *y = sl_elem_get(&b, "image");
      if (x->size != y->size) abort();
      const uint8_t *p = sl_comp_data(x), *q = sl_comp_data(y);
      double s = 0;
      for (size_t j = 0; j < x->size; j++) {
        int d = abs((int)p[j] - (int)q[j]);
        s += d;
        if (k && d > maxd_crop) maxd_crop = d;
      }
      if (k) mad_crop += s / (double)x->size, px += (double)x->size / 3 / area;
      else mad_rrc += s / (double)x->size;
      sl_elem_clear(&a), sl_elem_clear(&b);
    }
  }
  mode modes[6] = {BARE, DECODE, DECODE_RRC, FUSED_RRC, DECODE_CROP, FUSED_CROP};
  const char *names[6] = {"bare TurboJPEG decode loop", "decode_jpeg", "decode_jpeg + random_resized_crop 224",
                          "decode_and_crop_jpeg random, size 224", "decode_jpeg + crop (random window)",
                          "decode_and_crop_jpeg random, no resize"};
  double rate[6][99];
  uint64_t sum;
  for (int m = 0; m < 6; m++) pass(&c, modes[m], fns, &sum); /* warm-up */
  for (int r = 0; r < runs; r++)
    for (int m = 0; m < 6; m++) rate[m][r] = pass(&c, modes[m], fns, &sum);
  double med[6];
  for (int m = 0; m < 6; m++) med[m] = median(rate[m], runs);
  printf("images: %d from %s, mean %.1f KB; %d runs alternated, medians, images per CPU-second (one core)\n", c.n,
         argv[1], bytes / c.n / 1e3, runs);
  for (int m = 0; m < 6; m++) printf("  %-42s %8.1f img/s\n", names[m], med[m]);
  printf("decode_jpeg / bare loop:                          %.3f\n", med[1] / med[0]);
  printf("fused / unfused, random-resized-crop to 224:      %.2fx (mean abs pixel diff %.2f)\n", med[3] / med[2],
         mad_rrc / c.n);
  printf("fused / unfused, crop only (partial decode):      %.2fx (mean abs pixel diff %.3f, max %d; mean window "
         "%.0f%% of the image, %.0f%% of its rows below it)\n",
         med[5] / med[4], mad_crop / c.n, maxd_crop, 100.0 * px / c.n, 100.0 * below / c.n);
  /* The last line is JSON for bench/run (BENCHMARKS.md). */
  printf("{\"images\": %d, \"mean_kb\": %.1f, \"runs\": %d, \"bare_img_s\": %.1f, \"decode_jpeg_img_s\": %.1f, "
         "\"decode_vs_bare\": %.3f, \"unfused_rrc224_img_s\": %.1f, \"fused_rrc224_img_s\": %.1f, "
         "\"fused_speedup_rrc224\": %.3f, \"fused_mean_abs_diff_rrc224\": %.2f, \"unfused_crop_img_s\": %.1f, "
         "\"fused_crop_img_s\": %.1f, \"fused_speedup_crop\": %.3f, \"fused_max_diff_crop\": %d, "
         "\"mean_window_pct\": %.1f, \"mean_rows_below_pct\": %.1f}\n",
         c.n, bytes / c.n / 1e3, runs, med[0], med[1], med[1] / med[0], med[2], med[3], med[3] / med[2],
         mad_rrc / c.n, med[4], med[5], med[5] / med[4], maxd_crop, 100.0 * px / c.n, 100.0 * below / c.n);
  for (int k = 0; k < 5; k++)
    if (k != 3) fn_close(&fns[k]);
  json_decref(fns[3].obj);
  for (int i = 0; i < c.n; i++) sl_buf_unref(c.jpeg[i]);
  free(c.jpeg);
  return 0;
}
