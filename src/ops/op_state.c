/* ops/op_state.c: the saved state of a run (docs/state.md): the record each iterator writes (op, epoch, its input's
 * record, its own part, its pushback), the chain held still while it is written, the iterator that hands out
 * elements made again from their refs before its input's, making an element again from its ref (sl__remake), and
 * the state document around the records (sl_iter_state, sl_pipeline_iter_at): versioned, checksummed, with the
 * pipeline's identity and its data files' sizes and modification times. */
#define XXH_STATIC_LINKING_ONLY
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "ops/op_int.h"

_Thread_local sl__sr *sl__t_restore;
_Thread_local int sl__t_remaking;

/* ---- writer and reader ---- */
static void sw_put(sl__sw *w, const void *p, size_t n) {
  if (w->err) return;
  if (w->n + n > w->cap) {
    size_t nc = w->cap ? w->cap : 256;
    while (nc < w->n + n) {
      if (nc > SIZE_MAX / 2) {
        w->err = sl__oom("a saved state");
        return;
      }
      nc *= 2;
    }
    unsigned char *np = sl__realloc(w->p, nc);
    if (!np) {
      w->err = sl__oom("a saved state");
      return;
    }
    w->p = np;
    w->cap = nc;
  }
  memcpy(w->p + w->n, p, n);
  w->n += n;
}

void sl__sw_u64(sl__sw *w, uint64_t v) { /* LEB128 */
  unsigned char b[10];
  size_t n = 0;
  do {
    b[n] = (unsigned char)(v & 0x7f);
    v >>= 7;
    if (v) b[n] |= 0x80;
    n++;
  } while (v);
  sw_put(w, b, n);
}

void sl__sw_bytes(sl__sw *w, const void *p, size_t n) {
  if (n) sw_put(w, p, n);
}

void sl__sw_str(sl__sw *w, const char *s) {
  size_t n = strlen(s);
  sl__sw_u64(w, n);
  sw_put(w, s, n);
}

void sl__sw_ref(sl__sw *w, const sl_eref *r) {
  sl__sw_u64(w, r->op);
  sl__sw_u64(w, r->up_op);
  sl__sw_u64(w, r->up);
  sl__sw_u64(w, r->pos);
  sl__sw_u64(w, r->aux);
  sl__sw_u64(w, r->nstamp);
  for (int k = 0; k < SL_REF_STAMPS; k++)
    if (r->nstamp & (1u << k)) sl__sw_u64(w, r->stamp[k]);
  size_t nm = r->members ? sl_buf_size(r->members) / sizeof(sl_eref) : 0;
  sl__sw_u64(w, nm);
  const sl_eref *m = nm ? sl_buf_data(r->members) : NULL;
  for (size_t i = 0; i < nm; i++) sl__sw_ref(w, &m[i]);
}

int sl__sr_u64(sl__sr *r, uint64_t *v, const char *what) {
  uint64_t x = 0;
  for (int sh = 0; sh < 64; sh += 7) {
    if (r->at >= r->n)
      return sl__err(SL_ECORRUPT, "the saved state ends early, at byte %zu, reading %s (truncated?)", r->at, what);
    unsigned char b = r->p[r->at++];
    if (sh == 63 && b > 1) break;
    x |= (uint64_t)(b & 0x7f) << sh;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return sl__err(SL_ECORRUPT, "the saved state is damaged at byte %zu, reading %s (a number too long)", r->at, what);
}

int sl__sr_str(sl__sr *r, char *buf, size_t n, const char *what) {
  uint64_t len;
  int rc = sl__sr_u64(r, &len, what);
  if (rc) return rc;
  if (len >= n || len > r->n - r->at)
    return sl__err(SL_ECORRUPT, "the saved state is damaged at byte %zu, reading %s (a string of %llu bytes)", r->at,
                   what, (unsigned long long)len);
  memcpy(buf, r->p + r->at, (size_t)len);
  buf[len] = 0;
  r->at += (size_t)len;
  return 0;
}

int sl__sr_index(sl__sr *r, int64_t *pos, int64_t n, const sl__op *op, const char *what) {
  uint64_t v;
  int rc = sl__sr_u64(r, &v, what);
  if (rc) return rc;
  if (v > (uint64_t)n)
    return sl__op_err(op, SL_ECORRUPT, "the saved position (%llu) is past its %lld entries", (unsigned long long)v,
                      (long long)n);
  *pos = (int64_t)v;
  return 0;
}

static int sr_ref_depth(sl__sr *r, sl_eref *out, int depth) {
  *out = (sl_eref){0};
  uint64_t v[6];
  static const char *const what[] = {"a ref's op", "a ref's input op", "a ref's input", "a ref's position",
                                     "a ref's index", "a ref's stamps"};
  for (int i = 0; i < 6; i++) {
    int rc = sl__sr_u64(r, &v[i], what[i]);
    if (rc) return rc;
  }
  if (v[0] > UINT16_MAX || v[1] > UINT16_MAX || v[5] >= (1u << SL_REF_STAMPS))
    return sl__err(SL_ECORRUPT, "the saved state is damaged before byte %zu (a ref out of range)", r->at);
  out->op = (uint16_t)v[0];
  out->up_op = (uint16_t)v[1];
  out->up = v[2];
  out->pos = v[3];
  out->aux = v[4];
  out->nstamp = (uint32_t)v[5];
  for (int k = 0; k < SL_REF_STAMPS; k++) {
    int rc;
    if ((out->nstamp & (1u << k)) && (rc = sl__sr_u64(r, &out->stamp[k], "a ref's stamp"))) return rc;
  }
  uint64_t nm;
  int rc = sl__sr_u64(r, &nm, "a batch's member count");
  if (rc) return rc;
  if (!nm) return 0;
  if (depth > 0 || nm > (r->n - r->at))
    return sl__err(SL_ECORRUPT, "the saved state is damaged before byte %zu (a batch of %llu refs)", r->at,
                   (unsigned long long)nm);
  out->members = sl_buf_alloc((size_t)nm * sizeof(sl_eref));
  if (!out->members) return SL_ENOMEM;
  sl_eref *m = sl_buf_data(out->members);
  for (uint64_t i = 0; i < nm; i++)
    if ((rc = sr_ref_depth(r, &m[i], depth + 1))) {
      sl_buf_unref(out->members);
      out->members = NULL;
      return rc;
    }
  return 0;
}
int sl__sr_ref(sl__sr *r, sl_eref *out) { return sr_ref_depth(r, out, 0); }

/* ---- pushback: elements made again, handed out before the input's ---- */
typedef struct {
  sl__it it;
  sl__op *by; /* the op whose output the refs are (the inner iterator's op) */
  sl_eref *refs;
  size_t n, next;
} pb_it;

static int pb_next(sl__it *it, sl_elem *out) {
  pb_it *b = (pb_it *)it;
  if (b->next < b->n) {
    int rc = sl__remake(b->by, it->run, &b->refs[b->next], out);
    if (rc) return rc;
    sl_buf_unref(b->refs[b->next].members);
    b->refs[b->next].members = NULL;
    b->next++;
    return 0;
  }
  return it->input ? it->input->vt->next(it->input, out) : SL_END; /* counted once, as this iterator's */
}
static void pb_free(sl__it *it) {
  pb_it *b = (pb_it *)it;
  for (size_t i = b->next; i < b->n; i++) sl_buf_unref(b->refs[i].members);
  sl__free(b->refs);
  sl__free(b);
}
static const sl__it_vt PB_IT = {pb_next, pb_free};
const sl__it_vt *sl__pushback_vt(void) { return &PB_IT; }

int sl__pushback(sl__it **in, sl__run *run, sl__op *by, const sl_eref *refs, size_t n) {
  if (!n && *in) return 0;
  sl__it *inner = *in;
  sl__it *w;
  int rc = sl__it_new_ex(&w, sizeof(pb_it), &PB_IT, inner ? inner->op : by, run, NULL, false);
  if (rc) return rc;
  pb_it *b = (pb_it *)w;
  b->refs = sl__mallocarray(n, sizeof *b->refs);
  if (!b->refs) {
    sl__it_free(w);
    return sl__oom("elements to make again");
  }
  for (size_t i = 0; i < n; i++) {
    b->refs[i] = refs[i];
    sl_buf_ref(b->refs[i].members);
  }
  b->n = n;
  b->by = by ? by : inner->op;
  w->epoch = inner ? inner->epoch : 0;
  w->input = inner;
  *in = w;
  return 0;
}

/* ---- making an element again ---- */
static sl__op *owner_interleave(sl__op *op) {
  sl_pipeline *p = op->pl;
  for (int i = op->parent; i >= 0; i = sl__pipeline_op(p, i)->parent) {
    sl__op *o = sl__pipeline_op(p, i);
    if (o->vt->flags & SL__OPF_TAKES_SOURCE) return o;
  }
  return NULL;
}

int sl__remake_input(sl__op *op, sl__run *run, uint16_t up_op, uint64_t up, sl_elem *out) {
  sl_eref r = {.op = up_op, .pos = up};
  if (op->input) return sl__remake(op->input, run, &r, out);
  sl__op *il = owner_interleave(op);
  if (!il || !il->input) return sl__op_err(op, SL_EINVAL, "cannot make its input element again");
  return sl__remake(il->input, run, &r, out);
}

static int remake_op(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  for (;;) {
    const sl__op_state *st = op->vt->state;
    if (!r->op)
      return sl__op_err(op, SL_EINVAL, "an element to make again has no ref (an op before it does not keep "
                                             "refs: docs/state.md lists the ops a saved state covers)");
    if (!st) return sl__op_err(op, SL_EINVAL, "'%s' cannot make an element again", op->vt->kind);
    if (r->op == op->index + 1 || !(st->flags & SL__STF_PASS)) {
      if (!st->remake) return sl__op_err(op, SL_EINVAL, "'%s' cannot make an element again", op->vt->kind);
      return st->remake(op, run, r, out);
    }
    if (!op->input) return sl__op_err(op, SL_ECORRUPT, "an element's ref names no op before this one");
    op = op->input;
  }
}

int sl__remake(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  sl__sr *saved = sl__t_restore; /* iterators opened to make an element again read no state, count no epoch */
  sl__t_restore = NULL;
  sl__t_remaking++;
  int rc = remake_op(op, run, r, out);
  sl__t_remaking--;
  sl__t_restore = saved;
  return rc;
}

/* ---- records ---- */
int sl__state_save_it(sl__it *it, sl__sw *w) {
  /* Pushbacks around the iterator (a restored one may have several): theirs come first, outermost first. */
  enum { MAX_PB = 8 };
  const pb_it *pbs[MAX_PB];
  int npb = 0;
  while (it->vt == &PB_IT) {
    if (npb == MAX_PB) return sl__err(SL_EINVAL, "a run restored more than %d times over without handing out what "
                                                  "it made again: save its state later", MAX_PB);
    pbs[npb++] = (const pb_it *)it;
    it = it->input;
  }
  sl__op *op = it->op;
  bool single = op->pl == NULL; /* the start of a nested chain */
  sl__sw_u64(w, single ? 0 : (uint64_t)op->index + 1);
  sl__sw_u64(w, it->epoch);
  if (!single) sl__sw_u64(w, it->input != NULL);
  int rc = 0;
  if (single) {
    rc = sl__single_save(it, w);
  } else {
    const sl__op_state *st = op->vt->state;
    if (!st)
      return sl__op_err(op, SL_EINVAL, "'%s' cannot save its position yet (docs/state.md lists the ops that "
                                             "can)", op->vt->kind);
    if (op->stamp == -2)
      return sl__op_err(op, SL_EINVAL, "more than %d random maps: a run of it cannot save its position",
                        SL_REF_STAMPS);
    if (it->input && (rc = st->save_input ? st->save_input(it, w) : sl__state_save_it(it->input, w))) return rc;
    if (st->save && (rc = st->save(it, w))) return rc;
  }
  /* Its pushback: a wrapper's elements not handed out yet, then those the op took for its consumer. */
  sl__sw own = {0};
  size_t left = 0;
  for (int k = 0; k < npb; k++) left += pbs[k]->n - pbs[k]->next;
  int pend = !single && op->vt->state->pending ? op->vt->state->pending(it, &own) : 0;
  sl__sw_u64(w, left + (size_t)pend);
  for (int k = 0; k < npb; k++)
    for (size_t i = pbs[k]->next; i < pbs[k]->n; i++) sl__sw_ref(w, &pbs[k]->refs[i]);
  if (own.n) sw_put(w, own.p, own.n);
  if (own.err && !w->err) w->err = own.err;
  sl__free(own.p);
  return w->err ? w->err : rc;
}

void sl__state_hold(sl__it *it, bool on) {
  if (!it) return;
  if (it->vt == &PB_IT) {
    sl__state_hold(it->input, on);
    return;
  }
  const sl__op_state *st = it->op->pl ? it->op->vt->state : NULL;
  if (on && st && st->hold) st->hold(it, true);
  if (!st || !st->save_input) sl__state_hold(it->input, on); /* else its hold did */
  if (!on && st && st->hold) st->hold(it, false);
}

int sl__state_head(sl__it *it, bool *has_input) {
  sl__sr *r = sl__t_restore;
  uint64_t idx, ep, in = 0;
  int rc;
  if ((rc = sl__sr_u64(r, &idx, "an op's record")) || (rc = sl__sr_u64(r, &ep, "an op's epoch")) ||
      (has_input && (rc = sl__sr_u64(r, &in, "an op's record"))))
    return rc;
  if (has_input) *has_input = in != 0;
  bool single = it->op->pl == NULL;
  uint64_t want = single ? 0 : (uint64_t)it->op->index + 1;
  if (idx != want)
    return sl__err(SL_ECORRUPT, "the saved state does not fit this pipeline: at byte %zu it holds the record of op "
                                "%lld where %s was expected", r->at, (long long)idx - 1,
                   single ? "a nested source's start" : it->op->path);
  it->epoch = ep; /* the op's later epochs continue from the count the state's op list set */
  return 0;
}

int sl__sr_pushback(sl__sr *r, sl__it **in, sl__run *run, sl__op *by, const char *what) {
  uint64_t n;
  int rc = sl__sr_u64(r, &n, what);
  if (rc || !n) return rc;
  if (n > r->n - r->at)
    return sl__err(SL_ECORRUPT, "the saved state is damaged at byte %zu (%llu refs of %s)", r->at,
                   (unsigned long long)n, what);
  sl_eref *refs = sl__calloc((size_t)n, sizeof *refs);
  if (!refs) return sl__oom(what);
  for (uint64_t i = 0; i < n && !rc; i++) rc = sl__sr_ref(r, &refs[i]);
  if (!rc) rc = sl__pushback(in, run, by, refs, (size_t)n);
  for (uint64_t i = 0; i < n; i++) sl_buf_unref(refs[i].members);
  sl__free(refs);
  return rc;
}

static int read_pushback(sl__it **it) {
  return sl__sr_pushback(sl__t_restore, it, (*it)->run, NULL, "the elements to make again");
}

int sl__state_load(sl__it *it) {
  if (!sl__restoring(it->run)) return 0;
  const sl__op_state *st = it->op->pl ? it->op->vt->state : NULL;
  if (!st) return sl__op_err(it->op, SL_EINVAL, "'%s' cannot restore a position yet", it->op->vt->kind);
  return st->load ? st->load(it, sl__t_restore) : 0;
}

int sl__state_after_open(sl__it **it) {
  if (!sl__restoring((*it)->run)) return 0;
  int rc = 0;
  const sl__op_state *st = (*it)->op->pl ? (*it)->op->vt->state : NULL;
  if (st && !(st->flags & SL__STF_LOADS_ITSELF)) rc = sl__state_load(*it);
  else if (!st && (*it)->op->pl) rc = sl__state_load(*it);
  return rc ? rc : read_pushback(it);
}

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

static int file_stamp(const char *path, uint64_t *size, uint64_t *mtime) {
  struct stat st;
  if (stat(path, &st)) return sl__err(SL_EIO, "%s: cannot read its size and time (a data file of the pipeline)", path);
  *size = (uint64_t)st.st_size;
  *mtime = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
  return 0;
}

int sl__state_encode(sl_pipeline *p, sl__it *root, uint64_t delivered, void **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  sl__sw w = {0};
  sw_put(&w, STATE_MAGIC, 8);
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
    sw_put(&w, b, 8);
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

int sl__state_decode(sl_pipeline *p, const void *buf, size_t len, sl__sr *r, uint64_t *delivered) {
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
                   files[i], s0 != s1 ? "its size differs" : "its modification time differs");
  }
  sl_free(files);
  if (!rc) rc = sl__sr_u64(r, delivered, "the element count");
  return rc;
}

/* Sets each op's epoch count as the state has it (after sl__state_decode accepted the state). */
void sl__state_set_opens(sl_pipeline *p, const void *buf) {
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
