/* ops/op_batch.c: `batch` and `padded_batch`: stack `size` elements into tensors with a leading dimension.
 * Numeric components are copied into one new buffer per component (or, when the elements already sit side by side
 * in one buffer, viewed there); byte strings become a rank-1 string array (payload + offsets). padded_batch pads every dimension to the batch maximum (or a given shape). */
#include <stdint.h>
#include <string.h>

#include "ops/op_int.h"
#include "ops/stack_int.h"

typedef struct {
  int64_t size;
  bool drop_remainder;
  bool padded;
  json_t *pad_shapes; /* padded_batch: {"comp": [d0, d1, ...]} with -1 for "batch max" */
  json_t *pad_values; /* padded_batch: {"comp": number} */
} batch_cfg;

/* What `batch` has stacked so far of one component: elements are copied in as they arrive and dropped, so that a
 * batch holds its output and element 0, never `size` whole elements (an sl_elem is 2 KB whatever it carries). */
typedef struct {
  sl_buf *data;     /* numeric: the tensor so far (grows by doubling); NULL while `adopt` */
  unsigned char *payload; /* bytes: the strings so far */
  uint64_t *offs;   /* bytes: where each string starts */
  size_t len, cap;  /* bytes used and allocated in data or payload */
  int64_t ocap;     /* offsets allocated */
  size_t per;       /* numeric: bytes per element */
  size_t full;      /* numeric: bytes of a whole batch (size x per), the most data grows to */
  bool adopt;       /* numeric: every element so far is the next slot of element 0's buffer: nothing copied */
} stack_acc;

typedef struct {
  sl__it it;
  sl_elem *buf;  /* padded_batch: the batch's elements, held until its shape is known */
  int64_t alloc; /* slots in buf: grows by doubling up to the batch size as elements arrive */
  stack_acc acc[SL_MAX_COMPONENTS]; /* batch: per component of element 0 */
  bool eof;
  uint64_t batches;
  sl_eref *mrefs; /* the refs of the batch's members so far (the batch's ref: a resumed run makes it again) */
  int64_t mcap;    /* grows by doubling up to the batch size, as the buffer does */
} batch_it;

/* Notes member n's ref (a batch of batches keeps none: its own ref then says unknown). */
static int batch_note(batch_it *b, const batch_cfg *c, int64_t n, const sl_elem *e) {
  if (n == b->mcap) {
    int64_t na = b->mcap ? (b->mcap * 2 < c->size ? b->mcap * 2 : c->size) : (c->size < 64 ? c->size : 64);
    sl_eref *nm = sl__realloc(b->mrefs, (size_t)na * sizeof(sl_eref));
    if (!nm) return sl__op_err(b->it.op, SL_ENOMEM, "out of memory for a batch's refs");
    b->mrefs = nm;
    b->mcap = na;
  }
  sl_eref *m = b->mrefs;
  m[n] = e->ref;
  m[n].members = NULL;
  if (e->ref.members) m[n].op = 0;
  return 0;
}
/* Gives the batch of n members its ref. */
static void batch_ref(batch_it *b, const batch_cfg *c, int64_t n, sl_elem *out) {
  (void)c;
  sl_buf *m = sl_buf_alloc((size_t)n * sizeof(sl_eref)); /* none (out of memory): the batch's ref says unknown */
  if (m) memcpy(sl_buf_data(m), b->mrefs, (size_t)n * sizeof(sl_eref));
  sl_buf_unref(out->ref.members);
  out->ref = (sl_eref){.op = m ? (uint16_t)(b->it.op->index + 1) : 0, .members = m};
}

static int batch_parse_common(sl__op *op, json_t *o, bool padded) {
  sl_args k = sl__op_knobs(op, o);
  batch_cfg *c = sl__calloc(1, sizeof *c);
  if (!c) return sl__oom("batch");
  op->impl = c;
  c->padded = padded;
  int rc;
  if ((rc = sl__get_int(&c->size, &k, "size")) ||
      (rc = sl__get_bool(&c->drop_remainder, &k, "drop_remainder")))
    return rc;
  if (padded) {
    c->pad_shapes = json_object_get(o, "padded_shapes");
    c->pad_values = json_object_get(o, "padding_values");
    if (c->pad_shapes && !json_is_object(c->pad_shapes))
      return sl__err(SL_EINVAL, "%s.padded_shapes: expected an object of component -> shape", op->path);
    if (c->pad_values && !json_is_object(c->pad_values))
      return sl__err(SL_EINVAL, "%s.padding_values: expected an object of component -> number", op->path);
  }
  int64_t ic = op->input ? op->input->cardinality : -1;
  op->cardinality = ic >= 0 ? (c->drop_remainder ? ic / c->size : (ic + c->size - 1) / c->size) : ic;
  return 0;
}
static int batch_parse(sl__op *op, json_t *o) { return batch_parse_common(op, o, false); }
static int pbatch_parse(sl__op *op, json_t *o) { return batch_parse_common(op, o, true); }

/* Appends to `out` a string array of n strings whose `total` bytes the caller copies into *d and whose n + 1
 * offsets into *o. */
static int strings_new(sl__op *op, sl_elem *out, const char *name, int64_t n, size_t total, unsigned char **d,
                       uint64_t **o) {
  sl_buf *data = sl_buf_alloc(total ? total : 1), *offs = sl_buf_alloc((size_t)(n + 1) * sizeof(uint64_t));
  if (!data || !offs) {
    sl_buf_unref(data);
    sl_buf_unref(offs);
    return sl__op_err(op, SL_ENOMEM, "out of memory batching '%s'", name);
  }
  *o = sl_buf_data(offs);
  *d = sl_buf_data(data);
  sl_comp *dst = &out->c[out->n++];
  memset(dst, 0, sizeof *dst);
  dst->name = name;
  dst->dtype = SL_BYTES;
  dst->rank = 1;
  dst->shape[0] = n;
  dst->buf = data;
  dst->offs = offs;
  dst->size = total;
  return 0;
}

int sl__stack_bytes(sl__op *op, sl_elem *out, sl_elem *els, int64_t n, const sl_comp *c0) {
  size_t total = 0;
  if (c0->rank != 0)
    return sl__op_err(op, SL_EINVAL, "component '%s' is an array of %lld byte strings: batch stacks numeric "
                      "tensors and single strings only", c0->name, (long long)c0->shape[0]);
  for (int64_t k = 0; k < n; k++) {
    const sl_comp *c = sl_elem_get(&els[k], c0->name);
    if (!c || c->dtype != SL_BYTES || c->rank != 0)
      return sl__op_err(op, SL_EINVAL, "element %lld of the batch: component '%s' is missing or not a single byte "
                        "string like element 0's", (long long)k, c0->name);
    if (!sl__add_ok(total, c->size, &total)) return sl__op_err(op, SL_EINVAL, "batch too large");
  }
  unsigned char *d;
  uint64_t *o;
  int rc = strings_new(op, out, c0->name, n, total, &d, &o);
  if (rc) return rc;
  size_t pos = 0;
  for (int64_t k = 0; k < n; k++) {
    const sl_comp *c = sl_elem_get(&els[k], c0->name);
    o[k] = pos;
    if (c->size) memcpy(d + pos, sl_comp_data(c), c->size);
    pos += c->size;
  }
  o[n] = pos;
  return 0;
}

static double pad_value(const batch_cfg *c, const char *name) {
  json_t *v = c->pad_values ? json_object_get(c->pad_values, name) : NULL;
  return v && json_is_number(v) ? json_number_value(v) : 0.0;
}

static void fill_value(void *dst, sl_dtype dt, double v, int64_t count) {
  if (v == 0.0) {
    memset(dst, 0, (size_t)count * sl_dtype_size(dt));
    return;
  }
  for (int64_t i = 0; i < count; i++) switch (dt) {
    case SL_UINT8: ((uint8_t *)dst)[i] = (uint8_t)v; break;
    case SL_INT32: ((int32_t *)dst)[i] = (int32_t)v; break;
    case SL_INT64: ((int64_t *)dst)[i] = (int64_t)v; break;
    case SL_FLOAT32: ((float *)dst)[i] = (float)v; break;
    case SL_FLOAT64: ((double *)dst)[i] = v; break;
    default: break;
    }
}

/* Copies src (shape sshape) into the top-left corner of dst (shape dshape), both row-major, same rank. */
static void copy_padded(unsigned char *dst, const int64_t *dshape, const unsigned char *src, const int64_t *sshape,
                        int rank, size_t esz) {
  if (rank == 0) {
    memcpy(dst, src, esz);
    return;
  }
  if (rank == 1) {
    memcpy(dst, src, (size_t)sshape[0] * esz);
    return;
  }
  size_t dstride = esz, sstride = esz;
  for (int i = 1; i < rank; i++) {
    dstride *= (size_t)dshape[i];
    sstride *= (size_t)sshape[i];
  }
  for (int64_t r = 0; r < sshape[0]; r++)
    copy_padded(dst + (size_t)r * dstride, dshape + 1, src + (size_t)r * sstride, sshape + 1, rank - 1, esz);
}

static int stack_numeric(sl__op *op, const batch_cfg *cfg, sl_elem *out, sl_elem *els, int n, int ci) {
  const sl_comp *c0 = &els[0].c[ci];
  int64_t shape[SL_MAX_RANK];
  if (c0->rank >= SL_MAX_RANK)
    return sl__op_err(op, SL_EINVAL, "component '%s' has rank %d: batching would exceed rank %d", c0->name,
                      c0->rank, SL_MAX_RANK);
  memcpy(shape, c0->shape, sizeof shape);
  for (int k = 1; k < n; k++) {
    const sl_comp *c = sl_elem_get(&els[k], c0->name);
    if (!c) return sl__op_err(op, SL_EINVAL, "element %d of the batch lacks component '%s'", k, c0->name);
    if (c->dtype != c0->dtype || c->rank != c0->rank)
      return sl__op_err(op, SL_EINVAL, "element %d of the batch: '%s' is %s rank %d, element 0's is %s rank %d", k,
                        c0->name, sl_dtype_name(c->dtype), c->rank, sl_dtype_name(c0->dtype), c0->rank);
    for (int d = 0; d < c0->rank; d++) {
      if (c->shape[d] != shape[d] && !cfg->padded)
        return sl__op_err(op, SL_EINVAL, "element %d of the batch: '%s' dimension %d is %lld, element 0's is %lld "
                          "(use padded_batch for ragged shapes)", k, c0->name, d, (long long)c->shape[d],
                          (long long)c0->shape[d]);
      if (c->shape[d] > shape[d]) shape[d] = c->shape[d];
    }
  }
  if (cfg->padded && cfg->pad_shapes) {
    json_t *ps = json_object_get(cfg->pad_shapes, c0->name);
    if (ps) {
      if (!json_is_array(ps) || json_array_size(ps) != (size_t)c0->rank)
        return sl__op_err(op, SL_EINVAL, "padded_shapes.%s: expected an array of %d dimensions", c0->name, c0->rank);
      for (int d = 0; d < c0->rank; d++) {
        json_t *x = json_array_get(ps, (size_t)d);
        int64_t want = json_is_integer(x) ? json_integer_value(x) : -1;
        if (want < 0) continue;
        if (want < shape[d])
          return sl__op_err(op, SL_EINVAL, "padded_shapes.%s[%d] = %lld is smaller than an element's %lld",
                            c0->name, d, (long long)want, (long long)shape[d]);
        shape[d] = want;
      }
    }
  }
  return sl__stack_padded(op, out, els, n, c0, shape, cfg->padded ? pad_value(cfg, c0->name) : 0);
}

int sl__stack_padded(sl__op *op, sl_elem *out, sl_elem *els, int64_t n, const sl_comp *c0, const int64_t *shape,
                     double pad) {
  int64_t oshape[SL_MAX_RANK];
  oshape[0] = n;
  memcpy(oshape + 1, shape, (size_t)c0->rank * sizeof(int64_t));
  int64_t per;
  if (sl_shape_count(&per, c0->rank, shape)) return sl__op_wrap(op, SL_EINVAL);
  void *data;
  sl_elem tmp;
  sl_elem_init(&tmp);
  size_t esz0 = sl_dtype_size(c0->dtype), per0 = (size_t)per * esz0, end;
  /* Built in place: when the n elements are views of consecutive slots of one buffer (a function that wrote its
   * outputs into a shared slab, decode_and_crop_jpeg's "batch_slab"), the batch is a view of those slots: no copy. */
  bool adopt = c0->buf && per0 > 0 && c0->size == per0 && sl__mul_ok((size_t)n, per0, &end) &&
               sl__add_ok(end, c0->off, &end) && end <= sl_buf_size(c0->buf);
  for (int64_t k = 1; adopt && k < n; k++) {
    const sl_comp *c = sl_elem_get(&els[k], c0->name);
    adopt = c->buf == c0->buf && c->size == per0 && c->off == c0->off + (size_t)k * per0;
  }
  if (adopt) {
    int rc = sl_elem_set_tensor(&tmp, c0->name, c0->dtype, c0->rank + 1, oshape, c0->buf, c0->off, NULL);
    if (rc) return sl__op_wrap(op, rc);
    out->c[out->n++] = tmp.c[0];
    return 0;
  }
  int rc = sl_elem_new_tensor(&tmp, c0->name, c0->dtype, c0->rank + 1, oshape, &data);
  if (rc) return sl__op_wrap(op, rc);
  size_t esz = sl_dtype_size(c0->dtype);
  size_t per_bytes = (size_t)per * esz;
  for (int64_t k = 0; k < n; k++) {
    const sl_comp *c = k == 0 ? c0 : sl_elem_get(&els[k], c0->name);
    unsigned char *dst = (unsigned char *)data + (size_t)k * per_bytes;
    if (c->size == per_bytes) {
      memcpy(dst, sl_comp_data(c), per_bytes);
    } else {
      fill_value(dst, c0->dtype, pad, per);
      if (c->size) copy_padded(dst, shape, sl_comp_data(c), c->shape, c->rank, esz);
    }
  }
  out->c[out->n++] = tmp.c[0];
  return 0;
}

static void acc_dispose(stack_acc *a) {
  sl_buf_unref(a->data);
  sl__free(a->payload);
  sl__free(a->offs);
  memset(a, 0, sizeof *a);
}

/* A tensor up to this size is allocated whole when its batch starts (the usual case: one allocation, no copy);
 * a larger one starts here and doubles as elements arrive, so that a huge `size` over a short stream stays small. */
#define BATCH_FIRST_BYTES (16u << 20)

/* Room for `more` bytes in a's tensor (numeric) or payload (bytes), doubling; a tensor never beyond a whole
 * batch, so that a full batch's buffer is exactly its size. */
static int acc_reserve(sl__op *op, stack_acc *a, size_t more, bool bytes) {
  size_t need;
  if (!sl__add_ok(a->len, more, &need)) return sl__op_err(op, SL_EINVAL, "batch too large");
  if (need <= a->cap) return 0;
  size_t ncap = a->cap ? a->cap : bytes ? 64 : a->full < BATCH_FIRST_BYTES ? a->full : BATCH_FIRST_BYTES;
  while (ncap < need) ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
  if (!bytes && ncap > a->full && need <= a->full) ncap = a->full;
  if (bytes) {
    unsigned char *np = sl__realloc(a->payload, ncap);
    if (!np) return sl__op_err(op, SL_ENOMEM, "out of memory growing a batch to %zu bytes", ncap);
    a->payload = np;
  } else {
    sl_buf *nb = sl_buf_alloc(ncap);
    if (!nb) return sl__op_err(op, SL_ENOMEM, "out of memory growing a batch to %zu bytes", ncap);
    if (a->len) memcpy(sl_buf_data(nb), sl_buf_data(a->data), a->len);
    sl_buf_unref(a->data);
    a->data = nb;
  }
  a->cap = ncap;
  return 0;
}

/* Element k (0-based) of the batch being made: checked against element 0 (`first`) and copied into the
 * accumulators. Element 0's numeric components start as views of their own buffer while the next elements are the
 * next slots of it (a function that wrote its outputs into a shared slab): the batch is then a view, no copy. */
static int stack_add(sl__op *op, batch_it *b, const sl_elem *first, sl_elem *e, int64_t k) {
  for (int ci = 0; ci < first->n; ci++) {
    const sl_comp *c0 = &first->c[ci], *c = k ? sl_elem_get(e, c0->name) : c0;
    stack_acc *a = &b->acc[ci];
    if (c0->dtype == SL_BYTES) {
      if (k == 0 && c0->rank != 0)
        return sl__op_err(op, SL_EINVAL, "component '%s' is an array of %lld byte strings: batch stacks numeric "
                          "tensors and single strings only", c0->name, (long long)c0->shape[0]);
      if (!c || c->dtype != SL_BYTES || c->rank != 0)
        return sl__op_err(op, SL_EINVAL, "element %lld of the batch: component '%s' is missing or not a single byte "
                          "string like element 0's", (long long)k, c0->name);
      if (k + 2 > a->ocap) {
        int64_t nc = a->ocap ? a->ocap * 2 : 16;
        uint64_t *no = sl__realloc(a->offs, (size_t)nc * sizeof *no);
        if (!no) return sl__op_err(op, SL_ENOMEM, "out of memory batching '%s'", c0->name);
        a->offs = no;
        a->ocap = nc;
      }
      int rc = acc_reserve(op, a, c->size, true);
      if (rc) return rc;
      a->offs[k] = a->len;
      if (c->size) memcpy(a->payload + a->len, sl_comp_data(c), c->size);
      a->len += c->size;
      continue;
    }
    if (k == 0) {
      if (c0->rank >= SL_MAX_RANK)
        return sl__op_err(op, SL_EINVAL, "component '%s' has rank %d: batching would exceed rank %d", c0->name,
                          c0->rank, SL_MAX_RANK);
      int64_t per;
      if (sl_shape_count(&per, c0->rank, c0->shape)) return sl__op_wrap(op, SL_EINVAL);
      a->per = (size_t)per * sl_dtype_size(c0->dtype);
      if (!sl__mul_ok(a->per, (size_t)((const batch_cfg *)op->impl)->size, &a->full)) a->full = SIZE_MAX;
      a->adopt = c0->buf && a->per > 0 && c0->size == a->per && c0->off + a->per <= sl_buf_size(c0->buf);
      if (a->adopt) continue;
    } else {
      if (!c)
        return sl__op_err(op, SL_EINVAL, "element %lld of the batch lacks component '%s'", (long long)k, c0->name);
      if (c->dtype != c0->dtype || c->rank != c0->rank)
        return sl__op_err(op, SL_EINVAL, "element %lld of the batch: '%s' is %s rank %d, element 0's is %s rank %d",
                          (long long)k, c0->name, sl_dtype_name(c->dtype), c->rank, sl_dtype_name(c0->dtype), c0->rank);
      for (int d = 0; d < c0->rank; d++)
        if (c->shape[d] != c0->shape[d])
          return sl__op_err(op, SL_EINVAL, "element %lld of the batch: '%s' dimension %d is %lld, element 0's is %lld "
                            "(use padded_batch for ragged shapes)", (long long)k, c0->name, d, (long long)c->shape[d],
                            (long long)c0->shape[d]);
      if (a->adopt) {
        size_t off = c0->off + (size_t)k * a->per;
        if (c->buf == c0->buf && c->size == a->per && c->off == off && off + a->per <= sl_buf_size(c0->buf)) continue;
        /* The slab ends here: elements 0..k-1 are copied out of it in one piece. */
        a->adopt = false;
        int rc = acc_reserve(op, a, (size_t)k * a->per, false);
        if (rc) return rc;
        memcpy(sl_buf_data(a->data), sl_comp_data(c0), (size_t)k * a->per);
        a->len = (size_t)k * a->per;
      }
    }
    if (a->per == 0) continue;
    int rc = acc_reserve(op, a, a->per, false);
    if (rc) return rc;
    memcpy((unsigned char *)sl_buf_data(a->data) + a->len, sl_comp_data(c), a->per);
    a->len += a->per;
  }
  if (k && e->n != first->n)
    return sl__op_err(op, SL_EINVAL, "element %lld of batch %llu has %d components, element 0 has %d", (long long)k,
                      (unsigned long long)b->batches, e->n, first->n);
  return 0;
}

/* The batch of n elements from the accumulators. */
static int stack_finish(sl__op *op, batch_it *b, const sl_elem *first, int64_t n, sl_elem *out) {
  out->n = 0;
  for (int ci = 0; ci < first->n; ci++) {
    const sl_comp *c0 = &first->c[ci];
    stack_acc *a = &b->acc[ci];
    sl_elem tmp;
    sl_elem_init(&tmp);
    int rc;
    if (c0->dtype == SL_BYTES) {
      a->offs[n] = a->len;
      unsigned char *d;
      uint64_t *o;
      if ((rc = strings_new(op, out, c0->name, n, a->len, &d, &o))) return rc;
      if (a->len) memcpy(d, a->payload, a->len);
      memcpy(o, a->offs, (size_t)(n + 1) * sizeof(uint64_t));
      continue;
    }
    int64_t oshape[SL_MAX_RANK];
    oshape[0] = n;
    memcpy(oshape + 1, c0->shape, (size_t)c0->rank * sizeof(int64_t));
    if (a->adopt) rc = sl_elem_set_tensor(&tmp, c0->name, c0->dtype, c0->rank + 1, oshape, c0->buf, c0->off, NULL);
    else if (a->per == 0) {
      void *data;
      rc = sl_elem_new_tensor(&tmp, c0->name, c0->dtype, c0->rank + 1, oshape, &data);
    } else rc = sl_elem_set_tensor(&tmp, c0->name, c0->dtype, c0->rank + 1, oshape, a->data, 0, NULL);
    if (rc) return sl__op_wrap(op, rc);
    out->c[out->n++] = tmp.c[0];
  }
  return 0;
}

/* After n elements pulled, the last pull returning rc: true when no batch is made (rc is then what next returns),
 * else rc is 0. */
static bool batch_none(batch_it *b, const batch_cfg *c, int *rc, int64_t n) {
  if (*rc < 0) return true;
  if (*rc == SL_END) b->eof = true;
  if (n == 0 || (*rc == SL_END && c->drop_remainder && n < c->size)) {
    *rc = SL_END;
    return true;
  }
  *rc = 0;
  return false;
}

/* batch: each element is copied into the output as it arrives (stack_add), so memory is the output's. */
static int batch_next_stream(batch_it *b, const batch_cfg *c, sl_elem *out) {
  sl__it *it = &b->it;
  sl_elem *first = &b->buf[0], e;
  sl_elem_init(first);
  sl_elem_init(&e);
  int64_t n = 0;
  int rc = 0;
  while (n < c->size) {
    sl_elem *to = n ? &e : first;
    rc = sl__it_pull(it, to);
    if (rc) break;
    if ((rc = batch_note(b, c, n, to))) break;
    rc = stack_add(it->op, b, first, to, n);
    if (n) sl_elem_clear(&e);
    if (rc) break;
    n++;
  }
  if (batch_none(b, c, &rc, n)) goto done;
  rc = stack_finish(it->op, b, first, n, out);
  if (rc) sl_elem_clear(out);
  else batch_ref(b, c, n, out);
  b->batches++;
done:
  for (int ci = 0; ci < SL_MAX_COMPONENTS; ci++) acc_dispose(&b->acc[ci]);
  sl_elem_clear(first);
  return rc;
}

static int batch_next(sl__it *it, sl_elem *out) {
  batch_it *b = (batch_it *)it;
  const batch_cfg *c = it->op->impl;
  if (b->eof) return SL_END;
  if (!c->padded) return batch_next_stream(b, c, out);
  int n = 0, rc = 0;
  while (n < c->size) {
    if (n == b->alloc) {
      int64_t na = b->alloc * 2 < c->size ? b->alloc * 2 : c->size;
      sl_elem *nb = sl__realloc(b->buf, (size_t)na * sizeof(sl_elem));
      if (!nb) {
        rc = sl__op_err(it->op, SL_ENOMEM, "out of memory growing the batch to %lld elements", (long long)na);
        goto done;
      }
      b->buf = nb;
      b->alloc = na;
    }
    sl_elem_init(&b->buf[n]);
    rc = sl__it_pull(it, &b->buf[n]);
    if (rc) break;
    if ((rc = batch_note(b, c, n, &b->buf[n]))) {
      sl_elem_clear(&b->buf[n]);
      break;
    }
    n++;
  }
  if (batch_none(b, c, &rc, n)) goto done;
  out->n = 0;
  for (int ci = 0; ci < b->buf[0].n && !rc; ci++) {
    if (b->buf[0].c[ci].dtype == SL_BYTES) rc = sl__stack_bytes(it->op, out, b->buf, n, &b->buf[0].c[ci]);
    else rc = stack_numeric(it->op, c, out, b->buf, n, ci);
  }
  if (!rc) {
    for (int k = 1; k < n; k++)
      if (b->buf[k].n != b->buf[0].n) {
        rc = sl__op_err(it->op, SL_EINVAL, "element %d of batch %llu has %d components, element 0 has %d", k,
                        (unsigned long long)b->batches, b->buf[k].n, b->buf[0].n);
        break;
      }
  }
  if (rc) sl_elem_clear(out);
  else batch_ref(b, c, n, out);
  b->batches++;
done:
  for (int k = 0; k < n; k++) sl_elem_clear(&b->buf[k]);
  return rc;
}

static void batch_free(sl__it *it) {
  batch_it *b = (batch_it *)it;
  sl__free(b->mrefs);
  sl__free(b->buf);
  sl__free(b);
}
static const sl__it_vt BATCH_IT = {batch_next, batch_free};

static int batch_init(sl__op *op, sl__it **out);
static int batch_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  int rc = sl__it_new(out, sizeof(batch_it), &BATCH_IT, op, run, seed);
  return rc ? rc : batch_init(op, out);
}
/* A batch iterator over `in` (taken over), for making a batch again. */
static int batch_open_bare(sl__op *op, sl__run *run, sl__it *in, sl__it **out) {
  int rc = sl__it_new_ex(out, sizeof(batch_it), &BATCH_IT, op, run, NULL, false);
  if (rc) return rc;
  (*out)->input = in;
  return batch_init(op, out);
}
static int batch_init(sl__op *op, sl__it **out) {
  batch_it *b = (batch_it *)*out;
  const batch_cfg *c = op->impl;
  b->alloc = !c->padded ? 1 : c->size < 16 ? c->size : 16; /* batch holds element 0 only */
  b->buf = sl__mallocarray((size_t)b->alloc, sizeof(sl_elem));
  if (!b->buf) {
    sl__it_free(*out);
    *out = NULL;
    return sl__op_err(op, SL_ENOMEM, "out of memory for a batch");
  }
  return 0;
}
static void batch_free_op(sl__op *op) { sl__free(op->impl); }

/* A batch made again: its members made again by the input, batched as before. A batch holds no element between
 * calls (it pulls a whole batch in one), so it has no part of its own to save. */
static int batch_remake(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  if (!r->members) return sl__op_err(op, SL_ECORRUPT, "a saved ref of a batch lists no members");
  size_t n = sl_buf_size(r->members) / sizeof(sl_eref);
  sl__it *src = NULL, *bit = NULL;
  int rc = sl__pushback(&src, run, op->input, sl_buf_data(r->members), n);
  if (!rc) rc = batch_open_bare(op, run, src, &bit);
  if (rc) {
    sl__it_free(src);
    return rc;
  }
  rc = batch_next(bit, out);
  sl__it_free(bit);
  if (rc == SL_END) rc = sl__op_err(op, SL_ECORRUPT, "a saved batch made again came out empty");
  return rc;
}
static const sl__op_state BATCH_STATE = {NULL, NULL, NULL, batch_remake, 0};

static const sl__arg BATCH_KNOBS[] = {
    {"size", SL__ARG_INT, NULL, SL__ARGF_REQUIRED | SL__LOHI, 1, 16777216, NULL, "elements per batch"},
    {"drop_remainder", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "drop a last batch smaller than size"},
    {NULL}};
static const sl__arg PBATCH_KNOBS[] = {
    {"size", SL__ARG_INT, NULL, SL__ARGF_REQUIRED | SL__LOHI, 1, 16777216, NULL, "elements per batch"},
    {"drop_remainder", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "drop a last batch smaller than size"},
    {"padded_shapes", SL__ARG_OBJECT, NULL, 0, 0, 0, NULL,
     "component -> shape to pad to (-1 in a dim: the batch's longest; absent: the batch's longest)"},
    {"padding_values", SL__ARG_OBJECT, NULL, 0, 0, 0, NULL, "component -> the value padding is filled with (default 0)"},
    {NULL}};
static int64_t batch_dim(const sl__op *op) {
  const batch_cfg *c = op->impl;
  return c->drop_remainder ? c->size : SL__DIM_UNKNOWN;
}
static int batch_infer(sl__op *op, sl__struct *s, const sl__struct *src) {
  (void)src;
  return sl__op_batch_shape(op, s, batch_dim(op), false);
}
/* padded_shapes: each key a component reaching the op, each shape of its rank; the batch has those dims. */
static int pbatch_infer(sl__op *op, sl__struct *s, const sl__struct *src) {
  (void)src;
  const batch_cfg *c = op->impl;
  const char *key;
  json_t *v;
  json_object_foreach(c->pad_shapes, key, v) {
    char where[300];
    snprintf(where, sizeof where, "padded_shapes.%s", key);
    int rc = sl__op_need(op, s, key, where);
    if (rc) return rc;
    sl__comp_desc *d = sl__struct_get(s, key);
    if (!d) continue;
    if (!json_is_array(v))
      return sl__op_err(op, SL_EINVAL, "%s: expected an array of dims, found %s", where, sl__json_type_name(v));
    if (d->rank >= 0 && json_array_size(v) != (size_t)d->rank)
      return sl__op_err(op, SL_EINVAL, "%s: %zu dims, but '%s' (made by %s) has rank %d", where, json_array_size(v),
                        key, d->origin ? d->origin : "?", d->rank);
  }
  json_object_foreach(c->pad_values, key, v) {
    char where[300];
    snprintf(where, sizeof where, "padding_values.%s", key);
    int rc = sl__op_need(op, s, key, where);
    if (rc) return rc;
  }
  int rc = sl__op_batch_shape(op, s, batch_dim(op), true);
  if (rc) return rc;
  json_object_foreach(c->pad_shapes, key, v) {
    sl__comp_desc *d = sl__struct_get(s, key);
    if (!d || d->rank < 1) continue;
    for (int k = 0; k + 1 < d->rank && k < (int)json_array_size(v); k++) {
      json_t *x = json_array_get(v, (size_t)k);
      if (json_is_integer(x) && json_integer_value(x) >= 0) d->dims[k + 1] = (int64_t)json_integer_value(x);
    }
  }
  return 0;
}
static const sl__op_schema BATCH_SCHEMA = {SL__MK_BATCH, 0, "stacks `size` elements: each component gains a leading "
                                           "dim (shapes must match)", BATCH_KNOBS, batch_infer};
static const sl__op_schema PBATCH_SCHEMA = {SL__MK_BATCH, 0, "stacks `size` elements, padding each component to "
                                            "the batch's (or the given) shape", PBATCH_KNOBS, pbatch_infer};
const sl__op_vt sl__op_batch = {"batch", batch_parse, batch_open, batch_free_op, SL__OPF_NEEDS_INPUT, &BATCH_SCHEMA,
                                &BATCH_STATE};
const sl__op_vt sl__op_padded_batch = {"padded_batch", pbatch_parse, batch_open, batch_free_op, SL__OPF_NEEDS_INPUT,
                                        &PBATCH_SCHEMA, &BATCH_STATE};
