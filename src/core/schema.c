/* core/schema.c: checking a spec object against an op's or function's arg table (unknown names with the nearest
 * valid one, types, ranges, required args), the tables' defaults, and the element-structure helpers pipeline
 * validation uses. The tables themselves live beside each op and function. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/args_int.h"
#include "core/schema_int.h"

/* "an object", "a string", ...: how messages name a JSON value's type (args.c and the schema checks). */
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

const sl__arg *sl__arg_find(const sl__arg *schema, const char *name) {
  for (const sl__arg *a = schema; a && a->name; a++)
    if (!strcmp(a->name, name)) return a;
  return NULL;
}

int sl__edit_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > 62 || m > 62) return 255;
  unsigned char d[64][64];
  for (size_t i = 0; i <= n; i++) d[i][0] = (unsigned char)i;
  for (size_t j = 0; j <= m; j++) d[0][j] = (unsigned char)j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      int cost = a[i - 1] != b[j - 1];
      int v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1; /* a transposition ("delimeter" is two edits without it) */
      d[i][j] = (unsigned char)v;
    }
  return d[n][m];
}

/* Close enough to be a typo: one edit in a short name, up to a third of a long one. */
static bool near(const char *name, int d) {
  size_t len = strlen(name);
  int max = len <= 4 ? 1 : len <= 9 ? 2 : (int)(len / 3);
  return d <= max;
}

const char *sl__name_suggest(const char *const *names, size_t n, const char *name) {
  const char *best = NULL;
  int bd = 256;
  for (size_t i = 0; i < n && names[i]; i++) {
    int d = sl__edit_distance(name, names[i]);
    if (d < bd) {
      bd = d;
      best = names[i];
    }
  }
  return best && near(name, bd) ? best : NULL;
}

const char *sl__arg_suggest(const sl__arg *schema, const char *name) {
  const char *best = NULL;
  int bd = 256;
  for (const sl__arg *a = schema; a && a->name; a++) {
    int d = sl__edit_distance(name, a->name);
    if (d < bd) {
      bd = d;
      best = a->name;
    }
  }
  return best && near(name, bd) ? best : NULL;
}

static const char *num(char *b, size_t n, double v) {
  if (v == floor(v) && fabs(v) < 1e15) snprintf(b, n, "%.0f", v);
  else snprintf(b, n, "%g", v);
  return b;
}

const char *sl__arg_range(char *b, size_t n, const sl__arg *a) {
  char x[32], y[32];
  bool lo = a->flags & SL__ARGF_LO, hi = a->flags & SL__ARGF_HI;
  if (lo && hi) snprintf(b, n, "%s..%s", num(x, sizeof x, a->lo), num(y, sizeof y, a->hi));
  else if (lo) snprintf(b, n, ">= %s", num(x, sizeof x, a->lo));
  else if (hi) snprintf(b, n, "<= %s", num(y, sizeof y, a->hi));
  else if (b && n) b[0] = 0;
  return b;
}

const char *sl__arg_type_name(const sl__arg *a) {
  switch (a->type) {
  case SL__ARG_INT: return a->flags & SL__ARGF_TUNABLE ? "integer or \"autotune\"" : a->flags & SL__ARGF_AUTO_STR ? "integer or \"auto\"" : "integer";
  case SL__ARG_NUM: return "number";
  case SL__ARG_BOOL: return "boolean";
  case SL__ARG_STR: return "string";
  case SL__ARG_ENUM: return "string";
  case SL__ARG_COMP: return "component name";
  case SL__ARG_NUMS: return "array of numbers";
  case SL__ARG_INTS: return "array of integers";
  case SL__ARG_STRS: return "array of strings";
  case SL__ARG_GLOB: return "string or array of strings";
  case SL__ARG_OBJECT: return "object";
  case SL__ARG_ARRAY: return "array";
  case SL__ARG_CHAIN: return "array of ops";
  case SL__ARG_SCALAR: return "number or string";
  case SL__ARG_COMP_ALT: return "component name(s)";
  }
  return "?";
}

static int known_list(sl__str *b, const sl__arg *schema) {
  int rc = 0;
  for (const sl__arg *a = schema; a && a->name && !rc; a++) rc = sl__str_printf(b, "%s%s", a == schema ? "" : ", ", a->name);
  return rc ? rc : b->s ? 0 : sl__str_printf(b, "none");
}

static int unknown(const sl__arg *schema, const char *path, const char *key, const char *what, const char *word) {
  sl__str list = {0};
  if (known_list(&list, schema)) return sl__oom("a message");
  const char *near_name = sl__arg_suggest(schema, key);
  int rc;
  if (near_name)
    rc = sl__err(SL_EINVAL, "%s.%s: unknown %s for %s; did you mean '%s'? (known: %s)", path, key, word, what,
                 near_name, list.s);
  else
    rc = sl__err(SL_EINVAL, "%s.%s: unknown %s for %s (known: %s)", path, key, word, what, list.s);
  sl__str_dispose(&list);
  return rc;
}

int sl__args_check_asked(const sl_args *a, const char *what) {
  if (!a->obj || !a->asked || a->asked->lost) return 0;
  size_t n = json_object_size(a->asked->keys);
  sl__arg *table = sl__calloc(n + 1, sizeof *table); /* the names asked for, as an arg table for the message */
  if (!table) return sl__oom("an args check");
  size_t i = 0;
  const char *k;
  json_t *v;
  json_object_foreach(a->asked->keys, k, v) table[i++].name = k;
  int rc = 0;
  json_object_foreach(a->obj, k, v) {
    if (!json_object_get(a->asked->keys, k)) {
      rc = unknown(table, a->path, k, what, "arg");
      break;
    }
  }
  sl__free(table);
  return rc;
}

/* An integer is said as written (2^63-1 was "9.22337e+18"), a number as %g. */
static int out_of_range(const char *path, const sl__arg *a, const json_t *v) {
  char r[80], x[32];
  if (json_is_integer(v)) snprintf(x, sizeof x, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
  else num(x, sizeof x, json_number_value(v));
  return sl__err(SL_EINVAL, "%s.%s: %s is out of range (valid: %s)", path, a->name, x, sl__arg_range(r, sizeof r, a));
}

static bool in_range(const sl__arg *a, double v) {
  return !((a->flags & SL__ARGF_LO) && v < a->lo) && !((a->flags & SL__ARGF_HI) && v > a->hi);
}

static int check_enum(const char *path, const sl__arg *a, const char *s) {
  const char *p = a->values;
  const char *names[32] = {0};
  char buf[512];
  size_t n = 0, len = strlen(a->values);
  if (len >= sizeof buf) len = sizeof buf - 1;
  memcpy(buf, p, len);
  buf[len] = 0;
  char *save = NULL;
  for (char *t = strtok_r(buf, "|", &save); t && n < 32; t = strtok_r(NULL, "|", &save)) {
    if (!strcmp(t, s)) return 0;
    names[n++] = t;
  }
  sl__str list = {0};
  for (size_t i = 0; i < n; i++) sl__str_printf(&list, "%s\"%s\"", i ? ", " : "", names[i]);
  const char *near_name = sl__name_suggest(names, n, s);
  int rc;
  if (near_name)
    rc = sl__err(SL_EINVAL, "%s.%s: \"%s\" is not valid; did you mean \"%s\"? (valid: %s)", path, a->name, s, near_name,
                 list.s ? list.s : "");
  else
    rc = sl__err(SL_EINVAL, "%s.%s: \"%s\" is not valid (valid: %s)", path, a->name, s, list.s ? list.s : "");
  sl__str_dispose(&list);
  return rc;
}

static const char *article(const char *noun) { return strchr("aeiou", noun[0]) ? "an" : "a"; }

static int wrong_type(const char *path, const sl__arg *a, json_t *v) {
  const char *t = sl__arg_type_name(a);
  return sl__err(SL_EINVAL, "%s.%s: expected %s %s, found %s", path, a->name, article(t), t, sl__json_type_name(v));
}

static int check_array(const char *path, const sl__arg *a, json_t *v, int elem) {
  if (!json_is_array(v)) return wrong_type(path, a, v);
  size_t len = json_array_size(v);
  if (!in_range(a, (double)len)) {
    char r[80];
    return sl__err(SL_EINVAL, "%s.%s: %zu values (valid length: %s)", path, a->name, len, sl__arg_range(r, sizeof r, a));
  }
  for (size_t i = 0; i < len; i++) {
    json_t *x = json_array_get(v, i);
    bool ok = elem == 0 ? json_is_number(x) : elem == 1 ? json_is_integer(x) : json_is_string(x);
    if (!ok)
      return sl__err(SL_EINVAL, "%s.%s[%zu]: expected %s, found %s", path, a->name, i,
                     elem == 0 ? "a number" : elem == 1 ? "an integer" : "a string", sl__json_type_name(x));
  }
  return 0;
}

static int check_obj(const sl__arg *schema, json_t *obj, const char *path, const char *const *skip, const char *what,
                     const char *word);

/* Each value (object) or entry (array) of v against a->items, at path.name.key or path.name[i]. */
static int check_items(const char *path, const sl__arg *a, json_t *v) {
  char sub[512], what[160];
  snprintf(what, sizeof what, "an entry of '%s'", a->name);
  if (json_is_object(v)) {
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x) {
      snprintf(sub, sizeof sub, "%s.%s.%s", path, a->name, key);
      if (!json_is_object(x)) return sl__err(SL_EINVAL, "%s: expected an object, found %s", sub, sl__json_type_name(x));
      int rc = check_obj(a->items, x, sub, NULL, what, "key");
      if (rc) return rc;
    }
  } else {
    for (size_t i = 0; i < json_array_size(v); i++) {
      json_t *x = json_array_get(v, i);
      snprintf(sub, sizeof sub, "%s.%s[%zu]", path, a->name, i);
      if (!json_is_object(x)) return sl__err(SL_EINVAL, "%s: expected an object, found %s", sub, sl__json_type_name(x));
      int rc = check_obj(a->items, x, sub, NULL, what, "key");
      if (rc) return rc;
    }
  }
  return 0;
}

/* A component name or its alternatives: every name non-empty, at most SL__ALTS_MAX of them. */
static int check_alts(const char *path, const sl__arg *a, json_t *v) {
  if (!json_is_string(v) && !json_is_array(v)) return wrong_type(path, a, v);
  size_t n = json_is_array(v) ? json_array_size(v) : 1;
  for (size_t i = 0; json_is_array(v) && i < n; i++)
    if (!json_is_string(json_array_get(v, i)))
      return sl__err(SL_EINVAL, "%s.%s[%zu]: expected a component name (a string), found %s", path, a->name, i,
                     sl__json_type_name(json_array_get(v, i)));
  for (size_t i = 0; i < n; i++) {
    const char *t = json_string_value(json_is_array(v) ? json_array_get(v, i) : v);
    size_t parts = 1;
    for (const char *p = t;; p++) {
      const char *e = strchr(p, ';');
      if ((e ? e : p + strlen(p)) == p)
        return sl__err(SL_EINVAL, "%s.%s: \"%s\": an empty component name (alternatives are \"jpg;png;webp\" or "
                       "[\"jpg\", \"png\", \"webp\"])", path, a->name, t);
      if (!e) break;
      parts++;
      p = e;
    }
    if (json_is_array(v) && parts > 1)
      return sl__err(SL_EINVAL, "%s.%s[%zu]: \"%s\": give alternatives as \"a;b\" or as a list, not both", path,
                     a->name, i, t);
    if (!json_is_array(v)) n = parts;
  }
  if (n == 0 || n > SL__ALTS_MAX)
    return sl__err(SL_EINVAL, "%s.%s: %zu component names (valid: 1 to %d alternatives)", path, a->name, n,
                   SL__ALTS_MAX);
  return 0;
}

int sl__alts_from_json(sl__alts *out, json_t *v, const char *path, const char *key) {
  out->n = 0;
  size_t used = 0, m = json_is_array(v) ? json_array_size(v) : 1;
  for (size_t i = 0; i < m; i++) {
    const char *t = json_string_value(json_is_array(v) ? json_array_get(v, i) : v);
    size_t len = t ? strlen(t) : 0;
    if (!t || used + len + 1 > sizeof out->text)
      return sl__err(SL_EINVAL, "%s.%s: component names longer than %zu bytes in all", path, key, sizeof out->text - 1);
    memcpy(out->text + used, t, len + 1);
    for (char *p = out->text + used;;) { /* "a;b": split in place */
      char *e = strchr(p, ';');
      if (e) *e = 0;
      if (out->n == SL__ALTS_MAX || !*p)
        return sl__err(SL_EINVAL, "%s.%s: 1 to %d non-empty component names", path, key, SL__ALTS_MAX);
      out->name[out->n++] = p;
      if (!e) break;
      p = e + 1;
    }
    used += len + 1;
  }
  return out->n ? 0 : sl__err(SL_EINVAL, "%s.%s: 1 to %d non-empty component names", path, key, SL__ALTS_MAX);
}

const char *sl__alts_text(const sl__alts *a, char *buf, size_t n) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < a->n && k < n; i++) {
    int w = snprintf(buf + k, n - k, "%s%s", i ? ";" : "", a->name[i]);
    if (w < 0) break;
    k += (size_t)w;
  }
  return buf;
}

static int check_value(const char *path, const sl__arg *a, json_t *v) {
  if (json_is_string(v) && (a->flags & SL__ARGF_TUNABLE) && !strcmp(json_string_value(v), "autotune")) return 0;
  if (json_is_string(v) && (a->flags & SL__ARGF_AUTO_STR) && !strcmp(json_string_value(v), "auto")) return 0;
  switch (a->type) {
  case SL__ARG_INT:
    if (json_is_string(v) && (a->flags & (SL__ARGF_TUNABLE | SL__ARGF_AUTO_STR)))
      return sl__err(SL_EINVAL, "%s.%s: expected an %s, found \"%s\"", path, a->name, sl__arg_type_name(a),
                     json_string_value(v));
    if (!json_is_integer(v)) return wrong_type(path, a, v);
    if (!in_range(a, (double)json_integer_value(v))) return out_of_range(path, a, v);
    return 0;
  case SL__ARG_NUM:
    if (!json_is_number(v)) return wrong_type(path, a, v);
    if (!in_range(a, json_number_value(v))) return out_of_range(path, a, v);
    return 0;
  case SL__ARG_BOOL: return json_is_boolean(v) ? 0 : wrong_type(path, a, v);
  case SL__ARG_STR:
  case SL__ARG_COMP: return json_is_string(v) ? 0 : wrong_type(path, a, v);
  case SL__ARG_ENUM: return json_is_string(v) ? check_enum(path, a, json_string_value(v)) : wrong_type(path, a, v);
  case SL__ARG_NUMS: return check_array(path, a, v, 0);
  case SL__ARG_INTS: return check_array(path, a, v, 1);
  case SL__ARG_STRS: return check_array(path, a, v, 2);
  case SL__ARG_GLOB: return json_is_string(v) ? 0 : check_array(path, a, v, 2);
  case SL__ARG_OBJECT:
    if (!json_is_object(v)) return wrong_type(path, a, v);
    return a->items ? check_items(path, a, v) : 0;
  case SL__ARG_ARRAY:
  case SL__ARG_CHAIN:
    if (!json_is_array(v)) return wrong_type(path, a, v);
    if (!in_range(a, (double)json_array_size(v))) {
      char r[80];
      return sl__err(SL_EINVAL, "%s.%s: %zu entries (valid length: %s)", path, a->name, json_array_size(v),
                     sl__arg_range(r, sizeof r, a));
    }
    return a->items ? check_items(path, a, v) : 0;
  case SL__ARG_SCALAR: return json_is_number(v) || json_is_string(v) ? 0 : wrong_type(path, a, v);
  case SL__ARG_COMP_ALT: return check_alts(path, a, v);
  }
  return 0;
}

int sl__arg_check_value(const char *path, const sl__arg *a, json_t *v) { return check_value(path, a, v); }

int sl__args_check(const sl__arg *schema, json_t *obj, const char *path, const char *const *skip, const char *what,
                   const char *word) {
  return check_obj(schema, obj, path, skip, what, word);
}

static int check_obj(const sl__arg *schema, json_t *obj, const char *path, const char *const *skip, const char *what,
                     const char *word) {
  if (!obj) obj = json_object(); /* no args: only the required ones are checked */
  else json_incref(obj);
  if (!obj) return sl__oom("an args object");
  const char *key;
  json_t *v;
  int rc = 0;
  /* Keys in the spec's order, so the first wrong one is reported. */
  json_object_foreach(obj, key, v) {
    bool skipped = false;
    for (const char *const *s = skip; s && *s && !skipped; s++) skipped = !strcmp(*s, key);
    if (skipped) continue;
    const sl__arg *a = sl__arg_find(schema, key);
    if (!a) {
      rc = unknown(schema, path, key, what, word);
      break;
    }
    if ((rc = check_value(path, a, v))) break;
  }
  for (const sl__arg *a = schema; !rc && a && a->name; a++)
    if ((a->flags & SL__ARGF_REQUIRED) && !json_object_get(obj, a->name))
      rc = sl__err(SL_EINVAL, "%s.%s: required (%s)", path, a->name, a->doc);
  json_decref(obj);
  return rc;
}

json_t *sl__arg_default(const sl__arg *schema, const char *key) {
  const sl__arg *a = sl__arg_find(schema, key);
  if (!a || !a->def) return NULL;
  if (a->type == SL__ARG_STR || a->type == SL__ARG_ENUM || a->type == SL__ARG_COMP || a->type == SL__ARG_COMP_ALT)
    return json_string(a->def);
  return json_loads(a->def, JSON_DECODE_ANY, NULL);
}

/* ---- element structure ---- */
sl__comp_desc *sl__struct_get(sl__struct *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->c[i].name, name)) return &s->c[i];
  return NULL;
}

int sl__struct_put(sl__struct *s, const char *name, int dtype, int rank, const char *origin, sl__comp_desc **out) {
  sl__comp_desc *c = sl__struct_get(s, name);
  if (!c) {
    if (s->n >= SL_MAX_COMPONENTS)
      return sl__err(SL_EINVAL, "%s: more than %d components", origin ? origin : "?", SL_MAX_COMPONENTS);
    c = &s->c[s->n++];
  }
  c->name = name;
  c->dtype = dtype;
  c->rank = rank > SL_MAX_RANK ? SL_MAX_RANK : rank;
  for (int d = 0; d < SL_MAX_RANK; d++) c->dims[d] = SL__DIM_UNKNOWN;
  c->origin = origin;
  if (out) *out = c;
  return 0;
}

void sl__struct_remove(sl__struct *s, const char *name) {
  sl__comp_desc *c = sl__struct_get(s, name);
  if (!c) return;
  int i = (int)(c - s->c);
  memmove(&s->c[i], &s->c[i + 1], (size_t)(s->n - i - 1) * sizeof s->c[0]);
  s->n--;
}

int sl__struct_describe(sl__str *b, const sl__struct *s) {
  int rc = 0;
  for (int i = 0; i < s->n && !rc; i++) {
    const sl__comp_desc *c = &s->c[i];
    const char *dt = c->dtype >= 0 ? sl_dtype_name((sl_dtype)c->dtype) : NULL;
    rc |= sl__str_printf(b, "%s%s %s ", i ? ", " : "", c->name, dt ? dt : "?");
    if (c->rank < 0) {
      rc |= sl__str_printf(b, "[...]");
      continue;
    }
    rc |= sl__str_printf(b, "[");
    for (int d = 0; d < c->rank; d++) {
      int64_t x = c->dims[d];
      if (x >= 0) rc |= sl__str_printf(b, "%s%lld", d ? ", " : "", (long long)x);
      else rc |= sl__str_printf(b, "%s%s", d ? ", " : "", x == SL__DIM_VARIES ? "*" : "?");
    }
    rc |= sl__str_printf(b, "]");
  }
  if (s->open) rc |= sl__str_printf(b, "%s...", s->n ? ", " : "");
  else if (!s->n) rc |= sl__str_printf(b, "(nothing)");
  return rc ? sl__oom("a structure") : 0;
}

int sl__struct_names(sl__str *b, const sl__struct *s) {
  int rc = 0;
  for (int i = 0; i < s->n; i++) rc |= sl__str_printf(b, "%s'%s'", i ? ", " : "", s->c[i].name);
  if (!s->n) rc |= sl__str_printf(b, "none");
  return rc ? sl__oom("a message") : 0;
}
