/* cli/cmd_gen.c: `sluice gen imagenet|ssd|text|tabular --out DIR --n N --shards K --seed S`: writes a synthetic
 * dataset for the benchmark pipelines through sl_gen_run (include/sluice/gen.h), with a progress bar. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli_int.h"

static void gen_help(FILE *f) {
  fprintf(f,
          "usage: sluice gen imagenet|ssd|text|tabular --out DIR [--n N] [--shards K] [--seed S]\n"
          "                  [--format tfrecord|folder|tar] [--classes C] [--quality Q] [--chroma 444|420]\n"
          "                  [--threads T] [--vocab-size V] [--quiet]\n\n"
          "Writes a synthetic dataset into DIR (created when missing):\n"
          "  imagenet  TFRecord shards of tf.Example: image/encoded (photo-like JPEG, about 400x350, about 110 KB),\n"
          "            image/format, image/class/label, image/height, image/width\n"
          "  ssd       the same plus image/object/bbox/{ymin,xmin,ymax,xmax} and image/object/class/label (1-20)\n"
          "  text      text shards of sentences (5-300 tokens, Zipf vocabulary) and vocab.txt\n"
          "  tabular   Criteo-like CSV shards: label, 13 integer and 26 hex categorical columns, some empty\n\n"
          "  --format F      imagenet's layout, the same images and labels in each (default tfrecord):\n"
          "                  tfrecord  the TFRecord shards above\n"
          "                  folder    DIR/<label>/<index>.jpg, torchvision's ImageFolder layout (the label\n"
          "                            zero-padded, so ImageFolder's class index is the label when every class\n"
          "                            has an image: the summary says how many do)\n"
          "                  tar       WebDataset shards train-*.tar of <index>.jpg and <index>.cls\n"
          "  --classes C     labels 0..C-1 (default 1000); the images do not depend on it\n"
          "  --n N           records (default 1000)\n"
          "  --shards K      output files, train-00000-of-0000K.* (default 4)\n"
          "  --seed S        random seed (default 0); the output depends only on the options\n"
          "  --quality Q     JPEG quality (default 90)\n"
          "  --threads T     generator threads (default: the online cores; the output does not depend on it)\n"
          "  --chroma 444|420  JPEG chroma subsampling (default 444; 420 makes smaller, cheaper images)\n"
          "  --vocab-size V  text vocabulary words (default 30000)\n"
          "  --quiet         no progress bar\n\n"
          "Each file is written under a hidden temporary name (.NAME.tmp-PID) and renamed when complete. Ctrl-C\n"
          "(SIGTERM) stops at the next chunk of records, removes the file being written and exits with 130 (143).\n");
}

static void on_progress(int64_t done, int64_t total, void *payload) {
  cli_progress *bar = payload;
  bar->total = total; /* the library's count: --n may have been left to its default */
  cli_progress_update(bar, done, NULL);
}

int cmd_gen(int argc, char **argv) {
  sl_gen_opts o = SL_GEN_OPTS_INIT;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  o.threads = cores < 1 ? 1 : cores > 16 ? 16 : (int)cores;
  const char *kind = NULL, *format = "tfrecord";
  bool quiet = false;
  int64_t classes = 1000, shards = o.shards, quality = o.quality, threads = o.threads, seed = (int64_t)o.seed, chroma = o.chroma;
  const cli_opt opts[] = {
      {.name = "--out", .type = CLI_STR, .dst = &o.out_dir},
      {.name = "--n", .type = CLI_INT, .dst = &o.n, .lo = 1, .hi = (double)INT64_MAX, .must = "1 or more records"},
      {.name = "--format", .type = CLI_STR, .dst = &format, .needs = "a layout (tfrecord, folder, tar)"},
      {.name = "--classes", .type = CLI_INT, .dst = &classes, .lo = 1, .hi = 100000, .must = "in 1..100000"},
      {.name = "--shards", .type = CLI_INT, .dst = &shards, .lo = 1, .hi = 100000, .must = "in 1..100000"},
      {.name = "--quality", .type = CLI_INT, .dst = &quality, .lo = 1, .hi = 100000, .must = "in 1..100000"},
      {.name = "--threads", .type = CLI_INT, .dst = &threads, .lo = 1, .hi = 100000, .must = "in 1..100000"},
      {.name = "--seed", .type = CLI_INT, .dst = &seed},
      {.name = "--chroma", .type = CLI_INT, .dst = &chroma, .lo = 0, .hi = 1000, .must = "444 or 420"},
      {.name = "--vocab-size", .type = CLI_INT, .dst = &o.vocab_size, .lo = 10, .hi = 10000000,
       .must = "in 10..10000000"}, /* 0 was taken for the default 30000, as the library's 0 is */
      {.name = "--quiet", .type = CLI_FLAG, .dst = &quiet},
      {.name = NULL},
  };
  const cli_args args = {.cmd = "gen", .opts = opts, .help = gen_help, .pos = &kind, .npos = 1, .noun = "dataset"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  o.shards = (int)shards;
  o.quality = (int)quality;
  o.threads = (int)threads;
  o.seed = (uint64_t)seed; /* a negative seed is one of the 2^64 seeds as well */
  o.chroma = (int)chroma;
  o.classes = (int)classes;
  if (sl_gen_format_parse(&o.format, format)) return cli_usage("gen", "--format: %s", sl_error_last());
  if (!kind) return cli_usage("gen", "a dataset is required (imagenet, ssd, text, tabular)");
  if (sl_gen_kind_parse(&o.kind, kind)) return cli_usage("gen", "%s", sl_error_last());
  if (!o.out_dir) return cli_usage("gen", "--out DIR is required");
  if (o.n && o.shards > o.n) o.shards = (int)o.n;
  cli_progress bar;
  cli_progress_start(&bar, kind, o.n);
  if (quiet) bar.tty = false;
  o.progress = on_progress;
  o.payload = &bar;
  /* Ctrl-C / SIGTERM: the generator stops at its next chunk and removes the file it was writing. */
  cli_signals_install();
  o.cancel = cli_signal_flag();
  double t0 = cli_now();
  sl_gen_report r;
  int rc = sl_gen_run(&r, &o);
  cli_progress_end(&bar);
  int sig = cli_signal_seen();
  if (rc == SL_ECANCELED && sig) {
    fprintf(stderr, "sluice gen: %s; %s (no partial file left in %s)\n", sig == SIGTERM ? "terminated" : "interrupted",
            sl_error_last(), o.out_dir);
    return 128 + sig;
  }
  if (rc) return cli_fail(false, "gen %s: %s", kind, sl_error_last());
  double el = cli_now() - t0;
  printf("%s: %lld records in %d files under %s, %.1f MB, %.1fs\n", kind, (long long)r.records, r.files, o.out_dir,
         (double)r.bytes / 1e6, el);
  if (o.kind == SL_GEN_IMAGENET || o.kind == SL_GEN_SSD) {
    printf("mean image: %.0fx%.0f, %.1f KB JPEG (quality %d, %d chroma)\n", r.mean_width, r.mean_height,
           r.mean_image_bytes / 1e3, r.quality, r.chroma);
    if (o.format == SL_GEN_FOLDER && r.classes_present < o.classes)
      printf("classes: %d of %d have an image: a folder reader's class index is the label's rank among them\n",
             r.classes_present, o.classes);
    else printf("classes: %d of %d have an image\n", r.classes_present, o.classes);
    printf("decode cost: %.0f us/image (libjpeg-turbo, one core, sample of up to 48 images)\n", r.decode_us);
    if (o.kind == SL_GEN_SSD) printf("boxes: %lld (%.1f per image)\n", (long long)r.boxes, (double)r.boxes / (double)r.records);
  } else if (o.kind == SL_GEN_TEXT) {
    printf("vocabulary: %lld entries in %s/vocab.txt; %.1f tokens per sentence\n", (long long)r.vocab_size,
           o.out_dir, r.mean_tokens);
  }
  return CLI_OK;
}
