/* core/digest.c: the 64-bit digest of one element (XXH3 over its canonical bytes). `sluice run --digest` sums the
 * digests of every output element modulo 2^64, which makes the total independent of order and additive over
 * disjoint parts of a stream: a check that two runs (or a pipeline and its optimised rewrite) made the same data. */
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack: no allocation per element */
#include <string.h>
#include <xxhash.h>

#include "core/core_int.h"

/* Canonical bytes, in component order: for each component, its name's length (u32) and bytes, its dtype name's
 * length and bytes, its rank (u32) and dims (i64); then for numbers the values, for byte strings each string's
 * length (u64) and bytes. Integers are little-endian whatever the host, so the digest is portable. */
static void put_u64(XXH3_state_t *st, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
  XXH3_64bits_update(st, b, 8);
}

static void put_str(XXH3_state_t *st, const char *s) {
  size_t n = strlen(s);
  unsigned char b[4] = {(unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16), (unsigned char)(n >> 24)};
  XXH3_64bits_update(st, b, 4);
  XXH3_64bits_update(st, s, n);
}

/* Numeric payloads in little-endian order: as stored on a little-endian host, swapped value by value otherwise. */
static void put_values(XXH3_state_t *st, const unsigned char *p, size_t size, size_t width) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  unsigned char tmp[256];
  size_t used = 0;
  for (size_t i = 0; i + width <= size; i += width) {
    for (size_t k = 0; k < width; k++) tmp[used + k] = p[i + width - 1 - k];
    used += width;
    if (used + width > sizeof tmp) {
      XXH3_64bits_update(st, tmp, used);
      used = 0;
    }
  }
  XXH3_64bits_update(st, tmp, used);
#else
  (void)width;
  XXH3_64bits_update(st, p, size);
#endif
}

int sl_elem_digest(uint64_t *out, const sl_elem *e) {
  if (!out || !e) return sl__err(SL_EINVAL, "sl_elem_digest: NULL argument");
  XXH3_state_t st;
  XXH3_INITSTATE(&st);
  if (XXH3_64bits_reset(&st) != XXH_OK) return sl__err(SL_ERROR, "sl_elem_digest: cannot start the hash");
  for (int i = 0; i < e->n; i++) {
    const sl_comp *c = &e->c[i];
    const char *dt = sl_dtype_name(c->dtype);
    if (!dt) return sl__err(SL_EINVAL, "component '%s' has an unknown dtype %d", c->name ? c->name : "?", (int)c->dtype);
    if (c->rank < 0 || c->rank > SL_MAX_RANK)
      return sl__err(SL_EINVAL, "component '%s' has rank %d", c->name ? c->name : "?", c->rank);
    put_str(&st, c->name ? c->name : "");
    put_str(&st, dt);
    put_u64(&st, (uint64_t)c->rank);
    for (int d = 0; d < c->rank; d++) put_u64(&st, (uint64_t)c->shape[d]);
    if (c->dtype != SL_BYTES) {
      put_values(&st, sl_comp_data(c), c->size, sl_dtype_size(c->dtype));
      continue;
    }
    int64_t n = 1;
    if (c->rank > 0) {
      int rc = sl_shape_count(&n, c->rank, c->shape);
      if (rc) return rc;
      if (n > 0 && (!c->offs || sl_buf_size(c->offs) / sizeof(uint64_t) < (uint64_t)n + 1))
        return sl__err(SL_EINVAL, "component '%s' holds %lld strings but not their offsets", c->name, (long long)n);
    }
    for (int64_t k = 0; k < n; k++) {
      const void *s;
      size_t len;
      int rc = sl_comp_string(&s, &len, c, k);
      if (rc) return rc;
      put_u64(&st, (uint64_t)len);
      XXH3_64bits_update(&st, s, len);
    }
  }
  *out = XXH3_64bits_digest(&st);
  return 0;
}
