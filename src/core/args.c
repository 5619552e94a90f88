/* core/args.c: typed access to an op's "args" object for functions, and the function registry
 * (a mutex-protected table: registration is rare, lookup happens once per op when a pipeline is built). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/args_int.h"

const char *sl__json_type_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  default: return "null";
  }
}

static json_t *arg(const sl_args *a, const char *key) { return a && a->obj ? json_object_get(a->obj, key) : NULL; }

static int bad(const sl_args *a, const char *key, const char *want, json_t *v) {
  return sl__err(SL_EINVAL, "%s.%s: expected %s, found %s", a ? a->path : "args", key, want, sl__json_type_name(v));
}

int sl_args_int(const sl_args *a, const char *key, int64_t def, int64_t *out) {
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

int sl_args_double(const sl_args *a, const char *key, double def, double *out) {
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

int sl_args_bool(const sl_args *a, const char *key, bool def, bool *out) {
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

int sl_args_string(const sl_args *a, const char *key, const char *def, const char **out) {
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

int sl_args_doubles(const sl_args *a, const char *key, double *out, int max, int *n) {
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

/* ---- registry ----
 * Built-in functions live in static tables (no allocation, so they cannot go missing under memory pressure);
 * functions registered at run time live in a mutex-protected array and take precedence over built-ins. */
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static sl__fn *g_fns;
static size_t g_nfns, g_capfns;

static int reg_locked(const char *name, const sl_fn_def *def, void *payload) {
  for (size_t i = 0; i < g_nfns; i++)
    if (!strcmp(g_fns[i].name, name)) {
      g_fns[i].def = *def;
      g_fns[i].payload = payload;
      return 0;
    }
  if (g_nfns == g_capfns) {
    size_t cap = g_capfns ? g_capfns * 2 : 16;
    sl__fn *n = sl__realloc(g_fns, cap * sizeof *n);
    if (!n) return sl__oom("the function registry");
    g_fns = n;
    g_capfns = cap;
  }
  char *nm = sl__strdup(name);
  if (!nm) return sl__oom("a function name");
  g_fns[g_nfns++] = (sl__fn){nm, *def, payload};
  return 0;
}

int sl_fn_register(const char *name, const sl_fn_def *def, void *payload) {
  if (!name || !*name || !def || !def->call) return sl__err(SL_EINVAL, "sl_fn_register: a name and a call are required");
  if (def->version != SL_FN_DEF_VERSION)
    return sl__err(SL_EVERSION, "sl_fn_register(%s): sl_fn_def version %u, this library speaks %d", name, def->version,
                   SL_FN_DEF_VERSION);
  pthread_mutex_lock(&g_reg_mu);
  int rc = reg_locked(name, def, payload);
  pthread_mutex_unlock(&g_reg_mu);
  return rc;
}

int sl__fn_lookup(const char *name, sl__fn *out) {
  pthread_mutex_lock(&g_reg_mu);
  int rc = SL_ENOTFOUND;
  for (size_t i = 0; i < g_nfns; i++)
    if (!strcmp(g_fns[i].name, name)) {
      *out = g_fns[i];
      rc = 0;
      break;
    }
  pthread_mutex_unlock(&g_reg_mu);
  if (rc) {
    const sl_fn_def *d = sl__fn_builtin(name);
    if (d) {
      *out = (sl__fn){NULL, *d, NULL};
      rc = 0;
    }
  }
  return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

int sl_fn_list(const char ***names) {
  const char *const *builtin = sl__fn_builtin_names();
  size_t nb = 0;
  while (builtin[nb]) nb++;
  pthread_mutex_lock(&g_reg_mu);
  size_t n = g_nfns + nb, total = (n + 1) * sizeof(char *);
  for (size_t i = 0; i < g_nfns; i++) total += strlen(g_fns[i].name) + 1;
  const char **arr = sl__malloc(total);
  if (!arr) {
    pthread_mutex_unlock(&g_reg_mu);
    return sl__oom("the function list");
  }
  char *p = (char *)(arr + n + 1);
  size_t k = 0;
  for (size_t i = 0; i < g_nfns; i++) {
    size_t l = strlen(g_fns[i].name) + 1;
    memcpy(p, g_fns[i].name, l);
    arr[k++] = p;
    p += l;
  }
  pthread_mutex_unlock(&g_reg_mu);
  for (size_t i = 0; i < nb; i++) {
    bool dup = false;
    for (size_t j = 0; j < g_nfns && !dup; j++) dup = !strcmp(arr[j], builtin[i]);
    if (!dup) arr[k++] = builtin[i];
  }
  arr[k] = NULL;
  qsort(arr, k, sizeof *arr, cmp_str);
  *names = arr;
  return 0;
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
