/* cli/cmd_convert.c: `sluice convert SPEC --to tfrecord|tar --out DIR [--shards N]`: writes the elements a spec yields
 * (an image folder, WebDataset shards, any source) as TFRecord shards of tf.Example or WebDataset tar shards through
 * sl_convert (include/sluice/convert.h), with a progress line; Ctrl-C or an error leaves no file behind. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli_int.h"
#include "sluice/convert.h"

static void convert_help(FILE *f) {
  fprintf(f,
          "usage: sluice convert SPEC --out DIR [--to tfrecord|tar] [--shards N] [--prefix P] [--quiet]\n\n"
          "Runs the pipeline in SPEC and writes its elements into shards DIR/P-00000-of-0000N.{tfrecord,tar}\n"
          "(element i into shard i mod N).\n"
          "  tfrecord  one tf.Example per element: each component a feature of its name, except label ->\n"
          "            image/class/label, filename -> image/filename, __key__ -> image/key, and a WebDataset image\n"
          "            member jpg/jpeg/png/webp -> image/encoded (with image/format); __url__ is left out. Byte\n"
          "            strings become a bytes_list, integers an int64_list, floats a float_list (flattened).\n"
          "  tar       one WebDataset sample per element, keyed by __key__ or image/key (else the element's index):\n"
          "            member KEY.EXT per component: image/encoded -> jpg/png/webp (from the bytes), label and\n"
          "            image/class/label -> cls, others their name with '/' made '.'; a member holds one string or\n"
          "            one number in decimal; __url__ and image/format are left out. A key stays inside the\n"
          "            folder a reader extracts to (leading '/' and '.' parts dropped, '..' made '_'), and a key\n"
          "            already in the shard gets _1, _2, ...\n"
          "A decoded image (a uint8 tensor) is refused: convert the encoded bytes, not the pixels.\n\n"
          "  --out DIR     the output folder (created when missing)\n"
          "  --to FORMAT   tfrecord (default) or tar\n"
          "  --shards N    output files (default 1)\n"
          "  --prefix P    file name prefix (default train)\n"
          "  --quiet       no progress line\n\n"
          "Each file is written under a hidden temporary name (.NAME.tmp-PID-X) and renamed when every shard is\n"
          "complete; an error or Ctrl-C (SIGTERM) removes them and exits (with 130 (143) on a signal).\n");
}

typedef struct {
  cli_progress bar;
  int64_t done;
} convert_progress;

static void on_progress(int64_t done, uint64_t bytes, void *payload) {
  convert_progress *p = payload;
  char extra[64];
  snprintf(extra, sizeof extra, "%.1f MB", (double)bytes / 1e6);
  p->done = done;
  cli_progress_update(&p->bar, done, extra);
}

int cmd_convert(int argc, char **argv) {
  const char *spec = NULL, *to = "tfrecord";
  sl_convert_opts o = SL_CONVERT_OPTS_INIT;
  o.prefix = "train";
  int64_t shards = 1;
  bool quiet = false;
  const cli_opt opts[] = {
      {.name = "--out", .type = CLI_STR, .dst = &o.out_dir, .needs = "a folder"},
      {.name = "--to", .type = CLI_STR, .dst = &to, .needs = "a format (tfrecord, tar)"},
      {.name = "--shards", .type = CLI_INT, .dst = &shards, .lo = 1, .hi = 100000, .must = "in 1..100000"},
      {.name = "--prefix", .type = CLI_STR, .dst = &o.prefix, .needs = "a file name prefix"},
      {.name = "--quiet", .type = CLI_FLAG, .dst = &quiet},
      {.name = NULL},
  };
  const cli_args args = {.cmd = "convert", .opts = opts, .help = convert_help, .pos = &spec, .npos = 1, .noun = "spec"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  if (!spec) return cli_usage("convert", "a SPEC file is required");
  if (!o.out_dir) return cli_usage("convert", "--out DIR is required");
  if (sl_convert_format_parse(&o.format, to)) return cli_usage("convert", "--to: %s", sl_error_last());
  if (!*o.prefix || strchr(o.prefix, '/'))
    return cli_usage("convert", "--prefix must be a file name prefix, not '%s'", o.prefix);
  o.shards = (int)shards;
  char msg[2048];
  sl_pipeline *p = NULL;
  if (cli_open_spec(&p, spec, msg, sizeof msg)) return cli_fail(false, "%s", msg);
  convert_progress pr = {.done = 0};
  cli_progress_start(&pr.bar, "convert", -1);
  if (quiet) pr.bar.tty = false;
  o.progress = on_progress;
  o.payload = &pr;
  /* Ctrl-C / SIGTERM: the converter stops at the next element and removes every shard it was writing. */
  cli_signals_install();
  o.cancel = cli_signal_flag();
  sl_convert_report r;
  int rc = sl_convert(&r, p, &o);
  cli_progress_end(&pr.bar);
  sl_pipeline_free(p);
  int sig = cli_signal_seen();
  if (rc == SL_ECANCELED && sig) {
    fprintf(stderr, "sluice convert: %s after %lld elements (no partial file left in %s)\n",
            sig == SIGTERM ? "terminated" : "interrupted", (long long)pr.done, o.out_dir);
    return 128 + sig;
  }
  if (rc) return cli_fail(false, "convert: %s", sl_error_last());
  printf("convert: %lld elements into %d %s file%s under %s, %.1f MB\n", (long long)r.elements, r.files,
         o.format == SL_CONVERT_TAR ? "tar" : "TFRecord", r.files == 1 ? "" : "s", o.out_dir, (double)r.bytes / 1e6);
  return CLI_OK;
}
