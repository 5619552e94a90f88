/* fns/fn_schema.c: what the functions' schemas are used for: checking a map's args (unknown names with the nearest
 * valid one, types, ranges) and following the element structure through a call (the components it reads must
 * exist with a fitting dtype and rank; those it writes appear; consumed ones go). The schemas live beside each
 * function in fn_*.c. */
#include <string.h>

#include "fns/fns_int.h"

int sl__fn_check_args(const sl__fn_schema *sc, json_t *args, const char *path, const char *fn) {
  if (!sc) return 0;
  char what[160];
  snprintf(what, sizeof what, "function '%s'", fn);
  return sl__args_check(sc->args, args, path, NULL, what, "arg");
}

/* The component name an io entry resolves to, or NULL (an optional entry not given): its arg's value, else the
 * arg's default in the table (the one place it is written), else the fixed name of an entry without an arg. */
static const char *io_name(const sl__fn_schema *sc, const sl__fn_io *io, json_t *args) {
  json_t *v = io->arg ? json_object_get(args, io->arg) : NULL;
  if (json_is_string(v)) return json_string_value(v);
  const sl__arg *a = io->arg ? sl__arg_find(sc->args, io->arg) : NULL;
  if (a && a->def) return a->def;
  if (io->name) return io->name;
  if (io->like)
    for (const sl__fn_io *r = sc->reads; r && (r->arg || r->name); r++)
      if (r->arg && !strcmp(r->arg, io->like)) return io_name(sc, r, args);
  return NULL;
}

static int missing(const sl__struct *s, const char *who, const char *path, const sl__fn_io *io, const char *name) {
  sl__str have = {0};
  int rc = sl__struct_names(&have, s);
  if (rc) return rc;
  if (io->arg)
    rc = sl__err(SL_EINVAL, "%s: reads component '%s' (%s.%s), which no earlier op makes (the element has: %s)", who,
                 name, path, io->arg, have.s);
  else
    rc = sl__err(SL_EINVAL, "%s: reads component '%s', which no earlier op makes (the element has: %s)", who, name,
                 have.s);
  sl__str_dispose(&have);
  return rc;
}

int sl__fn_infer(sl__struct *s, const sl__fn_schema *sc, json_t *args, const char *path, const char *origin,
                 const char *who) {
  if (!sc) {
    s->open = true; /* a function registered at run time: what it makes is not known */
    return 0;
  }
  sl__comp_desc first = {0};
  bool have_first = false;
  json_t *keepv = json_object_get(args, "keep");
  bool keep = json_is_true(keepv);
  const char *consumed[8];
  int nconsumed = 0;
  for (const sl__fn_io *io = sc->reads; io && (io->arg || io->name || io->like); io++) {
    const char *name = io_name(sc, io, args);
    if (!name) continue;
    sl__comp_desc *c = sl__struct_get(s, name);
    if (!c) {
      if (s->open || (io->flags & SL__IO_IF_PRESENT)) continue;
      if ((io->flags & SL__IO_OPTIONAL) && !(io->arg && json_object_get(args, io->arg))) continue;
      return missing(s, who, path, io, name);
    }
    if (io->dtype >= 0 && c->dtype >= 0 && c->dtype != io->dtype)
      return sl__err(SL_EINVAL, "%s: component '%s' is %s (made by %s); the function reads %s", who, name,
                     sl_dtype_name((sl_dtype)c->dtype), c->origin ? c->origin : "?", sl_dtype_name((sl_dtype)io->dtype));
    if (io->rank >= 0 && c->rank >= 0 && c->rank != io->rank)
      return sl__err(SL_EINVAL, "%s: component '%s' has rank %d (made by %s); the function reads rank %d", who, name,
                     c->rank, c->origin ? c->origin : "?", io->rank);
    if (!have_first) {
      first = *c;
      have_first = true;
    }
    if ((io->flags & SL__IO_CONSUMED) && !keep && nconsumed < 8) consumed[nconsumed++] = name;
  }
  const char *written[8];
  int nwritten = 0;
  for (const sl__fn_io *io = sc->writes; io && (io->arg || io->name || io->like); io++) {
    const char *name = io_name(sc, io, args);
    if (!name) continue;
    int dt = io->dtype == SL__DT_SAME ? (have_first ? first.dtype : SL__DT_ANY) : io->dtype;
    int rank = io->rank == SL__RANK_SAME ? (have_first ? first.rank : -1) : io->rank;
    sl__comp_desc *c;
    int rc = sl__struct_put(s, name, dt, rank, origin, &c);
    if (rc) return sl__err_wrap(rc, "%s", path);
    if (io->rank == SL__RANK_SAME && have_first && first.rank >= 0)
      memcpy(c->dims, first.dims, sizeof c->dims);
    if (nwritten < 8) written[nwritten++] = name;
  }
  for (int i = 0; i < nconsumed; i++) {
    bool rewritten = false;
    for (int j = 0; j < nwritten; j++) rewritten |= !strcmp(consumed[i], written[j]);
    if (!rewritten) sl__struct_remove(s, consumed[i]);
  }
  sl_args view = {args, path, sc->args, NULL};
  return sc->infer ? sc->infer(s, &view, origin) : 0;
}
