/* ops/pipeline_state.c: the saved state of a run as a document (docs/state.md): versioned, checksummed, with each
 * op's kind, identity (its knobs that change what it makes) and epoch count, the data files' sizes and modification
 * times, and the root iterator's record; sl_iter_state and sl_pipeline_iter_at. Above pipeline.c: it reads a run
 * through pipeline.c's accessors, and nothing below calls it. */
#define XXH_STATIC_LINKING_ONLY
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "io/stream_int.h"
#include "ops/op_int.h"

/* ---- the state document ---- */
#define STATE_MAGIC "SLUICEST"
#define STATE_VERSION 1

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

/* A data file's size and modification time; a remote object's size and a hash of its ETag (or Last-Modified). */
static int file_stamp(const char *path, uint64_t *size, uint64_t *mtime) {
  if (sl__is_url(path)) return sl__remote_stamp(path, size, mtime);
  struct stat st;
  if (stat(path, &st)) return sl__err(SL_EIO, "%s: cannot read its size and time (a data file of the pipeline)", path);
  *size = (uint64_t)st.st_size;
  *mtime = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
  return 0;
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
  const char **files = NULL;
  size_t nf = 0;
  int rc = sl_pipeline_input_files(&files, &nf, p);
  if (rc) {
    sl__free(w.p);
    return rc;
  }
  sl__sw_u64(&w, nf);
  for (size_t i = 0; i < nf && !rc; i++) {
    uint64_t size = 0, mtime = 0;
    if (!(rc = file_stamp(files[i], &size, &mtime))) {
      sl__sw_u64(&w, size);
      sl__sw_u64(&w, mtime);
    }
  }
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
  const char **files = NULL;
  size_t nf = 0;
  if ((rc = sl_pipeline_input_files(&files, &nf, p))) return rc;
  uint64_t snf;
  rc = sl__sr_u64(r, &snf, "the data file count");
  if (!rc && snf != nf)
    rc = sl__err(SL_EINVAL, "the data files changed since the state was saved: %llu then, %zu now",
                 (unsigned long long)snf, nf);
  for (size_t i = 0; i < nf && !rc; i++) {
    uint64_t s0 = 0, m0 = 0, s1 = 0, m1 = 0;
    if ((rc = sl__sr_u64(r, &s0, "a data file's size")) || (rc = sl__sr_u64(r, &m0, "a data file's time")) ||
        (rc = file_stamp(files[i], &s1, &m1)))
      break;
    if (s0 != s1 || m0 != m1)
      rc = sl__err(SL_EINVAL, "%s changed since the state was saved (%s): the saved position may not exist in it",
                   files[i], s0 != s1 ? "its size differs"
                             : sl__is_url(files[i]) ? "its ETag or Last-Modified differs"
                                                    : "its modification time differs");
  }
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
