/* plan/plan_fuse.c: operator fusion as a spec rewrite. decode_jpeg then random_resized_crop / center_crop / resize
 * decodes the whole image only to throw most of it away; decode_and_crop_jpeg (fns/fn_jpeg.c) picks the same window
 * from the same parameters and per-element seed, skips the rows above it, decodes only the block columns under it
 * and at the smallest DCT scale (n/8) that still gives the output size, then resizes what is left. Fusion is
 * conservative: both ops plain maps with only the args this file knows, the crop reading the decoder's output and
 * writing over it (so the element keeps the same components, shapes and dtypes), and neither marked "fuse": false. */
#include <string.h>

#include "ops/engine_int.h"
#include "plan/plan_fuse_int.h"

static const char *map_fn(json_t *op) {
  const char *kind = json_string_value(json_object_get(op, "op"));
  if (!kind || strcmp(kind, "map")) return NULL;
  json_t *f = json_object_get(op, "fuse");
  if (json_is_false(f)) return NULL;
  return json_string_value(json_object_get(op, "fn"));
}

static const char *str_arg(json_t *args, const char *key, const char *def) {
  json_t *v = json_object_get(args, key);
  return json_is_string(v) ? json_string_value(v) : def;
}

/* True when every key of args is in `known`. */
static bool only_keys(json_t *args, const char *const *known) {
  const char *k;
  json_t *v;
  json_object_foreach(args, k, v) {
    bool ok = false;
    for (const char *const *q = known; *q; q++)
      if (!strcmp(*q, k)) ok = true;
    if (!ok) return false;
  }
  return true;
}

/* The fused op's value of a map knob: "autotune" when either asks for it, else the larger number. */
static json_t *merge_knob(json_t *a, json_t *b) {
  if (!a && !b) return NULL;
  if (json_is_string(a) || json_is_string(b)) return json_string("autotune");
  json_int_t x = json_is_integer(a) ? json_integer_value(a) : 0, y = json_is_integer(b) ? json_integer_value(b) : 0;
  return json_integer(x > y ? x : y);
}

/* Copies args[key] into dst when present. */
static int copy_arg(json_t *dst, json_t *args, const char *key, const char *as) {
  json_t *v = json_object_get(args, key);
  return v ? json_object_set(dst, as ? as : key, v) : 0;
}

/* The fused op for decode op a and crop op b, or NULL when the pair does not qualify (or on allocation failure,
 * with *oom set). */
static json_t *fuse_pair(json_t *a, json_t *b, const char *crop, bool *oom) {
  static const char *const dkeys[] = {"component", "output", "keep", "channels", "strict", "max_pixels", NULL};
  static const char *const rrc_keys[] = {"component", "output", "size", "scale", "ratio", "method", NULL};
  static const char *const cc_keys[] = {"component", "output", "size", "fraction", "method", NULL};
  static const char *const rs_keys[] = {"component", "output", "size", "shorter_side", "method", NULL};
  json_t *da = json_object_get(a, "args"), *ca = json_object_get(b, "args");
  if ((da && !json_is_object(da)) || (ca && !json_is_object(ca))) return NULL;
  const char *const *ck = !strcmp(crop, "random_resized_crop") ? rrc_keys : !strcmp(crop, "center_crop") ? cc_keys : rs_keys;
  if (!only_keys(da, dkeys) || !only_keys(ca, ck)) return NULL;
  const char *img = str_arg(da, "output", "image"), *cin = str_arg(ca, "component", "image");
  if (strcmp(img, cin) || strcmp(str_arg(ca, "output", cin), cin)) return NULL;
  /* Fused args: the decoder's, then the crop's mode. */
  json_t *args = json_object(), *op = json_object();
  int rc = !args || !op;
  for (const char *const *k = dkeys; !rc && *k; k++) rc |= copy_arg(args, da, *k, NULL);
  rc |= copy_arg(args, ca, "method", NULL);
  if (!strcmp(crop, "random_resized_crop")) {
    rc |= json_object_set_new(args, "random", json_true());
    rc |= copy_arg(args, ca, "size", NULL) | copy_arg(args, ca, "scale", NULL) | copy_arg(args, ca, "ratio", NULL);
  } else if (!strcmp(crop, "center_crop")) {
    rc |= copy_arg(args, ca, "size", "center") | copy_arg(args, ca, "fraction", "center_fraction");
  } else {
    rc |= json_object_set_new(args, "full", json_true());
    rc |= copy_arg(args, ca, "size", NULL) | copy_arg(args, ca, "shorter_side", NULL);
  }
  rc |= json_object_set_new(op, "op", json_string("map")) | json_object_set_new(op, "fn", json_string("decode_and_crop_jpeg"));
  rc |= json_object_set(op, "args", args);
  const char *knobs[] = {"parallelism", "buffer"};
  for (int k = 0; k < 2; k++) {
    json_t *v = merge_knob(json_object_get(a, knobs[k]), json_object_get(b, knobs[k]));
    if (v) rc |= json_object_set_new(op, knobs[k], v);
  }
  if (json_is_false(json_object_get(a, "deterministic")) || json_is_false(json_object_get(b, "deterministic")))
    rc |= json_object_set_new(op, "deterministic", json_false());
  json_decref(args);
  if (rc) {
    json_decref(op);
    *oom = true;
    return NULL;
  }
  return op;
}

/* Fuses the pairs of one chain (recursing into nested sources); path is the chain's JSON path prefix. Returns the
 * count or SL_ENOMEM; notes collects "ops[4] decode_jpeg + ops[5] random_resized_crop". */
static int fuse_chain(json_t *ops, const char *path, sl__str *notes) {
  int n = 0;
  for (size_t i = 0; i < json_array_size(ops); i++) {
    json_t *o = json_array_get(ops, i);
    json_t *src = json_object_get(o, "source");
    if (json_is_array(src)) {
      sl__str sp = {0};
      if (sl__str_printf(&sp, "%s[%zu].source", path, i)) return sl__oom("the fused spec");
      int k = fuse_chain(src, sp.s, notes);
      sl__str_dispose(&sp);
      if (k < 0) return k;
      n += k;
    }
    const char *f = map_fn(o), *g = i + 1 < json_array_size(ops) ? map_fn(json_array_get(ops, i + 1)) : NULL;
    if (!f || !g || strcmp(f, "decode_jpeg") ||
        (strcmp(g, "random_resized_crop") && strcmp(g, "center_crop") && strcmp(g, "resize")))
      continue;
    bool oom = false;
    json_t *fused = fuse_pair(o, json_array_get(ops, i + 1), g, &oom);
    if (oom) return sl__oom("the fused spec");
    if (!fused) continue;
    if (sl__str_printf(notes, "%s%s[%zu] decode_jpeg + %s[%zu] %s", notes->len ? ", " : "", path, i, path, i + 1, g) ||
        json_array_set_new(ops, i, fused) || json_array_remove(ops, i + 1))
      return sl__oom("the fused spec");
    n++;
  }
  return n;
}

int sl__plan_fuse_spec(json_t *spec) {
  sl__str notes = {0};
  int n = fuse_chain(json_object_get(spec, "ops"), "ops", &notes);
  if (n > 0) {
    const char *old = json_string_value(json_object_get(spec, "comment"));
    sl__str c = {0};
    int rc = sl__str_printf(&c, "%s%sfused by the planner into decode_and_crop_jpeg (later ops renumbered): %s",
                            old ? old : "", old ? "; " : "", notes.s);
    if (rc || json_object_set_new(spec, "comment", json_string(c.s))) n = sl__oom("the fused spec");
    sl__str_dispose(&c);
  }
  sl__str_dispose(&notes);
  return n;
}

int sl__plan_fuse(sl_pipeline **out, const sl_pipeline *p) {
  *out = NULL;
  json_t *spec = json_deep_copy(sl__pipeline_spec(p));
  if (!spec) return sl__oom("the fused spec");
  int n = sl__plan_fuse_spec(spec), rc = n < 0 ? n : 0;
  if (n > 0) {
    char *js = json_dumps(spec, JSON_COMPACT | JSON_PRESERVE_ORDER);
    rc = js ? sl_pipeline_from_json(out, js, strlen(js), sl__pipeline_origin(p)) : sl__oom("the fused spec");
    sl__free(js);
    if (rc) sl__err_wrap(rc, "the fused spec");
  }
  json_decref(spec);
  return rc;
}
