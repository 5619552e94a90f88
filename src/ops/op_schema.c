/* ops/op_schema.c: what the ops' schemas are read for: checking an op's spec object (unknown knobs with the nearest
 * valid name, types, ranges), the model kinds and knobs the planner and the tracer ask about, and following the
 * element structure through the pipeline (sl_pipeline_structure). The schemas live beside each op in op_*.c. */
#include <string.h>

#include "ops/op_int.h"

#define SL__MK_NAME(k, name) [SL__MK_##k] = name,
static const char *const MODEL_NAMES[SL__MK_COUNT] = {SL__MODEL_KINDS(SL__MK_NAME)};
#undef SL__MK_NAME

const char *sl__model_kind_name(sl__model_kind k) {
  return k >= 0 && k < SL__MK_COUNT && MODEL_NAMES[k] ? MODEL_NAMES[k] : "?";
}

const sl__op_schema *sl__op_schema_of(const char *kind) {
  const sl__op_vt *vt = kind ? sl__op_lookup(kind) : NULL;
  return vt ? vt->schema : NULL;
}

sl__model_kind sl__op_model(const char *kind) {
  const sl__op_schema *s = sl__op_schema_of(kind);
  return s ? s->model : SL__MK_SEQ;
}

bool sl__op_tunable(const char *kind, const char *key) {
  const sl__op_schema *s = sl__op_schema_of(kind);
  const sl__arg *a = s ? sl__arg_find(s->knobs, key) : NULL;
  return a && (a->flags & SL__ARGF_TUNABLE);
}

bool sl__op_is_knob(const char *kind, const char *key) {
  const sl__op_schema *s = sl__op_schema_of(kind);
  const sl__arg *a = s ? sl__arg_find(s->knobs, key) : NULL;
  return a && (a->flags & SL__ARGF_KNOB);
}

bool sl__op_outside_identity(const char *kind) {
  const sl__op_schema *s = sl__op_schema_of(kind);
  return s && (s->flags & SL__OPS_NO_IDENTITY);
}

int sl__op_check(const sl__op *op, json_t *obj) {
  const sl__op_schema *s = op->vt->schema;
  if (!s) return 0; /* an op without a schema checks its own keys */
  /* "fuse" is every op's: false keeps the planner from fusing it with its neighbour (plan/plan_fuse.c); so is
   * "seed_op", which the fusion writes (checked in pipeline.c). */
  static const char *const skip[] = {"op", "fuse", "seed_op", NULL};
  json_t *fuse = json_object_get(obj, "fuse");
  if (fuse && !json_is_boolean(fuse))
    return sl__err(SL_EINVAL, "%s.fuse: expected true or false", op->path);
  char what[96];
  snprintf(what, sizeof what, "op '%s'", op->vt->kind);
  return sl__args_check(s->knobs, obj, op->path, skip, what, "knob");
}

int sl__op_infer(sl__op *op, const sl__struct *seed) {
  sl__struct *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("an element structure");
  if (op->input) {
    if (op->input->shape) *s = *op->input->shape;
    else s->open = true;
  } else if (seed) {
    *s = *seed;
  }
  const sl__struct *src = op->source ? op->source->shape : NULL;
  const sl__op_schema *sc = op->vt->schema;
  int rc = 0;
  if (!sc) s->open = true; /* an op that does not describe itself: anything may follow */
  else if (sc->infer) rc = sc->infer(op, s, src);
  sl__free(op->shape);
  op->shape = s;
  return rc;
}

int sl__op_need(const sl__op *op, const sl__struct *s, const char *name, const char *where) {
  if (s->open || sl__struct_get((sl__struct *)s, name)) return 0;
  const char *names[SL_MAX_COMPONENTS];
  for (int i = 0; i < s->n; i++) names[i] = s->c[i].name;
  const char *near = sl__name_suggest(names, (size_t)s->n, name);
  sl__str have = {0};
  if (sl__struct_names(&have, s)) return SL_ENOMEM;
  int rc;
  if (near)
    rc = sl__op_err(op, SL_EINVAL, "%s: no component '%s' reaches this op; did you mean '%s'? (the element has: %s)",
                    where, name, near, have.s);
  else
    rc = sl__op_err(op, SL_EINVAL, "%s: no component '%s' reaches this op (the element has: %s)", where, name,
                    have.s);
  sl__str_dispose(&have);
  return rc;
}

int sl__op_batch_shape(sl__op *op, sl__struct *s, int64_t size, bool padded) {
  for (int i = 0; i < s->n; i++) {
    sl__comp_desc *c = &s->c[i];
    if (c->rank < 0) continue;
    if (c->dtype == SL_BYTES && c->rank > 0) /* what sl__stack_bytes refuses when the batch is made */
      return sl__op_err(op, SL_EINVAL, "component '%s' (made by %s) is an array of byte strings: batching stacks "
                        "numeric tensors and single strings only", c->name, c->origin ? c->origin : "?");
    if (c->rank >= SL_MAX_RANK)
      return sl__op_err(op, SL_EINVAL, "component '%s' has rank %d: batching would exceed rank %d", c->name, c->rank,
                        SL_MAX_RANK);
    for (int d = 0; d < c->rank; d++) {
      if (c->dims[d] != SL__DIM_VARIES) continue;
      if (!padded)
        return sl__op_err(op, SL_EINVAL, "component '%s' (made by %s) has a dimension %d that varies between elements: "
                          "a batch of them has mismatched shapes (use padded_batch or bucket_by_sequence_length)",
                          c->name, c->origin ? c->origin : "?", d);
      c->dims[d] = SL__DIM_UNKNOWN; /* padded to the batch's longest */
    }
    memmove(c->dims + 1, c->dims, (size_t)c->rank * sizeof c->dims[0]);
    c->dims[0] = size;
    c->rank++;
    c->origin = op->path;
  }
  return 0;
}
