/* core/element.c: reference-counted buffers, components and elements.
 * Small payloads (<= SL_INLINE_BYTES) live inline in the component, so scalar elements cost no allocation.
 * Large owned buffers (decoded images, crops, batches) are recycled through a bounded pool: the C library hands
 * blocks this size out as fresh mmap()ed pages, and faulting and zeroing them cost more than the work on them. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_int.h"

struct sl_buf {
  atomic_long refs;
  size_t size;
  size_t cap; /* pooled buffers: the data capacity (its size class); 0 for the others */
  void *data;
  void (*release)(void *data, void *payload);
  void *payload;        /* also the pool's free-list link */
  const char *origin;   /* text buffers: the file the bytes came from (stored after the data), else NULL */
  uint64_t origin_line; /* and their 1-based line in it */
  max_align_t owned[]; /* data of sl_buf_alloc buffers follows the header, aligned for any tensor */
};

/* ---- the pool: size classes of 4 steps per doubling from 64 KiB to 1 GiB (at most 25% slack), one free list
 * each, and a bound on the idle bytes held (SLUICE_BUFPOOL_MB, default 192; 0 turns the pool off). A buffer goes
 * back on its last unref; past the bound it is freed. Process-wide, because elements outlive and cross pipelines;
 * drained when the allocator changes (sl_set_allocator), since its blocks came from the previous one. */
enum { POOL_MIN_SHIFT = 16, POOL_MAX_SHIFT = 30, POOL_CLASSES = (POOL_MAX_SHIFT - POOL_MIN_SHIFT + 1) * 4 + 1 };
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static sl_buf *g_pool[POOL_CLASSES];
static size_t g_pool_idle;     /* bytes of data capacity held idle */
static long g_pool_limit = -1; /* bytes; -1 until read from the environment */

/* The class of a data size and its capacity; -1 when the size is not pooled. */
static int pool_class(size_t size, size_t *cap) {
  if (size < ((size_t)1 << POOL_MIN_SHIFT) || size > ((size_t)1 << POOL_MAX_SHIFT)) return -1;
  int e = 63 - __builtin_clzll((unsigned long long)(size - 1)); /* 2^e <= size - 1 < 2^(e+1) */
  size_t step = (size_t)1 << (e - 2);
  size_t c = (size + step - 1) & ~(step - 1);                    /* 5..8 steps of 2^(e-2) */
  *cap = c;
  return (e - (POOL_MIN_SHIFT - 1)) * 4 + (int)(c >> (e - 2)) - 8;
}

static size_t pool_limit(void) {
  if (g_pool_limit < 0) {
    const char *v = getenv("SLUICE_BUFPOOL_MB");
    long mb = v && *v ? strtol(v, NULL, 10) : 192;
    g_pool_limit = mb < 0 ? 0 : mb > (1L << 20) ? (1L << 40) : mb << 20;
  }
  return (size_t)g_pool_limit;
}

void sl__bufpool_drain(void) {
  pthread_mutex_lock(&g_pool_mu);
  for (int k = 0; k < POOL_CLASSES; k++)
    while (g_pool[k]) {
      sl_buf *b = g_pool[k];
      g_pool[k] = b->payload;
      sl__free(b);
    }
  g_pool_idle = 0;
  pthread_mutex_unlock(&g_pool_mu);
}

size_t sl__bufpool_idle(void) {
  pthread_mutex_lock(&g_pool_mu);
  size_t n = g_pool_idle;
  pthread_mutex_unlock(&g_pool_mu);
  return n;
}

sl_buf *sl_buf_alloc(size_t size) {
  size_t cap = 0, total;
  int k = pool_class(size, &cap);
  sl_buf *b = NULL;
  if (k >= 0) {
    pthread_mutex_lock(&g_pool_mu);
    if ((b = g_pool[k])) {
      g_pool[k] = b->payload;
      g_pool_idle -= cap;
    }
    pthread_mutex_unlock(&g_pool_mu);
  } else {
    cap = 0;
  }
  if (!b) {
    if (!sl__add_ok(sizeof(sl_buf), cap ? cap : size, &total)) {
      sl__err(SL_ENOMEM, "buffer of %zu bytes is too large", size);
      return NULL;
    }
    b = sl__malloc(total);
    if (!b) {
      sl__err(SL_ENOMEM, "out of memory allocating a buffer of %zu bytes", size);
      return NULL;
    }
  }
  atomic_init(&b->refs, 1);
  b->size = size;
  b->cap = cap;
  b->data = b->owned;
  b->release = NULL;
  b->payload = NULL;
  b->origin = NULL;
  b->origin_line = 0;
  return b;
}

sl_buf *sl__buf_alloc_origin(size_t size, const char *file, uint64_t line) {
  size_t flen = strlen(file), total;
  if (!sl__add_ok(size, flen, &total) || !sl__add_ok(total, 1, &total)) {
    sl__err(SL_ENOMEM, "buffer of %zu bytes is too large", size);
    return NULL;
  }
  sl_buf *b = sl_buf_alloc(total);
  if (!b) return NULL;
  char *o = (char *)b->data + size;
  memcpy(o, file, flen + 1);
  b->size = size;
  b->origin = o;
  b->origin_line = line;
  return b;
}

bool sl__buf_origin(const char **file, uint64_t *line, const sl_buf *b) {
  if (!b || !b->origin) return false;
  *file = b->origin;
  *line = b->origin_line;
  return true;
}

bool sl__comp_origin(const char **file, uint64_t *line, const sl_comp *c) { return sl__buf_origin(file, line, c->buf); }

bool sl__elem_origin(const char **file, uint64_t *line, const sl_elem *e) {
  for (int i = 0; i < e->n; i++)
    if (sl__comp_origin(file, line, &e->c[i])) return true;
  return false;
}

sl_buf *sl_buf_wrap(void *data, size_t size, void (*release)(void *, void *), void *payload) {
  sl_buf *b = sl__malloc(sizeof(sl_buf));
  if (!b) {
    sl__oom("a buffer header");
    return NULL;
  }
  atomic_init(&b->refs, 1);
  b->size = size;
  b->cap = 0;
  b->data = data;
  b->release = release;
  b->payload = payload;
  b->origin = NULL;
  b->origin_line = 0;
  return b;
}

void *sl_buf_data(const sl_buf *b) { return b->data; }
size_t sl_buf_size(const sl_buf *b) { return b->size; }
sl_buf *sl_buf_ref(sl_buf *b) {
  if (b) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
  return b;
}
void sl_buf_unref(sl_buf *b) {
  if (!b) return;
  if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
  if (b->release) b->release(b->data, b->payload);
  if (b->cap) {
    size_t cap = b->cap, dummy;
    int k = pool_class(cap, &dummy);
    pthread_mutex_lock(&g_pool_mu);
    bool keep = g_pool_idle + cap <= pool_limit();
    if (keep) {
      b->payload = g_pool[k];
      g_pool[k] = b;
      g_pool_idle += cap;
    }
    pthread_mutex_unlock(&g_pool_mu);
    if (keep) return;
  }
  sl__free(b);
}

static const size_t DT_SIZE[] = {1, 4, 8, 4, 8, 0};
static const char *const DT_NAME[] = {"uint8", "int32", "int64", "float32", "float64", "bytes"};

size_t sl_dtype_size(sl_dtype dt) { return (unsigned)dt <= SL_BYTES ? DT_SIZE[dt] : 0; }
const char *sl_dtype_name(sl_dtype dt) { return (unsigned)dt <= SL_BYTES ? DT_NAME[dt] : NULL; }
int sl_dtype_parse(sl_dtype *out, const char *name) {
  for (int i = 0; i <= SL_BYTES; i++)
    if (!strcmp(name, DT_NAME[i])) {
      *out = (sl_dtype)i;
      return 0;
    }
  if (!strcmp(name, "string")) {
    *out = SL_BYTES;
    return 0;
  }
  if (!strcmp(name, "float")) {
    *out = SL_FLOAT32;
    return 0;
  }
  return sl__err(SL_EINVAL, "unknown dtype '%s' (expected uint8, int32, int64, float32, float64 or bytes)", name);
}

int sl_shape_count(int64_t *out, int rank, const int64_t *shape) {
  if (rank < 0 || rank > SL_MAX_RANK) return sl__err(SL_EINVAL, "rank %d outside 0..%d", rank, SL_MAX_RANK);
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 0) return sl__err(SL_EINVAL, "negative dimension %lld", (long long)shape[i]);
    if (__builtin_mul_overflow(n, shape[i], &n)) return sl__err(SL_EINVAL, "shape too large");
  }
  *out = n;
  return 0;
}

static void comp_dispose(sl_comp *c) {
  sl_buf_unref(c->buf);
  sl_buf_unref(c->offs);
  c->buf = c->offs = NULL;
}

void sl_elem_init(sl_elem *e) {
  e->n = 0;
  memset(&e->ref, 0, sizeof e->ref);
}

void sl_elem_clear(sl_elem *e) {
  for (int i = 0; i < e->n; i++) comp_dispose(&e->c[i]);
  e->n = 0;
  sl_buf_unref(e->ref.members);
  memset(&e->ref, 0, sizeof e->ref);
}

void sl_elem_copy(sl_elem *dst, const sl_elem *src) {
  memcpy(dst->c, src->c, (size_t)src->n * sizeof(sl_comp));
  dst->n = src->n;
  dst->ref = src->ref;
  sl_buf_ref(dst->ref.members);
  for (int i = 0; i < src->n; i++) {
    sl_buf_ref(dst->c[i].buf);
    sl_buf_ref(dst->c[i].offs);
  }
}

void sl_elem_move(sl_elem *dst, sl_elem *src) {
  memcpy(dst->c, src->c, (size_t)src->n * sizeof(sl_comp));
  dst->n = src->n;
  dst->ref = src->ref;
  src->n = 0;
  src->ref.members = NULL;
  src->ref.op = 0;
}

int sl_elem_find(const sl_elem *e, const char *name) {
  for (int i = 0; i < e->n; i++)
    if (e->c[i].name == name || !strcmp(e->c[i].name, name)) return i;
  return -1;
}

sl_comp *sl_elem_get(sl_elem *e, const char *name) {
  int i = sl_elem_find(e, name);
  return i < 0 ? NULL : &e->c[i];
}

int sl_elem_remove(sl_elem *e, const char *name) {
  int i = sl_elem_find(e, name);
  if (i < 0) return sl__err(SL_ENOTFOUND, "no component '%s'", name);
  comp_dispose(&e->c[i]);
  memmove(&e->c[i], &e->c[i + 1], (size_t)(e->n - i - 1) * sizeof(sl_comp));
  e->n--;
  return 0;
}

size_t sl_elem_bytes(const sl_elem *e) {
  size_t t = 0;
  for (int i = 0; i < e->n; i++) t += e->c[i].size;
  return t;
}

/* Returns the slot for `name`: the existing one (disposed) or a new one. */
static sl_comp *slot_for(sl_elem *e, const char *name) {
  int i = sl_elem_find(e, name);
  if (i >= 0) {
    comp_dispose(&e->c[i]);
    return &e->c[i];
  }
  if (e->n >= SL_MAX_COMPONENTS) {
    sl__err(SL_EINVAL, "element has more than %d components (adding '%s')", SL_MAX_COMPONENTS, name);
    return NULL;
  }
  return &e->c[e->n++];
}

static int fill_shape(sl_comp *c, const char *name, sl_dtype dt, int rank, const int64_t *shape, size_t *bytes) {
  int64_t n;
  int rc = sl_shape_count(&n, rank, shape);
  if (rc) return rc;
  size_t b;
  if (!sl__mul_ok((size_t)n, sl_dtype_size(dt), &b)) return sl__err(SL_EINVAL, "tensor '%s' too large", name);
  c->name = name;
  c->dtype = dt;
  c->rank = rank;
  for (int i = 0; i < rank; i++) c->shape[i] = shape[i];
  c->buf = c->offs = NULL;
  c->off = 0;
  c->size = b;
  *bytes = b;
  return 0;
}

int sl_elem_set_tensor(sl_elem *e, const char *name, sl_dtype dt, int rank, const int64_t *shape, sl_buf *buf,
                       size_t off, const void *data) {
  if (dt == SL_BYTES) return sl__err(SL_EINVAL, "sl_elem_set_tensor: '%s' is bytes; use sl_elem_set_bytes", name);
  sl_comp tmp;
  size_t bytes = 0;
  int rc = fill_shape(&tmp, name, dt, rank, shape, &bytes);
  if (rc) return rc;
  if (buf) {
    size_t end;
    if (!sl__add_ok(off, bytes, &end) || end > sl_buf_size(buf))
      return sl__err(SL_EINVAL, "tensor '%s' (%zu bytes at %zu) overruns its buffer of %zu", name, bytes, off,
                     sl_buf_size(buf));
    tmp.buf = sl_buf_ref(buf);
    tmp.off = off;
  } else if (bytes <= SL_INLINE_BYTES) {
    if (bytes) memcpy(tmp.inl, data, bytes);
  } else {
    tmp.buf = sl_buf_alloc(bytes);
    if (!tmp.buf) return sl__err(SL_ENOMEM, "out of memory allocating %zu bytes for tensor '%s'", bytes, name);
    memcpy(sl_buf_data(tmp.buf), data, bytes);
  }
  sl_comp *c = slot_for(e, name);
  if (!c) {
    sl_buf_unref(tmp.buf);
    return SL_EINVAL;
  }
  *c = tmp;
  return 0;
}

int sl_elem_new_tensor(sl_elem *e, const char *name, sl_dtype dt, int rank, const int64_t *shape,
                       void **data_out) {
  if (dt == SL_BYTES) return sl__err(SL_EINVAL, "sl_elem_new_tensor: '%s' is bytes", name);
  sl_comp tmp;
  size_t bytes = 0;
  int rc = fill_shape(&tmp, name, dt, rank, shape, &bytes);
  if (rc) return rc;
  if (bytes > SL_INLINE_BYTES) {
    tmp.buf = sl_buf_alloc(bytes);
    if (!tmp.buf) return sl__err(SL_ENOMEM, "out of memory allocating %zu bytes for tensor '%s'", bytes, name);
  }
  sl_comp *c = slot_for(e, name);
  if (!c) {
    sl_buf_unref(tmp.buf);
    return SL_EINVAL;
  }
  *c = tmp;
  *data_out = c->buf ? sl_buf_data(c->buf) : c->inl;
  return 0;
}

int sl_elem_set_bytes(sl_elem *e, const char *name, sl_buf *buf, size_t off, const void *data, size_t len) {
  sl_comp tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.name = name;
  tmp.dtype = SL_BYTES;
  tmp.rank = 0;
  tmp.size = len;
  if (buf) {
    size_t end;
    if (!sl__add_ok(off, len, &end) || end > sl_buf_size(buf))
      return sl__err(SL_EINVAL, "bytes '%s' overrun their buffer", name);
    tmp.buf = sl_buf_ref(buf);
    tmp.off = off;
  } else if (len <= SL_INLINE_BYTES) {
    if (len) memcpy(tmp.inl, data, len);
  } else {
    tmp.buf = sl_buf_alloc(len);
    if (!tmp.buf) return sl__err(SL_ENOMEM, "out of memory allocating %zu bytes for '%s'", len, name);
    memcpy(sl_buf_data(tmp.buf), data, len);
  }
  sl_comp *c = slot_for(e, name);
  if (!c) {
    sl_buf_unref(tmp.buf);
    return SL_EINVAL;
  }
  *c = tmp;
  return 0;
}

int sl_elem_set_i64(sl_elem *e, const char *name, int64_t v) {
  return sl_elem_set_tensor(e, name, SL_INT64, 0, NULL, NULL, 0, &v);
}
int sl_elem_set_f64(sl_elem *e, const char *name, double v) {
  return sl_elem_set_tensor(e, name, SL_FLOAT64, 0, NULL, NULL, 0, &v);
}

const void *sl_comp_data(const sl_comp *c) {
  return c->buf ? (const unsigned char *)sl_buf_data(c->buf) + c->off : c->inl;
}

void *sl_comp_mutable_data(sl_comp *c) {
  if (!c->buf) return c->inl;
  if (atomic_load_explicit(&c->buf->refs, memory_order_acquire) > 1) {
    sl_buf *nb = sl_buf_alloc(c->size);
    if (!nb) return NULL;
    memcpy(sl_buf_data(nb), sl_comp_data(c), c->size);
    sl_buf_unref(c->buf);
    c->buf = nb;
    c->off = 0;
  }
  return (unsigned char *)sl_buf_data(c->buf) + c->off;
}

int64_t sl_comp_count(const sl_comp *c) {
  int64_t n = 1;
  for (int i = 0; i < c->rank; i++) n *= c->shape[i];
  return n;
}

int sl_comp_string(const void **data, size_t *len, const sl_comp *c, int64_t i) {
  if (c->dtype != SL_BYTES) return sl__err(SL_EINVAL, "component '%s' is not bytes", c->name);
  if (c->rank == 0) {
    if (i != 0) return sl__err(SL_EINVAL, "component '%s' holds one string; index %lld", c->name, (long long)i);
    *data = sl_comp_data(c);
    *len = c->size;
    return 0;
  }
  int64_t n = sl_comp_count(c);
  if (i < 0 || i >= n) return sl__err(SL_EINVAL, "string index %lld outside '%s' (%lld)", (long long)i, c->name, (long long)n);
  const uint64_t *o = sl_buf_data(c->offs);
  *data = (const unsigned char *)sl_comp_data(c) + o[i];
  *len = (size_t)(o[i + 1] - o[i]);
  return 0;
}

int sl_comp_get_i64(int64_t *out, const sl_comp *c) {
  const void *d = sl_comp_data(c);
  if (sl_comp_count(c) < 1) return sl__err(SL_EINVAL, "component '%s' is empty", c->name);
  switch (c->dtype) {
  case SL_UINT8: *out = *(const uint8_t *)d; return 0;
  case SL_INT32: { int32_t v; memcpy(&v, d, 4); *out = v; return 0; }
  case SL_INT64: memcpy(out, d, 8); return 0;
  case SL_FLOAT32: { float v; memcpy(&v, d, 4); *out = (int64_t)v; return 0; }
  case SL_FLOAT64: { double v; memcpy(&v, d, 8); *out = (int64_t)v; return 0; }
  default: return sl__err(SL_EINVAL, "component '%s' is bytes, not a number", c->name);
  }
}

int sl_comp_get_f64(double *out, const sl_comp *c) {
  const void *d = sl_comp_data(c);
  if (sl_comp_count(c) < 1) return sl__err(SL_EINVAL, "component '%s' is empty", c->name);
  switch (c->dtype) {
  case SL_UINT8: *out = *(const uint8_t *)d; return 0;
  case SL_INT32: { int32_t v; memcpy(&v, d, 4); *out = v; return 0; }
  case SL_INT64: { int64_t v; memcpy(&v, d, 8); *out = (double)v; return 0; }
  case SL_FLOAT32: { float v; memcpy(&v, d, 4); *out = v; return 0; }
  case SL_FLOAT64: memcpy(out, d, 8); return 0;
  default: return sl__err(SL_EINVAL, "component '%s' is bytes, not a number", c->name);
  }
}

/* Here, not in error.c beside the allocator, because the pool's idle blocks belong to the allocator being replaced:
 * they are returned to it first. */
void sl_set_allocator(const sl_allocator *a) {
  sl__bufpool_drain();
  sl__allocator_install(a);
}
