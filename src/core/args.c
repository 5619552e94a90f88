/* core/args.c: typed access to an op's "args" object for functions (the read-only sl_args view), and the
 * small seeded generator functions use. Depends on nothing of ours outside core; the function registry is in
 * fns/fn_registry.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/args_int.h"

static json_t *arg(const sl_args *a, const char *key) {
  if (a && a->asked && !a->asked->lost && json_object_set_new(a->asked->keys, key, json_true())) a->asked->lost = true;
  return a && a->obj ? json_object_get(a->obj, key) : NULL;
}

/* The schema's default text for an absent arg (the schema wins over the caller's `def`, so the documented
 * default is the one in force), or NULL. */
static const char *sdef(const sl_args *a, const char *key) {
  const sl__arg *s = a && a->schema ? sl__arg_find(a->schema, key) : NULL;
  return s ? s->def : NULL;
}

static int bad(const sl_args *a, const char *key, const char *want, json_t *v) {
  return sl__err(SL_EINVAL, "%s.%s: expected %s, found %s", a ? a->path : "args", key, want, sl__json_type_name(v));
}

int sl_args_int(int64_t *out, const sl_args *a, const char *key, int64_t def) {
  json_t *v = arg(a, key);
  if (!v) {
    const char *d = sdef(a, key);
    *out = d ? strtoll(d, NULL, 10) : def;
    return 0;
  }
  if (json_is_integer(v)) {
    *out = json_integer_value(v);
    return 0;
  }
  if (json_is_real(v) && json_real_value(v) == (double)(int64_t)json_real_value(v)) {
    *out = (int64_t)json_real_value(v);
    return 0;
  }
  return bad(a, key, "an integer", v);
}

int sl_args_double(double *out, const sl_args *a, const char *key, double def) {
  json_t *v = arg(a, key);
  if (!v) {
    const char *d = sdef(a, key);
    *out = d ? strtod(d, NULL) : def;
    return 0;
  }
  if (json_is_number(v)) {
    *out = json_number_value(v);
    return 0;
  }
  return bad(a, key, "a number", v);
}

int sl_args_bool(bool *out, const sl_args *a, const char *key, bool def) {
  json_t *v = arg(a, key);
  if (!v) {
    const char *d = sdef(a, key);
    *out = d ? !strcmp(d, "true") : def;
    return 0;
  }
  if (json_is_boolean(v)) {
    *out = json_is_true(v);
    return 0;
  }
  return bad(a, key, "true or false", v);
}

int sl_args_string(const char **out, const sl_args *a, const char *key, const char *def) {
  json_t *v = arg(a, key);
  if (!v) {
    const char *d = sdef(a, key);
    *out = d ? d : def;
    return 0;
  }
  if (json_is_string(v)) {
    *out = json_string_value(v);
    return 0;
  }
  return bad(a, key, "a string", v);
}

int sl_args_doubles(double *out, int *n, const sl_args *a, const char *key, int max) {
  json_t *v = arg(a, key);
  *n = 0;
  if (!v) return 0;
  if (!json_is_array(v)) return bad(a, key, "an array of numbers", v);
  size_t len = json_array_size(v);
  if (len > (size_t)max) return sl__err(SL_EINVAL, "%s.%s: at most %d values, found %zu", a->path, key, max, len);
  for (size_t i = 0; i < len; i++) {
    json_t *x = json_array_get(v, i);
    if (!json_is_number(x))
      return sl__err(SL_EINVAL, "%s.%s[%zu]: expected a number, found %s", a->path, key, i, sl__json_type_name(x));
    out[i] = json_number_value(x);
  }
  *n = (int)len;
  return 0;
}

bool sl_args_has(const sl_args *a, const char *key) { return arg(a, key) != NULL; }
const char *sl_args_path(const sl_args *a) { return a ? a->path : "args"; }

char *sl_args_json(const sl_args *a, const char *key) {
  json_t *v = arg(a, key);
  if (!v) return NULL;
  char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  if (!s) return NULL;
  char *r = sl__strdup(s);
  sl__free(s);
  return r;
}

/* ---- rng ---- */
static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
void sl_rng_seed(sl_rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) {
    seed += 0x9e3779b97f4a7c15ull;
    r->s[i] = sl__mix64(seed);
  }
}
uint64_t sl_rng_u64(sl_rng *r) {
  uint64_t *s = r->s;
  uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return res;
}
double sl_rng_uniform(sl_rng *r) { return (double)(sl_rng_u64(r) >> 11) * 0x1.0p-53; }
/* Box-Muller, the uniform kept off 0 for the log. */
double sl__rng_normal(sl_rng *r) {
  double u = sl_rng_uniform(r), v = sl_rng_uniform(r);
  if (u < 1e-300) u = 1e-300;
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
