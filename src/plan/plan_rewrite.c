/* plan/plan_rewrite.c: the rewriter: the traced spec with the plan's knobs written in (every "autotune" replaced by a
 * number) and the chosen cache and root prefetch inserted. The result is an ordinary spec a person can read. */
#include <stdlib.h>
#include <string.h>

#include "plan/plan_fuse_int.h"
#include "plan/plan_int.h"

/* Settles any "autotune" knob the plan left in op object o (the tunable knobs its table lists): to the table's
 * default, or, where the table computes it (a map's buffer, an interleave's cycle), by removing it so the op
 * computes it when built. */
static void settle_autotune(json_t *o, const char *kind) {
  const sl__op_schema *sc = sl__op_schema_of(kind);
  for (const sl__arg *a = sc ? sc->knobs : NULL; a && a->name; a++) {
    json_t *v = json_object_get(o, a->name);
    if (!(a->flags & SL__ARGF_TUNABLE) || !json_is_string(v)) continue;
    json_t *def = sl__arg_default(sc->knobs, a->name);
    if (def) json_object_set_new(o, a->name, def);
    else json_object_del(o, a->name);
  }
}

static void settle_chain(json_t *arr) {
  for (size_t i = 0; i < json_array_size(arr); i++) {
    json_t *o = json_array_get(arr, i);
    const char *kind = json_string_value(json_object_get(o, "op"));
    settle_autotune(o, kind ? kind : "");
    json_t *src = json_object_get(o, "source");
    if (src) settle_chain(src);
  }
}

json_t *sl__plan_spec(const sl_plan *P) {
  json_t *spec = json_deep_copy(P->spec);
  if (!spec) {
    sl__oom("the planned spec");
    return NULL;
  }
  int rc = 0;
  for (int i = 0; i < P->nops && !rc; i++) {
    const sl__pm_op *o = &P->ops[i];
    json_t *js = sl__spec_op_at(spec, o->path);
    if (!js) continue;
    if (o->par_tunable) rc |= json_object_set_new(js, "parallelism", json_integer(P->par[i]));
    if (o->buf_tunable) rc |= json_object_set_new(js, "buffer", json_integer(sl__plan_buffer_of(P, i)));
    if (o->has_cyc && (o->cyc_tunable || P->cyc[i] != o->cyc0))
      rc |= json_object_set_new(js, "cycle_length", json_integer(P->cyc[i]));
  }
  for (int k = 0; k < P->nnet && !rc; k++) { /* a remote reader's requests in flight (plan_net.c) */
    json_t *js = sl__spec_op_at(spec, P->ops[P->net[k].op].path);
    if (js) rc |= json_object_set_new(js, "readahead", json_integer(P->net[k].in_flight));
    if (js && P->net[k].keep > 0) rc |= json_object_set_new(js, "keep", json_integer((json_int_t)P->net[k].keep));
  }
  settle_chain(json_object_get(spec, "ops"));
  json_t *ops = json_object_get(spec, "ops");
  if (!rc && P->cache_at >= 0) {
    const char *p = P->ops[P->cache_at].path; /* "ops[k]": a top-level op */
    size_t k = (size_t)strtoul(p + 4, NULL, 10);
    rc = sl__plan_seeds_pin(ops); /* the ops after the cache keep the seeds of their old places */
    if (!rc) rc = json_array_insert_new(ops, k + 1, json_pack("{s:s}", "op", "cache"));
    if (!rc) sl__plan_seeds_unpin(ops);
  }
  if (!rc && P->add_prefetch)
    rc = json_array_append_new(ops, json_pack("{s:s, s:I}", "op", "prefetch", "buffer", (json_int_t)P->prefetch_buf));
  if (rc) {
    json_decref(spec);
    sl__oom("the planned spec");
    return NULL;
  }
  return spec;
}

int sl_plan_spec_json(char **out, const sl_plan *P) {
  *out = NULL;
  json_t *spec = sl__plan_spec(P);
  if (!spec) return SL_ENOMEM;
  char *s = json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(spec);
  if (!s) return sl__oom("the planned spec");
  *out = sl__strdup(s);
  sl__free(s);
  return *out ? 0 : sl__oom("the planned spec");
}
