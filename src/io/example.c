/* io/example.c: tf.Example building and protobuf (de)serialisation through protobuf-c, with allocations routed
 * through sluice's allocator (so fault injection reaches them). */
#include <string.h>

#include "io/io_int.h"
#include "example.pb-c.h"
#include "io/example_int.h"

/* protobuf-c returns NULL both for invalid input and for a failed allocation: this flag tells them apart. */
static _Thread_local bool tl_pb_oom;
static void *pa_alloc(void *d, size_t n) {
  (void)d;
  void *p = sl__malloc(n);
  if (!p) tl_pb_oom = true;
  return p;
}
static void pa_free(void *d, void *p) { (void)d; sl__free(p); }
ProtobufCAllocator sl__pb_allocator = {pa_alloc, pa_free, NULL};

typedef struct {
  char *key;
  Sluice__Tf__Feature feat;
  union {
    Sluice__Tf__BytesList b;
    Sluice__Tf__FloatList f;
    Sluice__Tf__Int64List i;
  } list;
  Sluice__Tf__Features__FeatureEntry entry;
} ex_feature;

struct sl_example {
  ex_feature *f;
  size_t n, cap;
};

sl_example *sl_example_new(void) {
  sl_example *ex = sl__calloc(1, sizeof *ex);
  if (!ex) sl__oom("an example");
  return ex;
}

static void feature_dispose(ex_feature *f) {
  sl__free(f->key);
  switch (f->feat.kind_case) {
  case SLUICE__TF__FEATURE__KIND_BYTES_LIST:
    for (size_t i = 0; i < f->list.b.n_value; i++) sl__free(f->list.b.value[i].data);
    sl__free(f->list.b.value);
    break;
  case SLUICE__TF__FEATURE__KIND_FLOAT_LIST: sl__free(f->list.f.value); break;
  case SLUICE__TF__FEATURE__KIND_INT64_LIST: sl__free(f->list.i.value); break;
  default: break;
  }
}

void sl_example_free(sl_example *ex) {
  if (!ex) return;
  for (size_t i = 0; i < ex->n; i++) feature_dispose(&ex->f[i]);
  sl__free(ex->f);
  sl__free(ex);
}

static ex_feature *add_feature(sl_example *ex, const char *key) {
  for (size_t i = 0; i < ex->n; i++)
    if (!strcmp(ex->f[i].key, key)) {
      sl__err(SL_EINVAL, "example: feature '%s' added twice", key);
      return NULL;
    }
  if (ex->n == ex->cap) {
    size_t cap = ex->cap ? ex->cap * 2 : 8;
    ex_feature *nf = sl__realloc(ex->f, cap * sizeof *nf);
    if (!nf) {
      sl__oom("an example feature");
      return NULL;
    }
    ex->f = nf;
    ex->cap = cap;
  }
  ex_feature *f = &ex->f[ex->n];
  memset(f, 0, sizeof *f);
  f->key = sl__strdup(key);
  if (!f->key) {
    sl__oom("an example feature");
    return NULL;
  }
  sluice__tf__feature__init(&f->feat);
  ex->n++;
  return f;
}

int sl_example_add_bytes(sl_example *ex, const char *key, const void *const *values, const size_t *lens, size_t n) {
  ex_feature *f = add_feature(ex, key);
  if (!f) return sl_error_code();
  sluice__tf__bytes_list__init(&f->list.b);
  f->feat.kind_case = SLUICE__TF__FEATURE__KIND_BYTES_LIST;
  f->list.b.value = sl__calloc(n ? n : 1, sizeof(ProtobufCBinaryData));
  if (!f->list.b.value) return sl__oom("example bytes");
  for (size_t i = 0; i < n; i++) {
    f->list.b.value[i].data = sl__malloc(lens[i]);
    if (!f->list.b.value[i].data) return sl__oom("example bytes");
    if (lens[i]) memcpy(f->list.b.value[i].data, values[i], lens[i]);
    f->list.b.value[i].len = lens[i];
    f->list.b.n_value = i + 1;
  }
  return 0;
}

int sl_example_add_int64(sl_example *ex, const char *key, const int64_t *values, size_t n) {
  ex_feature *f = add_feature(ex, key);
  if (!f) return sl_error_code();
  sluice__tf__int64_list__init(&f->list.i);
  f->feat.kind_case = SLUICE__TF__FEATURE__KIND_INT64_LIST;
  f->list.i.value = sl__mallocarray(n ? n : 1, sizeof(int64_t));
  if (!f->list.i.value) return sl__oom("example int64s");
  if (n) memcpy(f->list.i.value, values, n * sizeof(int64_t));
  f->list.i.n_value = n;
  return 0;
}

int sl_example_add_float(sl_example *ex, const char *key, const float *values, size_t n) {
  ex_feature *f = add_feature(ex, key);
  if (!f) return sl_error_code();
  sluice__tf__float_list__init(&f->list.f);
  f->feat.kind_case = SLUICE__TF__FEATURE__KIND_FLOAT_LIST;
  f->list.f.value = sl__mallocarray(n ? n : 1, sizeof(float));
  if (!f->list.f.value) return sl__oom("example floats");
  if (n) memcpy(f->list.f.value, values, n * sizeof(float));
  f->list.f.n_value = n;
  return 0;
}

int sl_example_serialize(sl_buf **out, const sl_example *ex) {
  *out = NULL;
  Sluice__Tf__Features__FeatureEntry **entries = sl__calloc(ex->n ? ex->n : 1, sizeof *entries);
  if (!entries) return sl__oom("an example");
  for (size_t i = 0; i < ex->n; i++) {
    ex_feature *f = &ex->f[i];
    sluice__tf__features__feature_entry__init(&f->entry);
    f->entry.key = f->key;
    f->entry.value = &f->feat;
    if (f->feat.kind_case == SLUICE__TF__FEATURE__KIND_BYTES_LIST) f->feat.bytes_list = &f->list.b;
    else if (f->feat.kind_case == SLUICE__TF__FEATURE__KIND_FLOAT_LIST) f->feat.float_list = &f->list.f;
    else f->feat.int64_list = &f->list.i;
    entries[i] = &f->entry;
  }
  Sluice__Tf__Features feats = SLUICE__TF__FEATURES__INIT;
  feats.n_feature = ex->n;
  feats.feature = entries;
  Sluice__Tf__Example msg = SLUICE__TF__EXAMPLE__INIT;
  msg.features = &feats;
  size_t sz = sluice__tf__example__get_packed_size(&msg);
  sl_buf *b = sl_buf_alloc(sz);
  if (!b) {
    sl__free(entries);
    return sl__oom("a packed tf.Example");
  }
  sluice__tf__example__pack(&msg, sl_buf_data(b));
  sl__free(entries);
  *out = b;
  return 0;
}

int sl__example_unpack(const void *data, size_t len, Sluice__Tf__Example **out) {
  tl_pb_oom = false;
  *out = sluice__tf__example__unpack(&sl__pb_allocator, len, data);
  if (!*out && tl_pb_oom) return sl__err(SL_ENOMEM, "out of memory decoding a tf.Example (%zu bytes)", len);
  if (!*out) return sl__err(SL_ECORRUPT, "not a valid tf.Example protobuf (%zu bytes)", len);
  return 0;
}

static void taken_release(void *data, void *payload) {
  (void)payload;
  sl__free(data);
}

sl_buf *sl__example_take_bytes(Sluice__Tf__BytesList *bl, size_t i) {
  sl_buf *b = sl_buf_wrap(bl->value[i].data, bl->value[i].len, taken_release, NULL);
  if (b) bl->value[i].data = NULL, bl->value[i].len = 0; /* free_unpacked skips a NULL value */
  return b;
}

void sl__example_free_unpacked(Sluice__Tf__Example *ex) {
  if (ex) sluice__tf__example__free_unpacked(ex, &sl__pb_allocator);
}
