/* ops/pipeline_state.c: the saved state of a run as a document (docs/state.md): versioned, checksummed, with each
 * op's kind, identity (its knobs that change what it makes) and epoch count, the data files' sizes and modification
 * times, and the root iterator's record; sl_iter_state and sl_pipeline_iter_at. Above pipeline.c: it reads a run
 * through pipeline.c's accessors, and nothing below calls it. */
#define XXH_STATIC_LINKING_ONLY
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "io/stream_int.h"
#include "ops/op_int.h"

/* ---- the state document ---- */
#define STATE_MAGIC "SLUICEST"
#define STATE_VERSION 2 /* 2: what the data was (issue 47): the seed, each file's identity, folder listings */
/* Up to this many data files, each is recorded (size, time, device, inode, a hash of its first and last 4 KiB) and a
 * change names the file; past it one hash of all their names, sizes, times and inodes stands for them (a state of
 * a 1.28-million-file listing stays a few kilobytes). The same for an image folder's classes. */
#define FILES_EACH 512
#define CLASSES_EACH 1024
#define EDGE 4096

/* An op's identity: its kind and what it does, without its performance knobs (a state restores into a re-tuned
 * spec with other parallelism or buffers). */
static uint64_t op_identity(const sl__op *op) {
  json_t *c = json_object();
  const char *k;
  json_t *v;
  if (!c) return 0;
  json_object_foreach(op->json, k, v) {
    if (sl__op_is_knob(op->vt->kind, k) || !strcmp(k, "source")) continue;
    json_object_set(c, k, v);
  }
  char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(c);
  uint64_t h = s ? XXH3_64bits(s, strlen(s)) : 0;
  free(s);
  return h;
}

/* What a data file is, as a resume checks it. */
typedef struct {
  uint64_t size, mtime, dev, ino, edges; /* edges: XXH3 of its first and last EDGE bytes (0: not a regular file) */
} file_id;

/* What a data file is; a remote object: its size and a hash of its ETag (or Last-Modified) in mtime, nothing else. */
static int file_stamp(const char *path, file_id *f, bool content) {
  if (sl__is_url(path)) {
    *f = (file_id){0};
    return sl__remote_stamp(path, &f->size, &f->mtime);
  }
  struct stat st;
  *f = (file_id){0};
  if (stat(path, &st)) return sl__err(SL_EIO, "%s: cannot read its size and time (a data file of the pipeline)", path);
  f->size = (uint64_t)st.st_size;
  f->mtime = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
  f->dev = (uint64_t)st.st_dev;
  f->ino = (uint64_t)st.st_ino;
  if (!content || !S_ISREG(st.st_mode)) return 0;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return sl__err(SL_EIO, "%s: cannot open it to check what it holds (a data file of the pipeline)", path);
  unsigned char b[2 * EDGE];
  size_t n = 0;
  ssize_t k = pread(fd, b, EDGE, 0);
  if (k > 0) n = (size_t)k;
  if (f->size > EDGE) {
    off_t at = f->size > 2 * EDGE ? (off_t)(f->size - EDGE) : EDGE;
    k = pread(fd, b + n, EDGE, at);
    if (k > 0) n += (size_t)k;
  }
  close(fd);
  if (k < 0) return sl__err(SL_EIO, "%s: cannot read it to check what it holds (a data file of the pipeline)", path);
  f->edges = XXH3_64bits(b, n) | 1;
  return 0;
}

/* The files' identity when there are too many to record each: their names, sizes, times and inodes. */
static int files_hash(const char **files, size_t nf, uint64_t *out) {
  uint64_t h = 0;
  for (size_t i = 0; i < nf; i++) {
    file_id f;
    int rc = file_stamp(files[i], &f, false);
    if (rc) return rc;
    uint64_t v[4] = {f.size, f.mtime, f.dev, f.ino};
    h = h * 0x9E3779B97F4A7C15ull + XXH3_64bits_withSeed(files[i], strlen(files[i]), XXH3_64bits(v, sizeof v));
  }
  *out = h;
  return 0;
}

/* A listing of more than CLASSES_EACH classes as one entry: its image count and one hash. */
static void fold_classes(int64_t nc, const char *const *names, const uint64_t *count, const uint64_t *hash,
                         uint64_t *all, uint64_t *h) {
  *all = *h = 0;
  for (int64_t c = 0; c < nc; c++) {
    *all += count[c];
    *h = *h * 0x9E3779B97F4A7C15ull + XXH3_64bits_withSeed(names[c], strlen(names[c]), hash[c]);
  }
}

static void save_listings(sl_pipeline *p, sl__sw *w) {
  int n = sl_pipeline_op_count(p), nl = 0;
  for (int i = 0; i < n; i++) nl += !strcmp(sl__pipeline_op(p, i)->vt->kind, "image_folder");
  sl__sw_u64(w, (uint64_t)nl);
  for (int i = 0; i < n; i++) {
    const sl__op *op = sl__pipeline_op(p, i);
    if (strcmp(op->vt->kind, "image_folder")) continue;
    const char *const *names;
    const uint64_t *count, *hash;
    int64_t nc = sl__folder_listing(op, &names, &count, &hash);
    sl__sw_u64(w, (uint64_t)i);
    if (nc <= CLASSES_EACH) {
      sl__sw_u64(w, (uint64_t)nc);
      for (int64_t c = 0; c < nc; c++) {
        sl__sw_str(w, names[c]);
        sl__sw_u64(w, count[c]);
        sl__sw_u64(w, hash[c]);
      }
    } else { /* one entry "" for the whole listing */
      uint64_t all, h;
      fold_classes(nc, names, count, hash, &all, &h);
      sl__sw_u64(w, 1);
      sl__sw_str(w, "");
      sl__sw_u64(w, all);
      sl__sw_u64(w, h);
    }
  }
}

static int64_t find_name(const char *const *v, int64_t n, const char *x) {
  int64_t k = 0;
  while (k < n && strcmp(v[k], x)) k++;
  return k;
}

/* The saved listing of one image_folder op against the one read now: the first difference, named. */
static int check_listing(const sl__op *op, sl__sr *r) {
  const char *const *names;
  const uint64_t *count, *hash;
  int64_t nc = sl__folder_listing(op, &names, &count, &hash);
  uint64_t sn;
  int rc = sl__sr_u64(r, &sn, "a listing's class count");
  if (rc) return rc;
  if (sn > r->n - r->at) return sl__err(SL_ECORRUPT, "the saved state is damaged: %llu classes", (unsigned long long)sn);
  const char *what = "the image folder";
  if (sn == 1 && nc > CLASSES_EACH) { /* folded */
    char nm[8];
    uint64_t all, h, now, hn;
    if ((rc = sl__sr_str(r, nm, sizeof nm, "a class name")) || (rc = sl__sr_u64(r, &all, "a class's count")) ||
        (rc = sl__sr_u64(r, &h, "a class's hash")))
      return rc;
    fold_classes(nc, names, count, hash, &now, &hn);
    if (all != now || h != hn)
      return sl__err(SL_EINVAL, "%s ('image_folder'): %s changed since the state was saved (%llu images then, %llu "
                                "now; a class or image added, removed, renamed, moved or rewritten): start the run "
                                "over", op->path, what, (unsigned long long)all, (unsigned long long)now);
    return 0;
  }
  /* classes: a short list (at most CLASSES_EACH), compared by name */
  char (*sname)[256] = sl__calloc(sn ? sn : 1, sizeof *sname);
  uint64_t *scount = sl__calloc(sn ? sn : 1, sizeof *scount), *shash = sl__calloc(sn ? sn : 1, sizeof *shash);
  const char **sp = sl__calloc(sn ? sn : 1, sizeof *sp);
  if (!sname || !scount || !shash || !sp) rc = sl__oom("the saved listing");
  for (uint64_t c = 0; c < sn && !rc; c++)
    if (!(rc = sl__sr_str(r, sname[c], sizeof sname[c], "a class name")) && (sp[c] = sname[c]) &&
        !(rc = sl__sr_u64(r, &scount[c], "a class's count")))
      rc = sl__sr_u64(r, &shash[c], "a class's hash");
  int64_t up = -1, down = -1, differs = -1;
  for (uint64_t c = 0; c < sn && !rc; c++) { /* removed classes */
    int64_t k = find_name(names, nc, sname[c]);
    if (k == nc)
      rc = sl__err(SL_EINVAL, "%s ('image_folder'): class '%s' (%llu images) was removed or renamed since the state "
                              "was saved: start the run over", op->path, sname[c], (unsigned long long)scount[c]);
    else if (count[k] > scount[c] && up < 0) up = k;
    else if (count[k] < scount[c] && down < 0) down = k;
    else if (count[k] == scount[c] && hash[k] != shash[c] && differs < 0) differs = k;
  }
  for (int64_t k = 0; k < nc && !rc; k++) { /* added classes */
    if (find_name(sp, (int64_t)sn, names[k]) == (int64_t)sn)
      rc = sl__err(SL_EINVAL, "%s ('image_folder'): class '%s' (%llu images) was added since the state was saved: "
                              "start the run over", op->path, names[k], (unsigned long long)count[k]);
  }
  if (!rc && up >= 0 && down >= 0)
    rc = sl__err(SL_EINVAL, "%s ('image_folder'): images moved from class '%s' to class '%s' since the state was "
                            "saved: start the run over", op->path, names[down], names[up]);
  else if (!rc && (up >= 0 || down >= 0)) {
    int64_t k = up >= 0 ? up : down;
    int64_t c = find_name(sp, (int64_t)sn, names[k]);
    rc = sl__err(SL_EINVAL, "%s ('image_folder'): class '%s' has %llu images, %llu when the state was saved (%s): "
                            "start the run over", op->path, names[k], (unsigned long long)count[k],
                 (unsigned long long)scount[c], up >= 0 ? "an image added" : "an image removed");
  } else if (!rc && differs >= 0)
    rc = sl__err(SL_EINVAL, "%s ('image_folder'): an image of class '%s' was renamed, replaced or rewritten since the "
                            "state was saved (the same count, another listing of names, sizes and times): start the "
                            "run over", op->path, names[differs]);
  sl__free(sname);
  sl__free(sp);
  sl__free(scount);
  sl__free(shash);
  return rc;
}

static int check_listings(sl_pipeline *p, sl__sr *r) {
  uint64_t nl;
  int rc = sl__sr_u64(r, &nl, "the listing count");
  int n = sl_pipeline_op_count(p), have = 0;
  for (int i = 0; i < n; i++) have += !strcmp(sl__pipeline_op(p, i)->vt->kind, "image_folder");
  if (!rc && nl != (uint64_t)have)
    return sl__err(SL_ECORRUPT, "the saved state is damaged: %llu folder listings for %d image_folder ops",
                   (unsigned long long)nl, have);
  for (uint64_t l = 0; l < nl && !rc; l++) {
    uint64_t i;
    if ((rc = sl__sr_u64(r, &i, "a listing's op"))) break;
    if (i >= (uint64_t)n || strcmp(sl__pipeline_op(p, (int)i)->vt->kind, "image_folder"))
      return sl__err(SL_ECORRUPT, "the saved state is damaged: a folder listing of op %llu", (unsigned long long)i);
    rc = check_listing(sl__pipeline_op(p, (int)i), r);
  }
  return rc;
}

static int sl__state_encode(sl_pipeline *p, sl__it *root, uint64_t delivered, void **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  sl__sw w = {0};
  sl__sw_bytes(&w, STATE_MAGIC, 8);
  sl__sw_u64(&w, STATE_VERSION);
  int n = sl_pipeline_op_count(p);
  sl__sw_u64(&w, (uint64_t)n);
  for (int i = 0; i < n; i++) {
    const sl__op *op = sl__pipeline_op(p, i);
    sl__sw_str(&w, op->vt->kind);
    sl__sw_u64(&w, op_identity(op));
    sl__sw_u64(&w, atomic_load(&((sl__op *)op)->opens)); /* its iterators so far: the next one's epoch */
  }
  sl__sw_u64(&w, sl_pipeline_seed(p)); /* the spec's top-level seed: every op's default */
  const char **files = NULL;
  size_t nf = 0;
  int rc = sl_pipeline_input_files(&files, &nf, p);
  if (rc) {
    sl__free(w.p);
    return rc;
  }
  sl__sw_u64(&w, nf);
  if (nf > FILES_EACH) {
    uint64_t h = 0;
    if (!(rc = files_hash(files, nf, &h))) sl__sw_u64(&w, h);
  }
  for (size_t i = 0; i < nf && nf <= FILES_EACH && !rc; i++) {
    file_id f;
    if (!(rc = file_stamp(files[i], &f, true))) {
      sl__sw_u64(&w, f.size);
      sl__sw_u64(&w, f.mtime);
      sl__sw_u64(&w, f.dev);
      sl__sw_u64(&w, f.ino);
      sl__sw_u64(&w, f.edges);
    }
  }
  if (!rc) save_listings(p, &w);
  sl_free(files);
  sl__sw_u64(&w, delivered);
  if (!rc) rc = sl__state_save_it(root, &w);
  if (!rc && !w.err) {
    uint64_t h = XXH3_64bits(w.p, w.n);
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(h >> (8 * i));
    sl__sw_bytes(&w, b, 8);
  }
  if (!rc) rc = w.err;
  if (rc) {
    sl__free(w.p);
    return rc;
  }
  *buf = w.p;
  *len = w.n;
  return 0;
}

static int sl__state_decode(sl_pipeline *p, const void *buf, size_t len, sl__sr *r, uint64_t *delivered) {
  *r = (sl__sr){buf, len, 0};
  if (len < 8 + 8 || memcmp(buf, STATE_MAGIC, 8))
    return sl__err(SL_EINVAL, "not a sluice state (%zu bytes, no \"" STATE_MAGIC "\" at the start)", len);
  r->at = 8;
  uint64_t ver;
  int rc = sl__sr_u64(r, &ver, "the format version");
  if (rc) return rc;
  if (ver == 1)
    return sl__err(SL_EVERSION, "a state made by an older sluice (format version 1, which did not record what the "
                                "data was: the seed, the files' identity, folder listings); this sluice (%s) cannot "
                                "check it is resumed on the same data: start the run over", sl_version());
  if (ver != STATE_VERSION)
    return sl__err(SL_EVERSION, "a state of format version %llu; this sluice (%s) reads version %d: save it again",
                   (unsigned long long)ver, sl_version(), STATE_VERSION);
  const unsigned char *b = (const unsigned char *)buf + len - 8;
  uint64_t want = 0;
  for (int i = 0; i < 8; i++) want |= (uint64_t)b[i] << (8 * i);
  if (XXH3_64bits(buf, len - 8) != want)
    return sl__err(SL_ECORRUPT, "the saved state is damaged or truncated (%zu bytes; its checksum does not match)", len);
  r->n = len - 8;
  uint64_t n;
  if ((rc = sl__sr_u64(r, &n, "the op count"))) return rc;
  int have = sl_pipeline_op_count(p);
  for (uint64_t i = 0; i < n && i < (uint64_t)have; i++) {
    char kind[64];
    uint64_t id, opens;
    if ((rc = sl__sr_str(r, kind, sizeof kind, "an op's kind")) || (rc = sl__sr_u64(r, &id, "an op's identity")) ||
        (rc = sl__sr_u64(r, &opens, "an op's epoch count")))
      return rc;
    const sl__op *op = sl__pipeline_op(p, (int)i);
    if (strcmp(kind, op->vt->kind))
      return sl__err(SL_EINVAL, "the state is of another pipeline: %s is '%s' here but was '%s' when the state was "
                                "saved", op->path, op->vt->kind, kind);
    if (id != op_identity(op))
      return sl__err(SL_EINVAL, "the state is of another pipeline: %s ('%s') has other settings than when the state "
                                "was saved (knobs that change what it makes: a function, its arguments, a seed, a "
                                "count; parallelism and buffers may differ)", op->path, kind);
  }
  if (n != (uint64_t)have)
    return sl__err(SL_EINVAL, "the state is of another pipeline: it has %llu ops, this one %d (prefetch and cache ops "
                              "count: restore into the spec the state was saved from, re-tuned knobs allowed)",
                   (unsigned long long)n, have);
  uint64_t seed;
  if ((rc = sl__sr_u64(r, &seed, "the pipeline's seed"))) return rc;
  if (seed != sl_pipeline_seed(p))
    return sl__err(SL_EINVAL, "the state is of another pipeline: the spec's \"seed\" is %llu, it was %llu when the "
                              "state was saved (the rest of the epoch would follow neither)",
                   (unsigned long long)sl_pipeline_seed(p), (unsigned long long)seed);
  const char **files = NULL;
  size_t nf = 0;
  if ((rc = sl_pipeline_input_files(&files, &nf, p))) return rc;
  uint64_t snf;
  rc = sl__sr_u64(r, &snf, "the data file count");
  if (!rc && snf != nf)
    rc = sl__err(SL_EINVAL, "the data files changed since the state was saved: %llu then, %zu now",
                 (unsigned long long)snf, nf);
  if (!rc && nf > FILES_EACH) {
    uint64_t h0, h1 = 0;
    if (!(rc = sl__sr_u64(r, &h0, "the data files' hash")) && !(rc = files_hash(files, nf, &h1)) && h0 != h1)
      rc = sl__err(SL_EINVAL, "the data files changed since the state was saved: one of the %zu files was renamed, "
                              "replaced, moved or rewritten (their names, sizes, times and inodes differ): start the "
                              "run over", nf);
  }
  for (size_t i = 0; i < nf && nf <= FILES_EACH && !rc; i++) {
    file_id s0, s1;
    if ((rc = sl__sr_u64(r, &s0.size, "a data file's size")) || (rc = sl__sr_u64(r, &s0.mtime, "a data file's time")) ||
        (rc = sl__sr_u64(r, &s0.dev, "a data file's device")) || (rc = sl__sr_u64(r, &s0.ino, "a data file's inode")) ||
        (rc = sl__sr_u64(r, &s0.edges, "a data file's content hash")) || (rc = file_stamp(files[i], &s1, true)))
      break;
    const char *why = s0.size != s1.size                          ? "its size differs"
                      : s0.dev != s1.dev || s0.ino != s1.ino    ? "it is another file: its inode differs (renamed, "
                                                                  "replaced or swapped with another)"
                      : s0.edges != s1.edges                     ? "its content differs (its first or last 4 KiB)"
                      : s0.mtime != s1.mtime && sl__is_url(files[i]) ? "its ETag or Last-Modified differs"
                      : s0.mtime != s1.mtime                     ? "its modification time differs"
                                                                 : NULL;
    if (why)
      rc = sl__err(SL_EINVAL, "%s changed since the state was saved (%s): the saved position may not exist in it",
                   files[i], why);
  }
  if (!rc) rc = check_listings(p, r);
  sl_free(files);
  if (!rc) rc = sl__sr_u64(r, delivered, "the element count");
  return rc;
}

/* Sets each op's epoch count as the state has it (after sl__state_decode accepted the state). */
static void sl__state_set_opens(sl_pipeline *p, const void *buf) {
  sl__sr r = {buf, SIZE_MAX, 8};
  uint64_t v, n;
  char kind[64];
  sl__sr_u64(&r, &v, "");
  sl__sr_u64(&r, &n, "");
  for (uint64_t i = 0; i < n; i++) {
    sl__sr_str(&r, kind, sizeof kind, "");
    sl__sr_u64(&r, &v, "");
    sl__sr_u64(&r, &v, "");
    atomic_store(&sl__pipeline_op(p, (int)i)->opens, v);
  }
}

int sl_pipeline_iter_at(sl_iter **out, sl_pipeline *p, const void *buf, size_t len) {
  *out = NULL;
  if (!buf) return sl__err(SL_EINVAL, "sl_pipeline_iter_at: no state given");
  sl__sr r;
  uint64_t delivered;
  int rc = sl__state_decode(p, buf, len, &r, &delivered);
  if (rc) return rc;
  sl__state_set_opens(p, buf);
  return sl__iter_open(out, p, &r, delivered);
}

int sl_iter_state(sl_iter *it, void **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  int sticky = sl__iter_sticky(it);
  if (sticky) return sl__err(sticky, "the run has failed or was cancelled: it has no position to save");
  sl_iter_keep_state(it);
  sl__it *root = sl__iter_root(it);
  sl__state_hold(root, true);
  int rc = sl__state_encode(sl__iter_pipeline(it), root, sl_iter_position(it), buf, len);
  sl__state_hold(root, false);
  return rc;
}
