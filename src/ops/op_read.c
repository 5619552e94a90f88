/* ops/op_read.c: the file readers: `files` (a list or globs -> filenames, optionally shuffled per epoch),
 * `tfrecord` (records of each input filename) and `lines` (text lines of each input filename). */
#include <errno.h>
#include <unistd.h>
#include <glob.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "io/io_int.h"
#include "ops/op_int.h"
#include "sluice/tfrecord.h"

/* ---------------- files ---------------- */
typedef struct {
  char **paths;
  int64_t n;
  bool shuffle, reshuffle;
  int64_t seed;
} files_cfg;

typedef struct {
  sl__it it;
  int64_t *order;
  int64_t pos;
} files_it;

static int files_add(files_cfg *c, const char *p) {
  char **np = sl__realloc(c->paths, (size_t)(c->n + 1) * sizeof *np);
  if (!np) return sl__oom("the file list");
  c->paths = np;
  c->paths[c->n] = sl__strdup(p);
  if (!c->paths[c->n]) return sl__oom("the file list");
  c->n++;
  return 0;
}

/* The most names one pattern's braces may give (WebDataset's shard lists run to thousands). */
enum { MAX_BRACE_NAMES = 1000000 };

/* Adds the files one pattern names, after its braces are expanded: local paths through glob(3) (sorted), s3:// URLs
 * with '*', '?' or '[' by listing the bucket (sorted), other URLs as they are. */
static int files_glob_one(sl__op *op, files_cfg *c, const char *full, const char *where) {
  if (sl__is_url(full)) {
    bool wild = full[strcspn(full, "*?[")] != 0;
    if (!wild) return files_add(c, full);
    if (strncasecmp(full, "s3://", 5)) {
      char *shown = sl__url_shown(full);
      int rc = sl__err(SL_EINVAL, "%s: '%s': an http(s) URL cannot be globbed (a web server lists nothing); name the "
                                  "shards with a brace range, \"shard-{000000..000127}.tar\"", where,
                       shown ? shown : "a URL");
      sl__free(shown);
      return rc;
    }
    char **urls = NULL;
    size_t n = 0;
    int rc = sl__s3_glob(&urls, &n, full);
    for (size_t i = 0; i < n; i++) {
      if (!rc) rc = files_add(c, urls[i]);
      sl__free(urls[i]);
    }
    sl__free(urls);
    return rc ? sl__err_wrap(rc, "%s", where) : 0;
  }
  glob_t g;
  int gr = glob(full, GLOB_MARK, NULL, &g); /* directories end in '/': refused now, not when the reader opens them */
  int rc = 0;
  char cwd[1024] = "";
  if (full[0] != '/' && !getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, "?");
  if (gr == GLOB_NOMATCH)
    rc = sl__err(SL_ENOTFOUND, "%s: glob '%s' matched no files%s%s%s", where, full,
                 cwd[0] ? " (a relative pattern: matched against the working directory " : "", cwd, cwd[0] ? ")" : "");
  else if (gr) rc = sl__err(SL_EIO, "%s: glob '%s' failed", where, full);
  for (size_t i = 0; gr == 0 && i < g.gl_pathc && !rc; i++) {
    size_t n = strlen(g.gl_pathv[i]);
    if (n && g.gl_pathv[i][n - 1] == '/')
      rc = sl__err(SL_EINVAL, "%s: glob '%s' matches the directory '%s'; the readers read files (a pattern such as "
                   "'%s*' lists what is in it)", where, full, g.gl_pathv[i], g.gl_pathv[i]);
    else
      rc = files_add(c, g.gl_pathv[i]); /* glob sorts */
  }
  if (gr == 0) globfree(&g);
  return rc;
}

/* The patterns a string names once its braces are expanded ("shard-{000..127}.tar"), each resolved against the
 * spec's folder, in *out (sl__free each and the array). */
static int files_expand(sl__op *op, char ***out, size_t *n, const char *pat, const char *where) {
  *out = NULL;
  *n = 0;
  int rc = sl__brace_expand(out, n, pat, MAX_BRACE_NAMES);
  for (size_t i = 0; !rc && i < *n; i++) {
    char *full = sl__resolve_path(op->pl, (*out)[i]);
    if (!full) rc = sl__oom("a path");
    else {
      sl__free((*out)[i]);
      (*out)[i] = full;
    }
  }
  return rc ? sl__err_wrap(rc, "%s", where) : 0;
}
static void names_free(char **a, size_t n) {
  for (size_t i = 0; i < n; i++) sl__free(a[i]);
  sl__free(a);
}

static int files_glob(sl__op *op, files_cfg *c, const char *pat, const char *where) {
  char **pats;
  size_t n;
  int rc = files_expand(op, &pats, &n, pat, where);
  for (size_t i = 0; !rc && i < n; i++) rc = files_glob_one(op, c, pats[i], where);
  names_free(pats, n);
  return rc;
}

static int files_parse(sl__op *op, json_t *o) {
  sl_args k = sl__op_knobs(op, o);
  files_cfg *c = sl__calloc(1, sizeof *c);
  if (!c) return sl__oom("files");
  op->impl = c;
  int rc;
  if ((rc = sl__get_bool(&c->shuffle, &k, "shuffle")) ||
      (rc = sl__get_bool(&c->reshuffle, &k, "reshuffle_each_iteration")) ||
      (rc = sl__get_int(&c->seed, &k, "seed")))
    return rc;
  json_t *g = json_object_get(o, "glob"), *l = json_object_get(o, "list");
  if (!g && !l) return sl__err(SL_EINVAL, "%s: needs \"glob\" (a pattern or a list of them) or \"list\" (paths)", op->path);
  char where[512];
  if (g) {
    snprintf(where, sizeof where, "%s.glob", op->path);
    if (json_is_string(g)) {
      if ((rc = files_glob(op, c, json_string_value(g), where))) return rc;
    } else if (json_is_array(g)) {
      for (size_t i = 0; i < json_array_size(g); i++) {
        json_t *x = json_array_get(g, i);
        snprintf(where, sizeof where, "%s.glob[%zu]", op->path, i);
        if (!json_is_string(x)) return sl__err(SL_EINVAL, "%s: expected a string", where);
        if ((rc = files_glob(op, c, json_string_value(x), where))) return rc;
      }
    } else {
      return sl__err(SL_EINVAL, "%s.glob: expected a string or an array of strings, found %s", op->path,
                     sl__json_type_name(g));
    }
  }
  if (l) {
    if (!json_is_array(l)) return sl__err(SL_EINVAL, "%s.list: expected an array of paths", op->path);
    for (size_t i = 0; i < json_array_size(l); i++) {
      json_t *x = json_array_get(l, i);
      if (!json_is_string(x)) return sl__err(SL_EINVAL, "%s.list[%zu]: expected a string", op->path, i);
      char where2[512], **names;
      size_t nn;
      snprintf(where2, sizeof where2, "%s.list[%zu]", op->path, i);
      if ((rc = files_expand(op, &names, &nn, json_string_value(x), where2))) {
        names_free(names, nn); /* what was expanded before the failure */
        return rc;
      }
      for (size_t j = 0; !rc && j < nn; j++) {
        const char *full = names[j];
        struct stat st;
        int missing = sl__is_url(full) ? 0 : stat(full, &st) != 0 ? errno : 0; /* a URL is asked when read */
        if (!sl__is_url(full) && (missing || S_ISDIR(st.st_mode)))
          rc = missing ? sl__err(SL_ENOTFOUND, "%s: '%s': %s", where2, full, strerror(missing))
                       : sl__err(SL_EINVAL, "%s: '%s' is a directory; the readers read files", where2, full);
        else
          rc = files_add(c, full);
      }
      names_free(names, nn);
      if (rc) return rc;
    }
  }
  op->random = c->shuffle;
  op->cardinality = c->n;
  /* One epoch's bytes, which lets the planner size a cache from a trace that read only part of them. */
  uint64_t total = 0;
  bool known = true;
  for (int64_t i = 0; i < c->n; i++) {
    struct stat st;
    if (stat(c->paths[i], &st)) {
      known = false;
      continue;
    }
    if (!S_ISREG(st.st_mode)) /* a FIFO would block its reader, a device never end: refused now (validate too) */
      return sl__err(SL_EINVAL, "%s: '%s' is %s, not a regular file: sluice reads regular files only", op->path,
                     c->paths[i], sl__file_kind(st.st_mode));
    total += (uint64_t)st.st_size;
  }
  if (!known) total = 0;
  op->source_bytes = total;
  return 0;
}

static int files_next(sl__it *it, sl_elem *out) {
  files_it *f = (files_it *)it;
  const files_cfg *c = it->op->impl;
  if (f->pos >= c->n) return SL_END;
  int64_t k = f->order ? f->order[f->pos] : f->pos;
  const char *p = c->paths[k];
  f->pos++;
  sl__ref_set(out, it->op, NULL, (uint64_t)k, 0);
  return sl_elem_set_bytes(out, "filename", NULL, 0, p, strlen(p));
}
static int files_save(sl__it *it, sl__sw *w) {
  sl__sw_u64(w, (uint64_t)((files_it *)it)->pos);
  return 0;
}
static int files_load(sl__it *it, sl__sr *r) {
  return sl__sr_index(r, &((files_it *)it)->pos, ((const files_cfg *)it->op->impl)->n, it->op, "a files op's position");
}
static int files_remake(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  (void)run;
  const files_cfg *c = op->impl;
  if (r->pos >= (uint64_t)c->n) return sl__op_err(op, SL_ECORRUPT, "a saved ref names file %llu of %lld",
                                                  (unsigned long long)r->pos, (long long)c->n);
  const char *p = c->paths[r->pos];
  sl__ref_set(out, op, NULL, r->pos, 0);
  return sl_elem_set_bytes(out, "filename", NULL, 0, p, strlen(p));
}
static const sl__op_state FILES_STATE = {files_save, files_load, NULL, files_remake, 0};
static void files_free(sl__it *it) {
  files_it *f = (files_it *)it;
  sl__free(f->order);
  sl__free(f);
}
static const sl__it_vt FILES_IT = {files_next, files_free};

int sl__file_order(int64_t **order, const sl__op *op, int64_t n, int64_t seed, bool reshuffle, uint64_t epoch) {
  *order = sl__mallocarray((size_t)n, sizeof(int64_t));
  if (!*order) return sl__oom("a file order");
  int64_t *o = *order;
  sl_rng r;
  uint64_t base = seed >= 0 ? (uint64_t)seed : sl_pipeline_seed(op->pl);
  sl_rng_seed(&r, sl__seed_of(base, (uint64_t)op->seed_ops[0], reshuffle ? epoch : 0, 0xf11e));
  for (int64_t i = 0; i < n; i++) o[i] = i;
  for (int64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
    int64_t j = (int64_t)(sl_rng_u64(&r) % (uint64_t)(i + 1));
    int64_t t = o[i];
    o[i] = o[j];
    o[j] = t;
  }
  return 0;
}

static int files_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  int rc = sl__it_new(out, sizeof(files_it), &FILES_IT, op, run, NULL);
  if (rc) return rc;
  const files_cfg *c = op->impl;
  files_it *f = (files_it *)*out;
  if (c->shuffle && c->n > 1 && (rc = sl__file_order(&f->order, op, c->n, c->seed, c->reshuffle, (*out)->epoch))) {
    sl__it_free(*out);
    *out = NULL;
    return rc;
  }
  return 0;
}
static void files_free_op(sl__op *op) {
  files_cfg *c = op->impl;
  if (!c) return;
  for (int64_t i = 0; i < c->n; i++) sl__free(c->paths[i]);
  sl__free(c->paths);
  sl__free(c);
}
static const sl__arg FILES_KNOBS[] = {
    {"glob", SL__ARG_GLOB, NULL, 0, 0, 0, NULL, "file patterns (one, or an array)"},
    {"list", SL__ARG_STRS, NULL, 0, 0, 0, NULL, "file names"},
    {"shuffle", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "shuffle the file order"},
    {"seed", SL__ARG_INT, "-1", SL__ARGF_LO, -1, 0, NULL, "the shuffle's seed (-1: from the pipeline's)"},
    {"reshuffle_each_iteration", SL__ARG_BOOL, "true", 0, 0, 0, NULL, "a new order each epoch"},
    {NULL}};
static int files_infer(sl__op *op, sl__struct *s, const sl__struct *src) {
  (void)src;
  *s = (sl__struct){0};
  return sl__struct_put(s, "filename", SL_BYTES, 0, op->path, NULL);
}
static const char *files_first(const sl__op *op) {
  const files_cfg *c = op->impl;
  return c && c->n ? c->paths[0] : NULL;
}
static const sl__op_schema FILES_SCHEMA = {SL__MK_SOURCE, SL__OPS_LISTS_FILES,
                                           "file names (from globs or a list), as bytes `filename`", FILES_KNOBS,
                                           files_infer, files_first};
const sl__op_vt sl__op_files = {"files", files_parse, files_open, files_free_op, SL__OPF_SOURCE, &FILES_SCHEMA,
                                &FILES_STATE};

/* ---------------- helpers for per-file readers ---------------- */
/* Reads the filename out of an input element (component `comp`) into a NUL-terminated string. */
static int input_filename(sl__op *op, sl_elem *e, const char *comp, char *buf, size_t n) {
  sl_comp *c = sl_elem_get(e, comp);
  if (!c || c->dtype != SL_BYTES || c->rank != 0)
    return sl__op_err(op, SL_EINVAL, "input element has no byte-string component '%s' (a filename)", comp);
  if (c->size >= n) return sl__op_err(op, SL_EINVAL, "filename longer than %zu bytes", n - 1);
  memcpy(buf, sl_comp_data(c), c->size);
  buf[c->size] = 0;
  return 0;
}

/* A per-file reader's saved part: the file being read ("" when none), its element's ref, and the next record's
 * byte offset and index in it. */
static void reader_save(sl__sw *w, const char *path, const sl_eref *in, uint64_t off, uint64_t idx) {
  sl__sw_str(w, path ? path : "");
  if (!path) return;
  sl__sw_u64(w, in->op);
  sl__sw_u64(w, in->pos);
  sl__sw_u64(w, off);
  sl__sw_u64(w, idx);
}
/* Reads it back: *path "" when no file was open. */
static int reader_load(sl__sr *r, char *path, size_t n, sl_eref *in, uint64_t *off, uint64_t *idx) {
  uint64_t op, up;
  int rc = sl__sr_str(r, path, n, "a reader's file");
  if (rc || !path[0]) return rc;
  if ((rc = sl__sr_u64(r, &op, "a reader's file ref")) || (rc = sl__sr_u64(r, &up, "a reader's file ref")) ||
      (rc = sl__sr_u64(r, off, "a reader's offset")) || (rc = sl__sr_u64(r, idx, "a reader's record index")))
    return rc;
  if (op > UINT16_MAX) return sl__err(SL_ECORRUPT, "the saved state is damaged (a reader's file ref)");
  *in = (sl_eref){.op = (uint16_t)op, .pos = up};
  return 0;
}
/* The file name of a reader's input element made again from its ref (r->up_op, r->up). */
static int reader_remake_path(sl__op *op, sl__run *run, const sl_eref *r, const char *comp, char *path, size_t n) {
  sl_elem in;
  sl_elem_init(&in);
  int rc = sl__remake_input(op, run, r->up_op, r->up, &in);
  if (!rc) rc = input_filename(op, &in, comp, path, n);
  sl_elem_clear(&in);
  return rc;
}

void sl__op_net_account(sl__op *op, const sl__stream *s, sl__net_stats *seen) {
  sl__net_stats n;
  if (!s || !sl__stream_net(s, &n)) return;
  sl__stat_add(&op->st.net_requests, n.requests - seen->requests);
  sl__stat_add(&op->st.net_retries, n.retries - seen->retries);
  sl__stat_add(&op->st.net_bytes, n.bytes - seen->bytes);
  sl__stat_add(&op->st.net_ttfb_ns, n.ttfb_ns - seen->ttfb_ns);
  sl__stat_add(&op->st.net_xfer_ns, n.xfer_ns - seen->xfer_ns);
  sl__stat_add(&op->st.net_solo_bytes, n.solo_bytes - seen->solo_bytes);
  sl__stat_add(&op->st.net_solo_ns, n.solo_ns - seen->solo_ns);
  sl__stat_add(&op->st.net_ovl_bytes, n.overlap_bytes - seen->overlap_bytes);
  sl__stat_add(&op->st.net_ovl_ns, n.overlap_ns - seen->overlap_ns);
  sl__stat_add(&op->st.net_cpu_ns, n.cpu_ns - seen->cpu_ns);
  atomic_store_explicit(&op->st.net_block, n.block, memory_order_relaxed);
  atomic_store_explicit(&op->st.net_inflight, n.inflight, memory_order_relaxed);
  *seen = n;
}

sl__stream_opts sl__op_stream_opts(const sl__op *op, sl__stream_opts o) {
  int ra = atomic_load_explicit(&((sl__op *)op)->active_ra, memory_order_relaxed);
  if (ra > 0) o.inflight = ra;
  o.keep = op->keep;
  return o;
}

int sl__op_net_knobs(sl__op *op, sl__stream_opts *o, const sl_args *k) {
  int64_t ra, keep;
  int rc = sl__get_int(&ra, k, "readahead");
  if (!rc) rc = sl__get_int(&keep, k, "keep");
  *o = (sl__stream_opts){0, (int)ra, NULL};
  if (!rc && keep > 0 && !op->keep) rc = sl__keep_create(&op->keep, (uint64_t)keep);
  return rc;
}

void sl__op_net_opened(sl__op *op, const sl__stream *s) {
  if (!s || !(sl__stream_remote(s) || sl__stream_kept(s))) return;
  sl__stat_add(&op->st.net_objects, 1);
  sl__stat_add(&op->st.net_object_bytes, sl__stream_size(s));
  if (sl__stream_kept(s)) sl__stat_add(&op->st.net_kept, 1);
}

/* on_error "skip": a file that could not be opened or read to its end (the error just set names it) is noted and
 * counted as one skip. */
static void unreadable_skip(sl__op *op) {
  sl__op_skip_note(op, sl_error_last(), NULL, 0);
  sl__stat_add(&op->st.skipped, 1);
}

/* ---------------- tfrecord ---------------- */
typedef struct {
  sl_compression comp;
  bool skip_corrupt, skip_unreadable;
  const char *component;
  sl__stream_opts net; /* a remote file's read-ahead (readahead) */
} tfr_cfg;

typedef struct {
  sl__it it;
  sl_tfrecord_reader *r;
  uint64_t disk_seen;
  sl__net_stats net_seen;
  sl_eref in_ref; /* the ref of the filename element being read (its records' `up`) */
  char *path;     /* that file's name (a saved state names it) */
} tfr_it;

static int tfr_parse(sl__op *op, json_t *o) {
  sl_args k = sl__op_knobs(op, o);
  tfr_cfg *c = sl__calloc(1, sizeof *c);
  if (!c) return sl__oom("tfrecord");
  op->impl = c;
  const char *comp, *oc, *oe;
  int rc;
  if ((rc = sl__get_str(&comp, &k, "compression")) ||
      (rc = sl__get_str(&oc, &k, "on_corrupt")) || (rc = sl__get_str(&oe, &k, "on_error")) ||
      (rc = sl__op_net_knobs(op, &c->net, &k)) ||
      (rc = sl__get_str(&c->component, &k, "component")))
    return rc;
  if (sl_compression_parse(&c->comp, comp)) return sl__err_wrap(SL_EINVAL, "%s.compression", op->path);
  if (!strcmp(oc, "skip")) c->skip_corrupt = true;
  else if (strcmp(oc, "error"))
    return sl__err(SL_EINVAL, "%s.on_corrupt: expected \"error\" or \"skip\", found \"%s\"", op->path, oc);
  c->skip_unreadable = !strcmp(oe, "skip");
  op->cardinality = -1;
  return 0;
}

static void tfr_account(tfr_it *t) {
  uint64_t d = sl_tfrecord_reader_disk_bytes(t->r);
  if (!sl__stream_remote(sl__tfrecord_reader_stream(t->r))) /* a remote file's bytes are net_bytes */
    sl__stat_add(&t->it.op->st.disk_bytes, d - t->disk_seen);
  t->disk_seen = d;
  sl__op_net_account(t->it.op, sl__tfrecord_reader_stream(t->r), &t->net_seen);
}

static int tfr_start(tfr_it *t, const char *path, const tfr_cfg *c) {
  sl__free(t->path);
  t->path = sl__strdup(path);
  if (!t->path) return sl__oom("a file name");
  sl__stream_opts so = sl__op_stream_opts(t->it.op, c->net);
  int rc = sl__tfrecord_reader_open_ex(&t->r, path, c->comp, &so);
  if (rc) return sl__op_wrap(t->it.op, rc);
  sl__op_net_opened(t->it.op, sl__tfrecord_reader_stream(t->r));
  t->disk_seen = 0;
  t->net_seen = (sl__net_stats){0};
  return 0;
}

static int tfr_next(sl__it *it, sl_elem *out) {
  tfr_it *t = (tfr_it *)it;
  const tfr_cfg *c = it->op->impl;
  for (;;) {
    if (!t->r) {
      sl_elem in;
      sl_elem_init(&in);
      int rc = sl__it_pull(it, &in);
      if (rc) return rc;
      char path[4096];
      rc = input_filename(it->op, &in, c->component, path, sizeof path);
      t->in_ref = in.ref;
      t->in_ref.members = NULL;
      sl_elem_clear(&in);
      if (rc) return rc;
      if ((rc = tfr_start(t, path, c))) {
        if (rc == SL_ECANCELED || rc == SL_ENOMEM || !c->skip_unreadable) return rc;
        unreadable_skip(it->op);
        continue;
      }
    }
    sl_buf *rec;
    size_t len;
    uint64_t at = sl_tfrecord_reader_offset(t->r), idx = sl_tfrecord_reader_index(t->r);
    int rc = sl_tfrecord_reader_next(&rec, &len, t->r);
    tfr_account(t);
    if (rc == 0) {
      sl__ref_set(out, it->op, &t->in_ref, at, idx);
      rc = sl_elem_set_bytes(out, "record", rec, 0, NULL, len);
      sl_buf_unref(rec);
      return rc;
    }
    if (rc == SL_END) {
      sl_tfrecord_reader_free(t->r);
      t->r = NULL;
      continue;
    }
    if (rc == SL_ECORRUPT && c->skip_corrupt) {
      sl__op_skip_note(it->op, sl_error_last(), NULL, 0); /* names the file, the record and its byte offset */
      sl__stat_add(&it->op->st.skipped, 1);
      continue; /* the reader resumes after a data-CRC error, or ends the file after a framing error */
    }
    if ((rc == SL_EIO || rc == SL_ENOTFOUND) && c->skip_unreadable) { /* the rest of the file goes */
      unreadable_skip(it->op);
      sl_tfrecord_reader_free(t->r);
      t->r = NULL;
      continue;
    }
    return sl__op_wrap(it->op, rc);
  }
}
static void tfr_free(sl__it *it) {
  tfr_it *t = (tfr_it *)it;
  sl_tfrecord_reader_free(t->r);
  sl__free(t->path);
  sl__free(t);
}
/* Its part: the file being read (none: "") with its element's ref, and the next record's offset and index. */
static int tfr_save(sl__it *it, sl__sw *w) {
  tfr_it *t = (tfr_it *)it;
  reader_save(w, t->r ? t->path : NULL, &t->in_ref, t->r ? sl_tfrecord_reader_offset(t->r) : 0,
              t->r ? sl_tfrecord_reader_index(t->r) : 0);
  return 0;
}
static int tfr_load(sl__it *it, sl__sr *r) {
  tfr_it *t = (tfr_it *)it;
  char path[4096];
  uint64_t off = 0, idx = 0;
  int rc = reader_load(r, path, sizeof path, &t->in_ref, &off, &idx);
  if (rc || !path[0]) return rc;
  if ((rc = tfr_start(t, path, it->op->impl))) return rc;
  rc = sl_tfrecord_reader_seek(t->r, off, idx);
  return rc ? sl__op_wrap(it->op, rc) : 0;
}
static int tfr_remake(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  const tfr_cfg *c = op->impl;
  char path[4096];
  int rc = reader_remake_path(op, run, r, c->component, path, sizeof path);
  if (rc) return rc;
  sl_tfrecord_reader *rd;
  if ((rc = sl_tfrecord_reader_open(&rd, path, c->comp))) return sl__op_wrap(op, rc);
  sl_buf *rec = NULL;
  size_t len;
  if (!(rc = sl_tfrecord_reader_seek(rd, r->pos, r->aux))) rc = sl_tfrecord_reader_next(&rec, &len, rd);
  sl_tfrecord_reader_free(rd);
  if (rc == SL_END) rc = sl__op_err(op, SL_ECORRUPT, "%s: no record at byte %llu to resume with", path,
                                    (unsigned long long)r->pos);
  if (rc) return rc < 0 ? sl__op_wrap(op, rc) : rc;
  sl__ref_set(out, op, NULL, r->pos, r->aux);
  out->ref.up_op = r->up_op;
  out->ref.up = r->up;
  rc = sl_elem_set_bytes(out, "record", rec, 0, NULL, len);
  sl_buf_unref(rec);
  return rc;
}
static const sl__op_state TFR_STATE = {tfr_save, tfr_load, NULL, tfr_remake, 0};
static const sl__it_vt TFR_IT = {tfr_next, tfr_free};
static int tfr_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  return sl__it_new(out, sizeof(tfr_it), &TFR_IT, op, run, seed);
}
static void cfg_free(sl__op *op) { sl__free(op->impl); }
static const sl__arg TFR_KNOBS[] = {
    {"compression", SL__ARG_STR, "NONE", 0, 0, 0, NULL, "NONE, GZIP or ZLIB"},
    {"on_corrupt", SL__ARG_ENUM, "error", 0, 0, 0, "error|skip", "a corrupt record fails the run, or is skipped and counted"},
    SL__NET_KNOBS,
    {"on_error", SL__ARG_ENUM, "error", 0, 0, 0, "error|skip",
     "a file that cannot be opened or read (missing, or a remote one unreachable after the retries) fails the run, or "
     "the rest of it is skipped and counted"},
    {"component", SL__ARG_COMP, "filename", 0, 0, 0, NULL, "the input component naming the file"},
    {NULL}};
/* The element becomes the record read; the input must name a file. */
static int reader_infer(sl__op *op, sl__struct *s, const char *comp, const char *out) {
  int rc = sl__op_need(op, s, comp, "component");
  if (rc) return rc;
  *s = (sl__struct){0};
  return sl__struct_put(s, out, SL_BYTES, 0, op->path, NULL);
}
static int tfr_infer(sl__op *op, sl__struct *s, const sl__struct *src) {
  (void)src;
  return reader_infer(op, s, ((const tfr_cfg *)op->impl)->component, "record");
}
static const sl__op_schema TFR_SCHEMA = {SL__MK_READER, 0, "the records of each input file, as bytes `record`",
                                         TFR_KNOBS, tfr_infer};
const sl__op_vt sl__op_tfrecord = {"tfrecord", tfr_parse, tfr_open, cfg_free, SL__OPF_NEEDS_INPUT, &TFR_SCHEMA,
                                   &TFR_STATE};

/* ---------------- lines ---------------- */
typedef struct {
  const char *component;
  bool skip_empty, skip_unreadable;
  int64_t max_line; /* the longest line, its line end not counted */
  sl__stream_opts net;
} lines_cfg;

/* Lines read through a buffer of our own (getline grows without bound and reports ENOMEM as the end of the file). */
enum { LR_BUF = 1 << 16 };
typedef struct {
  sl__stream *st; /* read in LR_BUF blocks straight into rb (stdio over a cookie stream read byte by byte) */
  char *rb;
  size_t rpos, rend;
  char *line; /* the line, its '\n' kept */
  size_t cap;
} line_reader;

static void lr_close(line_reader *r) {
  sl__stream_free(r->st);
  r->st = NULL;
  r->rpos = r->rend = 0;
}
static void lr_free(line_reader *r) {
  lr_close(r);
  sl__free(r->rb);
  sl__free(r->line);
  memset(r, 0, sizeof *r);
}

/* The next line into r->line: *n bytes (0: the end of the file), its '\n' kept. SL_EINVAL when it is longer than
 * `max` bytes before its line end, SL_ENOMEM, SL_EIO; the caller names the file and the line. */
static int lr_next(line_reader *r, int64_t max, size_t *n) {
  size_t len = 0;
  for (;;) {
    if (r->rpos == r->rend) {
      size_t got;
      int rc = sl__stream_read_some(r->st, r->rb, LR_BUF, &got);
      if (rc) return rc == SL_ECANCELED || rc == SL_ENOMEM ? rc : SL_EIO; /* the stream's message stays */
      if (!got) break; /* the end of the file: the last line may have no '\n' */
      r->rpos = 0;
      r->rend = got;
    }
    const char *s = r->rb + r->rpos, *nl = memchr(s, '\n', r->rend - r->rpos);
    size_t take = nl ? (size_t)(nl - s) + 1 : r->rend - r->rpos;
    size_t body = len + take - (nl ? 1 : 0);
    if ((int64_t)body > max) /* without its \n, past the cap (a \r before it is counted) */
      return sl__err(SL_EINVAL, "a line longer than max_line_bytes %lld", (long long)max);
    if (len + take + 1 > r->cap) {
      size_t cap = r->cap ? r->cap : 256;
      while (cap < len + take + 1) cap *= 2;
      char *nlb = sl__realloc(r->line, cap);
      if (!nlb) return sl__err(SL_ENOMEM, "out of memory for a line of %zu bytes or more", len + take);
      r->line = nlb;
      r->cap = cap;
    }
    memcpy(r->line + len, s, take);
    len += take;
    r->rpos += take;
    if (nl) break;
  }
  *n = len;
  return 0;
}

typedef struct {
  sl__it it;
  line_reader r;   /* owns st */
  sl__stream *st;  /* the file or remote object being read (borrowed from r.st) */
  const char *shown; /* its name in messages (a URL without credentials) */
  char path[4096];
  uint64_t lineno;
  uint64_t at;    /* byte offset of the next line (counted, not asked of the stream: ftello is a system call) */
  uint64_t seen;  /* the stream's source bytes counted so far */
  sl__net_stats net_seen;
  sl_eref in_ref; /* the ref of the filename element being read */
} lines_it;

static int lines_parse(sl__op *op, json_t *o) {
  sl_args k = sl__op_knobs(op, o);
  lines_cfg *c = sl__calloc(1, sizeof *c);
  if (!c) return sl__oom("lines");
  op->impl = c;
  int rc;
  const char *oe;
  if ((rc = sl__get_str(&c->component, &k, "component")) ||
      (rc = sl__get_bool(&c->skip_empty, &k, "skip_empty")) || (rc = sl__get_str(&oe, &k, "on_error")) ||
      (rc = sl__op_net_knobs(op, &c->net, &k)) || (rc = sl__get_int(&c->max_line, &k, "max_line_bytes")))
    return rc;
  c->skip_unreadable = !strcmp(oe, "skip");
  op->cardinality = -1;
  return 0;
}

/* Opens the file or object at `path` (a local one must be a regular file) at byte `off` into r; *st borrows it. */
static int lr_open(line_reader *r, sl__op *op, sl__stream **st, const char *path, uint64_t off) {
  lr_close(r);
  *st = NULL;
  if (!r->rb && !(r->rb = sl__malloc(LR_BUF))) return sl__oom("a line reader's buffer");
  sl__stream_opts so = sl__op_stream_opts(op, ((const lines_cfg *)op->impl)->net);
  int rc = sl__stream_open(&r->st, path, &so);
  if (rc) return sl__op_wrap(op, rc);
  sl__op_net_opened(op, r->st);
  if (off && (rc = sl__stream_seek(r->st, off))) {
    lr_close(r);
    return sl__op_err(op, rc, "cannot resume at byte %llu", (unsigned long long)off);
  }
  *st = r->st;
  return 0;
}

/* Opens l->path at byte `off`, the start of line lineno + 1. */
static int lines_start(lines_it *l, uint64_t off, uint64_t lineno) {
  int rc = lr_open(&l->r, l->it.op, &l->st, l->path, off);
  if (rc) return rc;
  l->shown = sl__stream_name(l->st);
  l->lineno = lineno;
  l->at = off;
  return 0;
}

/* The bytes read from the disk since the last call, added to the op's disk_bytes (a remote file's: net_bytes). */
static void lines_account(lines_it *l) {
  uint64_t d = sl__stream_source_bytes(l->st);
  if (d > l->seen && !sl__stream_remote(l->st)) sl__stat_add(&l->it.op->st.disk_bytes, d - l->seen);
  l->seen = d;
  sl__op_net_account(l->it.op, l->st, &l->net_seen);
}

static int lines_next(sl__it *it, sl_elem *out) {
  lines_it *l = (lines_it *)it;
  const lines_cfg *c = it->op->impl;
  for (;;) {
    if (!l->r.st) {
      sl_elem in;
      sl_elem_init(&in);
      int rc = sl__it_pull(it, &in);
      if (rc) return rc;
      rc = input_filename(it->op, &in, c->component, l->path, sizeof l->path);
      l->in_ref = in.ref;
      l->in_ref.members = NULL;
      sl_elem_clear(&in);
      if (rc) return rc;
      l->seen = 0;
      l->net_seen = (sl__net_stats){0};
      if ((rc = lines_start(l, 0, 0))) {
        if (rc == SL_ECANCELED || rc == SL_ENOMEM || !c->skip_unreadable) return rc;
        unreadable_skip(it->op);
        continue;
      }
    }
    uint64_t at = l->at;
    size_t n;
    int lrc = lr_next(&l->r, c->max_line, &n);
    if (lrc) { /* ENOMEM is ENOMEM, never the end of the file */
      int rc = sl__op_err(it->op, lrc, "%s: line %llu: %s", l->shown, (unsigned long long)l->lineno + 1,
                          sl_error_last());
      if (lrc != SL_EIO || !c->skip_unreadable) return rc;
      unreadable_skip(it->op); /* the rest of the file goes */
      n = 0;
    }
    if (n == 0) {
      lines_account(l);
      lr_close(&l->r);
      l->st = NULL;
      continue;
    }
    char *line = l->r.line;
    l->lineno++;
    l->at += (uint64_t)n;
    lines_account(l);
    if (n > 0 && line[n - 1] == '\n') n--;
    if (n > 0 && line[n - 1] == '\r') n--;
    if (n == 0 && c->skip_empty) continue;
    /* The line's buffer remembers its file and line, so that a function failing on it (parse_csv) names them. */
    sl_buf *b = sl__buf_alloc_origin(n, l->shown, l->lineno);
    if (!b) return sl__op_err(it->op, SL_ENOMEM, "%s: line %llu", l->shown, (unsigned long long)l->lineno);
    memcpy(sl_buf_data(b), line, n);
    int rc = sl_elem_set_bytes(out, "line", b, 0, NULL, (size_t)n);
    sl_buf_unref(b);
    sl__ref_set(out, it->op, &l->in_ref, at, l->lineno);
    return rc;
  }
}
static void lines_free(sl__it *it) {
  lines_it *l = (lines_it *)it;
  lr_free(&l->r);
  sl__free(l);
}
static const sl__it_vt LINES_IT = {lines_next, lines_free};
static int lines_save(sl__it *it, sl__sw *w) {
  lines_it *l = (lines_it *)it;
  reader_save(w, l->r.st ? l->path : NULL, &l->in_ref, l->at, l->lineno);
  return 0;
}
static int lines_load(sl__it *it, sl__sr *r) {
  lines_it *l = (lines_it *)it;
  uint64_t off = 0, idx = 0;
  int rc = reader_load(r, l->path, sizeof l->path, &l->in_ref, &off, &idx);
  return rc || !l->path[0] ? rc : lines_start(l, off, idx);
}
static int lines_remake(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  const lines_cfg *c = op->impl;
  char path[4096];
  int rc = reader_remake_path(op, run, r, c->component, path, sizeof path);
  if (rc) return rc;
  line_reader lr = {0};
  sl__stream *st;
  size_t n = 0;
  if ((rc = lr_open(&lr, op, &st, path, r->pos))) {
    lr_free(&lr);
    return rc;
  }
  if ((rc = lr_next(&lr, c->max_line, &n))) {
    lr_free(&lr);
    return sl__op_err(op, rc, "%s: line %llu: %s", path, (unsigned long long)r->aux, sl_error_last());
  }
  if (n == 0) {
    lr_free(&lr);
    return sl__op_err(op, SL_ECORRUPT, "%s: no line at byte %llu to resume with", path, (unsigned long long)r->pos);
  }
  const char *line = lr.line;
  if (n > 0 && line[n - 1] == '\n') n--;
  if (n > 0 && line[n - 1] == '\r') n--;
  sl_buf *b = sl__buf_alloc_origin(n, path, r->aux);
  if (b) memcpy(sl_buf_data(b), line, n);
  lr_free(&lr);
  if (!b) return sl__op_err(op, SL_ENOMEM, "%s: line %llu", path, (unsigned long long)r->aux);
  rc = sl_elem_set_bytes(out, "line", b, 0, NULL, (size_t)n);
  sl_buf_unref(b);
  sl__ref_set(out, op, NULL, r->pos, r->aux);
  out->ref.up_op = r->up_op;
  out->ref.up = r->up;
  return rc;
}
static const sl__op_state LINES_STATE = {lines_save, lines_load, NULL, lines_remake, 0};
static int lines_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  return sl__it_new(out, sizeof(lines_it), &LINES_IT, op, run, seed);
}
static const sl__arg LINES_KNOBS[] = {
    {"component", SL__ARG_COMP, "filename", 0, 0, 0, NULL, "the input component naming the file"},
    {"skip_empty", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "drop empty lines"},
    {"max_line_bytes", SL__ARG_INT, "67108864", SL__LOHI, 1, 1073741824, NULL,
     "the longest line, its line end not counted: a longer one fails the run naming the file and line (64 MiB)"},
    SL__NET_KNOBS,
    {"on_error", SL__ARG_ENUM, "error", 0, 0, 0, "error|skip",
     "a file that cannot be opened or read (missing, or a remote one unreachable after the retries) fails the run, or "
     "the rest of it is skipped and counted"},
    {NULL}};
static int lines_infer(sl__op *op, sl__struct *s, const sl__struct *src) {
  (void)src;
  return reader_infer(op, s, ((const lines_cfg *)op->impl)->component, "line");
}
static const sl__op_schema LINES_SCHEMA = {SL__MK_READER, 0, "the text lines of each input file, as bytes `line`",
                                           LINES_KNOBS, lines_infer};
const sl__op_vt sl__op_lines = {"lines", lines_parse, lines_open, cfg_free, SL__OPF_NEEDS_INPUT, &LINES_SCHEMA,
                                &LINES_STATE};

int sl_pipeline_input_files(const char ***paths, size_t *n, const sl_pipeline *p) {
  *paths = NULL;
  *n = 0;
  size_t total = 0;
  for (int i = 0; i < sl_pipeline_op_count(p); i++)
    if (sl__pipeline_op(p, i)->vt == &sl__op_files) total += (size_t)((files_cfg *)sl__pipeline_op(p, i)->impl)->n;
  const char **arr = sl__calloc(total + 1, sizeof *arr);
  if (!arr) return sl__oom("the input file list");
  size_t k = 0;
  for (int i = 0; i < sl_pipeline_op_count(p); i++)
    if (sl__pipeline_op(p, i)->vt == &sl__op_files) {
      const files_cfg *c = sl__pipeline_op(p, i)->impl;
      for (int64_t j = 0; j < c->n; j++) arr[k++] = c->paths[j];
    }
  *paths = arr;
  *n = k;
  return 0;
}
