/* ops/op_folder.c: `image_folder`, the source that reads a PyTorch image-folder tree (root/<class>/<file>) as
 * torchvision's datasets.ImageFolder lists it: classes are the sorted sub-folders of root (symlinks followed), the
 * label a class's index, the samples each class's files with an image extension (case-insensitive), walked
 * recursively and sorted as ImageFolder sorts them (by directory, then by name). Yields the file's bytes. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "fns/fns_int.h"
#include "ops/op_int.h"

/* torchvision's IMG_EXTENSIONS. */
static const char *const DEFAULT_EXTS[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};
enum { MAX_DEPTH = 64, MAX_EXTS = 64 };
static const int64_t MAX_FILE_BYTES = (int64_t)1 << 30;

typedef struct {
  char *dir, *name; /* the file is dir/name; samples sort by (dir, name) as sorted(os.walk(...)) does */
  int64_t label;
} sample;

typedef struct {
  char *root;
  char **classes;
  int64_t nclasses;
  sample *s;
  int64_t n, cap;
  char *exts[MAX_EXTS];
  int nexts;
  bool shuffle, reshuffle, skip;
  int64_t seed;
  char *first; /* the first sample's path, made when the tracer asks (folder_first) */
  /* The listing's identity, per class (a resume checks it: sl__folder_listing): images, and a hash of their names,
   * sizes and modification times in the listing's order. */
  uint64_t *ccount, *chash;
} folder_cfg;

typedef struct {
  sl__it it;
  int64_t *order;
  int64_t pos;
} folder_it;

static bool has_ext(const folder_cfg *c, const char *name) {
  size_t n = strlen(name);
  for (int i = 0; i < c->nexts; i++) {
    size_t k = strlen(c->exts[i]);
    if (k <= n && !strcasecmp(name + n - k, c->exts[i])) return true;
  }
  return false;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static int cmp_sample(const void *a, const void *b) {
  const sample *x = a, *y = b;
  if (x->label != y->label) return x->label < y->label ? -1 : 1;
  int r = strcmp(x->dir, y->dir);
  return r ? r : strcmp(x->name, y->name);
}

static char *join(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *p = sl__malloc(la + lb + 2);
  if (!p) return NULL;
  memcpy(p, a, la);
  p[la] = '/';
  memcpy(p + la + 1, b, lb + 1);
  return p;
}

/* The entries of dir (without . and ..), sorted: (*names, *n), each sl__free'd by the caller. */
static int list_dir(const sl__op *op, const char *dir, char ***names, size_t *n) {
  *names = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return sl__op_err(op, errno == ENOENT ? SL_ENOTFOUND : SL_EIO, "'%s': %s", dir, strerror(errno));
  size_t cap = 0;
  int rc = 0;
  struct dirent *de;
  while (!rc && (de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (*n == cap) {
      char **nn = sl__realloc(*names, (cap = cap ? cap * 2 : 16) * sizeof *nn);
      if (!nn) {
        rc = sl__oom("a directory listing");
        break;
      }
      *names = nn;
    }
    if (!((*names)[*n] = sl__strdup(de->d_name))) rc = sl__oom("a directory listing");
    else (*n)++;
  }
  closedir(d);
  if (*n) qsort(*names, *n, sizeof **names, cmp_str);
  return rc;
}
static void free_names(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) sl__free(names[i]);
  sl__free(names);
}

/* Is path a directory, following symlinks (os.DirEntry.is_dir() as os.walk(followlinks=True) asks)? */
static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int add_sample(folder_cfg *c, const char *dir, const char *name, int64_t label) {
  if (c->n == c->cap) {
    int64_t cap = c->cap ? c->cap * 2 : 256;
    sample *ns = sl__realloc(c->s, (size_t)cap * sizeof *ns);
    if (!ns) return sl__oom("the sample list");
    c->s = ns;
    c->cap = cap;
  }
  sample *s = &c->s[c->n];
  s->dir = sl__strdup(dir);
  s->name = sl__strdup(name);
  s->label = label;
  c->n++; /* counted even when a copy failed, so that the list's free releases the other */
  return s->dir && s->name ? 0 : sl__oom("the sample list");
}

/* Under on_error "skip", a folder that cannot be listed is skipped, counted and its reason kept (the run's skipped
 * line and Python's SkipWarning name it), as an unreadable file is. */
static int skip_or_fail(sl__op *op, const folder_cfg *c, int rc) {
  if (!rc || !c->skip || rc == SL_ENOMEM) return rc;
  sl__op_skip_note(op, sl_error_last(), NULL, 0);
  sl__stat_add(&op->st.skipped, 1);
  return 0;
}

/* Every file under dir with an image extension, recursively (symlinked directories followed). */
static int walk(sl__op *op, folder_cfg *c, const char *dir, int64_t label, int depth) {
  if (depth > MAX_DEPTH)
    return sl__op_err(op, SL_EINVAL, "'%s': more than %d directory levels (a symlink loop?)", dir, MAX_DEPTH);
  char **names;
  size_t n;
  int rc = list_dir(op, dir, &names, &n);
  if (rc) { /* an unreadable class folder (EACCES) */
    free_names(names, n);
    return skip_or_fail(op, c, rc);
  }
  for (size_t i = 0; !rc && i < n; i++) {
    char *p = join(dir, names[i]);
    if (!p) rc = sl__oom("a path");
    else if (is_dir(p)) rc = walk(op, c, p, label, depth + 1);
    else if (has_ext(c, names[i])) /* a FIFO: refused (or skipped) now, not waited on when read */
      rc = (rc = sl__check_regular(p)) ? skip_or_fail(op, c, sl__op_wrap(op, rc)) : add_sample(c, dir, names[i], label);
    sl__free(p);
  }
  free_names(names, n);
  return rc;
}

static int read_exts(sl__op *op, folder_cfg *c, json_t *o) {
  json_t *e = json_object_get(o, "extensions");
  if (!e) {
    for (size_t i = 0; i < sizeof DEFAULT_EXTS / sizeof *DEFAULT_EXTS; i++)
      if (!(c->exts[c->nexts++] = sl__strdup(DEFAULT_EXTS[i]))) return sl__oom("image_folder's extensions");
    return 0;
  }
  if (!json_is_array(e) || json_array_size(e) == 0 || json_array_size(e) > MAX_EXTS)
    return sl__err(SL_EINVAL, "%s.extensions: expected 1..%d strings such as \".jpg\"", op->path, MAX_EXTS);
  for (size_t i = 0; i < json_array_size(e); i++) {
    json_t *x = json_array_get(e, i);
    if (!json_is_string(x) || !json_string_length(x))
      return sl__err(SL_EINVAL, "%s.extensions[%zu]: expected a non-empty string", op->path, i);
    if (!(c->exts[c->nexts++] = sl__strdup(json_string_value(x)))) return sl__oom("image_folder's extensions");
  }
  return 0;
}

static int read_classes(sl__op *op, folder_cfg *c, json_t *o) {
  json_t *given = json_object_get(o, "classes");
  char **names = NULL;
  size_t n = 0;
  int rc = 0;
  if (given) {
    if (!json_is_array(given) || json_array_size(given) == 0)
      return sl__err(SL_EINVAL, "%s.classes: expected a non-empty array of folder names", op->path);
    n = json_array_size(given);
    if (!(names = sl__calloc(n, sizeof *names))) return sl__oom("image_folder's classes");
    for (size_t i = 0; !rc && i < n; i++) {
      json_t *x = json_array_get(given, i);
      if (!json_is_string(x) || !json_string_length(x) || strchr(json_string_value(x), '/'))
        rc = sl__err(SL_EINVAL, "%s.classes[%zu]: expected a folder name", op->path, i);
      else if (!(names[i] = sl__strdup(json_string_value(x)))) rc = sl__oom("image_folder's classes");
    }
    for (size_t i = 0; !rc && i < n; i++) {
      char *p = join(c->root, names[i]);
      if (!p) rc = sl__oom("a path");
      else if (!is_dir(p)) rc = sl__op_err(op, SL_ENOTFOUND, "class folder '%s' (classes[%zu]) is not a directory", p, i);
      sl__free(p);
    }
  } else {
    char **all;
    size_t na;
    if ((rc = list_dir(op, c->root, &all, &na))) return rc;
    if (na && !(names = sl__calloc(na, sizeof *names))) rc = sl__oom("image_folder's classes");
    for (size_t i = 0; !rc && i < na; i++) {
      char *p = join(c->root, all[i]);
      if (!p) rc = sl__oom("a path");
      else if (is_dir(p)) names[n++] = all[i], all[i] = NULL;
      sl__free(p);
    }
    free_names(all, na);
    if (!rc && n == 0) rc = sl__op_err(op, SL_ENOTFOUND, "'%s' has no class folders (expected root/<class>/<file>)", c->root);
  }
  c->classes = names;
  c->nclasses = (int64_t)n;
  return rc;
}

static int folder_parse(sl__op *op, json_t *o) {
  sl_args k = sl__op_knobs(op, o);
  folder_cfg *c = sl__calloc(1, sizeof *c);
  if (!c) return sl__oom("image_folder");
  op->impl = c;
  const char *root, *onerr;
  int rc;
  if ((rc = sl__get_str(&root, &k, "root")) || (rc = sl__get_bool(&c->shuffle, &k, "shuffle")) ||
      (rc = sl__get_bool(&c->reshuffle, &k, "reshuffle_each_iteration")) || (rc = sl__get_int(&c->seed, &k, "seed")) ||
      (rc = sl__get_str(&onerr, &k, "on_error")))
    return rc;
  if (!root) return sl__err(SL_EINVAL, "%s.root: required (the folder holding one sub-folder per class)", op->path);
  c->skip = !strcmp(onerr, "skip");
  if (!(c->root = sl__resolve_path(op->pl, root))) return sl__oom("a path");
  size_t rl = strlen(c->root);
  while (rl > 1 && c->root[rl - 1] == '/') c->root[--rl] = 0;
  if (!is_dir(c->root)) return sl__op_err(op, SL_ENOTFOUND, "root '%s' is not a directory", c->root);
  if ((rc = read_exts(op, c, o)) || (rc = read_classes(op, c, o))) return rc;
  for (int64_t i = 0; i < c->nclasses; i++) {
    int64_t before = c->n;
    char *p = join(c->root, c->classes[i]);
    if (!p) return sl__oom("a path");
    rc = walk(op, c, p, i, 0);
    if (!rc && c->n == before && !c->skip) /* (skipped: the class keeps its index, as allow_empty does) */
      rc = sl__op_err(op, SL_ENOTFOUND, "class folder '%s' has no file with an image extension (%s%s)", p, c->exts[0],
                      c->nexts > 1 ? ", ..." : "");
    sl__free(p);
    if (rc) return rc;
  }
  if (c->n == 0) return sl__op_err(op, SL_ENOTFOUND, "'%s': no image files in any class folder", c->root);
  qsort(c->s, (size_t)c->n, sizeof *c->s, cmp_sample);
  op->random = c->shuffle;
  op->cardinality = c->skip ? -1 : c->n; /* a skipped unreadable file makes an epoch shorter */
  uint64_t total = 0;
  c->ccount = sl__calloc((size_t)c->nclasses, sizeof *c->ccount);
  c->chash = sl__calloc((size_t)c->nclasses, sizeof *c->chash);
  if (!c->ccount || !c->chash) return sl__oom("the listing's identity");
  size_t rootlen = strlen(c->root);
  for (int64_t i = 0; i < c->n; i++) {
    struct stat st;
    char *p = join(c->s[i].dir, c->s[i].name);
    if (!p) return sl__oom("a path");
    uint64_t id[2] = {0, 0};
    if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
      total += (uint64_t)st.st_size;
      id[0] = (uint64_t)st.st_size;
      id[1] = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    }
    /* the path under the root (a class moved or renamed changes it) with its size and time, in listing order */
    uint64_t h = XXH3_64bits_withSeed(p + rootlen, strlen(p + rootlen), XXH3_64bits(id, sizeof id));
    int64_t l = c->s[i].label;
    c->ccount[l]++;
    c->chash[l] = c->chash[l] * 0x9E3779B97F4A7C15ull + h;
    sl__free(p);
  }
  op->source_bytes = total; /* one epoch's bytes, as `files` gives them */
  return 0;
}

/* Sample k (in the listing's order) read into out: 0, or the read's error (unwrapped). */
static int folder_make(sl__op *op, int64_t k, sl_elem *out) {
  const folder_cfg *c = op->impl;
  const sample *s = &c->s[k];
  char *p = join(s->dir, s->name);
  if (!p) return sl__op_err(op, SL_ENOMEM, "a path");
  sl_buf *b;
  size_t n;
  int rc = sl__read_whole_file(p, MAX_FILE_BYTES, &b, &n);
  if (rc) {
    sl__free(p);
    return rc;
  }
  sl__stat_add(&op->st.disk_bytes, n);
  rc = sl_elem_set_bytes(out, "image/encoded", b, 0, NULL, n);
  sl_buf_unref(b);
  if (!rc) rc = sl_elem_set_i64(out, "label", s->label);
  if (!rc) rc = sl_elem_set_bytes(out, "filename", NULL, 0, p, strlen(p));
  sl__ref_set(out, op, NULL, (uint64_t)k, 0);
  sl__free(p);
  return rc;
}

static int folder_next(sl__it *it, sl_elem *out) {
  folder_it *f = (folder_it *)it;
  const folder_cfg *c = it->op->impl;
  for (;;) {
    if (f->pos >= c->n) return SL_END;
    int64_t k = f->order ? f->order[f->pos] : f->pos;
    f->pos++;
    int rc = folder_make(it->op, k, out);
    if (rc && c->skip && rc != SL_ENOMEM) {
      sl_elem_clear(out);
      sl__stat_add(&it->op->st.skipped, 1);
      continue;
    }
    return rc ? sl__op_wrap(it->op, rc) : 0;
  }
}
static void folder_free(sl__it *it) {
  folder_it *f = (folder_it *)it;
  sl__free(f->order);
  sl__free(f);
}
static const sl__it_vt FOLDER_IT = {folder_next, folder_free};
static int folder_save(sl__it *it, sl__sw *w) {
  sl__sw_u64(w, (uint64_t)((folder_it *)it)->pos);
  return 0;
}
static int folder_load(sl__it *it, sl__sr *r) {
  return sl__sr_index(r, &((folder_it *)it)->pos, ((const folder_cfg *)it->op->impl)->n, it->op, "an image folder's position");
}
static int folder_remake(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  (void)run;
  if (r->pos >= (uint64_t)((const folder_cfg *)op->impl)->n)
    return sl__op_err(op, SL_ECORRUPT, "a saved ref names sample %llu, past the listing", (unsigned long long)r->pos);
  int rc = folder_make(op, (int64_t)r->pos, out);
  return rc ? sl__op_wrap(op, rc) : 0;
}
static const sl__op_state FOLDER_STATE = {folder_save, folder_load, NULL, folder_remake, 0};

static int folder_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  int rc = sl__it_new(out, sizeof(folder_it), &FOLDER_IT, op, run, NULL);
  if (rc) return rc;
  const folder_cfg *c = op->impl;
  folder_it *f = (folder_it *)*out;
  if (c->shuffle && c->n > 1 && (rc = sl__file_order(&f->order, op, c->n, c->seed, c->reshuffle, (*out)->epoch))) {
    sl__it_free(*out);
    *out = NULL;
  }
  return rc;
}

static void folder_free_op(sl__op *op) {
  folder_cfg *c = op->impl;
  if (!c) return;
  for (int64_t i = 0; i < c->n; i++) sl__free(c->s[i].dir), sl__free(c->s[i].name);
  sl__free(c->s);
  free_names(c->classes, (size_t)c->nclasses);
  for (int i = 0; i < c->nexts; i++) sl__free(c->exts[i]);
  sl__free(c->root);
  sl__free(c->first);
  sl__free(c->ccount);
  sl__free(c->chash);
  sl__free(c);
}

int64_t sl__folder_listing(const sl__op *op, const char *const **classes, const uint64_t **count,
                           const uint64_t **hash) {
  const folder_cfg *c = op->impl;
  *classes = (const char *const *)c->classes;
  *count = c->ccount;
  *hash = c->chash;
  return c->nclasses;
}

static const sl__arg FOLDER_KNOBS[] = {
    {"root", SL__ARG_STR, NULL, SL__ARGF_REQUIRED, 0, 0, NULL, "the folder holding one sub-folder per class"},
    {"classes", SL__ARG_STRS, NULL, 0, 0, 0, NULL, "the class folders, in label order (default: every sub-folder, sorted)"},
    {"extensions", SL__ARG_STRS, NULL, 0, 0, 0, NULL,
     "file endings read, case-insensitive (default torchvision's: .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp)"},
    {"shuffle", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "shuffle the sample order"},
    {"seed", SL__ARG_INT, "-1", SL__ARGF_LO, -1, 0, NULL, "the shuffle's seed (-1: from the pipeline's)"},
    {"reshuffle_each_iteration", SL__ARG_BOOL, "true", 0, 0, 0, NULL, "a new order each epoch"},
    {"on_error", SL__ARG_ENUM, "error", 0, 0, 0, "error|skip",
     "an empty class folder or an unreadable file fails, or is skipped and counted"},
    {NULL}};
static int folder_infer(sl__op *op, sl__struct *s, const sl__struct *src) {
  (void)src;
  *s = (sl__struct){0};
  int rc = sl__struct_put(s, "image/encoded", SL_BYTES, 0, op->path, NULL);
  if (!rc) rc = sl__struct_put(s, "label", SL_INT64, 0, op->path, NULL);
  if (!rc) rc = sl__struct_put(s, "filename", SL_BYTES, 0, op->path, NULL);
  return rc;
}
/* (the sample's path, made once per call: kept in the config for the tracer, which asks once) */
static const char *folder_first(const sl__op *op) {
  folder_cfg *c = op->impl;
  if (!c || !c->n) return NULL;
  if (!c->first) c->first = join(c->s[0].dir, c->s[0].name);
  return c->first;
}
static const sl__op_schema FOLDER_SCHEMA = {
    SL__MK_SOURCE, SL__OPS_LISTS_FILES,
    "an image-folder tree root/<class>/<file> as torchvision's ImageFolder lists it: bytes `image/encoded`, int64 "
    "`label` (the class's index), bytes `filename`",
    FOLDER_KNOBS, folder_infer, folder_first};
const sl__op_vt sl__op_image_folder = {"image_folder", folder_parse, folder_open, folder_free_op, SL__OPF_SOURCE,
                                       &FOLDER_SCHEMA, &FOLDER_STATE};
