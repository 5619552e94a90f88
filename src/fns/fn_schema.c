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

/* A read of a component s does not have: the op, the component (and the arg naming it, `arg` "ops[3].args.x" or
 * NULL), the nearest name and the components there are. */
static int missing(const sl__struct *s, const char *who, const char *arg, const char *name) {
  const char *names[SL_MAX_COMPONENTS];
  for (int i = 0; i < s->n; i++) names[i] = s->c[i].name;
  const char *near = sl__name_suggest(names, (size_t)s->n, name);
  char nb[160] = "";
  if (near) snprintf(nb, sizeof nb, "; did you mean '%.120s'?", near);
  sl__str have = {0};
  int rc = sl__struct_names(&have, s);
  if (rc) return rc;
  bool alts = strchr(name, ';') != NULL;
  rc = sl__err(SL_EINVAL, "%s: reads %s '%s'%s%s%s, which no earlier op makes (the element has: %s)%s", who,
               alts ? "one of the components" : "component", name, arg ? " (" : "", arg ? arg : "", arg ? ")" : "",
               have.s, nb);
  sl__str_dispose(&have);
  return rc;
}

/* A component read: present (in an open structure, may be) and of the dtype and rank asked for (-1: any). */
static int read_check(sl__struct *s, const char *who, const char *arg, const char *name, int dtype, int rank,
                      sl__comp_desc **out) {
  sl__comp_desc *c = *out = sl__struct_get(s, name);
  if (!c) return s->open ? 0 : missing(s, who, arg, name);
  if (dtype >= 0 && c->dtype >= 0 && c->dtype != dtype)
    return sl__err(SL_EINVAL, "%s: component '%s' is %s (made by %s); the function reads %s", who, name,
                   sl_dtype_name((sl_dtype)c->dtype), c->origin ? c->origin : "?", sl_dtype_name((sl_dtype)dtype));
  if (rank >= 0 && c->rank >= 0 && c->rank != rank)
    return sl__err(SL_EINVAL, "%s: component '%s' has rank %d (made by %s); the function reads rank %d", who, name,
                   c->rank, c->origin ? c->origin : "?", rank);
  return 0;
}

int sl__fn_infer_decl(sl__struct *s, const sl__fn_decl *d, const char *origin, const char *who) {
  if (!d) {
    s->open = true; /* a function registered at run time: what it makes is not known */
    return 0;
  }
  sl__comp_desc *c;
  for (int i = 0; i < d->nreads; i++) {
    int rc = read_check(s, who, NULL, d->reads[i].name, d->reads[i].dtype, d->reads[i].rank, &c);
    if (rc) return rc;
  }
  for (int i = 0; i < d->nmakes; i++) {
    const sl_fn_io *m = &d->makes[i];
    int rc = sl__struct_put(s, m->name, m->dtype, m->rank, origin, &c);
    if (rc) return sl__err_wrap(rc, "%s", who);
    for (int k = 0; k < m->rank; k++) c->dims[k] = m->dims[k] >= 0 ? m->dims[k] : SL__DIM_UNKNOWN;
  }
  return 0;
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
  const char *consumed[8 + SL__ALTS_MAX];
  int nconsumed = 0;
  sl__alts alts = {0}; /* one read may name alternatives (decode_image's "jpg;png;webp") */
  for (const sl__fn_io *io = sc->reads; io && (io->arg || io->name || io->like); io++) {
    const sl__arg *ad = io->arg ? sl__arg_find(sc->args, io->arg) : NULL;
    if (ad && ad->type == SL__ARG_COMP_ALT && !alts.n) {
      /* Alternatives: those the element has must fit; in a closed structure at least one must be there. */
      char arg[200], joined[1100];
      snprintf(arg, sizeof arg, "%s.%s", path, io->arg);
      json_t *v = json_object_get(args, io->arg), *def = v ? NULL : sl__arg_default(sc->args, io->arg);
      int rc = v || def ? sl__alts_from_json(&alts, v ? v : def, path, io->arg) : 0;
      json_decref(def);
      if (rc) return rc;
      int found = 0;
      for (int i = 0; i < alts.n; i++) {
        sl__comp_desc *c = sl__struct_get(s, alts.name[i]);
        if (!c) continue;
        if ((rc = read_check(s, who, arg, alts.name[i], io->dtype, io->rank, &c))) return rc;
        if (!found++ && !have_first) {
          first = *c;
          have_first = true;
        }
      }
      if (!found && alts.n && !s->open && !(io->flags & SL__IO_IF_PRESENT))
        return missing(s, who, arg, sl__alts_text(&alts, joined, sizeof joined));
      if ((io->flags & SL__IO_CONSUMED) && !keep)
        for (int i = 0; i < alts.n && nconsumed < 8 + SL__ALTS_MAX; i++) consumed[nconsumed++] = alts.name[i];
      continue;
    }
    const char *name = io_name(sc, io, args);
    if (!name) continue;
    sl__comp_desc *c = sl__struct_get(s, name);
    if (!c && (s->open || (io->flags & SL__IO_IF_PRESENT))) continue;
    if (!c && (io->flags & SL__IO_OPTIONAL) && !(io->arg && json_object_get(args, io->arg))) continue;
    char arg[200];
    if (io->arg) snprintf(arg, sizeof arg, "%s.%s", path, io->arg);
    int rc = read_check(s, who, io->arg ? arg : NULL, name, io->dtype, io->rank, &c);
    if (rc) return rc;
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
