/* sluice/element.h: elements (tuples of named components), tensors, byte strings and reference-counted buffers.
 * Data lives in sl_buf buffers with an atomic reference count, so batch, cache and prefetch move pointers.
 * Thread rules: an sl_elem belongs to one thread at a time; sl_buf reference counting is safe from any thread. */
#ifndef SLUICE_ELEMENT_H
#define SLUICE_ELEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_MAX_RANK 8
#define SL_MAX_COMPONENTS 16
/* Payloads this small live inside the component itself: no allocation for scalars. */
#define SL_INLINE_BYTES 16

typedef enum sl_dtype {
  SL_UINT8 = 0,
  SL_INT32 = 1,
  SL_INT64 = 2,
  SL_FLOAT32 = 3,
  SL_FLOAT64 = 4,
  SL_BYTES = 5 /* byte strings: rank 0 is one string; rank >= 1 an array of strings with offsets */
} sl_dtype;

/* Bytes per value of a numeric dtype (0 for SL_BYTES). */
SL_EXTERN size_t sl_dtype_size(sl_dtype dt);
/* "uint8", "int32", ... ; NULL for an unknown value. */
SL_EXTERN const char *sl_dtype_name(sl_dtype dt);
/* Parses a dtype name; SL_EINVAL when unknown. */
SL_EXTERN int sl_dtype_parse(sl_dtype *out, const char *name);

/* A reference-counted byte buffer. Create with sl_buf_alloc (data owned) or sl_buf_wrap (data freed by a callback). */
typedef struct sl_buf sl_buf;
/* Allocates a buffer of `size` bytes (uninitialised), refcount 1. NULL with SL_ENOMEM set on failure. */
SL_EXTERN sl_buf *sl_buf_alloc(size_t size);
/* Wraps caller memory; `release(data, payload)` runs when the last reference goes. */
SL_EXTERN sl_buf *sl_buf_wrap(void *data, size_t size, void (*release)(void *data, void *payload), void *payload);
SL_EXTERN void *sl_buf_data(const sl_buf *b);
SL_EXTERN size_t sl_buf_size(const sl_buf *b);
SL_EXTERN sl_buf *sl_buf_ref(sl_buf *b);
/* Drops one reference; frees at zero. Accepts NULL. */
SL_EXTERN void sl_buf_unref(sl_buf *b);

/* A component: a tensor or byte string(s). Fields are public for speed; use the accessors to keep them valid.
 * Numeric: `data` bytes are count(shape) * dtype size. Byte strings (SL_BYTES): `data` holds the concatenated
 * strings; for rank >= 1, `offs` holds count+1 uint64 offsets into data. `name` must outlive the element
 * (names come from the spec, which lives as long as the pipeline, or are static strings). */
typedef struct sl_comp {
  const char *name;
  sl_dtype dtype;
  int rank;
  int64_t shape[SL_MAX_RANK];
  sl_buf *buf;  /* NULL when the payload is inline */
  sl_buf *offs; /* SL_BYTES with rank >= 1 only */
  size_t off;   /* offset of this component's payload inside buf */
  size_t size;  /* payload bytes */
  unsigned char inl[SL_INLINE_BYTES];
} sl_comp;

/* Where an element came from: enough for the engine to make it again when a run resumes from a saved state
 * (docs/state.md). Set by the ops that make elements and carried along; callers leave it alone. */
#define SL_REF_STAMPS 4
typedef struct sl_eref {
  uint16_t op;    /* 1 + index of the op that made it (a reader or generator); 0: unknown */
  uint16_t up_op; /* 1 + index of the op that made that reader's input element (a filename); 0: none */
  uint32_t nstamp; /* stamps set (a bit per slot) */
  uint64_t up;    /* that input element's position in its op */
  uint64_t pos;   /* its position in its reader: byte offset, record or file index */
  uint64_t aux;   /* the reader's second coordinate (a record's index in its file) */
  uint64_t stamp[SL_REF_STAMPS]; /* per random map on its way (the op's stamp slot): epoch << 40 | its index there */
  sl_buf *members; /* a batch: its members' refs (an array of sl_eref without members); NULL otherwise */
} sl_eref;

/* An element: up to SL_MAX_COMPONENTS named components. Caller-owned storage; references to buffers inside. */
typedef struct sl_elem {
  int n;
  sl_eref ref;
  sl_comp c[SL_MAX_COMPONENTS];
} sl_elem;

/* Zeroes an element (n = 0). */
SL_EXTERN void sl_elem_init(sl_elem *e);
/* Drops every component's references and leaves the element empty. */
SL_EXTERN void sl_elem_clear(sl_elem *e);
/* Makes `dst` a new reference-sharing copy of `src` (dst must be empty). */
SL_EXTERN void sl_elem_copy(sl_elem *dst, const sl_elem *src);
/* Moves `src` into `dst` (dst must be empty); src becomes empty. */
SL_EXTERN void sl_elem_move(sl_elem *dst, sl_elem *src);
/* Index of the component named `name`, or -1. */
SL_EXTERN int sl_elem_find(const sl_elem *e, const char *name);
/* The component named `name`, or NULL. */
SL_EXTERN sl_comp *sl_elem_get(sl_elem *e, const char *name);
/* Removes the named component (dropping its references); SL_ENOTFOUND when absent. */
SL_EXTERN int sl_elem_remove(sl_elem *e, const char *name);
/* Total payload bytes of an element. */
SL_EXTERN size_t sl_elem_bytes(const sl_elem *e);

/* Number of values of a shape (1 for rank 0). SL_EINVAL on overflow or a negative dimension. */
SL_EXTERN int sl_shape_count(int64_t *out, int rank, const int64_t *shape);

/* Adds or replaces component `name` with a numeric tensor. If `buf` is NULL the payload (count * dtype size
 * bytes) is copied from `data` (inline when small, else into a new buffer); otherwise the component takes a
 * reference-sharing view of buf at offset `off` (the caller keeps its own reference). */
SL_EXTERN int sl_elem_set_tensor(sl_elem *e, const char *name, sl_dtype dt, int rank, const int64_t *shape, sl_buf *buf,
                       size_t off, const void *data);
/* Adds or replaces a numeric tensor whose payload is allocated here; *data_out points to it (uninitialised). */
SL_EXTERN int sl_elem_new_tensor(sl_elem *e, const char *name, sl_dtype dt, int rank, const int64_t *shape,
                       void **data_out);
/* Adds or replaces a rank-0 byte string: copies `len` bytes from `data`, or views buf[off, off+len) when buf
 * is given. */
SL_EXTERN int sl_elem_set_bytes(sl_elem *e, const char *name, sl_buf *buf, size_t off, const void *data, size_t len);
/* Scalar helpers. */
SL_EXTERN int sl_elem_set_i64(sl_elem *e, const char *name, int64_t v);
SL_EXTERN int sl_elem_set_f64(sl_elem *e, const char *name, double v);

/* Read access. sl_comp_data returns the first payload byte. For a rank >= 1 byte-string component,
 * sl_comp_string gives string i. */
SL_EXTERN const void *sl_comp_data(const sl_comp *c);
SL_EXTERN void *sl_comp_mutable_data(sl_comp *c); /* copies the payload first when the buffer is shared */
SL_EXTERN int64_t sl_comp_count(const sl_comp *c);
SL_EXTERN int sl_comp_string(const void **data, size_t *len, const sl_comp *c, int64_t i);
/* Reads a scalar (or the first value) of any numeric dtype as int64 / double. SL_EINVAL for SL_BYTES. */
SL_EXTERN int sl_comp_get_i64(int64_t *out, const sl_comp *c);
SL_EXTERN int sl_comp_get_f64(double *out, const sl_comp *c);

/* The element's 64-bit digest: XXH3_64bits of its canonical bytes (each component in order: name, dtype name,
 * rank and dims, then the values little-endian, or each string's length and bytes). Summing the digests of a
 * stream's elements modulo 2^64 gives a digest of the stream's multiset of elements: independent of order, and
 * additive over disjoint parts (what `sluice run --digest` prints). SL_EINVAL for a malformed component. */
SL_EXTERN int sl_elem_digest(uint64_t *out, const sl_elem *e);

#ifdef __cplusplus
}
#endif
#endif
