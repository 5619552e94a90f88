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

static int bad(const sl_args *a, const char *key, const char *want, json_t *v) {
  return sl__err(SL_EINVAL, "%s.%s: expected %s, found %s", a ? a->path : "args", key, want, sl__json_type_name(v));
}

/* ---- the one family of getters: the schema's entry gives the default, the range and tunability ---- */
static _Thread_local sl__args_read_fn read_hook;
static _Thread_local void *read_payload;

void sl__args_read_hook(sl__args_read_fn fn, void *payload) {
  read_hook = fn;
  read_payload = payload;
}

/* The schema's entry for `key`, or an error: reading an arg the table does not list is the code's mistake (the
 * table is the only place an arg is stated). */
static int entry(const sl__arg **out, const sl_args *a, const char *key) {
  *out = a && a->schema ? sl__arg_find(a->schema, key) : NULL;
  if (!*out) return sl__err(SL_EINVAL, "%s.%s: read but not in the schema (internal)", a ? a->path : "args", key);
  return 0;
}

/* The value in force for `key`: the spec's, checked against the entry (type, range), or the entry's default
 * (parsed from its text into *owned, which the caller releases), or NULL when there is neither. */
static int value_of(json_t **out, json_t **owned, const sl_args *a, const sl__arg *e, const char *key) {
  *owned = NULL;
  json_t *v = arg(a, key);
  if (v) {
    int rc = sl__arg_check_value(a->path, e, v);
    if (rc) return rc;
  } else if (e->def) {
    v = *owned = sl__arg_default(a->schema, key);
    if (!v) return sl__oom("an arg's default");
  }
  if (read_hook) read_hook(a->path, key, v, v && !*owned, read_payload);
  *out = v;
  return 0;
}

int sl__get_int_or(int64_t *out, const sl_args *a, const char *key, int64_t computed) {
  const sl__arg *e;
  json_t *v, *own;
  int rc = entry(&e, a, key);
  if (rc || (rc = value_of(&v, &own, a, e, key))) return rc;
  if (v && !json_is_integer(v)) rc = bad(a, key, "an integer", v);
  else *out = v ? (int64_t)json_integer_value(v) : computed;
  json_decref(own);
  return rc;
}

int sl__get_int(int64_t *out, const sl_args *a, const char *key) { return sl__get_int_or(out, a, key, 0); }

int sl__get_num_or(double *out, const sl_args *a, const char *key, double computed) {
  const sl__arg *e;
  json_t *v, *own;
  int rc = entry(&e, a, key);
  if (rc || (rc = value_of(&v, &own, a, e, key))) return rc;
  if (v && !json_is_number(v)) rc = bad(a, key, "a number", v);
  else *out = v ? json_number_value(v) : computed;
  json_decref(own);
  return rc;
}

int sl__get_num(double *out, const sl_args *a, const char *key) { return sl__get_num_or(out, a, key, 0); }

int sl__get_bool_or(bool *out, const sl_args *a, const char *key, bool computed) {
  const sl__arg *e;
  json_t *v, *own;
  int rc = entry(&e, a, key);
  if (rc || (rc = value_of(&v, &own, a, e, key))) return rc;
  if (v && !json_is_boolean(v)) rc = bad(a, key, "true or false", v);
  else *out = v ? json_is_true(v) : computed;
  json_decref(own);
  return rc;
}

int sl__get_bool(bool *out, const sl_args *a, const char *key) { return sl__get_bool_or(out, a, key, false); }

int sl__get_str(const char **out, const sl_args *a, const char *key) {
  const sl__arg *e;
  json_t *v = NULL, *own = NULL;
  int rc = entry(&e, a, key);
  if (rc || (rc = value_of(&v, &own, a, e, key))) return rc;
  if (own) *out = e->def; /* the table's text outlives every pipeline */
  else if (v && !json_is_string(v)) rc = bad(a, key, "a string", v);
  else *out = v ? json_string_value(v) : NULL;
  json_decref(own);
  return rc;
}

int sl__get_str_or(const char **out, const sl_args *a, const char *key, const char *computed) {
  int rc = sl__get_str(out, a, key);
  if (!rc && !*out) *out = computed;
  return rc;
}

int sl__get_alts(sl__alts *out, const sl_args *a, const char *key) {
  const sl__arg *e;
  json_t *v, *own;
  int rc = entry(&e, a, key);
  if (rc || (rc = value_of(&v, &own, a, e, key))) return rc;
  if (!v || (!json_is_string(v) && !json_is_array(v))) rc = bad(a, key, "a component name or a list of them", v);
  else rc = sl__alts_from_json(out, v, a->path, key);
  json_decref(own);
  return rc;
}

int sl__get_nums(double *out, int *n, const sl_args *a, const char *key, int max) {
  const sl__arg *e;
  json_t *v, *own;
  int rc = entry(&e, a, key);
  if (rc || (rc = value_of(&v, &own, a, e, key))) return rc;
  *n = 0;
  if (v && !json_is_array(v)) rc = bad(a, key, "an array of numbers", v);
  else if (v && json_array_size(v) > (size_t)max)
    rc = sl__err(SL_EINVAL, "%s.%s: at most %d values, found %zu", a->path, key, max, json_array_size(v));
  for (size_t i = 0; !rc && v && i < json_array_size(v); i++) {
    json_t *x = json_array_get(v, i);
    if (!json_is_number(x))
      rc = sl__err(SL_EINVAL, "%s.%s[%zu]: expected a number, found %s", a->path, key, i, sl__json_type_name(x));
    else out[(*n)++] = json_number_value(x);
  }
  json_decref(own);
  return rc;
}

int sl__get_tunable_or(int64_t *out, bool *autotune, const sl_args *a, const char *key, int64_t computed) {
  const sl__arg *e;
  int rc = entry(&e, a, key);
  if (rc) return rc;
  json_t *v = a->obj ? json_object_get(a->obj, key) : NULL;
  *autotune = v && json_is_string(v) && (e->flags & SL__ARGF_TUNABLE);
  if (*autotune) {
    if ((rc = sl__arg_check_value(a->path, e, v))) return rc;
    if (read_hook) read_hook(a->path, key, v, true, read_payload);
    *out = e->def ? strtoll(e->def, NULL, 10) : computed;
    return 0;
  }
  if ((rc = sl__get_int_or(out, a, key, computed))) return rc;
  /* A tunable knob is always written back, so the normalised spec shows the value in force. */
  if (!v && (e->flags & SL__ARGF_TUNABLE) && a->obj && json_object_set_new(a->obj, key, json_integer(*out)))
    return sl__oom("a knob's value");
  return 0;
}

int sl__get_tunable(int64_t *out, bool *autotune, const sl_args *a, const char *key) {
  return sl__get_tunable_or(out, autotune, a, key, 0);
}

/* ---- the public getters (sl/fn.h): a function with an arg table reads its defaults from there; one registered
 * without a table (sl_fn_register) states its own `def` ---- */
static const sl__arg *listed(const sl_args *a, const char *key) {
  return a && a->schema ? sl__arg_find(a->schema, key) : NULL;
}

int sl_args_int(int64_t *out, const sl_args *a, const char *key, int64_t def) {
  if (listed(a, key)) return sl__get_int_or(out, a, key, def);
  json_t *v = arg(a, key);
  if (!v) {
    *out = def;
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
  if (listed(a, key)) return sl__get_num_or(out, a, key, def);
  json_t *v = arg(a, key);
  if (!v) {
    *out = def;
    return 0;
  }
  if (json_is_number(v)) {
    *out = json_number_value(v);
    return 0;
  }
  return bad(a, key, "a number", v);
}

int sl_args_bool(bool *out, const sl_args *a, const char *key, bool def) {
  if (listed(a, key)) return sl__get_bool_or(out, a, key, def);
  json_t *v = arg(a, key);
  if (!v) {
    *out = def;
    return 0;
  }
  if (json_is_boolean(v)) {
    *out = json_is_true(v);
    return 0;
  }
  return bad(a, key, "true or false", v);
}

int sl_args_string(const char **out, const sl_args *a, const char *key, const char *def) {
  if (listed(a, key)) {
    int rc = sl__get_str(out, a, key);
    if (!rc && !*out) *out = def;
    return rc;
  }
  json_t *v = arg(a, key);
  if (!v) {
    *out = def;
    return 0;
  }
  if (json_is_string(v)) {
    *out = json_string_value(v);
    return 0;
  }
  return bad(a, key, "a string", v);
}

int sl_args_doubles(double *out, int *n, const sl_args *a, const char *key, int max) {
  if (listed(a, key)) return sl__get_nums(out, n, a, key, max);
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
