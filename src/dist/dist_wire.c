/* dist/dist_wire.c: the offload transport's wire format: one element as one message (a compact binary header,
 * the component names, then the payloads), no JSON. Unpacking checks every length against the message. No MPI
 * here, so that the unit tests and the fuzz target reach it in every build. */
#include <string.h>

#include "core/core_int.h"
#include "dist/dist_int.h"

#define WIRE_MAGIC 0x31454c53u /* "SLE1" */
#define WIRE_ALIGN 16

/* The format:
 * u32 magic, u32 ncomp; then per component a descriptor:
 *   u32 name_len, u32 dtype, u32 rank, u32 has_offs, i64 shape[8], u64 size, u64 data_at, u64 offs_at, u64 name_at
 * then the names, then each payload (and its offsets, count+1 u64) at WIRE_ALIGN-aligned places. Native byte
 * order: the ranks of one job share an architecture. */
typedef struct {
  uint32_t name_len, dtype, rank, has_offs;
  int64_t shape[SL_MAX_RANK];
  uint64_t size, data_at, offs_at, name_at;
} wire_comp;

static size_t align_up(size_t x) { return (x + WIRE_ALIGN - 1) & ~(size_t)(WIRE_ALIGN - 1); }

int sl__dist_pack(void **out, size_t *len, const sl_elem *e) {
  size_t cap = 0;
  *out = NULL;
  return sl__dist_pack_into(out, &cap, len, e);
}

int sl__dist_pack_into(void **buf, size_t *cap, size_t *len, const sl_elem *e) {
  size_t at = 8 + (size_t)e->n * sizeof(wire_comp);
  wire_comp wc[SL_MAX_COMPONENTS];
  memset(wc, 0, sizeof wc);
  for (int i = 0; i < e->n; i++) {
    const sl_comp *c = &e->c[i];
    wc[i].name_len = (uint32_t)strlen(c->name);
    wc[i].dtype = (uint32_t)c->dtype;
    wc[i].rank = (uint32_t)c->rank;
    memcpy(wc[i].shape, c->shape, sizeof wc[i].shape);
    wc[i].size = c->size;
    wc[i].name_at = at;
    at += wc[i].name_len;
  }
  for (int i = 0; i < e->n; i++) {
    const sl_comp *c = &e->c[i];
    at = align_up(at);
    wc[i].data_at = at;
    at += c->size;
    if (c->dtype == SL_BYTES && c->rank >= 1) {
      at = align_up(at);
      wc[i].has_offs = 1;
      wc[i].offs_at = at;
      at += ((size_t)sl_comp_count(c) + 1) * sizeof(uint64_t);
    }
  }
  if (at > (size_t)INT32_MAX) return sl__err(SL_EINVAL, "offload: an element of %zu bytes is too large for one "
                                            "message (2 GiB at most)", at);
  unsigned char *b = *buf;
  if (!b || *cap < at) {
    /* a quarter to spare, for the next element a little larger (decoded images vary): a worker reuses its
     * buffers, so that packing writes to pages already mapped (fresh ones cost it a third of its CPU) */
    size_t want = at + at / 4;
    sl__free(*buf);
    *buf = NULL;
    *cap = 0;
    if (!(b = sl__malloc(want))) return sl__oom("an offload message");
    *buf = b;
    *cap = want;
  }
  uint32_t hdr[2] = {WIRE_MAGIC, (uint32_t)e->n};
  memcpy(b, hdr, 8);
  memcpy(b + 8, wc, (size_t)e->n * sizeof(wire_comp));
  for (int i = 0; i < e->n; i++) {
    const sl_comp *c = &e->c[i];
    memcpy(b + wc[i].name_at, c->name, wc[i].name_len);
    if (c->size) memcpy(b + wc[i].data_at, sl_comp_data(c), c->size);
    if (wc[i].has_offs) memcpy(b + wc[i].offs_at, sl_buf_data(c->offs), ((size_t)sl_comp_count(c) + 1) * 8);
  }
  *len = at;
  return 0;
}

int sl__dist_unpack(sl_elem *out, sl_buf *msg, const char *(*intern)(void *ctx, const char *name, size_t len),
                    void *ctx, int from) {
  const unsigned char *b = sl_buf_data(msg);
  size_t len = sl_buf_size(msg);
  uint32_t hdr[2];
  if (len < 8) goto bad;
  memcpy(hdr, b, 8);
  if (hdr[0] != WIRE_MAGIC || hdr[1] > SL_MAX_COMPONENTS || (len - 8) / sizeof(wire_comp) < hdr[1]) goto bad;
  sl_elem_init(out);
  for (uint32_t i = 0; i < hdr[1]; i++) {
    wire_comp w;
    memcpy(&w, b + 8 + i * sizeof w, sizeof w);
    if (w.dtype > SL_BYTES || w.rank > SL_MAX_RANK || w.name_at > len || w.name_len > len - w.name_at ||
        w.data_at > len || w.size > len - w.data_at)
      goto bad_clear;
    sl_comp *c = &out->c[out->n];
    memset(c, 0, sizeof *c);
    c->name = intern(ctx, (const char *)b + w.name_at, w.name_len);
    if (!c->name) {
      sl_elem_clear(out);
      return sl__oom("an offload component name");
    }
    c->dtype = (sl_dtype)w.dtype;
    c->rank = (int)w.rank;
    memcpy(c->shape, w.shape, sizeof c->shape);
    int64_t count;
    if (sl_shape_count(&count, c->rank, c->shape)) goto bad_clear;
    size_t es = sl_dtype_size(c->dtype);
    uint64_t want;
    if (es && (__builtin_mul_overflow((uint64_t)count, (uint64_t)es, &want) || want != w.size)) goto bad_clear;
    c->size = (size_t)w.size;
    if (c->size <= SL_INLINE_BYTES) memcpy(c->inl, b + w.data_at, c->size);
    else {
      c->buf = sl_buf_ref(msg);
      c->off = (size_t)w.data_at;
    }
    out->n++;
    if (w.has_offs) {
      /* count comes from the message: bound it by the bytes there before (count + 1) * 8 can wrap */
      if (c->dtype != SL_BYTES || c->rank < 1 || w.offs_at > len || (uint64_t)count >= (len - w.offs_at) / 8)
        goto bad_clear;
      size_t ob = ((size_t)count + 1) * 8;
      if (!(c->offs = sl_buf_alloc(ob))) {
        sl_elem_clear(out);
        return sl__oom("offload string offsets");
      }
      memcpy(sl_buf_data(c->offs), b + w.offs_at, ob);
      const uint64_t *o = sl_buf_data(c->offs);
      for (int64_t k = 0; k < count; k++)
        if (o[k] > o[k + 1] || o[k + 1] > c->size) goto bad_clear;
    } else if (c->dtype == SL_BYTES && c->rank >= 1) goto bad_clear;
  }
  return 0;
bad_clear:
  sl_elem_clear(out);
bad:
  return sl__err(SL_ECORRUPT, "rank %d (worker): a malformed element message of %zu bytes", from, len);
}

