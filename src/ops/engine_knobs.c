/* ops/engine_knobs.c: reading an op's knobs from its spec object, with errors that name the JSON path, the
 * "autotune" value, and unknown keys refused. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/engine_int.h"

/* The default the op's schema documents for `key` (NULL: none): it wins over the caller's, so that the documented
 * default is the one in force. */
static const char *sdef(const sl__op *op, const char *key) {
  const sl__arg *a = op->vt && op->vt->schema ? sl__arg_find(op->vt->schema->knobs, key) : NULL;
  return a ? a->def : NULL;
}

/* ---- knobs ---- */
int sl__knob_int(const sl__op *op, json_t *obj, const char *key, int64_t def, int64_t min, int64_t *out) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    const char *d = sdef(op, key);
    *out = d ? strtoll(d, NULL, 10) : def;
    return 0;
  }
  if (!json_is_integer(v))
    return sl__err(SL_EINVAL, "%s.%s: expected an integer, found %s", op->path, key, sl__json_type_name(v));
  int64_t x = json_integer_value(v);
  if (x < min) return sl__err(SL_EINVAL, "%s.%s: %lld is below the minimum %lld", op->path, key, (long long)x, (long long)min);
  *out = x;
  return 0;
}

int sl__knob_tunable(const sl__op *op, json_t *obj, const char *key, int64_t def, int64_t min, int64_t *out,
                     bool *autotune) {
  json_t *v = json_object_get(obj, key);
  *autotune = false;
  const char *d = sdef(op, key);
  if (d) def = strtoll(d, NULL, 10);
  if (v && json_is_string(v)) {
    if (strcmp(json_string_value(v), "autotune"))
      return sl__err(SL_EINVAL, "%s.%s: expected an integer or \"autotune\", found \"%s\"", op->path, key,
                     json_string_value(v));
    *autotune = true;
    *out = def;
    return 0;
  }
  /* A tunable knob is always written back, so the normalised spec shows the value in force. */
  if (!v) json_object_set_new(obj, key, json_integer(def));
  if (v && !json_is_integer(v))
    return sl__err(SL_EINVAL, "%s.%s: expected an integer or \"autotune\", found %s", op->path, key,
                   sl__json_type_name(v));
  return sl__knob_int(op, obj, key, def, min, out);
}

int sl__knob_bool(const sl__op *op, json_t *obj, const char *key, bool def, bool *out) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    const char *d = sdef(op, key);
    *out = d ? !strcmp(d, "true") : def;
    return 0;
  }
  if (!json_is_boolean(v))
    return sl__err(SL_EINVAL, "%s.%s: expected true or false, found %s", op->path, key, sl__json_type_name(v));
  *out = json_is_true(v);
  return 0;
}

int sl__knob_str(const sl__op *op, json_t *obj, const char *key, const char *def, const char **out) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    const char *d = sdef(op, key);
    *out = d ? d : def;
    return 0;
  }
  if (!json_is_string(v))
    return sl__err(SL_EINVAL, "%s.%s: expected a string, found %s", op->path, key, sl__json_type_name(v));
  *out = json_string_value(v);
  return 0;
}

int sl__knob_double(const sl__op *op, json_t *obj, const char *key, double def, double *out) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    const char *d = sdef(op, key);
    *out = d ? strtod(d, NULL) : def;
    return 0;
  }
  if (!json_is_number(v))
    return sl__err(SL_EINVAL, "%s.%s: expected a number, found %s", op->path, key, sl__json_type_name(v));
  *out = json_number_value(v);
  return 0;
}

int sl__knob_check_keys(const sl__op *op, json_t *obj, const char *const *allowed) {
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    /* fuse and seed_op are every op's (plan_fuse.c; pipeline.c checks seed_op) */
    if (!strcmp(key, "op") || (!strcmp(key, "fuse") && json_is_boolean(v)) || !strcmp(key, "seed_op")) continue;
    bool ok = false;
    for (const char *const *a = allowed; *a; a++)
      if (!strcmp(*a, key)) ok = true;
    if (!ok) {
      char list[512] = "";
      for (const char *const *a = allowed; *a; a++) {
        if (list[0]) strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, *a, sizeof list - strlen(list) - 1);
      }
      return sl__err(SL_EINVAL, "%s.%s: unknown knob for op '%s' (known: %s)", op->path, key, op->vt->kind,
                     list[0] ? list : "none");
    }
  }
  return 0;
}

int64_t sl__autotune_parallelism(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? n : 1;
}

