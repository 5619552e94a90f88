/* prov/store/mlmd_value.c: property values as the ml-metadata library stores them. A STRUCT is
 * "mlmd-struct::" + base64 of a serialized google.protobuf.Struct in `string_value`; a PROTO is base64 of the
 * serialized google.protobuf.Any in `proto_value`. sluice's API keeps JSON text and raw bytes. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "prov/store/store_int.h"

static const char PREFIX[] = "mlmd-struct::";
#define PREFIX_LEN (sizeof PREFIX - 1)
#define MAX_DEPTH 64 /* nesting a Struct may have; deeper is refused rather than recursed into */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Standard base64 with padding, as the library writes it; `pre` is copied in front. NUL-terminated. */
static char *b64_encode(const char *pre, const uint8_t *b, size_t n, size_t *outlen) {
  size_t lp = strlen(pre), m = lp + 4 * ((n + 2) / 3);
  char *o = sl__malloc(m + 1);
  if (!o) return NULL;
  memcpy(o, pre, lp);
  char *w = o + lp;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
    *w++ = B64[v >> 18 & 63];
    *w++ = B64[v >> 12 & 63];
    *w++ = i + 1 < n ? B64[v >> 6 & 63] : '=';
    *w++ = i + 2 < n ? B64[v & 63] : '=';
  }
  *w = 0;
  if (outlen) *outlen = m;
  return o;
}

static int b64_val(char c) {
  const char *p = c ? strchr(B64, c) : NULL;
  return p ? (int)(p - B64) : -1;
}

/* Strict: length a multiple of 4, padding only at the end. 1 when `s` is not base64 (no error set: the caller
 * then keeps the value as it is), SL_ENOMEM. */
static int b64_decode(uint8_t **out, size_t *outlen, const char *s, size_t n) {
  *out = NULL;
  if (n % 4) return 1;
  size_t pad = n && s[n - 1] == '=' ? (n > 1 && s[n - 2] == '=' ? 2 : 1) : 0;
  uint8_t *o = sl__malloc(n / 4 * 3 + 1);
  if (!o) return sl__oom("base64 value");
  size_t w = 0;
  for (size_t i = 0; i < n; i += 4) {
    int v[4];
    for (int k = 0; k < 4; k++) {
      bool padded = i + (size_t)k >= n - pad;
      v[k] = padded ? 0 : b64_val(s[i + (size_t)k]);
      if (v[k] < 0) {
        sl__free(o);
        return 1;
      }
    }
    uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    size_t keep = i + 4 < n ? 3 : 3 - pad;
    for (size_t k = 0; k < keep; k++) o[w++] = (uint8_t)(x >> (16 - 8 * k));
  }
  *out = o;
  *outlen = w;
  return 0;
}

/* ---- protobuf wire format, only what google.protobuf.Struct/Value/ListValue use. */

typedef struct {
  uint8_t *b;
  size_t n, cap;
} buf;

static int put(buf *o, const void *p, size_t n) {
  if (o->n + n > o->cap) {
    size_t c = o->cap ? o->cap : 64;
    while (c < o->n + n) c *= 2;
    uint8_t *nb = sl__realloc(o->b, c);
    if (!nb) return sl__oom("STRUCT property");
    o->b = nb;
    o->cap = c;
  }
  memcpy(o->b + o->n, p, n);
  o->n += n;
  return 0;
}

static int put_varint(buf *o, uint64_t v) {
  uint8_t t[10];
  size_t k = 0;
  do {
    t[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  return put(o, t, k);
}

static int put_len(buf *o, unsigned field, const void *p, size_t n) {
  int rc = put_varint(o, field << 3 | 2);
  if (!rc) rc = put_varint(o, n);
  return rc ? rc : put(o, p, n);
}

static int enc_struct(buf *o, json_t *obj, int depth);
static int enc_list(buf *o, json_t *arr, int depth);

/* One google.protobuf.Value: null 1, number 2, string 3, bool 4, struct 5, list 6. */
static int enc_value(buf *o, json_t *v, int depth) {
  if (depth > MAX_DEPTH) return sl__err(SL_EINVAL, "STRUCT property: nested deeper than %d", MAX_DEPTH);
  switch (json_typeof(v)) {
  case JSON_NULL: return put_varint(o, 1 << 3 | 0) || put_varint(o, 0) ? SL_ENOMEM : 0;
  case JSON_TRUE:
  case JSON_FALSE: return put_varint(o, 4 << 3 | 0) || put_varint(o, json_is_true(v)) ? SL_ENOMEM : 0;
  case JSON_INTEGER:
  case JSON_REAL: {
    double d = json_number_value(v);
    uint64_t u;
    memcpy(&u, &d, 8);
    uint8_t le[8];
    for (int k = 0; k < 8; k++) le[k] = (uint8_t)(u >> (8 * k));
    return put_varint(o, 2 << 3 | 1) || put(o, le, 8) ? SL_ENOMEM : 0;
  }
  case JSON_STRING: return put_len(o, 3, json_string_value(v), json_string_length(v));
  case JSON_OBJECT:
  case JSON_ARRAY: {
    buf in = {0};
    int rc = json_is_object(v) ? enc_struct(&in, v, depth + 1) : enc_list(&in, v, depth + 1);
    if (!rc) rc = put_len(o, json_is_object(v) ? 5 : 6, in.b ? in.b : (uint8_t *)"", in.n);
    sl__free(in.b);
    return rc;
  }
  }
  return sl__err(SL_EINVAL, "STRUCT property: unknown JSON value");
}

/* Struct: map<string, Value> fields = 1, each entry a message {1: key, 2: value}. */
static int enc_struct(buf *o, json_t *obj, int depth) {
  const char *k;
  json_t *v;
  json_object_foreach(obj, k, v) {
    buf e = {0}, val = {0};
    int rc = put_len(&e, 1, k, strlen(k));
    if (!rc) rc = enc_value(&val, v, depth);
    if (!rc) rc = put_len(&e, 2, val.b ? val.b : (uint8_t *)"", val.n);
    if (!rc) rc = put_len(o, 1, e.b, e.n);
    sl__free(e.b);
    sl__free(val.b);
    if (rc) return rc;
  }
  return 0;
}

/* ListValue: repeated Value values = 1. */
static int enc_list(buf *o, json_t *arr, int depth) {
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    buf val = {0};
    int rc = enc_value(&val, v, depth);
    if (!rc) rc = put_len(o, 1, val.b ? val.b : (uint8_t *)"", val.n);
    sl__free(val.b);
    if (rc) return rc;
  }
  return 0;
}

int sl__mlmd_struct_encode(char **out, const char *json, const char *name) {
  *out = NULL;
  json_error_t je;
  json_t *root = json_loads(json, JSON_DECODE_ANY, &je);
  if (!root) return sl__err(SL_EINVAL, "STRUCT property '%s': not JSON (%s)", name, je.text);
  if (!json_is_object(root)) {
    json_decref(root);
    return sl__err(SL_EINVAL, "STRUCT property '%s': a STRUCT is a JSON object", name);
  }
  buf b = {0};
  int rc = enc_struct(&b, root, 0);
  json_decref(root);
  if (!rc && !(*out = b64_encode(PREFIX, b.b ? b.b : (uint8_t *)"", b.n, NULL))) rc = sl__oom("STRUCT property");
  sl__free(b.b);
  return rc;
}

/* ---- decoding: every read is bounds-checked; a malformed value gives 1 (it then stays a STRING). */

typedef struct {
  const uint8_t *p, *end;
} rd;

static int get_varint(rd *r, uint64_t *v) {
  *v = 0;
  for (int s = 0; s < 64; s += 7) {
    if (r->p >= r->end) return -1;
    uint8_t c = *r->p++;
    *v |= (uint64_t)(c & 0x7f) << s;
    if (!(c & 0x80)) return 0;
  }
  return -1;
}

/* Next field: its number, wire type, and for wire type 2 the sub-reader over its bytes. */
static int get_field(rd *r, unsigned *field, unsigned *wt, rd *sub, uint64_t *num) {
  uint64_t tag;
  if (get_varint(r, &tag) || tag >> 3 == 0 || tag >> 3 > 536870911u) return -1;
  *field = (unsigned)(tag >> 3);
  *wt = (unsigned)(tag & 7);
  switch (*wt) {
  case 0: return get_varint(r, num);
  case 1:
    if (r->end - r->p < 8) return -1;
    *num = 0;
    for (int k = 0; k < 8; k++) *num |= (uint64_t)r->p[k] << (8 * k);
    r->p += 8;
    return 0;
  case 2: {
    uint64_t n;
    if (get_varint(r, &n) || n > (uint64_t)(r->end - r->p)) return -1;
    sub->p = r->p;
    sub->end = r->p + n;
    r->p += n;
    return 0;
  }
  case 5:
    if (r->end - r->p < 4) return -1;
    r->p += 4;
    return 0;
  default: return -1;
  }
}

static json_t *dec_struct(rd r, int depth);
static json_t *dec_list(rd r, int depth);

static json_t *dec_value(rd r, int depth) {
  if (depth > MAX_DEPTH) return NULL;
  json_t *v = NULL;
  while (r.p < r.end) {
    unsigned f, wt;
    rd sub = {0};
    uint64_t num = 0;
    if (get_field(&r, &f, &wt, &sub, &num)) goto bad;
    json_t *nv = NULL;
    if (f == 1 && wt == 0) nv = json_null();
    else if (f == 2 && wt == 1) {
      double d;
      memcpy(&d, &num, 8);
      /* An integral number within the exact range reads back as the integer it was written from. */
      nv = isfinite(d) && d == floor(d) && fabs(d) < 9007199254740992.0 ? json_integer((json_int_t)d) : json_real(d);
    } else if (f == 3 && wt == 2) nv = json_stringn((const char *)sub.p, (size_t)(sub.end - sub.p));
    else if (f == 4 && wt == 0) nv = json_boolean(num != 0);
    else if (f == 5 && wt == 2) nv = dec_struct(sub, depth + 1);
    else if (f == 6 && wt == 2) nv = dec_list(sub, depth + 1);
    else continue; /* an unknown field is skipped, as protobuf does */
    if (!nv) goto bad;
    json_decref(v); /* oneof: the last one wins */
    v = nv;
  }
  return v ? v : json_null();
bad:
  json_decref(v);
  return NULL;
}

static json_t *dec_struct(rd r, int depth) {
  json_t *o = json_object();
  if (!o) return NULL;
  while (r.p < r.end) {
    unsigned f, wt;
    rd e = {0};
    uint64_t num;
    if (get_field(&r, &f, &wt, &e, &num)) goto bad;
    if (f != 1 || wt != 2) continue;
    rd key = {0}, val = {0};
    bool have_key = false;
    while (e.p < e.end) {
      rd sub = {0};
      if (get_field(&e, &f, &wt, &sub, &num)) goto bad;
      if (f == 1 && wt == 2) key = sub, have_key = true;
      else if (f == 2 && wt == 2) val = sub;
    }
    char *k = sl__malloc((size_t)(key.end - key.p) + 1);
    if (!k) goto bad;
    if (have_key) memcpy(k, key.p, (size_t)(key.end - key.p));
    k[have_key ? key.end - key.p : 0] = 0;
    json_t *v = val.p ? dec_value(val, depth) : json_null();
    int rc = v ? json_object_set_new(o, k, v) : -1; /* jansson refuses a key that is not UTF-8: bad */
    sl__free(k);
    if (rc) goto bad;
  }
  return o;
bad:
  json_decref(o);
  return NULL;
}

static json_t *dec_list(rd r, int depth) {
  json_t *a = json_array();
  if (!a) return NULL;
  while (r.p < r.end) {
    unsigned f, wt;
    rd sub = {0};
    uint64_t num;
    if (get_field(&r, &f, &wt, &sub, &num)) goto bad;
    if (f != 1 || wt != 2) continue;
    json_t *v = dec_value(sub, depth);
    if (!v || json_array_append_new(a, v)) goto bad;
  }
  return a;
bad:
  json_decref(a);
  return NULL;
}

int sl__mlmd_struct_decode(char **json_out, const char *s) {
  *json_out = NULL;
  if (!s || strncmp(s, PREFIX, PREFIX_LEN)) return 1;
  uint8_t *b;
  size_t n;
  int rc = b64_decode(&b, &n, s + PREFIX_LEN, strlen(s + PREFIX_LEN));
  if (rc) return rc;
  (void)sl__json_oom_take();
  json_t *o = dec_struct((rd){b, b + n}, 0);
  sl__free(b);
  if (!o) return sl__json_oom_take() ? sl__oom("STRUCT property") : 1;
  char *t = json_dumps(o, JSON_ENCODE_ANY);
  json_decref(o);
  if (!t) return sl__oom("STRUCT property");
  *json_out = sl__strdup(t);
  sl__free(t);
  return *json_out ? 0 : sl__oom("STRUCT property");
}

int sl__mlmd_proto_encode(char **out, size_t *outlen, const void *bytes, size_t len) {
  *out = b64_encode("", bytes ? bytes : "", bytes ? len : 0, outlen);
  return *out ? 0 : sl__oom("PROTO property");
}

int sl__mlmd_proto_decode(void **out, size_t *outlen, const void *b64, size_t len) {
  uint8_t *o;
  int rc = b64_decode(&o, outlen, b64, len);
  *out = o;
  return rc;
}

/* A serialized google.protobuf.Any: well-formed fields, type_url (1) a non-empty string. */
static bool is_any(const void *bytes, size_t len) {
  if (!bytes) return false;
  rd r = {bytes, (const uint8_t *)bytes + len};
  bool url = false;
  while (r.p < r.end) {
    unsigned f, wt;
    rd sub = {0};
    uint64_t num;
    if (get_field(&r, &f, &wt, &sub, &num)) return false;
    if (f == 1) url = wt == 2 && sub.end > sub.p;
  }
  return url;
}

int sl__mlmd_value_store(sl_prov_value *enc, char **tmp, const sl_prov_value *v, const char *name, bool b64) {
  *enc = *v;
  *tmp = NULL;
  if (v->type == SL_PROV_T_STRUCT) {
    if (!v->s) return sl__err(SL_EINVAL, "property '%s': string value is NULL", name);
    int rc = sl__mlmd_struct_encode(tmp, v->s, name);
    enc->s = *tmp;
    return rc;
  }
  if (v->type == SL_PROV_T_PROTO) {
    if (!is_any(v->bytes, v->len))
      return sl__err(SL_EINVAL, "PROTO property '%s': not a serialized google.protobuf.Any with a type_url (the "
                                "ml-metadata library refuses to read a node holding one)",
                     name);
    if (!b64) return 0;
    size_t n;
    int rc = sl__mlmd_proto_encode(tmp, &n, v->bytes, v->len);
    enc->bytes = *tmp;
    enc->len = n;
    return rc;
  }
  return 0;
}
