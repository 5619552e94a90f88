/* prov/store/store_query.c: reading the store: nodes by filter (sl_prov_find), types, the events and contexts next
 * to a node, and freeing what they return. The few statements built here are assembled from fixed fragments
 * chosen by which filters are set, never from data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prov/store/store_int.h"

static void node_dispose(sl_prov_node *n) {
  sl__free(n->type_name);
  sl__free(n->name);
  sl__free(n->uri);
  for (size_t i = 0; i < n->nprops; i++) {
    sl__free(n->props[i].name);
    sl__free(n->props[i].s);
    sl__free(n->props[i].bytes);
  }
  sl__free(n->props);
}

void sl_prov_list_free(sl_prov_list *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) node_dispose(&l->nodes[i]);
  sl__free(l->nodes);
  for (size_t i = 0; i < l->nevents; i++) sl__free(l->events[i].path);
  sl__free(l->events);
  sl__free(l);
}

int sl__prov_grow(void **v, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t nc = *cap ? *cap * 2 : 16, bytes;
  while (nc < need) nc *= 2;
  if (!sl__mul_ok(nc, elem, &bytes)) return sl__oom("list");
  void *nv = sl__realloc(*v, bytes);
  if (!nv) return sl__oom("list");
  memset((char *)nv + *cap * elem, 0, (nc - *cap) * elem);
  *v = nv;
  *cap = nc;
  return 0;
}

static int dup_or_null(char **dst, const char *s) {
  *dst = NULL;
  if (!s) return 0;
  *dst = sl__strdup(s);
  return *dst ? 0 : sl__oom("string");
}

static const char *TABLE[3] = {"Execution", "Artifact", "Context"};
static const char *PTABLE[3] = {"ExecutionProperty", "ArtifactProperty", "ContextProperty"};
static const char *PCOL[3] = {"execution_id", "artifact_id", "context_id"};

/* The node filter, from fixed fragments. Parameters are bound in the order the fragments appear. */
static void filter_sql(char *buf, size_t cap, sl_prov_kind kind, const sl_prov_query *q) {
  size_t l = (size_t)snprintf(buf, cap, " FROM %s n JOIN Type t ON t.id = n.type_id WHERE 1 = 1", TABLE[kind]);
  if (q && q->type_name) l += (size_t)snprintf(buf + l, cap - l, " AND t.name = ?");
  if (q && q->id) l += (size_t)snprintf(buf + l, cap - l, " AND n.id = ?");
  if (q && q->name) l += (size_t)snprintf(buf + l, cap - l, " AND n.name = ?");
  if (q && q->context_id)
    l += (size_t)snprintf(buf + l, cap - l,
                          kind == SL_PROV_ARTIFACT    ? " AND n.id IN (SELECT artifact_id FROM Attribution WHERE "
                                                        "context_id = ?)"
                          : kind == SL_PROV_EXECUTION ? " AND n.id IN (SELECT execution_id FROM Association WHERE "
                                                        "context_id = ?)"
                                                      : " AND n.id IN (SELECT context_id FROM ParentContext WHERE "
                                                        "parent_context_id = ?)");
}

static int bind_filter(sl__pstmt *st, const sl_prov_query *q, int *k) {
  int rc = 0;
  if (q && q->type_name && (rc = sl__pstmt_bind_text(st, ++*k, q->type_name))) return rc;
  if (q && q->id && (rc = sl__pstmt_bind_i64(st, ++*k, q->id))) return rc;
  if (q && q->name && (rc = sl__pstmt_bind_text(st, ++*k, q->name))) return rc;
  if (q && q->context_id && (rc = sl__pstmt_bind_i64(st, ++*k, q->context_id))) return rc;
  if (q && q->limit && (rc = sl__pstmt_bind_i64(st, ++*k, (int64_t)q->limit))) return rc;
  return 0;
}

static int read_prop(sl__pstmt *st, int c0, sl_prov_prop *pr, bool b64) {
  /* columns: name, is_custom, int, double, string, proto, bool, byte */
  int rc = dup_or_null(&pr->name, sl__pstmt_text(st, c0));
  if (rc) return rc;
  pr->custom = sl__pstmt_i64(st, c0 + 1) != 0;
  if (!sl__pstmt_null(st, c0 + 6)) {
    pr->type = SL_PROV_T_BOOL;
    pr->i = sl__pstmt_i64(st, c0 + 6);
  } else if (!sl__pstmt_null(st, c0 + 2)) {
    pr->type = SL_PROV_T_INT;
    pr->i = sl__pstmt_i64(st, c0 + 2);
  } else if (!sl__pstmt_null(st, c0 + 3)) {
    pr->type = SL_PROV_T_DOUBLE;
    pr->d = sl__pstmt_f64(st, c0 + 3);
  } else if (!sl__pstmt_null(st, c0 + 4)) {
    pr->type = SL_PROV_T_STRING;
    const char *t = sl__pstmt_text(st, c0 + 4);
    rc = sl__mlmd_struct_decode(&pr->s, t); /* the library's STRUCT encoding, else a plain string */
    if (rc < 0) return rc;
    if (rc == 0) pr->type = SL_PROV_T_STRUCT;
    else if ((rc = dup_or_null(&pr->s, t))) return rc;
  } else {
    int col = !sl__pstmt_null(st, c0 + 5) ? c0 + 5 : c0 + 7;
    size_t n = 0;
    const void *b = sl__pstmt_blob(st, col, &n);
    pr->type = b ? SL_PROV_T_PROTO : SL_PROV_T_UNKNOWN;
    /* On SQLite proto_value holds base64 text (the library's encoding there); bytes that are not base64 are kept */
    if (b && b64 && col == c0 + 5 && (rc = sl__mlmd_proto_decode(&pr->bytes, &pr->len, b, n)) <= 0) return rc;
    if (b) {
      pr->bytes = sl__malloc(n ? n : 1);
      if (!pr->bytes) return sl__oom("property");
      if (n) memcpy(pr->bytes, b, n);
      pr->len = n;
    }
  }
  return 0;
}

int sl_prov_find(sl_prov_list **out, sl_prov *p, sl_prov_kind kind, const sl_prov_query *q) {
  *out = NULL;
  if (kind < SL_PROV_EXECUTION || kind > SL_PROV_CONTEXT) return sl__err(SL_EINVAL, "bad kind %d", kind);
  sl_prov_list *l = sl__calloc(1, sizeof *l);
  if (!l) return sl__oom("list");
  char filt[512], sql[1400];
  filter_sql(filt, sizeof filt, kind, q);
  const char *lim = q && q->limit ? " LIMIT ?" : "";
  snprintf(sql, sizeof sql,
           "SELECT n.id, n.type_id, t.name, n.name, %s, %s, n.create_time_since_epoch, "
           "n.last_update_time_since_epoch%s ORDER BY n.id%s",
           kind == SL_PROV_ARTIFACT ? "n.uri" : "NULL",
           kind == SL_PROV_ARTIFACT ? "n.state" : kind == SL_PROV_EXECUTION ? "n.last_known_state" : "0", filt, lim);
  sl__pstmt *st = NULL;
  size_t cap = 0;
  int k = 0, rc = sl__pdb_prepare(p->db, &st, sql);
  if (!rc) rc = bind_filter(st, q, &k);
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    if ((rc = sl__prov_grow((void **)&l->nodes, &cap, l->n + 1, sizeof *l->nodes))) break;
    sl_prov_node *n = &l->nodes[l->n++];
    n->kind = kind;
    n->id = sl__pstmt_i64(st, 0);
    n->type_id = sl__pstmt_i64(st, 1);
    if ((rc = dup_or_null(&n->type_name, sl__pstmt_text(st, 2))) || (rc = dup_or_null(&n->name, sl__pstmt_text(st, 3))) ||
        (rc = dup_or_null(&n->uri, sl__pstmt_text(st, 4))))
      break;
    n->state = (int)sl__pstmt_i64(st, 5);
    n->create_ms = sl__pstmt_i64(st, 6);
    n->update_ms = sl__pstmt_i64(st, 7);
    rc = 0;
  }
  sl__pstmt_free(st);
  st = NULL;
  if (rc < 0) goto fail;
  rc = 0;
  if (l->n) {
    /* Properties of the same set, in one query. */
    snprintf(sql, sizeof sql,
             "SELECT %s, name, is_custom_property, int_value, double_value, string_value, proto_value, bool_value, "
             "byte_value FROM %s WHERE %s IN (SELECT n.id%s ORDER BY n.id%s) ORDER BY %s, is_custom_property, name",
             PCOL[kind], PTABLE[kind], PCOL[kind], filt, lim, PCOL[kind]);
    k = 0;
    rc = sl__pdb_prepare(p->db, &st, sql);
    if (!rc) rc = bind_filter(st, q, &k);
    size_t idx = 0;
    while (!rc && (rc = sl__pstmt_step(st)) == 1) {
      int64_t id = sl__pstmt_i64(st, 0);
      while (idx < l->n && l->nodes[idx].id < id) idx++;
      rc = 0;
      if (idx >= l->n || l->nodes[idx].id != id) continue;
      sl_prov_node *n = &l->nodes[idx];
      size_t pc = n->nprops; /* capacity tracking: grow by one each time (few properties per node) */
      sl_prov_prop *np = sl__realloc(n->props, (pc + 1) * sizeof *np);
      if (!np) {
        rc = sl__oom("properties");
        break;
      }
      n->props = np;
      memset(&np[pc], 0, sizeof *np);
      n->nprops++;
      rc = read_prop(st, 1, &np[pc], sl__pdb_dialect_of(p->db)->proto_text);
    }
    sl__pstmt_free(st);
    if (rc < 0) goto fail;
    rc = 0;
  }
  *out = l;
  return 0;
fail:
  sl_prov_list_free(l);
  return rc;
}

int sl_prov_types(sl_prov_list **out, sl_prov *p) {
  *out = NULL;
  sl_prov_list *l = sl__calloc(1, sizeof *l);
  if (!l) return sl__oom("list");
  sl__pstmt *st = NULL;
  size_t cap = 0;
  int rc = sl__pdb_prepare(p->db, &st,
                           "SELECT t.id, t.type_kind, t.name, (SELECT b.name FROM ParentType pt JOIN Type b ON "
                           "b.id = pt.parent_type_id WHERE pt.type_id = t.id ORDER BY b.id LIMIT 1) FROM Type t "
                           "ORDER BY t.id");
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    if ((rc = sl__prov_grow((void **)&l->nodes, &cap, l->n + 1, sizeof *l->nodes))) break;
    sl_prov_node *n = &l->nodes[l->n++];
    n->id = n->type_id = sl__pstmt_i64(st, 0);
    n->kind = (sl_prov_kind)sl__pstmt_i64(st, 1);
    if ((rc = dup_or_null(&n->type_name, sl__pstmt_text(st, 2))) || (rc = dup_or_null(&n->name, sl__pstmt_text(st, 3))))
      break;
    rc = 0;
  }
  sl__pstmt_free(st);
  st = NULL;
  if (rc >= 0) {
    rc = sl__pdb_prepare(p->db, &st, "SELECT type_id, name, data_type FROM TypeProperty ORDER BY type_id, name");
    while (!rc && (rc = sl__pstmt_step(st)) == 1) {
      int64_t tid = sl__pstmt_i64(st, 0);
      rc = 0;
      for (size_t i = 0; i < l->n; i++) {
        if (l->nodes[i].id != tid) continue;
        sl_prov_node *n = &l->nodes[i];
        sl_prov_prop *np = sl__realloc(n->props, (n->nprops + 1) * sizeof *np);
        if (!np) {
          rc = sl__oom("properties");
          break;
        }
        n->props = np;
        memset(&np[n->nprops], 0, sizeof *np);
        np[n->nprops].type = (sl_prov_ptype)sl__pstmt_i64(st, 2);
        rc = dup_or_null(&np[n->nprops].name, sl__pstmt_text(st, 1));
        n->nprops++;
        break;
      }
    }
    sl__pstmt_free(st);
  }
  if (rc < 0) {
    sl_prov_list_free(l);
    return rc;
  }
  *out = l;
  return 0;
}

/* Events touching one node (kind ARTIFACT or EXECUTION), with their paths. */
int sl__prov_load_events(sl_prov *p, sl_prov_list *l, size_t *cap, sl_prov_kind kind, int64_t id) {
  char sql[512];
  const char *col = kind == SL_PROV_ARTIFACT ? "artifact_id" : "execution_id";
  snprintf(sql, sizeof sql,
           "SELECT e.id, e.artifact_id, e.execution_id, e.type, e.milliseconds_since_epoch, p.is_index_step, "
           "p.step_index, p.step_key, x.last_known_state, t.name FROM Event e LEFT JOIN EventPath p ON p.event_id = "
           "e.id LEFT JOIN Execution x ON x.id = e.execution_id LEFT JOIN Type t ON t.id = x.type_id WHERE e.%s = ? "
           "ORDER BY e.id, %s",
           col, sl__pdb_dialect_of(p->db)->path_order);
  sl__pstmt *st;
  int rc = sl__pdb_prepare(p->db, &st, sql);
  if (rc) return rc;
  if ((rc = sl__pstmt_bind_i64(st, 1, id))) {
    sl__pstmt_free(st);
    return rc;
  }
  while ((rc = sl__pstmt_step(st)) == 1) {
    int64_t eid = sl__pstmt_i64(st, 0);
    sl_prov_event *ev = l->nevents ? &l->events[l->nevents - 1] : NULL;
    if (!ev || ev->id != eid) {
      if ((rc = sl__prov_grow((void **)&l->events, cap, l->nevents + 1, sizeof *l->events))) break;
      ev = &l->events[l->nevents++];
      ev->id = eid;
      ev->artifact_id = sl__pstmt_i64(st, 1);
      ev->execution_id = sl__pstmt_i64(st, 2);
      ev->type = (int)sl__pstmt_i64(st, 3);
      ev->ms = sl__pstmt_i64(st, 4);
      /* Marks re-emitting executions (CACHED, Resolvers) for the lineage walk; not part of the public event. */
      const char *tn = sl__pstmt_text(st, 9);
      size_t tl = tn ? strlen(tn) : 0;
      ev->reemit = sl__pstmt_i64(st, 8) == SL_PROV_E_CACHED ||
                   (tl >= 8 && (!strcmp(tn + tl - 8, "Resolver") || !strcmp(tn + tl - 8, "resolver")));
    }
    if (sl__pstmt_null(st, 5)) continue;
    char step[300];
    if (sl__pstmt_i64(st, 5))
      snprintf(step, sizeof step, "%lld", (long long)sl__pstmt_i64(st, 6));
    else
      snprintf(step, sizeof step, "%s", sl__pstmt_text(st, 7) ? sl__pstmt_text(st, 7) : "");
    size_t ol = ev->path ? strlen(ev->path) : 0, sl = strlen(step);
    char *np = sl__realloc(ev->path, ol + sl + 2);
    if (!np) {
      rc = sl__oom("event path");
      break;
    }
    if (ol) np[ol++] = ':';
    memcpy(np + ol, step, sl + 1);
    ev->path = np;
  }
  sl__pstmt_free(st);
  return rc < 0 ? rc : 0;
}

int sl_prov_neighbours(sl_prov_list **out, sl_prov *p, sl_prov_kind kind, int64_t id) {
  *out = NULL;
  sl_prov_list *l = NULL;
  int rc;
  if (kind == SL_PROV_CONTEXT) {
    sl_prov_query q = {0};
    q.context_id = id;
    return sl_prov_find(out, p, SL_PROV_CONTEXT, &q);
  }
  /* The contexts of the node. */
  sl__pstmt *st;
  rc = sl__pdb_prepare(p->db, &st,
                       kind == SL_PROV_ARTIFACT ? "SELECT context_id FROM Attribution WHERE artifact_id = ? ORDER BY "
                                                  "context_id"
                                                : "SELECT context_id FROM Association WHERE execution_id = ? ORDER BY "
                                                  "context_id");
  if (rc) return rc;
  l = sl__calloc(1, sizeof *l);
  if (!l) {
    sl__pstmt_free(st);
    return sl__oom("list");
  }
  size_t ncap = 0, ecap = 0;
  rc = sl__pstmt_bind_i64(st, 1, id);
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    /* Ids first, nodes after: a backend may run one statement at a time per connection (db_int.h). */
    int64_t cid = sl__pstmt_i64(st, 0);
    if ((rc = sl__prov_grow((void **)&l->nodes, &ncap, l->n + 1, sizeof *l->nodes))) break;
    l->nodes[l->n++].id = cid;
    rc = 0;
  }
  sl__pstmt_free(st);
  for (size_t i = 0; rc >= 0 && i < l->n; i++) {
    sl_prov_query q = {0};
    q.id = l->nodes[i].id;
    sl_prov_list *c;
    rc = sl_prov_find(&c, p, SL_PROV_CONTEXT, &q);
    if (rc) break;
    if (c->n) {
      l->nodes[i] = c->nodes[0];
      c->n = 0;
    }
    sl_prov_list_free(c);
  }
  if (rc >= 0) rc = sl__prov_load_events(p, l, &ecap, kind, id);
  if (rc < 0) {
    sl_prov_list_free(l);
    return rc;
  }
  *out = l;
  return 0;
}
