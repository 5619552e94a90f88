/* plan/plan_fuse.c: operator fusion as a spec rewrite. decode_jpeg (or decode_image: then the fused op has
 * "any_format", and a PNG or WebP is decoded whole and windowed exactly as the unfused crop would) then
 * random_resized_crop / center_crop / resize decodes the whole image only to throw most of it away; decode_and_crop_jpeg (fns/fn_jpeg.c) picks the same window
 * from the same parameters and per-element seed, skips the rows above it, decodes only the block columns under it
 * and at the smallest DCT scale (n/8) that still gives the output size, then resizes what is left. Fusion is
 * conservative: both ops plain maps with only the args this file knows, the crop reading the decoder's output and
 * writing over it (so the element keeps the same components, shapes and dtypes), and neither marked "fuse": false.
 * Then random_flip and normalize right after a decode_and_crop_jpeg, or after a random_resized_crop left on its own
 * (one after a cache), fold into its output pass (one pass from the window to the flipped float32 tensor), under
 * the same conditions. A rewritten spec draws the randomness
 * the original drew: every op whose pre-order index moved says where its seeds came from ("seed_op"), and a fused
 * op lists the crop's and the flip's ([crop, flip]). A fused op right before a batch writes into the batch's buffer. */
#include <string.h>

#include "ops/pipeline_int.h"
#include "plan/plan_fuse_int.h"

static const char *map_fn(json_t *op) {
  const char *kind = json_string_value(json_object_get(op, "op"));
  if (!kind || sl__op_model(kind) != SL__MK_MAP) return NULL;
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

/* The fused op's map knobs from a and b (merged into `into`, which may be a). */
static int merge_knobs(json_t *into, json_t *a, json_t *b) {
  int rc = 0;
  const char *knobs[] = {"parallelism", "buffer"};
  for (int k = 0; k < 2; k++) {
    json_t *v = merge_knob(json_object_get(a, knobs[k]), json_object_get(b, knobs[k]));
    if (v) rc |= json_object_set_new(into, knobs[k], v);
  }
  if (json_is_false(json_object_get(a, "deterministic")) || json_is_false(json_object_get(b, "deterministic")))
    rc |= json_object_set_new(into, "deterministic", json_false());
  if (json_object_get(b, "on_error")) rc |= json_object_set(into, "on_error", json_object_get(b, "on_error"));
  return rc;
}

/* True when maps a and b handle a function's error alike (on_error, "fail" when absent). */
static bool same_on_error(json_t *a, json_t *b) {
  json_t *x = json_object_get(a, "on_error"), *y = json_object_get(b, "on_error");
  const char *p = x ? json_string_value(x) : "fail", *q = y ? json_string_value(y) : "fail";
  return p && q && !strcmp(p, q);
}

/* Copies args[key] into dst when present. */
static int copy_arg(json_t *dst, json_t *args, const char *key, const char *as) {
  json_t *v = json_object_get(args, key);
  return v ? json_object_set(dst, as ? as : key, v) : 0;
}

/* The fused op for decode op a and crop op b, or NULL when the pair does not qualify (or on allocation failure,
 * with *oom set). */
static json_t *fuse_pair(json_t *a, json_t *b, const char *dec, const char *crop, bool *oom) {
  static const char *const dkeys[] = {"component", "output", "keep", "channels", "strict", "max_pixels", NULL};
  static const char *const rrc_keys[] = {"component", "output", "size", "scale", "ratio", "method", NULL};
  static const char *const cc_keys[] = {"component", "output", "size", "fraction", "method", NULL};
  static const char *const rs_keys[] = {"component", "output", "size", "shorter_side", "method", NULL};
  json_t *da = json_object_get(a, "args"), *ca = json_object_get(b, "args");
  if ((da && !json_is_object(da)) || (ca && !json_is_object(ca))) return NULL;
  const char *const *ck = !strcmp(crop, "random_resized_crop") ? rrc_keys : !strcmp(crop, "center_crop") ? cc_keys : rs_keys;
  if (!only_keys(da, dkeys) || !only_keys(ca, ck)) return NULL;
  json_t *chv = json_object_get(da, "channels");
  bool any = !strcmp(dec, "decode_image");
  if (any && json_is_integer(chv) && json_integer_value(chv) == 4) return NULL; /* RGBA: the fused op reads <= 3 */
  const char *img = str_arg(da, "output", "image"), *cin = str_arg(ca, "component", "image");
  if (strcmp(img, cin) || strcmp(str_arg(ca, "output", cin), cin)) return NULL;
  /* Fused args: the decoder's, then the crop's mode. */
  if (!same_on_error(a, b)) return NULL; /* one op cannot skip for one part and fail for the other */
  json_t *args = json_object(), *op = json_object();
  int rc = !args || !op;
  for (const char *const *k = dkeys; !rc && *k; k++) rc |= copy_arg(args, da, *k, NULL);
  rc |= copy_arg(args, ca, "method", NULL);
  if (any) rc |= json_object_set_new(args, "any_format", json_true()); /* a PNG or WebP: decoded whole, then cropped */
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
  rc |= merge_knobs(op, a, b);
  json_t *seed = json_object_get(b, "seed_op"); /* the crop's randomness */
  if (seed) rc |= json_object_set(op, "seed_op", seed);
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
    if (!f || !g || (strcmp(f, "decode_jpeg") && strcmp(f, "decode_image")) ||
        (strcmp(g, "random_resized_crop") && strcmp(g, "center_crop") && strcmp(g, "resize")))
      continue;
    bool oom = false;
    json_t *fused = fuse_pair(o, json_array_get(ops, i + 1), f, g, &oom);
    if (oom) return sl__oom("the fused spec");
    if (!fused) continue;
    if (sl__str_printf(notes, "%s%s[%zu] %s + %s[%zu] %s", notes->len ? ", " : "", path, i, f, path, i + 1, g) ||
        json_array_set_new(ops, i, fused) || json_array_remove(ops, i + 1))
      return sl__oom("the fused spec");
    n++;
  }
  return n;
}

/* Folds random_flip and normalize (either order, each once) that follow op i, a decode_and_crop_jpeg or a
 * random_resized_crop (fn f), into its output pass. Returns the number folded, 0 when none qualifies, or
 * SL_ENOMEM. */
static int fold_after(json_t *ops, size_t i, const char *f, const char *path, sl__str *notes) {
  static const char *const flip_keys[] = {"component", "output", "prob", "method", NULL};
  static const char *const norm_keys[] = {"component", "output", "scale", "mean", "std", NULL};
  json_t *o = json_array_get(ops, i), *args = json_object_get(o, "args");
  if (args && !json_is_object(args)) return 0;
  /* the image it writes: decode_and_crop_jpeg's output defaults to "image", a crop's to its input */
  const char *img = str_arg(args, "output", strcmp(f, "random_resized_crop") ? "image" : str_arg(args, "component", "image"));
  int n = 0;
  while (i + 1 < json_array_size(ops)) {
    json_t *b = json_array_get(ops, i + 1), *ba = json_object_get(b, "args");
    const char *g = map_fn(b);
    if (!g || (ba && !json_is_object(ba)) || strcmp(str_arg(ba, "component", "image"), img) ||
        strcmp(str_arg(ba, "output", img), img) || !same_on_error(o, b))
      break;
    json_t *seed = json_object_get(o, "seed_op"), *bseed = json_object_get(b, "seed_op");
    int rc = 0;
    if (!strcmp(g, "random_flip") && !json_object_get(args, "flip_prob") && only_keys(ba, flip_keys) &&
        json_is_integer(seed) && json_is_integer(bseed)) {
      json_t *prob = json_object_get(ba, "prob");
      if (prob && !json_is_number(prob)) break;
      if (!args && (!(args = json_object()) || json_object_set_new(o, "args", args))) return sl__oom("the fused spec");
      rc |= json_object_set_new(args, "flip_prob", prob ? json_deep_copy(prob) : json_real(0.5));
      /* [the crop's seed op, the flip's]: the fused op's call->seeds */
      json_t *pair = json_pack("[OO]", seed, bseed);
      rc |= !pair || json_object_set_new(o, "seed_op", pair);
    } else if (!strcmp(g, "normalize") && !json_is_true(json_object_get(args, "normalize")) && only_keys(ba, norm_keys)) {
      json_t *mean = json_object_get(ba, "mean"), *std = json_object_get(ba, "std");
      if ((mean && (!json_is_array(mean) || json_array_size(mean) > 4)) || (std && (!json_is_array(std) || json_array_size(std) > 4)))
        break; /* the output pass takes up to 4 channels */
      if (!args && (!(args = json_object()) || json_object_set_new(o, "args", args))) return sl__oom("the fused spec");
      rc |= json_object_set_new(args, "normalize", json_true());
      rc |= copy_arg(args, ba, "mean", NULL) | copy_arg(args, ba, "std", NULL) | copy_arg(args, ba, "scale", "value_scale");
    } else {
      break;
    }
    rc |= merge_knobs(o, o, b);
    if (rc || sl__str_printf(notes, "%s%s[%zu] %s folded into %s[%zu] %s", notes->len ? ", " : "",
                             path, i + 1 + (size_t)n, g, path, i, f) ||
        json_array_remove(ops, i + 1))
      return sl__oom("the fused spec");
    n++;
  }
  return n;
}

/* Op i (fn f: a decode_and_crop_jpeg, a random_resized_crop or a normalize) right before a batch of N writes its
 * outputs N to a buffer ("batch_slab"), which the batch then takes as it is: batches built in place, no copy (ssd's
 * normalize made 32 MB of float32 per batch that the batch then copied on the consumer's thread). A decoder needs a
 * fixed output size; the others' first output fixes the slot size (another size gets its own buffer). Not under
 * on_error (a skipped element would shift every later batch across two slabs: correct, but copied). 1 when set, 0
 * when not, or SL_ENOMEM. */
static int slab_for_batch(json_t *ops, size_t i, const char *f, const char *path, sl__str *notes) {
  json_t *o = json_array_get(ops, i), *args = json_object_get(o, "args"), *b = json_array_get(ops, i + 1);
  const char *kind = json_string_value(json_object_get(b, "op"));
  json_t *size = json_object_get(b, "size"), *ch = json_object_get(args, "channels");
  if (!kind || strcmp(kind, "batch") || !json_is_integer(size) || json_integer_value(size) < 2 ||
      (args && !json_is_object(args)) || json_object_get(args, "batch_slab") || json_object_get(o, "on_error"))
    return 0;
  if (!strcmp(f, "decode_and_crop_jpeg") &&
      (json_array_size(json_object_get(args, "size")) != 2 || (ch && !(json_is_integer(ch) && json_integer_value(ch) > 0))))
    return 0;
  if (!args && (!(args = json_object()) || json_object_set_new(o, "args", args))) return sl__oom("the fused spec");
  if (json_object_set_new(args, "batch_slab", json_integer(json_integer_value(size))) ||
      sl__str_printf(notes, "%s%s[%zu] %s writes into the %s[%zu] batch's buffer", notes->len ? ", " : "", path, i, f,
                     path, i + 1))
    return sl__oom("the fused spec");
  return 1;
}

/* Folds flip and normalize into every decode_and_crop_jpeg and random_resized_crop of a chain (recursing into
 * nested sources), and has such an op or a normalize right before a batch write into the batch's buffer. A
 * random_resized_crop not fused with a decoder is one after a cache (imagenet-cacheable): its flip and normalize
 * were two more thread pools, hand-offs and passes over each image. */
static int fold_chain(json_t *ops, const char *path, sl__str *notes) {
  int n = 0;
  for (size_t i = 0; i < json_array_size(ops); i++) {
    json_t *o = json_array_get(ops, i), *src = json_object_get(o, "source");
    if (json_is_array(src)) {
      sl__str sp = {0};
      if (sl__str_printf(&sp, "%s[%zu].source", path, i)) return sl__oom("the fused spec");
      int k = fold_chain(src, sp.s, notes);
      sl__str_dispose(&sp);
      if (k < 0) return k;
      n += k;
    }
    const char *f = map_fn(o);
    if (!f || (strcmp(f, "decode_and_crop_jpeg") && strcmp(f, "random_resized_crop") && strcmp(f, "normalize"))) continue;
    int k = strcmp(f, "normalize") ? fold_after(ops, i, f, path, notes) : 0;
    if (k < 0) return k;
    n += k;
    if ((k = slab_for_batch(ops, i, f, path, notes)) < 0) return k;
    n += k;
  }
  return n;
}

/* Pre-order walk (the order pipeline.c numbers ops in): annotate gives every op without a "seed_op" its index;
 * otherwise a "seed_op" equal to the op's (new) index is dropped, so only the ops a rewrite moved keep one. */
static int seed_walk(json_t *ops, int *idx, bool annotate) {
  for (size_t i = 0; i < json_array_size(ops); i++) {
    json_t *o = json_array_get(ops, i);
    if (!json_is_object(o)) continue;
    int me = (*idx)++;
    json_t *v = json_object_get(o, "seed_op");
    if (annotate && !v) {
      if (json_object_set_new(o, "seed_op", json_integer(me))) return sl__oom("the fused spec");
    } else if (!annotate && json_is_integer(v) && json_integer_value(v) == me) {
      json_object_del(o, "seed_op");
    }
    json_t *src = json_object_get(o, "source");
    if (json_is_array(src)) {
      int rc = seed_walk(src, idx, annotate);
      if (rc) return rc;
    }
  }
  return 0;
}

int sl__plan_seeds_pin(json_t *ops) {
  int idx = 0;
  return seed_walk(ops, &idx, true);
}

void sl__plan_seeds_unpin(json_t *ops) {
  int idx = 0;
  (void)seed_walk(ops, &idx, false); /* deletes only: cannot fail */
}

/* sl__plan_fuse_spec; *note (when not NULL) gets what was fused (sl__free), NULL when nothing was. */
static int fuse_spec(json_t *spec, char **note) {
  sl__str notes = {0};
  json_t *ops = json_object_get(spec, "ops");
  int n = sl__plan_seeds_pin(ops);
  if (n == 0) n = fuse_chain(ops, "ops", &notes);
  if (n >= 0) {
    int k = fold_chain(ops, "ops", &notes);
    n = k < 0 ? k : n + k;
  }
  if (n >= 0) sl__plan_seeds_unpin(ops);
  if (n > 0) {
    const char *old = json_string_value(json_object_get(spec, "comment"));
    sl__str c = {0};
    int rc = sl__str_printf(&c, "%s%sfused by the planner (later ops renumbered): %s",
                            old ? old : "", old ? "; " : "", notes.s);
    if (rc || json_object_set_new(spec, "comment", json_string(c.s))) n = sl__oom("the fused spec");
    sl__str_dispose(&c);
    if (n > 0 && note && !(*note = sl__strdup(notes.s))) n = sl__oom("the fused spec");
  }
  sl__str_dispose(&notes);
  return n;
}

int sl__plan_fuse_spec(json_t *spec) {
  return fuse_spec(spec, NULL);
}

int sl__plan_fuse_spec_note(json_t *spec, char **note) {
  if (note) *note = NULL;
  return fuse_spec(spec, note);
}

/* p's spec fused (fuse_spec) into a new pipeline *out, NULL when nothing was fused. */
static int fuse_pipeline(sl_pipeline **out, const sl_pipeline *p, char **note) {
  *out = NULL;
  if (note) *note = NULL;
  json_t *spec = json_deep_copy(sl__pipeline_spec(p));
  if (!spec) return sl__oom("the fused spec");
  int n = fuse_spec(spec, note), rc = n < 0 ? n : 0;
  if (n > 0) {
    char *js = json_dumps(spec, JSON_COMPACT | JSON_PRESERVE_ORDER);
    rc = js ? sl_pipeline_from_json(out, js, strlen(js), sl__pipeline_origin(p)) : sl__oom("the fused spec");
    sl__free(js);
    if (rc) sl__err_wrap(rc, "the fused spec");
  }
  json_decref(spec);
  if (rc && note) {
    sl__free(*note);
    *note = NULL;
  }
  return rc;
}

int sl__plan_fuse(sl_pipeline **out, const sl_pipeline *p) {
  return fuse_pipeline(out, p, NULL);
}

int sl_pipeline_fuse(sl_pipeline **out, const sl_pipeline *p, char **note) {
  if (!out || !p) return sl__err(SL_EINVAL, "sl_pipeline_fuse: out and p are required");
  return fuse_pipeline(out, p, note);
}
