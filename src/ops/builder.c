/* ops/builder.c: the C builder API: appends ops to a JSON spec (the same format sl_pipeline_from_json reads), so a
 * built pipeline can be written out, diffed and planned like any other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/pipeline_int.h"

#define MAX_DEPTH 8

struct sl_builder {
  json_t *spec;
  json_t *stack[MAX_DEPTH]; /* the op arrays being appended to; [0] is the top chain */
  int depth;
};

sl_builder *sl_builder_new(const char *name, uint64_t seed) {
  sl_builder *b = sl__calloc(1, sizeof *b);
  if (!b) return NULL;
  b->spec = json_object();
  json_t *ops = json_array();
  if (!b->spec || !ops || json_object_set_new(b->spec, "name", json_string(name ? name : "pipeline")) ||
      json_object_set_new(b->spec, "seed", json_integer((json_int_t)seed)) || json_object_set(b->spec, "ops", ops)) {
    json_decref(ops);
    sl_builder_free(b);
    sl__oom("a builder");
    return NULL;
  }
  b->stack[0] = ops;
  json_decref(ops); /* the spec holds it */
  return b;
}

void sl_builder_free(sl_builder *b) {
  if (!b) return;
  json_decref(b->spec);
  sl__free(b);
}

int sl_builder_op(sl_builder *b, const char *op, const char *knobs_json) {
  json_t *o;
  if (knobs_json && *knobs_json) {
    json_error_t err;
    o = json_loads(knobs_json, 0, &err);
    if (!o) return sl__err(SL_EINVAL, "builder: knobs of '%s': malformed JSON at column %d: %s", op, err.column, err.text);
    if (!json_is_object(o)) {
      json_decref(o);
      return sl__err(SL_EINVAL, "builder: knobs of '%s' must be a JSON object", op);
    }
  } else {
    o = json_object();
    if (!o) return sl__oom("a builder op");
  }
  if (json_object_set_new(o, "op", json_string(op)) || json_array_append_new(b->stack[b->depth], o))
    return sl__oom("a builder op");
  return 0;
}

static int op_with(sl_builder *b, const char *op, json_t *knobs) {
  if (!knobs) return sl__oom("a builder op");
  if (json_object_set_new(knobs, "op", json_string(op)) || json_array_append_new(b->stack[b->depth], knobs))
    return sl__oom("a builder op");
  return 0;
}

static json_t *knob(int64_t v) { return v == SL_AUTOTUNE ? json_string("autotune") : json_integer((json_int_t)v); }

int sl_builder_range(sl_builder *b, int64_t start, int64_t stop, int64_t step) {
  return op_with(b, "range", json_pack("{sIsIsI}", "start", (json_int_t)start, "stop", (json_int_t)stop, "step",
                                       (json_int_t)step));
}

int sl_builder_map(sl_builder *b, const char *fn, const char *args_json, int parallelism) {
  json_t *o = json_pack("{ssso}", "fn", fn, "parallelism", knob(parallelism));
  if (o && args_json && *args_json) {
    json_error_t err;
    json_t *a = json_loads(args_json, 0, &err);
    if (!a) {
      json_decref(o);
      return sl__err(SL_EINVAL, "builder: args of map '%s': malformed JSON: %s", fn, err.text);
    }
    json_object_set_new(o, "args", a);
  }
  return op_with(b, "map", o);
}

int sl_builder_batch(sl_builder *b, int64_t size, bool drop_remainder) {
  return op_with(b, "batch", json_pack("{sIsb}", "size", (json_int_t)size, "drop_remainder", drop_remainder));
}

int sl_builder_prefetch(sl_builder *b, int buffer) { return op_with(b, "prefetch", json_pack("{so}", "buffer", knob(buffer))); }

int sl_builder_begin_source(sl_builder *b) {
  json_t *arr = b->stack[b->depth];
  size_t n = json_array_size(arr);
  if (!n) return sl__err(SL_EINVAL, "builder: begin_source needs an interleave op before it");
  json_t *last = json_array_get(arr, n - 1);
  const char *kind = json_string_value(json_object_get(last, "op"));
  const sl__op_vt *vt = kind ? sl__op_lookup(kind) : NULL;
  if (!vt || !(vt->flags & SL__OPF_TAKES_SOURCE))
    return sl__err(SL_EINVAL, "builder: begin_source: the last op is '%s', which takes no nested source (an interleave "
                   "does)", kind ? kind : "?");
  if (b->depth + 1 >= MAX_DEPTH) return sl__err(SL_EINVAL, "builder: sources nested too deep");
  json_t *src = json_array();
  if (!src || json_object_set_new(last, "source", src)) return sl__oom("a builder source");
  b->stack[++b->depth] = src;
  return 0;
}

int sl_builder_end_source(sl_builder *b) {
  if (b->depth == 0) return sl__err(SL_EINVAL, "builder: end_source without begin_source");
  b->depth--;
  return 0;
}

int sl_builder_build(sl_pipeline **out, sl_builder *b) {
  *out = NULL;
  if (b->depth) return sl__err(SL_EINVAL, "builder: %d source chain(s) left open", b->depth);
  char *s = json_dumps(b->spec, JSON_COMPACT | JSON_PRESERVE_ORDER);
  if (!s) return sl__oom("the spec");
  int rc = sl_pipeline_from_json(out, s, strlen(s), "<builder>");
  sl__free(s);
  return rc;
}
