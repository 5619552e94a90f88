/* png_bench.c: the CPU of a PNG decode through sluice's decode_image against a bare libspng decode loop on the same
 * files (issue 36: within 1.1x). One thread each, alternating rounds. sluice's figure is a pipeline reading each file
 * (files + read_file) and decoding it to RGB8 (decode_image, channels 3), less the same pipeline without the decode;
 * the bare loop decodes the files' bytes, already in memory, to RGB8 with libspng as decode_image asks it to.
 * Prints one JSON line: microseconds of CPU per image, medians over the rounds, and their ratio.
 * usage: png_bench DIR [--rounds R] (DIR holds the *.png files) */
#define _GNU_SOURCE
#include <glob.h>
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "sluice.h"

static double cpu_now(void) { return bench_clock(CLOCK_PROCESS_CPUTIME_ID); }

/* The bare loop: every file's bytes decoded to RGB8. Returns CPU seconds. */
static double bare(unsigned char **data, size_t *len, size_t n) {
  double c0 = cpu_now();
  for (size_t i = 0; i < n; i++) {
    spng_ctx *ctx = spng_ctx_new(0);
    size_t need = 0;
    if (!ctx || spng_set_png_buffer(ctx, data[i], len[i]) || spng_decoded_image_size(ctx, SPNG_FMT_RGB8, &need)) {
      fprintf(stderr, "png_bench: file %zu is not a PNG libspng reads\n", i);
      exit(1);
    }
    void *out = malloc(need);
    if (!out || spng_decode_image(ctx, out, need, SPNG_FMT_RGB8, SPNG_DECODE_TRNS)) exit(1);
    free(out);
    spng_ctx_free(ctx);
  }
  return cpu_now() - c0;
}

/* A run of the pipeline in `spec`: CPU seconds. */
static double run(const char *spec, size_t want) {
  sl_pipeline *p;
  if (sl_pipeline_from_json(&p, spec, strlen(spec), "png_bench")) {
    fprintf(stderr, "png_bench: %s\n", sl_error_last());
    exit(1);
  }
  sl_iter *it;
  double c0 = cpu_now();
  if (sl_pipeline_iter(&it, p)) exit(1);
  sl_elem e;
  sl_elem_init(&e);
  size_t n = 0;
  int rc;
  while ((rc = sl_iter_next(&e, it)) == 0) {
    n++;
    sl_elem_clear(&e);
  }
  double c = cpu_now() - c0;
  if (rc < 0 || n != want) {
    fprintf(stderr, "png_bench: %s (%zu of %zu elements)\n", sl_error_last(), n, want);
    exit(1);
  }
  sl_iter_free(it);
  sl_pipeline_free(p);
  return c;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: png_bench DIR [--rounds R]\n");
    return 2;
  }
  int rounds = argc > 3 && !strcmp(argv[2], "--rounds") ? atoi(argv[3]) : 5;
  if (rounds < 1 || rounds > 64) rounds = 5;
  char pat[4096];
  snprintf(pat, sizeof pat, "%s/*.png", argv[1]);
  glob_t g;
  if (glob(pat, 0, NULL, &g) || g.gl_pathc == 0) {
    fprintf(stderr, "png_bench: no PNG files in %s\n", argv[1]);
    return 1;
  }
  size_t n = g.gl_pathc;
  unsigned char **data = calloc(n, sizeof *data);
  size_t *len = calloc(n, sizeof *len);
  size_t cap = 256;
  char *list = malloc(cap);
  size_t used = 0;
  list[0] = 0;
  for (size_t i = 0; i < n; i++) {
    FILE *f = fopen(g.gl_pathv[i], "rb");
    if (!f) return 1;
    fseek(f, 0, SEEK_END);
    len[i] = (size_t)ftell(f);
    rewind(f);
    data[i] = malloc(len[i]);
    if (fread(data[i], 1, len[i], f) != len[i]) return 1;
    fclose(f);
    size_t need = used + strlen(g.gl_pathv[i]) + 8;
    if (need > cap) {
      while (cap < need) cap *= 2;
      list = realloc(list, cap);
    }
    used += (size_t)sprintf(list + used, "%s\"%s\"", i ? ", " : "", g.gl_pathv[i]);
  }
  char *read_only, *with_decode;
  if (asprintf(&read_only, "{\"ops\": [{\"op\": \"files\", \"list\": [%s]}, {\"op\": \"map\", \"fn\": \"read_file\"}]}",
               list) < 0 ||
      asprintf(&with_decode, "{\"ops\": [{\"op\": \"files\", \"list\": [%s]}, {\"op\": \"map\", \"fn\": \"read_file\"}, "
                             "{\"op\": \"map\", \"fn\": \"decode_image\", \"args\": {\"channels\": 3}}]}", list) < 0)
    return 1;
  double b[64], s[64];
  for (int r = 0; r < rounds; r++) { /* alternating */
    b[r] = bare(data, len, n) / (double)n * 1e6;
    s[r] = (run(with_decode, n) - run(read_only, n)) / (double)n * 1e6;
  }
  double rb[64];
  for (int r = 0; r < rounds; r++) rb[r] = s[r] / b[r];
  printf("{\"images\": %zu, \"rounds\": %d, \"bare_us\": %.1f, \"sluice_us\": %.1f, \"ratio\": %.3f}\n", n, rounds,
         bench_median(b, rounds), bench_median(s, rounds), bench_median(rb, rounds));
  for (size_t i = 0; i < n; i++) free(data[i]);
  free(data);
  free(len);
  free(list);
  free(read_only);
  free(with_decode);
  globfree(&g);
  return 0;
}
