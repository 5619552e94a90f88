/* cli/cmd_convert.c: `sluice convert SPEC --out DIR [--shards N]`: writes the elements a spec yields (an image folder,
 * WebDataset shards, any source) as TFRecord shards of tf.Example, the layout TensorFlow's ImageNet readers expect,
 * each shard under a temporary name renamed when complete, so that Ctrl-C or an error leaves no partial file. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_int.h"
#include "sluice/tfrecord.h"

static void convert_help(FILE *f) {
  fprintf(f,
          "usage: sluice convert SPEC --out DIR [--to tfrecord] [--shards N] [--prefix P] [--quiet]\n\n"
          "Runs the pipeline in SPEC and writes each element as a tf.Example into TFRecord shards\n"
          "DIR/P-00000-of-0000N.tfrecord (element i into shard i mod N). Each component becomes a feature of its\n"
          "name, except: label -> image/class/label, filename -> image/filename, __key__ -> image/key, and a\n"
          "WebDataset image member jpg/jpeg/png/webp -> image/encoded (with image/format); __url__ is left out.\n"
          "Byte strings become a bytes_list, int32/int64 an int64_list, float32/float64 a float_list (flattened);\n"
          "a uint8 tensor (a decoded image) is refused: convert the encoded bytes, not the pixels.\n\n"
          "  --out DIR     the output folder (created when missing)\n"
          "  --to FORMAT   tfrecord (the one output format so far)\n"
          "  --shards N    output files (default 1)\n"
          "  --prefix P    file name prefix (default train)\n"
          "  --quiet       no progress line\n\n"
          "Each file is written under a hidden temporary name (.NAME.tmp-PID) and renamed when every shard is\n"
          "complete; an error or Ctrl-C (SIGTERM) removes them and exits (with 130 (143) on a signal).\n");
}

/* The feature name of component `name` (NULL: left out), and the format for image/format (or NULL). */
static const char *feature_name(const char *name, const char **format) {
  static const char *const IMAGE_EXT[] = {"jpg", "jpeg", "png", "webp"};
  *format = NULL;
  if (!strcmp(name, "label")) return "image/class/label";
  if (!strcmp(name, "filename")) return "image/filename";
  if (!strcmp(name, "__key__")) return "image/key";
  if (!strcmp(name, "__url__")) return NULL;
  for (size_t i = 0; i < sizeof IMAGE_EXT / sizeof *IMAGE_EXT; i++)
    if (!strcmp(name, IMAGE_EXT[i])) {
      *format = IMAGE_EXT[i];
      return "image/encoded";
    }
  return name;
}

/* Adds component c to ex; msg says what was wrong. */
static int add_feature(sl_example *ex, const sl_comp *c, char *msg, size_t cap) {
  const char *format, *key = feature_name(c->name, &format);
  if (!key) return 0;
  int64_t n = 1;
  if (sl_shape_count(&n, c->rank, c->shape)) n = 0;
  int rc = 0;
  if (c->dtype == SL_BYTES) {
    const void **v = malloc((size_t)(n ? n : 1) * sizeof *v);
    size_t *l = malloc((size_t)(n ? n : 1) * sizeof *l);
    if (!v || !l) rc = SL_ENOMEM;
    for (int64_t i = 0; !rc && i < n; i++) rc = sl_comp_string(&v[i], &l[i], c, i);
    if (!rc) rc = sl_example_add_bytes(ex, key, v, l, (size_t)n);
    free(v);
    free(l);
    if (!rc && format) rc = sl_example_add_bytes(ex, "image/format", (const void *const[]){format},
                                                 (const size_t[]){strlen(format)}, 1);
  } else if (c->dtype == SL_INT64) {
    rc = sl_example_add_int64(ex, key, sl_comp_data(c), (size_t)n);
  } else if (c->dtype == SL_INT32 || c->dtype == SL_FLOAT32 || c->dtype == SL_FLOAT64) {
    int64_t *iv = c->dtype == SL_INT32 ? malloc((size_t)(n ? n : 1) * sizeof *iv) : NULL;
    float *fv = c->dtype != SL_INT32 ? malloc((size_t)(n ? n : 1) * sizeof *fv) : NULL;
    if (!iv && !fv) rc = SL_ENOMEM;
    for (int64_t i = 0; !rc && i < n; i++) {
      if (iv) iv[i] = ((const int32_t *)sl_comp_data(c))[i];
      else fv[i] = c->dtype == SL_FLOAT32 ? ((const float *)sl_comp_data(c))[i] : (float)((const double *)sl_comp_data(c))[i];
    }
    if (!rc) rc = iv ? sl_example_add_int64(ex, key, iv, (size_t)n) : sl_example_add_float(ex, key, fv, (size_t)n);
    free(iv);
    free(fv);
  } else {
    snprintf(msg, cap, "component '%s' is %s: convert writes encoded images and scalars, not decoded pixels (leave "
             "out the decode, or drop it with select)", c->name, sl_dtype_name(c->dtype));
    return SL_EINVAL;
  }
  if (rc) snprintf(msg, cap, "component '%s': %s", c->name, rc == SL_ENOMEM ? "out of memory" : sl_error_last());
  return rc;
}

typedef struct {
  char **tmp, **final;
  sl_tfrecord_writer **w;
  int n;
} shard_set;

/* Closes the writers; renames every temporary file to its final name when `keep`, else removes them. */
static int finish(shard_set *s, bool keep, char *msg, size_t cap) {
  int rc = 0;
  for (int i = 0; i < s->n; i++)
    if (s->w[i] && sl_tfrecord_writer_close(s->w[i]) && !rc) {
      rc = SL_EIO;
      snprintf(msg, cap, "%s: %s", s->tmp[i], sl_error_last());
    }
  for (int i = 0; i < s->n; i++) {
    if (keep && !rc && s->tmp[i] && rename(s->tmp[i], s->final[i])) {
      rc = SL_EIO;
      snprintf(msg, cap, "renaming %s to %s: %s", s->tmp[i], s->final[i], strerror(errno));
    }
    if ((!keep || rc) && s->tmp[i]) unlink(s->tmp[i]);
    free(s->tmp[i]);
    free(s->final[i]);
  }
  free(s->tmp);
  free(s->final);
  free(s->w);
  return rc;
}

static int open_shards(shard_set *s, const char *dir, const char *prefix, int n, char *msg, size_t cap) {
  s->tmp = calloc((size_t)n, sizeof *s->tmp);
  s->final = calloc((size_t)n, sizeof *s->final);
  s->w = calloc((size_t)n, sizeof *s->w);
  if (!s->tmp || !s->final || !s->w) {
    snprintf(msg, cap, "out of memory");
    return SL_ENOMEM;
  }
  s->n = n;
  for (int i = 0; i < n; i++) {
    char name[512];
    snprintf(name, sizeof name, "%s-%05d-of-%05d.tfrecord", prefix, i, n);
    size_t len = strlen(dir) + strlen(name) + 32;
    s->final[i] = malloc(len);
    s->tmp[i] = malloc(len);
    if (!s->final[i] || !s->tmp[i]) {
      snprintf(msg, cap, "out of memory");
      return SL_ENOMEM;
    }
    snprintf(s->final[i], len, "%s/%s", dir, name);
    snprintf(s->tmp[i], len, "%s/.%s.tmp-%d", dir, name, (int)getpid());
    if (sl_tfrecord_writer_open(&s->w[i], s->tmp[i], SL_COMPRESSION_NONE)) {
      snprintf(msg, cap, "%s", sl_error_last());
      return SL_EIO;
    }
  }
  return 0;
}

int cmd_convert(int argc, char **argv) {
  const char *spec = NULL, *out = NULL, *to = "tfrecord", *prefix = "train";
  int64_t shards = 1;
  bool quiet = false;
  const cli_opt opts[] = {
      {.name = "--out", .type = CLI_STR, .dst = &out, .needs = "a folder"},
      {.name = "--to", .type = CLI_STR, .dst = &to, .needs = "a format (tfrecord)"},
      {.name = "--shards", .type = CLI_INT, .dst = &shards, .lo = 1, .hi = 100000, .must = "in 1..100000"},
      {.name = "--prefix", .type = CLI_STR, .dst = &prefix, .needs = "a file name prefix"},
      {.name = "--quiet", .type = CLI_FLAG, .dst = &quiet},
      {.name = NULL},
  };
  const cli_args args = {.cmd = "convert", .opts = opts, .help = convert_help, .pos = &spec, .npos = 1, .noun = "spec"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  if (!spec) return cli_usage("convert", "a SPEC file is required");
  if (!out) return cli_usage("convert", "--out DIR is required");
  if (strcmp(to, "tfrecord")) return cli_usage("convert", "--to: '%s' is not an output format (tfrecord)", to);
  if (!*prefix || strchr(prefix, '/')) return cli_usage("convert", "--prefix must be a file name prefix, not '%s'", prefix);
  if (mkdir(out, 0777) && errno != EEXIST) return cli_fail(false, "convert: cannot create %s: %s", out, strerror(errno));
  char msg[2048];
  sl_pipeline *p = NULL;
  sl_iter *it = NULL;
  if (cli_open_spec(&p, spec, msg, sizeof msg) == 0 && sl_pipeline_iter(&it, p))
    snprintf(msg, sizeof msg, "%s", sl_error_last());
  if (!it) {
    sl_pipeline_free(p);
    return cli_fail(false, "%s", msg);
  }
  shard_set s = {0};
  int rc = open_shards(&s, out, prefix, (int)shards, msg, sizeof msg);
  cli_progress bar;
  cli_progress_start(&bar, "convert", -1);
  if (quiet) bar.tty = false;
  cli_signals_install();
  sl_elem e;
  sl_elem_init(&e);
  int64_t n = 0, bytes = 0;
  while (!rc && !cli_signal_seen()) {
    int r = sl_iter_next(&e, it);
    if (r == SL_END) break;
    if (r) {
      rc = r;
      snprintf(msg, sizeof msg, "%s", sl_error_last());
      break;
    }
    sl_example *ex = sl_example_new();
    if (!ex) rc = SL_ENOMEM, snprintf(msg, sizeof msg, "out of memory");
    for (int k = 0; !rc && k < e.n; k++) rc = add_feature(ex, &e.c[k], msg, sizeof msg);
    sl_buf *b = NULL;
    if (!rc && (rc = sl_example_serialize(&b, ex))) snprintf(msg, sizeof msg, "%s", sl_error_last());
    if (!rc && (rc = sl_tfrecord_write(s.w[n % shards], sl_buf_data(b), sl_buf_size(b))))
      snprintf(msg, sizeof msg, "%s: %s", s.tmp[n % shards], sl_error_last());
    if (!rc) bytes += (int64_t)sl_buf_size(b);
    if (rc && e.n) { /* name the element that failed */
      char m2[sizeof msg];
      snprintf(m2, sizeof m2, "element %lld: %.1990s", (long long)n, msg);
      snprintf(msg, sizeof msg, "%s", m2);
    }
    sl_buf_unref(b);
    sl_example_free(ex);
    sl_elem_clear(&e);
    if (!rc) cli_progress_update(&bar, ++n, NULL);
  }
  cli_progress_end(&bar);
  sl_iter_free(it);
  sl_pipeline_free(p);
  int sig = cli_signal_seen();
  int frc = finish(&s, !rc && !sig, msg, sizeof msg);
  if (sig) {
    fprintf(stderr, "sluice convert: %s after %lld elements (no partial file left in %s)\n",
            sig == SIGTERM ? "terminated" : "interrupted", (long long)n, out);
    return 128 + sig;
  }
  if (rc || frc) return cli_fail(false, "convert: %s", msg);
  printf("convert: %lld elements into %lld TFRecord file%s under %s, %.1f MB\n", (long long)n, (long long)shards,
         shards == 1 ? "" : "s", out, (double)bytes / 1e6);
  return CLI_OK;
}
