/* fns/fn_common.c: what the function implementations (fn_*.c) share: reading a component an arg names, with the
 * error naming the op, the element and where it came from. Declared in fns_int.h. */
#include <stdio.h>
#include <string.h>

#include "fns/fns_int.h"

/* A byte-string component's text, at most 1024 bytes, for a message; NULL when e has no such component. */
static const sl_comp *text_comp(const sl_elem *e, const char *name) {
  const sl_comp *c = sl_elem_get((sl_elem *)e, name);
  return c && c->dtype == SL_BYTES && c->rank == 0 ? c : NULL;
}
#define TEXT_ARG(c) (int)((c)->size < 1024 ? (c)->size : 1024), (const char *)sl_comp_data(c)

const char *sl__fn_origin(const sl_elem *e, char *buf, size_t n) {
  const sl_comp *f = text_comp(e, "filename"), *url = text_comp(e, "__url__"), *key = text_comp(e, "__key__");
  buf[0] = 0;
  if (f) snprintf(buf, n, " (file '%.*s')", TEXT_ARG(f));
  else if (url && key) snprintf(buf, n, " (shard '%.*s', sample '%.*s')", TEXT_ARG(url), TEXT_ARG(key));
  return buf;
}

int sl__fn_component(sl_elem *e, const sl_fn_call *call, const char *name, sl_comp **out) {
  *out = sl_elem_get(e, name);
  if (*out) return 0;
  char from[2200];
  /* A sample of a WebDataset shard may lack a member its neighbours have: a data error (on_error "skip" drops it). */
  if (sl_elem_get(e, "__key__"))
    return sl__err(SL_EINVAL, "%s: element %llu%s has no component '%s'", call->op_path,
                   (unsigned long long)call->index, sl__fn_origin(e, from, sizeof from), name);
  /* Elsewhere the build checks the names an element carries, except after a function registered at run time (its
   * output is not known then): a name missing here is a spec mistake, SL_ENOTFOUND, which "skip" does not drop. */
  return sl__err(SL_ENOTFOUND, "%s: element %llu%s has no component '%s' (a spec error: no earlier op makes it)",
                 call->op_path, (unsigned long long)call->index, sl__fn_origin(e, from, sizeof from), name);
}

int sl__fn_component_alt(sl_elem *e, const sl_fn_call *call, const sl__alts *alts, sl_comp **out) {
  if (alts->n == 1) return sl__fn_component(e, call, alts->name[0], out);
  for (int i = 0; i < alts->n; i++)
    if ((*out = sl_elem_get(e, alts->name[i]))) return 0;
  char from[2200], names[1100], have[1024];
  sl__alts_text(alts, names, sizeof names);
  size_t k = 0;
  have[0] = 0;
  for (int i = 0; i < e->n && k < sizeof have; i++) {
    int w = snprintf(have + k, sizeof have - k, "%s%s", i ? ", " : "", e->c[i].name);
    if (w < 0) break;
    k += (size_t)w;
  }
  if (sl_elem_get(e, "__key__"))
    return sl__err(SL_EINVAL, "%s: element %llu%s has none of the components '%s' (it has: %s)", call->op_path,
                   (unsigned long long)call->index, sl__fn_origin(e, from, sizeof from), names, have);
  return sl__err(SL_ENOTFOUND, "%s: element %llu%s has none of the components '%s' (it has: %s; a spec error: no "
                 "earlier op makes them)", call->op_path, (unsigned long long)call->index,
                 sl__fn_origin(e, from, sizeof from), names, have);
}

void sl__fn_remove_alts(sl_elem *e, const sl__alts *alts, const char *keep) {
  for (int i = 0; i < alts->n; i++)
    if (strcmp(alts->name[i], keep)) sl_elem_remove(e, alts->name[i]);
}
