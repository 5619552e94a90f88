/* convert/shard_writer.c: sl_convert (include/sluice/convert.h): runs a pipeline and writes its elements as tf.Example
 * TFRecords or WebDataset tar samples into N shards, each a temporary (core/outfile_int.h) renamed into place only
 * when every shard is complete, so an error or a Ctrl-C leaves nothing under a final name. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "core/outfile_int.h"
#include "io/io_int.h"
#include "ops/pipeline_int.h"
#include "sluice/convert.h"

static const char *const FORMAT_NAMES[] = {"tfrecord", "tar"};

int sl_convert_format_parse(sl_convert_format *out, const char *name) {
  int i = sl__name_index(FORMAT_NAMES, 2, name);
  if (i >= 0) {
    *out = (sl_convert_format)i;
    return 0;
  }
  return sl__err(SL_EINVAL, "unknown output format '%s' (tfrecord, tar)", name ? name : "");
}
const char *sl_convert_format_name(sl_convert_format f) { return (unsigned)f < 2 ? FORMAT_NAMES[f] : "?"; }

static bool is_image_ext(const char *s) {
  return !strcmp(s, "jpg") || !strcmp(s, "jpeg") || !strcmp(s, "png") || !strcmp(s, "webp");
}

/* Refuses what a shard cannot hold: decoded pixels and other tensors of numbers that are not int/float. */
static int check_dtype(const sl_comp *c) {
  if (c->dtype == SL_BYTES || c->dtype == SL_INT64 || c->dtype == SL_INT32 || c->dtype == SL_FLOAT32 ||
      c->dtype == SL_FLOAT64)
    return 0;
  return sl__err(SL_EINVAL, "component '%s' is %s: convert writes encoded images and numbers, not decoded pixels "
                 "(leave out the decode, or drop it with select)", c->name, sl_dtype_name(c->dtype));
}

/* ---- tf.Example ---- */

/* The feature name of component `name` (NULL: left out), and the format for image/format (or NULL). */
static const char *feature_name(const char *name, const char **format) {
  *format = NULL;
  if (!strcmp(name, "label")) return "image/class/label";
  if (!strcmp(name, "filename")) return "image/filename";
  if (!strcmp(name, "__key__")) return "image/key";
  if (!strcmp(name, "__url__")) return NULL;
  if (is_image_ext(name)) {
    *format = name;
    return "image/encoded";
  }
  return name;
}

static int add_feature(sl_example *ex, const sl_comp *c) {
  const char *format, *key = feature_name(c->name, &format);
  if (!key) return 0;
  int rc = check_dtype(c);
  if (rc) return rc;
  int64_t n = 1;
  if (sl_shape_count(&n, c->rank, c->shape)) n = 0;
  size_t cap = (size_t)(n ? n : 1);
  if (c->dtype == SL_INT64) return sl_example_add_int64(ex, key, sl_comp_data(c), (size_t)n);
  if (c->dtype == SL_BYTES) {
    const void **v = sl__mallocarray(cap, sizeof *v);
    size_t *l = sl__mallocarray(cap, sizeof *l);
    if (!v || !l) rc = sl__oom("a tf.Example");
    for (int64_t i = 0; !rc && i < n; i++) rc = sl_comp_string(&v[i], &l[i], c, i);
    if (!rc) rc = sl_example_add_bytes(ex, key, v, l, (size_t)n);
    sl__free(v);
    sl__free(l);
    if (!rc && format)
      rc = sl_example_add_bytes(ex, "image/format", (const void *const[]){format}, (const size_t[]){strlen(format)}, 1);
    return rc;
  }
  const void *d = sl_comp_data(c);
  if (c->dtype == SL_INT32) {
    int64_t *iv = sl__mallocarray(cap, sizeof *iv);
    if (!iv) return sl__oom("a tf.Example");
    for (int64_t i = 0; i < n; i++) iv[i] = ((const int32_t *)d)[i];
    rc = sl_example_add_int64(ex, key, iv, (size_t)n);
    sl__free(iv);
    return rc;
  }
  float *fv = sl__mallocarray(cap, sizeof *fv);
  if (!fv) return sl__oom("a tf.Example");
  for (int64_t i = 0; i < n; i++)
    fv[i] = c->dtype == SL_FLOAT32 ? ((const float *)d)[i] : (float)((const double *)d)[i];
  rc = sl_example_add_float(ex, key, fv, (size_t)n);
  sl__free(fv);
  return rc;
}

static int write_example(sl_tfrecord_writer *w, const sl_elem *e, uint64_t *bytes) {
  sl_example *ex = sl_example_new();
  if (!ex) return sl__oom("a tf.Example");
  int rc = 0;
  for (int k = 0; !rc && k < e->n; k++) rc = add_feature(ex, &e->c[k]);
  sl_buf *b = NULL;
  if (!rc) rc = sl_example_serialize(&b, ex);
  if (!rc) rc = sl_tfrecord_write(w, sl_buf_data(b), sl_buf_size(b));
  if (!rc) *bytes += sl_buf_size(b);
  sl_buf_unref(b);
  sl_example_free(ex);
  return rc;
}

/* ---- WebDataset sample ---- */

/* The extension of an encoded image, from its first bytes (NULL: not one we know). */
static const char *sniff_image(const unsigned char *p, size_t n) {
  if (n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) return "jpg";
  if (n >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8)) return "png";
  if (n >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4)) return "webp";
  return NULL;
}

/* Member extension of component c into ext (empty: no member). */
static void member_ext(char *ext, size_t cap, const sl_comp *c) {
  const char *n = c->name;
  ext[0] = 0;
  if (!strcmp(n, "__key__") || !strcmp(n, "image/key") || !strcmp(n, "__url__") || !strcmp(n, "image/format")) return;
  if (!strcmp(n, "label") || !strcmp(n, "image/class/label")) {
    snprintf(ext, cap, "cls");
    return;
  }
  const void *d;
  size_t len;
  if (!strcmp(n, "image/encoded") && c->dtype == SL_BYTES && !sl_comp_string(&d, &len, c, 0)) {
    const char *s = sniff_image(d, len);
    snprintf(ext, cap, "%s", s ? s : "bin");
    return;
  }
  snprintf(ext, cap, "%s", n);
  for (char *p = ext; *p; p++)
    if (*p == '/') *p = '.';
}

/* A key as a member path that stays inside the directory a reader extracts to: leading '/'s, empty and "."
 * components dropped, a ".." component made "_" ("../../x" is "_/_/x", "/abs/x" is "abs/x"). In place; its new
 * length. */
static size_t key_confine(char *k, size_t n) {
  size_t o = 0, i = 0;
  while (i < n) {
    size_t e = i;
    while (e < n && k[e] != '/') e++;
    size_t l = e - i;
    if (l && !(l == 1 && k[i] == '.')) {
      if (o) k[o++] = '/';
      if (l == 2 && k[i] == '.' && k[i + 1] == '.') k[o++] = '_';
      else {
        memmove(k + o, k + i, l);
        o += l;
      }
    }
    i = e + 1;
  }
  k[o] = 0;
  return o;
}

/* The sample's key: __key__ or image/key (confined: key_confine), else the element's index; a key whose base name
 * has a dot would split differently when read back (the part before the first dot is the key). */
static int sample_key(sl__str *key, const sl_elem *e, int64_t index) {
  key->len = 0;
  for (int k = 0; k < e->n; k++) {
    const sl_comp *c = &e->c[k];
    if ((strcmp(c->name, "__key__") && strcmp(c->name, "image/key")) || c->dtype != SL_BYTES || c->rank != 0) continue;
    int rc = sl__str_append(key, sl_comp_data(c), c->size);
    if (rc) return rc;
    if (memchr(key->s, 0, key->len))
      return sl__err(SL_EINVAL, "component '%s': the key holds a NUL byte: it cannot name a tar member", c->name);
    key->len = key_confine(key->s, key->len);
    if (!key->len) break; /* nothing left ("/", ".."): the index */
    const char *base = strrchr(key->s, '/');
    base = base ? base + 1 : key->s;
    if (strchr(base, '.'))
      return sl__err(SL_EINVAL, "component '%s': the key '%s' cannot name a WebDataset sample (a base name without "
                     "dots is needed: the reader keys on the part before the first dot)", c->name, key->s);
    return 0;
  }
  key->len = 0;
  return sl__str_printf(key, "%09" PRId64, index);
}

/* The keys a shard holds, as 64-bit hashes (open addressing; 0 is an empty slot): a key written again gets a suffix,
 * so that no two samples of a shard share a key (a reader groups consecutive members by key, and an extraction
 * would write one over the other). */
typedef struct {
  uint64_t *h;
  size_t cap, n;
} keyset;

/* Adds h; false when it was there already. SL_ENOMEM as *rc. */
static bool keyset_add(keyset *s, uint64_t h, int *rc) {
  h |= 1;
  if (2 * (s->n + 1) > s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 1024;
    uint64_t *nh = sl__calloc(cap, sizeof *nh);
    if (!nh) {
      *rc = sl__oom("a shard's key set");
      return false;
    }
    for (size_t i = 0; i < s->cap; i++)
      if (s->h[i])
        for (size_t j = s->h[i] & (cap - 1);; j = (j + 1) & (cap - 1))
          if (!nh[j]) {
            nh[j] = s->h[i];
            break;
          }
    sl__free(s->h);
    s->h = nh;
    s->cap = cap;
  }
  for (size_t j = h & (s->cap - 1);; j = (j + 1) & (s->cap - 1)) {
    if (s->h[j] == h) return false;
    if (!s->h[j]) {
      s->h[j] = h;
      s->n++;
      return true;
    }
  }
}

/* The key made unique in its shard: as it is, else with "_1", "_2", ... */
static int unique_key(sl__str *key, keyset *seen) {
  int rc = 0;
  size_t base = key->len;
  for (uint64_t n = 1; !keyset_add(seen, XXH3_64bits(key->s, key->len), &rc); n++) {
    if (rc) return rc;
    key->len = base;
    if ((rc = sl__str_printf(key, "_%" PRIu64, n))) return rc;
  }
  return rc;
}

static int write_sample(sl__tarw *w, keyset *seen, const sl_elem *e, int64_t index, sl__str *key, sl__str *name,
                        uint64_t *bytes) {
  int rc = sample_key(key, e, index);
  if (!rc) rc = unique_key(key, seen);
  if (rc) return rc;
  char exts[SL_MAX_COMPONENTS][256];
  int members = 0;
  for (int k = 0; k < e->n; k++) {
    const sl_comp *c = &e->c[k];
    member_ext(exts[k], sizeof exts[k], c);
    if (!exts[k][0]) continue;
    if ((rc = check_dtype(c)) != 0) return rc;
    for (int j = 0; j < k; j++)
      if (!strcmp(exts[j], exts[k]))
        return sl__err(SL_EINVAL, "components '%s' and '%s' would both be member %s.%s (drop one with select)",
                       e->c[j].name, c->name, key->s, exts[k]);
    int64_t n = 1;
    if (sl_shape_count(&n, c->rank, c->shape) || n != 1)
      return sl__err(SL_EINVAL, "component '%s' holds %" PRId64 " values: a tar member holds one string or number "
                     "(convert to tfrecord for lists)", c->name, n);
    const void *data = sl_comp_data(c);
    size_t len = c->size;
    char num[64];
    if (c->dtype != SL_BYTES) {
      const void *d = data;
      int m = c->dtype == SL_INT64   ? snprintf(num, sizeof num, "%" PRId64, *(const int64_t *)d)
              : c->dtype == SL_INT32 ? snprintf(num, sizeof num, "%" PRId32, *(const int32_t *)d)
              : c->dtype == SL_FLOAT32 ? snprintf(num, sizeof num, "%.9g", (double)*(const float *)d)
                                       : snprintf(num, sizeof num, "%.17g", *(const double *)d);
      data = num;
      len = (size_t)m;
    } else if ((rc = sl_comp_string(&data, &len, c, 0)) != 0) {
      return rc;
    }
    name->len = 0;
    if ((rc = sl__str_printf(name, "%s.%s", key->s, exts[k])) || (rc = sl__tarw_add(w, name->s, data, len))) return rc;
    *bytes += len;
    members++;
  }
  if (!members) return sl__err(SL_EINVAL, "nothing to write: no component makes a tar member (only the key?)");
  return 0;
}

/* ---- shards ---- */

typedef struct {
  int n;
  sl__outfile *of;
  sl_tfrecord_writer **tw;
  sl__tarw **tar;
  keyset *keys; /* per tar shard */
} shard_set;

/* Closes the writers, then renames every shard into place (keep) or removes them all. */
static int finish(shard_set *s, bool keep) {
  int rc = 0;
  for (int i = 0; i < s->n; i++) {
    int c = s->tw ? sl_tfrecord_writer_close(s->tw[i]) : 0;
    if (s->tar) {
      int t = sl__tarw_close(s->tar[i]);
      if (!c) c = t;
    }
    if (keep && !rc) rc = c;
  }
  for (int i = 0; i < s->n; i++) {
    if (keep && !rc) rc = sl__outfile_commit(&s->of[i]);
    sl__outfile_abort(&s->of[i]);
  }
  sl__free(s->of);
  sl__free(s->tw);
  sl__free(s->tar);
  for (int i = 0; s->keys && i < s->n; i++) sl__free(s->keys[i].h);
  sl__free(s->keys);
  return rc;
}

static int open_shards(shard_set *s, const sl_convert_opts *o) {
  s->of = sl__calloc((size_t)o->shards, sizeof *s->of);
  if (o->format == SL_CONVERT_TAR) {
    s->tar = sl__calloc((size_t)o->shards, sizeof *s->tar);
    s->keys = sl__calloc((size_t)o->shards, sizeof *s->keys);
  } else
    s->tw = sl__calloc((size_t)o->shards, sizeof *s->tw);
  if (!s->of || (!s->tar && !s->tw) || (s->tar && !s->keys)) return sl__oom("the converter's shards");
  sl__str path = {0};
  int rc = 0;
  for (int i = 0; i < o->shards && !rc; i++) {
    path.len = 0;
    if ((rc = sl__str_printf(&path, "%s/%s-%05d-of-%05d.%s", o->out_dir, o->prefix, i, o->shards,
                             FORMAT_NAMES[o->format])) ||
        (rc = sl__outfile_open(&s->of[i], path.s, 0)))
      break;
    s->n = i + 1;
    rc = s->tar ? sl__tarw_on(&s->tar[i], s->of[i].f, path.s)
                : sl__tfrecord_writer_on(&s->tw[i], s->of[i].f, path.s, SL_COMPRESSION_NONE);
  }
  sl__str_dispose(&path);
  return rc;
}

/* The options as the run reads them, defaults filled in; the error names the field. */
static int convert_opts(sl_convert_opts *o, const sl_convert_opts *opts) {
  if (!opts || opts->version != SL_CONVERT_OPTS_VERSION)
    return sl__err(SL_EINVAL, "sl_convert: options of another version");
  *o = *opts;
  if (!o->shards) o->shards = 1;
  if (!o->prefix) o->prefix = "train";
  if ((unsigned)o->format > SL_CONVERT_TAR) return sl__err(SL_EINVAL, "format: unknown format %d", (int)o->format);
  if (!o->out_dir || !o->out_dir[0]) return sl__err(SL_EINVAL, "out_dir: required");
  if (o->shards < 1 || o->shards > 100000) return sl__err(SL_EINVAL, "shards: must be in 1..100000 (got %d)", o->shards);
  if (!o->prefix[0] || strchr(o->prefix, '/'))
    return sl__err(SL_EINVAL, "prefix: a file name prefix is needed, not '%s'", o->prefix);
  if (mkdir(o->out_dir, 0777) && errno != EEXIST)
    return sl__err(SL_EIO, "cannot create '%s': %s", o->out_dir, strerror(errno));
  struct stat st;
  if (stat(o->out_dir, &st) || !S_ISDIR(st.st_mode)) return sl__err(SL_EIO, "'%s' is not a directory", o->out_dir);
  return 0;
}

/* The shards about to be written, and the directory swept, against the pipeline's inputs: `convert --out` onto the
 * folder of the input shards would replace them. Before anything is opened. */
static int check_outputs(const sl_pipeline *p, const sl_convert_opts *o, const char *const *ours) {
  char **names = sl__calloc((size_t)o->shards, sizeof *names);
  if (!names) return sl__oom("the converter's shard names");
  int rc = 0;
  for (int i = 0; i < o->shards && !rc; i++) {
    sl__str path = {0};
    rc = sl__str_printf(&path, "%s/%s-%05d-of-%05d.%s", o->out_dir, o->prefix, i, o->shards, FORMAT_NAMES[o->format]);
    names[i] = path.s;
  }
  if (!rc) rc = sl__pipeline_check_outputs(p, (const char *const *)names, (size_t)o->shards, o->out_dir, ours,
                                           "the shard ");
  for (int i = 0; i < o->shards; i++) sl__free(names[i]);
  sl__free(names);
  return rc;
}

int sl_convert(sl_convert_report *report, sl_pipeline *p, const sl_convert_opts *opts) {
  sl_convert_opts o = {0};
  int rc = convert_opts(&o, opts);
  if (rc) return rc;
  if (!p) return sl__err(SL_EINVAL, "sl_convert: no pipeline");
  /* the temporaries of killed converts of this prefix and format (whatever their shard count), no others: the
   * prefix's own glob characters are escaped (--prefix 'a*' must not sweep the temporaries of --prefix abc) */
  sl__str pat = {0};
  for (const char *c = o.prefix; *c && !rc; c++)
    rc = strchr("*?[]\\", *c) ? sl__str_printf(&pat, "\\%c", *c) : sl__str_append(&pat, c, 1);
  if (rc || (rc = sl__str_printf(&pat, "-[0-9]*-of-[0-9]*.%s", FORMAT_NAMES[o.format]))) {
    sl__str_dispose(&pat);
    return rc;
  }
  const char *const ours[] = {pat.s, NULL};
  if (!(rc = check_outputs(p, &o, ours))) sl__outfile_sweep_dir(o.out_dir, ours);
  sl__str_dispose(&pat);
  if (rc) return rc;
  sl_iter *it = NULL;
  if ((rc = sl_pipeline_iter(&it, p)) != 0) return rc;
  shard_set s = {0};
  sl_convert_report rep = {0};
  sl__str key = {0}, name = {0};
  sl_elem e;
  sl_elem_init(&e);
  rc = open_shards(&s, &o);
  while (!rc) {
    if (o.cancel && *o.cancel) {
      rc = sl__err(SL_ECANCELED, "cancelled after %" PRId64 " elements; no file written", rep.elements);
      break;
    }
    int r = sl_iter_next(&e, it);
    if (r == SL_END) break;
    if (r) {
      rc = r;
      break;
    }
    int shard = (int)(rep.elements % o.shards);
    rc = s.tar ? write_sample(s.tar[shard], &s.keys[shard], &e, rep.elements, &key, &name, &rep.bytes)
               : write_example(s.tw[shard], &e, &rep.bytes);
    if (rc) sl__err_wrap(rc, "element %" PRId64, rep.elements);
    sl_elem_clear(&e);
    if (rc) break;
    rep.elements++;
    if (o.progress) o.progress(rep.elements, rep.bytes, o.payload);
  }
  sl_elem_clear(&e);
  sl_iter_free(it);
  sl__str_dispose(&key);
  sl__str_dispose(&name);
  int frc = finish(&s, !rc);
  if (!rc) rc = frc;
  rep.files = rc ? 0 : o.shards;
  if (!rc && report) *report = rep;
  return rc;
}
