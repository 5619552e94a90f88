/* ops/state_io.c: the bytes of a saved state (docs/state.md): the writer and reader of its numbers, strings and
 * element refs, errors that name the byte a damaged or truncated state fails at, and the head of an iterator's
 * record. Below the engine: it calls nothing of ops/. */
#include <string.h>

#include "ops/op_int.h"

_Thread_local sl__sr *sl__t_restore;
_Thread_local int sl__t_remaking;

bool sl__restoring(const sl__run *run) {
  (void)run;
  return sl__t_restore != NULL;
}

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
  uint64_t len = 0;
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
  uint64_t v = 0;
  int rc = sl__sr_u64(r, &v, what);
  if (rc) return rc;
  if (v > (uint64_t)n)
    return sl__err(SL_ECORRUPT, "%s: the saved position (%llu) is past its %lld entries", op->path,
                   (unsigned long long)v, (long long)n);
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
  uint64_t nm = 0;
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

int sl__state_head(sl__it *it, bool *has_input) {
  sl__sr *r = sl__t_restore;
  uint64_t idx = 0, ep = 0, in = 0;
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

