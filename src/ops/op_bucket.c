/* ops/op_bucket.c: `bucket_by_sequence_length` (tf.data's bucket_by_sequence_length): elements go to the bucket
 * of their length (first dimension of `component`, or bytes of a string): bucket i holds lengths in
 * [boundaries[i-1], boundaries[i]), the last one everything from the last boundary up. A bucket that reaches its
 * batch size is emitted as a padded batch (every dimension padded to the batch maximum, or the length dimension to
 * boundary - 1 with pad_to_bucket_boundary). At the end of input the partial buckets are emitted in bucket order
 * unless drop_remainder. Synchronous: it runs on the consumer's thread. */
#include <string.h>

#include "ops/op_int.h"
#include "ops/stack_int.h"

#define MAX_BUCKETS 64

typedef struct {
  const char *comp;
  int nb; /* buckets = boundaries + 1 */
  int64_t bound[MAX_BUCKETS];
  int64_t size[MAX_BUCKETS];
  json_t *pad_values;
  bool drop_remainder, pad_to_boundary;
} bucket_cfg;

typedef struct {
  sl__it it;
  sl_elem *b[MAX_BUCKETS];
  int64_t n[MAX_BUCKETS];
  int64_t held[MAX_BUCKETS];
  bool eof;
  int flush; /* next bucket to flush after the end of input */
} bucket_it;

static int read_int_array(sl__op *op, json_t *o, const char *key, int64_t *out, int max, int *n) {
  json_t *a = json_object_get(o, key);
  if (!json_is_array(a) || json_array_size(a) > (size_t)max)
    return sl__err(SL_EINVAL, "%s.%s: expected an array of at most %d integers", op->path, key, max);
  *n = (int)json_array_size(a);
  for (int i = 0; i < *n; i++) {
    json_t *x = json_array_get(a, (size_t)i);
    if (!json_is_integer(x) || json_integer_value(x) < 1)
      return sl__err(SL_EINVAL, "%s.%s[%d]: expected an integer >= 1", op->path, key, i);
    out[i] = json_integer_value(x);
  }
  return 0;
}

static int bucket_parse(sl__op *op, json_t *o) {
  sl_args k = sl__op_knobs(op, o);
  bucket_cfg *c = sl__calloc(1, sizeof *c);
  if (!c) return sl__oom("bucket_by_sequence_length");
  op->impl = c;
  int rc, nbound, nsize;
  if ((rc = sl__get_str(&c->comp, &k, "component")) ||
      (rc = sl__get_bool(&c->drop_remainder, &k, "drop_remainder")) ||
      (rc = sl__get_bool(&c->pad_to_boundary, &k, "pad_to_bucket_boundary")))
    return rc;
  if (!c->comp) return sl__err(SL_EINVAL, "%s.component: required (the component whose length picks the bucket)", op->path);
  if ((rc = read_int_array(op, o, "boundaries", c->bound, MAX_BUCKETS - 1, &nbound)) ||
      (rc = read_int_array(op, o, "batch_sizes", c->size, MAX_BUCKETS, &nsize)))
    return rc;
  if (nbound < 1) return sl__err(SL_EINVAL, "%s.boundaries: at least one boundary", op->path);
  if (nsize != nbound + 1)
    return sl__err(SL_EINVAL, "%s.batch_sizes: expected %d sizes (one more than boundaries), found %d", op->path,
                   nbound + 1, nsize);
  for (int i = 1; i < nbound; i++)
    if (c->bound[i] <= c->bound[i - 1])
      return sl__err(SL_EINVAL, "%s.boundaries: must increase (boundaries[%d] = %lld)", op->path, i,
                     (long long)c->bound[i]);
  for (int i = 0; i < nsize; i++)
    if (c->size[i] > (1 << 20)) return sl__err(SL_EINVAL, "%s.batch_sizes[%d]: too large", op->path, i);
  c->nb = nsize;
  c->pad_values = json_object_get(o, "padding_values");
  if (c->pad_values && !json_is_object(c->pad_values))
    return sl__err(SL_EINVAL, "%s.padding_values: expected an object of component -> number", op->path);
  op->cardinality = -1;
  return 0;
}

static int stack(sl__op *op, const bucket_cfg *c, int bucket, sl_elem *els, int64_t n, sl_elem *out) {
  const sl_elem *e0 = &els[0];
  for (int ci = 0; ci < e0->n; ci++) {
    const sl_comp *c0 = &e0->c[ci];
    if (c0->dtype == SL_BYTES) {
      int rc = sl__stack_bytes(op, out, els, n, c0);
      if (rc) return rc;
      continue;
    }
    if (c0->rank >= SL_MAX_RANK)
      return sl__op_err(op, SL_EINVAL, "component '%s' has rank %d: batching exceeds rank %d", c0->name, c0->rank,
                        SL_MAX_RANK);
    int64_t shape[SL_MAX_RANK];
    memcpy(shape, c0->shape, sizeof shape);
    for (int64_t k = 1; k < n; k++) {
      const sl_comp *x = sl_elem_get(&els[k], c0->name);
      if (!x || x->dtype != c0->dtype || x->rank != c0->rank)
        return sl__op_err(op, SL_EINVAL, "component '%s' differs in dtype or rank between elements of a bucket",
                          c0->name);
      for (int d = 0; d < x->rank; d++)
        if (x->shape[d] > shape[d]) shape[d] = x->shape[d];
    }
    if (c->pad_to_boundary && !strcmp(c0->name, c->comp) && c0->rank >= 1 && bucket < c->nb - 1 &&
        c->bound[bucket] - 1 > shape[0])
      shape[0] = c->bound[bucket] - 1;
    json_t *pv = c->pad_values ? json_object_get(c->pad_values, c0->name) : NULL;
    int rc = sl__stack_padded(op, out, els, n, c0, shape, json_is_number(pv) ? json_number_value(pv) : 0.0);
    if (rc) return rc;
  }
  return 0;
}

/* The bucket an element goes to (by its component's length); -1 when it has no such component. */
static int bucket_of(const bucket_cfg *c, sl_elem *e) {
  sl_comp *x = sl_elem_get(e, c->comp);
  if (!x) return -1;
  int64_t len = x->rank == 0 ? (x->dtype == SL_BYTES ? (int64_t)x->size : 1) : x->shape[0];
  int k = 0;
  while (k < c->nb - 1 && len >= c->bound[k]) k++;
  return k;
}

/* A batch's ref: its members' refs (a resumed run makes it again). */
static void members_ref(const sl__op *op, const sl_elem *els, int64_t n, sl_elem *out) {
  sl_buf *m = sl_buf_alloc((size_t)n * sizeof(sl_eref));
  if (m) {
    sl_eref *r = sl_buf_data(m);
    for (int64_t i = 0; i < n; i++) {
      r[i] = els[i].ref;
      r[i].members = NULL;
      if (els[i].ref.members) r[i].op = 0;
    }
  }
  sl_buf_unref(out->ref.members);
  out->ref = (sl_eref){.op = m ? (uint16_t)(op->index + 1) : 0, .members = m};
}

static int emit(sl__it *it, int bucket, sl_elem *out) {
  bucket_it *b = (bucket_it *)it;
  const bucket_cfg *c = it->op->impl;
  sl_elem_init(out);
  int rc = stack(it->op, c, bucket, b->b[bucket], b->n[bucket], out);
  if (rc) sl_elem_clear(out);
  else members_ref(it->op, b->b[bucket], b->n[bucket], out);
  for (int64_t k = 0; k < b->n[bucket]; k++) sl_elem_clear(&b->b[bucket][k]);
  sl__stats_held(it->op, -b->held[bucket]);
  b->held[bucket] = 0;
  b->n[bucket] = 0;
  return rc;
}

static int bucket_next(sl__it *it, sl_elem *out) {
  bucket_it *b = (bucket_it *)it;
  const bucket_cfg *c = it->op->impl;
  while (!b->eof) {
    sl_elem e;
    sl_elem_init(&e);
    int rc = sl__it_pull(it, &e);
    if (rc == SL_END) {
      b->eof = true;
      break;
    }
    if (rc) return rc;
    int k = bucket_of(c, &e);
    if (k < 0) {
      sl_elem_clear(&e);
      return sl__op_err(it->op, SL_EINVAL, "input element has no component '%s'", c->comp);
    }
    if (!b->b[k]) {
      b->b[k] = sl__mallocarray((size_t)c->size[k], sizeof(sl_elem));
      if (!b->b[k]) {
        sl_elem_clear(&e);
        return sl__op_err(it->op, SL_ENOMEM, "out of memory for bucket %d", k);
      }
    }
    int64_t bytes = (int64_t)sl_elem_bytes(&e);
    sl_elem_move(&b->b[k][b->n[k]++], &e);
    b->held[k] += bytes;
    sl__stats_held(it->op, bytes);
    if (b->n[k] == c->size[k]) return emit(it, k, out);
  }
  for (; b->flush < c->nb; b->flush++) {
    int k = b->flush;
    if (b->n[k] == 0) continue;
    if (c->drop_remainder) {
      for (int64_t i = 0; i < b->n[k]; i++) sl_elem_clear(&b->b[k][i]);
      sl__stats_held(it->op, -b->held[k]);
      b->held[k] = 0;
      b->n[k] = 0;
      continue;
    }
    b->flush++;
    return emit(it, k, out);
  }
  return SL_END;
}

static void bucket_free(sl__it *it) {
  bucket_it *b = (bucket_it *)it;
  const bucket_cfg *c = it->op->impl;
  for (int k = 0; k < c->nb; k++) {
    for (int64_t i = 0; i < b->n[k]; i++) sl_elem_clear(&b->b[k][i]);
    if (b->held[k]) sl__stats_held(it->op, -b->held[k]);
    sl__free(b->b[k]);
  }
  sl__free(b);
}
static const sl__it_vt BUCKET_IT = {bucket_next, bucket_free};

/* ---- saved state: whether the input ended, the bucket being flushed, each bucket's elements as refs ---- */
static int bucket_save(sl__it *it, sl__sw *w) {
  bucket_it *b = (bucket_it *)it;
  const bucket_cfg *c = it->op->impl;
  sl__sw_u64(w, b->eof);
  sl__sw_u64(w, (uint64_t)b->flush);
  for (int k = 0; k < c->nb; k++) {
    sl__sw_u64(w, (uint64_t)b->n[k]);
    for (int64_t i = 0; i < b->n[k]; i++) sl__sw_ref(w, &b->b[k][i].ref);
  }
  return 0;
}
static int bucket_load(sl__it *it, sl__sr *r) {
  bucket_it *b = (bucket_it *)it;
  const bucket_cfg *c = it->op->impl;
  uint64_t eof, flush;
  int rc;
  if ((rc = sl__sr_u64(r, &eof, "a bucket op's state")) || (rc = sl__sr_u64(r, &flush, "a bucket op's state")))
    return rc;
  b->eof = eof != 0;
  b->flush = (int)(flush > (uint64_t)c->nb ? (uint64_t)c->nb : flush);
  for (int k = 0; k < c->nb; k++) {
    uint64_t n;
    if ((rc = sl__sr_u64(r, &n, "a bucket's size"))) return rc;
    if (n >= (uint64_t)c->size[k])
      return sl__op_err(it->op, SL_ECORRUPT, "the saved state holds %llu elements in bucket %d of %lld",
                        (unsigned long long)n, k, (long long)c->size[k]);
    if (n && !b->b[k] && !(b->b[k] = sl__mallocarray((size_t)c->size[k], sizeof(sl_elem))))
      return sl__op_err(it->op, SL_ENOMEM, "out of memory for bucket %d", k);
    for (; b->n[k] < (int64_t)n; b->n[k]++) {
      sl_eref ref;
      if ((rc = sl__sr_ref(r, &ref))) return rc;
      sl_elem *e = &b->b[k][b->n[k]];
      sl_elem_init(e);
      rc = sl__remake(it->op->input, it->run, &ref, e);
      sl_buf_unref(ref.members);
      if (rc) {
        sl_elem_clear(e);
        return rc;
      }
      int64_t bytes = (int64_t)sl_elem_bytes(e);
      b->held[k] += bytes;
      sl__stats_held(it->op, bytes);
    }
  }
  return 0;
}
static int bucket_remake(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  const bucket_cfg *c = op->impl;
  size_t n = r->members ? sl_buf_size(r->members) / sizeof(sl_eref) : 0;
  if (!n) return sl__op_err(op, SL_ECORRUPT, "a saved ref of a bucket's batch lists no members");
  sl_elem *els = sl__calloc(n, sizeof *els);
  if (!els) return sl__oom("a bucket's batch");
  const sl_eref *m = sl_buf_data(r->members);
  int rc = 0;
  size_t got = 0;
  for (; got < n && !rc; got++) rc = sl__remake(op->input, run, &m[got], &els[got]);
  int k = rc ? 0 : bucket_of(c, &els[0]);
  if (!rc && k < 0) rc = sl__op_err(op, SL_EINVAL, "input element has no component '%s'", c->comp);
  if (!rc && (rc = stack(op, c, k, els, (int64_t)n, out))) sl_elem_clear(out);
  if (!rc) members_ref(op, els, (int64_t)n, out);
  for (size_t i = 0; i < got; i++) sl_elem_clear(&els[i]);
  sl__free(els);
  return rc;
}
static const sl__op_state BUCKET_STATE = {bucket_save, bucket_load, NULL, bucket_remake, 0};

static int bucket_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  return sl__it_new(out, sizeof(bucket_it), &BUCKET_IT, op, run, seed);
}
static void bucket_free_op(sl__op *op) { sl__free(op->impl); }

static const sl__arg BUCKET_KNOBS[] = {
    {"component", SL__ARG_COMP, NULL, SL__ARGF_REQUIRED, 0, 0, NULL, "the component whose length picks the bucket"},
    {"boundaries", SL__ARG_INTS, NULL, SL__ARGF_REQUIRED | SL__LOHI, 1, 63, NULL, "increasing length boundaries"},
    {"batch_sizes", SL__ARG_INTS, NULL, SL__ARGF_REQUIRED | SL__LOHI, 2, 64, NULL, "one batch size per bucket (boundaries + 1)"},
    {"padding_values", SL__ARG_OBJECT, NULL, 0, 0, 0, NULL, "component -> the value padding is filled with (default 0)"},
    {"pad_to_bucket_boundary", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "pad to the bucket's boundary, not the batch's longest"},
    {"drop_remainder", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "drop each bucket's last partial batch"},
    {NULL}};
static int bucket_infer(sl__op *op, sl__struct *s, const sl__struct *src) {
  (void)src;
  const bucket_cfg *c = op->impl;
  int rc = sl__op_need(op, s, c->comp, "component");
  const char *key;
  json_t *v;
  json_object_foreach(c->pad_values, key, v) {
    char where[300];
    snprintf(where, sizeof where, "padding_values.%s", key);
    if (!rc) rc = sl__op_need(op, s, key, where);
  }
  return rc ? rc : sl__op_batch_shape(op, s, SL__DIM_UNKNOWN, true);
}
static const sl__op_schema BUCKET_SCHEMA = {SL__MK_BUCKET, 0, "batches elements of similar length together, padded",
                                            BUCKET_KNOBS, bucket_infer};
const sl__op_vt sl__op_bucket_by_sequence_length = {"bucket_by_sequence_length", bucket_parse, bucket_open,
                                                    bucket_free_op, SL__OPF_NEEDS_INPUT, &BUCKET_SCHEMA,
                                                    &BUCKET_STATE};
