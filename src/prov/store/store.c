/* prov/store/store.c: the MLMD store API: open/verify, types, artifacts, executions, contexts, properties, events,
 * attributions/associations, queries, lineage walks and the JSON export. Every statement is prepared and its
 * values bound; the few statements built here are assembled from fixed fragments chosen by which filters are
 * set, never from data. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "prov/store/store_int.h"

int64_t sl__prov_now_ms(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

const char *sl_prov_state_name(sl_prov_kind kind, int s) {
  static const char *const A[] = {"UNKNOWN", "PENDING", "LIVE", "MARKED_FOR_DELETION", "DELETED", "ABANDONED",
                                  "REFERENCE"};
  static const char *const E[] = {"UNKNOWN", "NEW", "RUNNING", "COMPLETE", "FAILED", "CACHED", "CANCELED"};
  if (kind == SL_PROV_ARTIFACT) return s >= 0 && s <= 6 ? A[s] : "?";
  if (kind == SL_PROV_EXECUTION) return s >= 0 && s <= 6 ? E[s] : "?";
  return "";
}

const char *sl_prov_event_name(int t) {
  static const char *const N[] = {"UNKNOWN", "DECLARED_OUTPUT", "DECLARED_INPUT", "INPUT", "OUTPUT",
                                  "INTERNAL_INPUT", "INTERNAL_OUTPUT", "PENDING_OUTPUT"};
  return t >= 0 && t <= 7 ? N[t] : "?";
}

static const char *const SQL[Q_NQ] = {
    [Q_TYPE_FIND] = "SELECT id, type_kind FROM Type WHERE name = ? ORDER BY id LIMIT 1",
    [Q_TYPE_INS] = "INSERT INTO Type(name, type_kind) VALUES(?, ?) RETURNING id",
    [Q_TYPE_PROP_INS] = "INSERT INTO TypeProperty(type_id, name, data_type) VALUES(?, ?, ?) ON CONFLICT DO NOTHING",
    [Q_PARENT_TYPE_INS] = "INSERT INTO ParentType(type_id, parent_type_id) VALUES(?, ?) ON CONFLICT DO NOTHING",
    [Q_ART_INS] = "INSERT INTO Artifact(type_id, uri, state, name, create_time_since_epoch, "
                  "last_update_time_since_epoch) VALUES(?, ?, ?, ?, ?, ?) RETURNING id",
    [Q_EXEC_INS] = "INSERT INTO Execution(type_id, last_known_state, name, create_time_since_epoch, "
                   "last_update_time_since_epoch) VALUES(?, ?, ?, ?, ?) RETURNING id",
    [Q_CTX_FIND] = "SELECT id FROM Context WHERE type_id = ? AND name = ?",
    [Q_CTX_INS] = "INSERT INTO Context(type_id, name, create_time_since_epoch, last_update_time_since_epoch) "
                  "VALUES(?, ?, ?, ?) RETURNING id",
    [Q_EXEC_STATE] = "UPDATE Execution SET last_known_state = ?, last_update_time_since_epoch = ? WHERE id = ?",
    [Q_APROP] = "INSERT INTO ArtifactProperty(artifact_id, name, is_custom_property, int_value, double_value, "
                "string_value, proto_value, bool_value) VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(artifact_id, "
                "name, is_custom_property) DO UPDATE SET int_value = excluded.int_value, double_value = "
                "excluded.double_value, string_value = excluded.string_value, proto_value = excluded.proto_value, "
                "bool_value = excluded.bool_value",
    [Q_EPROP] = "INSERT INTO ExecutionProperty(execution_id, name, is_custom_property, int_value, double_value, "
                "string_value, proto_value, bool_value) VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(execution_id, "
                "name, is_custom_property) DO UPDATE SET int_value = excluded.int_value, double_value = "
                "excluded.double_value, string_value = excluded.string_value, proto_value = excluded.proto_value, "
                "bool_value = excluded.bool_value",
    [Q_CPROP] = "INSERT INTO ContextProperty(context_id, name, is_custom_property, int_value, double_value, "
                "string_value, proto_value, bool_value) VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(context_id, "
                "name, is_custom_property) DO UPDATE SET int_value = excluded.int_value, double_value = "
                "excluded.double_value, string_value = excluded.string_value, proto_value = excluded.proto_value, "
                "bool_value = excluded.bool_value",
    [Q_EVENT_INS] = "INSERT INTO Event(artifact_id, execution_id, type, milliseconds_since_epoch) "
                    "VALUES(?, ?, ?, ?) RETURNING id",
    [Q_PATH_INS] = "INSERT INTO EventPath(event_id, is_index_step, step_index, step_key) VALUES(?, ?, ?, ?)",
    [Q_ATTR] = "INSERT INTO Attribution(context_id, artifact_id) VALUES(?, ?) ON CONFLICT DO NOTHING",
    [Q_ASSOC] = "INSERT INTO Association(context_id, execution_id) VALUES(?, ?) ON CONFLICT DO NOTHING",
    [Q_PARENT_CTX] = "INSERT INTO ParentContext(context_id, parent_context_id) VALUES(?, ?) ON CONFLICT DO NOTHING",
    /* PostgreSQL only. */
    [Q_NAME_LOCK] = "SELECT pg_advisory_xact_lock(hashtext(?))",
    /* PostgreSQL only: an event and its [key, index] path in one statement (one round trip instead of three). */
    [Q_EVENT_PG2] = "WITH e AS (INSERT INTO Event(artifact_id, execution_id, type, milliseconds_since_epoch) "
                    "VALUES(?, ?, ?, ?) RETURNING id) INSERT INTO EventPath(event_id, is_index_step, step_index, "
                    "step_key) SELECT id, false, CAST(NULL AS INTEGER), CAST(? AS TEXT) FROM e UNION ALL SELECT id, "
                    "true, CAST(? AS INTEGER), CAST(NULL AS TEXT) FROM e",
};

int sl__prov_stmt(sl_prov *p, int which, sl__pstmt **out) {
  if (!p->q[which]) {
    int rc = sl__pdb_prepare_insert(p->db, &p->q[which], SQL[which]);
    if (rc) return rc;
  } else {
    sl__pstmt_reset(p->q[which]);
  }
  *out = p->q[which];
  return 0;
}

int sl_prov_open(sl_prov **out, const char *uri, unsigned flags) {
  *out = NULL;
  sl_prov *p = sl__calloc(1, sizeof *p);
  if (!p) return sl__oom("store");
  p->uri = sl__strdup(uri ? uri : "");
  if (!p->uri) {
    sl__free(p);
    return sl__oom("store");
  }
  /* Keep a password out of messages. */
  char *at = strchr(p->uri, '@'), *sch = strstr(p->uri, "://");
  if (at && sch) {
    char *colon = memchr(sch + 3, ':', (size_t)(at - sch - 3));
    if (colon) memmove(colon, at, strlen(at) + 1);
  }
  int rc = sl__pdb_open(&p->db, uri, (flags & SL_PROV_CREATE) != 0);
  if (!rc) rc = sl__prov_schema(p, (flags & SL_PROV_CREATE) != 0);
  if (rc) {
    sl_prov_close(p);
    return rc;
  }
  *out = p;
  return 0;
}

void sl_prov_close(sl_prov *p) {
  if (!p) return;
  if (p->in_txn && p->db) sl__pdb_exec(p->db, "ROLLBACK");
  for (int i = 0; i < Q_NQ; i++) sl__pstmt_free(p->q[i]);
  sl__pdb_close(p->db);
  sl__free(p->uri);
  sl__free(p);
}

const char *sl_prov_backend(const sl_prov *p) { return sl__pdb_is_pg(p->db) ? "postgresql" : "sqlite"; }

int sl_prov_begin(sl_prov *p) {
  if (p->in_txn) return sl__err(SL_EINVAL, "a transaction is already open");
  int rc = sl__pdb_exec(p->db, sl__pdb_is_pg(p->db) ? "BEGIN" : "BEGIN IMMEDIATE");
  if (!rc) p->in_txn = 1;
  return rc;
}

int sl_prov_commit(sl_prov *p) {
  if (!p->in_txn) return sl__err(SL_EINVAL, "no transaction is open");
  p->in_txn = 0;
  int rc = sl__pdb_exec(p->db, "COMMIT");
  if (rc) sl__pdb_exec(p->db, "ROLLBACK");
  return rc;
}

int sl_prov_rollback(sl_prov *p) {
  if (!p->in_txn) return 0;
  p->in_txn = 0;
  return sl__pdb_exec(p->db, "ROLLBACK");
}

int sl__prov_txn_begin(sl_prov *p, bool *own) {
  *own = !p->in_txn;
  return *own ? sl_prov_begin(p) : 0;
}

int sl__prov_txn_end(sl_prov *p, bool own, int rc) {
  if (!own) return rc;
  if (rc) {
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", sl_error_last());
    sl_prov_rollback(p);
    return sl__err(rc, "%s", keep);
  }
  return sl_prov_commit(p);
}

/* Serialises find-or-create of a name across PostgreSQL sessions (SQLite's write lock already does). */
static int pg_name_lock(sl_prov *p, const char *name) {
  if (!sl__pdb_is_pg(p->db)) return 0;
  sl__pstmt *st;
  int rc = sl__prov_stmt(p, Q_NAME_LOCK, &st);
  if (rc) return rc;
  rc = sl__pstmt_bind_text(st, 1, name);
  if (!rc) rc = sl__pstmt_step(st);
  sl__pstmt_reset(st);
  return rc < 0 ? rc : 0;
}

static int insert_id(sl__pstmt *st, int64_t *id) { return sl__pstmt_insert(st, id); }

/* A write whose result is not needed: queued in PostgreSQL pipeline mode (bulk loads), else run now. */
static int exec_done(sl__pstmt *st) {
  int rc = sl__pstmt_defer(st);
  return rc < 0 ? rc : 0;
}

static int type_find(sl_prov *p, const char *name, int64_t *id, int *kind) {
  sl__pstmt *st;
  int rc = sl__prov_stmt(p, Q_TYPE_FIND, &st);
  if (rc) return rc;
  if ((rc = sl__pstmt_bind_text(st, 1, name))) return rc;
  rc = sl__pstmt_step(st);
  if (rc == 1) {
    *id = sl__pstmt_i64(st, 0);
    *kind = (int)sl__pstmt_i64(st, 1);
    rc = 0;
  } else if (rc == 0) {
    rc = SL_ENOTFOUND;
  }
  sl__pstmt_reset(st);
  return rc;
}

static int type_put1(sl_prov *p, int64_t *id, sl_prov_kind kind, const char *name) {
  int k, rc = type_find(p, name, id, &k);
  if (rc == 0) {
    if (k != (int)kind)
      return sl__err(SL_EINVAL, "type '%s' exists as a%s type", name,
                     k == 0 ? "n execution" : k == 1 ? "n artifact" : " context");
    return 0;
  }
  if (rc != SL_ENOTFOUND) return rc;
  sl__pstmt *st;
  if ((rc = sl__prov_stmt(p, Q_TYPE_INS, &st))) return rc;
  if ((rc = sl__pstmt_bind_text(st, 1, name)) || (rc = sl__pstmt_bind_i64(st, 2, kind))) return rc;
  return insert_id(st, id);
}

int sl_prov_put_type(sl_prov *p, int64_t *id, sl_prov_kind kind, const char *name, const sl_prov_type_prop *props,
                     size_t nprops, const char *base) {
  if (!name || !*name) return sl__err(SL_EINVAL, "type name is empty");
  if (kind < SL_PROV_EXECUTION || kind > SL_PROV_CONTEXT) return sl__err(SL_EINVAL, "bad type kind %d", kind);
  bool own;
  int rc = sl__prov_txn_begin(p, &own);
  if (rc) return rc;
  int64_t tid = 0;
  rc = pg_name_lock(p, name);
  if (!rc) rc = type_put1(p, &tid, kind, name);
  for (size_t i = 0; !rc && i < nprops; i++) {
    sl__pstmt *st;
    if ((rc = sl__prov_stmt(p, Q_TYPE_PROP_INS, &st))) break;
    if ((rc = sl__pstmt_bind_i64(st, 1, tid)) || (rc = sl__pstmt_bind_text(st, 2, props[i].name)) ||
        (rc = sl__pstmt_bind_i64(st, 3, props[i].type)))
      break;
    rc = exec_done(st);
  }
  if (!rc && base) {
    int64_t bid = 0;
    rc = pg_name_lock(p, base);
    if (!rc) rc = type_put1(p, &bid, kind, base);
    sl__pstmt *st;
    if (!rc && !(rc = sl__prov_stmt(p, Q_PARENT_TYPE_INS, &st))) {
      if (!(rc = sl__pstmt_bind_i64(st, 1, tid)) && !(rc = sl__pstmt_bind_i64(st, 2, bid))) rc = exec_done(st);
    }
  }
  rc = sl__prov_txn_end(p, own, rc);
  if (!rc && id) *id = tid;
  return rc;
}

int sl_prov_type_id(sl_prov *p, int64_t *id, sl_prov_kind kind, const char *name) {
  int k, rc = type_find(p, name, id, &k);
  if (rc == SL_ENOTFOUND || (!rc && k != (int)kind))
    return sl__err(SL_ENOTFOUND, "no %s type named '%s'",
                   kind == SL_PROV_ARTIFACT ? "artifact" : kind == SL_PROV_EXECUTION ? "execution" : "context", name);
  return rc;
}

int sl_prov_put_artifact(sl_prov *p, int64_t *id, int64_t type_id, const char *uri, const char *name, int state,
                         int64_t create_ms) {
  sl__pstmt *st;
  int rc = sl__prov_stmt(p, Q_ART_INS, &st);
  if (rc) return rc;
  if (!create_ms) create_ms = sl__prov_now_ms();
  if ((rc = sl__pstmt_bind_i64(st, 1, type_id)) || (rc = sl__pstmt_bind_text(st, 2, uri)) ||
      (rc = sl__pstmt_bind_i64(st, 3, state)) || (rc = sl__pstmt_bind_text(st, 4, name)) ||
      (rc = sl__pstmt_bind_i64(st, 5, create_ms)) || (rc = sl__pstmt_bind_i64(st, 6, create_ms)))
    return rc;
  return insert_id(st, id);
}

int sl_prov_put_execution(sl_prov *p, int64_t *id, int64_t type_id, const char *name, int state, int64_t create_ms,
                          int64_t update_ms) {
  sl__pstmt *st;
  int rc = sl__prov_stmt(p, Q_EXEC_INS, &st);
  if (rc) return rc;
  if (!create_ms) create_ms = sl__prov_now_ms();
  if (!update_ms) update_ms = create_ms;
  if ((rc = sl__pstmt_bind_i64(st, 1, type_id)) || (rc = sl__pstmt_bind_i64(st, 2, state)) ||
      (rc = sl__pstmt_bind_text(st, 3, name)) || (rc = sl__pstmt_bind_i64(st, 4, create_ms)) ||
      (rc = sl__pstmt_bind_i64(st, 5, update_ms)))
    return rc;
  return insert_id(st, id);
}

int sl_prov_put_context(sl_prov *p, int64_t *id, int64_t type_id, const char *name, int64_t create_ms) {
  if (!name) return sl__err(SL_EINVAL, "context name is NULL");
  bool own;
  int rc = sl__prov_txn_begin(p, &own);
  if (rc) return rc;
  rc = pg_name_lock(p, name);
  sl__pstmt *st;
  if (!rc && !(rc = sl__prov_stmt(p, Q_CTX_FIND, &st))) {
    if (!(rc = sl__pstmt_bind_i64(st, 1, type_id)) && !(rc = sl__pstmt_bind_text(st, 2, name))) {
      rc = sl__pstmt_step(st);
      if (rc == 1) {
        *id = sl__pstmt_i64(st, 0);
        sl__pstmt_reset(st);
        return sl__prov_txn_end(p, own, 0);
      }
    }
    sl__pstmt_reset(st);
  }
  if (!rc && !(rc = sl__prov_stmt(p, Q_CTX_INS, &st))) {
    if (!create_ms) create_ms = sl__prov_now_ms();
    if (!(rc = sl__pstmt_bind_i64(st, 1, type_id)) && !(rc = sl__pstmt_bind_text(st, 2, name)) &&
        !(rc = sl__pstmt_bind_i64(st, 3, create_ms)) && !(rc = sl__pstmt_bind_i64(st, 4, create_ms)))
      rc = insert_id(st, id);
  }
  return sl__prov_txn_end(p, own, rc);
}

int sl_prov_set_execution_state(sl_prov *p, int64_t execution_id, int state, int64_t update_ms) {
  sl__pstmt *st;
  int rc = sl__prov_stmt(p, Q_EXEC_STATE, &st);
  if (rc) return rc;
  if (!update_ms) update_ms = sl__prov_now_ms();
  if ((rc = sl__pstmt_bind_i64(st, 1, state)) || (rc = sl__pstmt_bind_i64(st, 2, update_ms)) ||
      (rc = sl__pstmt_bind_i64(st, 3, execution_id)))
    return rc;
  return exec_done(st);
}

int sl_prov_set_property(sl_prov *p, sl_prov_kind kind, int64_t id, const char *name, bool custom,
                         const sl_prov_value *v) {
  if (!name || !v) return sl__err(SL_EINVAL, "property name or value is NULL");
  int which = kind == SL_PROV_ARTIFACT ? Q_APROP : kind == SL_PROV_EXECUTION ? Q_EPROP : Q_CPROP;
  sl__pstmt *st;
  int rc = sl__prov_stmt(p, which, &st);
  if (rc) return rc;
  if ((rc = sl__pstmt_bind_i64(st, 1, id)) || (rc = sl__pstmt_bind_text(st, 2, name)) ||
      (rc = sl__pstmt_bind_i64(st, 3, custom ? 1 : 0)))
    return rc;
  switch (v->type) {
  case SL_PROV_T_INT: rc = sl__pstmt_bind_i64(st, 4, v->i); break;
  case SL_PROV_T_DOUBLE: rc = sl__pstmt_bind_f64(st, 5, v->d); break;
  case SL_PROV_T_STRING:
  case SL_PROV_T_STRUCT:
    if (!v->s) return sl__err(SL_EINVAL, "property '%s': string value is NULL", name);
    rc = sl__pstmt_bind_text(st, 6, v->s);
    break;
  case SL_PROV_T_PROTO: rc = sl__pstmt_bind_blob(st, 7, v->bytes, v->len); break;
  case SL_PROV_T_BOOL: rc = sl__pstmt_bind_i64(st, 8, v->i ? 1 : 0); break;
  default: return sl__err(SL_EINVAL, "property '%s': unknown value type %d", name, (int)v->type);
  }
  if (rc) return rc;
  return exec_done(st);
}

int sl_prov_put_event(sl_prov *p, int64_t *id, int64_t artifact_id, int64_t execution_id, int type, int64_t ms,
                      const sl_prov_step *path, size_t npath) {
  if (!ms) ms = sl__prov_now_ms();
  if (!id && npath == 2 && path[0].key && !path[1].key && sl__pdb_is_pg(p->db)) {
    /* TFX's [key, index] path, id not wanted: one statement. */
    sl__pstmt *st;
    int rc = sl__prov_stmt(p, Q_EVENT_PG2, &st);
    if (rc) return rc;
    if ((rc = sl__pstmt_bind_i64(st, 1, artifact_id)) || (rc = sl__pstmt_bind_i64(st, 2, execution_id)) ||
        (rc = sl__pstmt_bind_i64(st, 3, type)) || (rc = sl__pstmt_bind_i64(st, 4, ms)) ||
        (rc = sl__pstmt_bind_text(st, 5, path[0].key)) || (rc = sl__pstmt_bind_i64(st, 6, path[1].index)))
      return rc;
    return exec_done(st);
  }
  bool own = false;
  int rc = npath ? sl__prov_txn_begin(p, &own) : 0;
  if (rc) return rc;
  sl__pstmt *st;
  int64_t eid = 0;
  if (!(rc = sl__prov_stmt(p, Q_EVENT_INS, &st))) {
    if (!ms) ms = sl__prov_now_ms();
    if (!(rc = sl__pstmt_bind_i64(st, 1, artifact_id)) && !(rc = sl__pstmt_bind_i64(st, 2, execution_id)) &&
        !(rc = sl__pstmt_bind_i64(st, 3, type)) && !(rc = sl__pstmt_bind_i64(st, 4, ms)))
      rc = insert_id(st, &eid);
  }
  for (size_t i = 0; !rc && i < npath; i++) {
    if ((rc = sl__prov_stmt(p, Q_PATH_INS, &st))) break;
    bool idx = path[i].key == NULL;
    if ((rc = sl__pstmt_bind_i64(st, 1, eid)) || (rc = sl__pstmt_bind_i64(st, 2, idx ? 1 : 0))) break;
    rc = idx ? sl__pstmt_bind_i64(st, 3, path[i].index) : sl__pstmt_bind_text(st, 4, path[i].key);
    if (!rc) rc = exec_done(st);
  }
  rc = sl__prov_txn_end(p, own, rc);
  if (!rc && id) *id = eid;
  return rc;
}

static int pair(sl_prov *p, int which, int64_t a, int64_t b) {
  sl__pstmt *st;
  int rc = sl__prov_stmt(p, which, &st);
  if (rc) return rc;
  if ((rc = sl__pstmt_bind_i64(st, 1, a)) || (rc = sl__pstmt_bind_i64(st, 2, b))) return rc;
  return exec_done(st);
}
int sl_prov_attribute(sl_prov *p, int64_t c, int64_t a) { return pair(p, Q_ATTR, c, a); }
int sl_prov_associate(sl_prov *p, int64_t c, int64_t e) { return pair(p, Q_ASSOC, c, e); }
int sl_prov_set_parent_context(sl_prov *p, int64_t c, int64_t parent) { return pair(p, Q_PARENT_CTX, c, parent); }

/* ---- reading ---- */

void sl_prov_free(void *ptr) { sl__free(ptr); }

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

static int grow(void **v, size_t *cap, size_t need, size_t elem) {
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

static int read_prop(sl__pstmt *st, int c0, sl_prov_prop *pr) {
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
    if ((rc = dup_or_null(&pr->s, sl__pstmt_text(st, c0 + 4)))) return rc;
  } else {
    int col = !sl__pstmt_null(st, c0 + 5) ? c0 + 5 : c0 + 7;
    size_t n = 0;
    const void *b = sl__pstmt_blob(st, col, &n);
    pr->type = b ? SL_PROV_T_PROTO : SL_PROV_T_UNKNOWN;
    if (b) {
      pr->bytes = sl__malloc(n ? n : 1);
      if (!pr->bytes) return sl__oom("property");
      if (n) memcpy(pr->bytes, b, n);
      pr->len = n;
    }
  }
  return 0;
}

int sl_prov_find(sl_prov *p, sl_prov_list **out, sl_prov_kind kind, const sl_prov_query *q) {
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
    if ((rc = grow((void **)&l->nodes, &cap, l->n + 1, sizeof *l->nodes))) break;
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
      rc = read_prop(st, 1, &np[pc]);
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

int sl_prov_types(sl_prov *p, sl_prov_list **out) {
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
    if ((rc = grow((void **)&l->nodes, &cap, l->n + 1, sizeof *l->nodes))) break;
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
static int load_events(sl_prov *p, sl_prov_list *l, size_t *cap, sl_prov_kind kind, int64_t id) {
  char sql[512];
  const char *col = kind == SL_PROV_ARTIFACT ? "artifact_id" : "execution_id";
  snprintf(sql, sizeof sql,
           "SELECT e.id, e.artifact_id, e.execution_id, e.type, e.milliseconds_since_epoch, p.is_index_step, "
           "p.step_index, p.step_key, x.last_known_state, t.name FROM Event e LEFT JOIN EventPath p ON p.event_id = "
           "e.id LEFT JOIN Execution x ON x.id = e.execution_id LEFT JOIN Type t ON t.id = x.type_id WHERE e.%s = ? "
           "ORDER BY e.id",
           col);
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
      if ((rc = grow((void **)&l->events, cap, l->nevents + 1, sizeof *l->events))) break;
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

int sl_prov_neighbours(sl_prov *p, sl_prov_list **out, sl_prov_kind kind, int64_t id) {
  *out = NULL;
  sl_prov_list *l = NULL;
  int rc;
  if (kind == SL_PROV_CONTEXT) {
    sl_prov_query q = {0};
    q.context_id = id;
    return sl_prov_find(p, out, SL_PROV_CONTEXT, &q);
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
    /* Ids first, nodes after: a PostgreSQL connection runs one statement at a time. */
    int64_t cid = sl__pstmt_i64(st, 0);
    if ((rc = grow((void **)&l->nodes, &ncap, l->n + 1, sizeof *l->nodes))) break;
    l->nodes[l->n++].id = cid;
    rc = 0;
  }
  sl__pstmt_free(st);
  for (size_t i = 0; rc >= 0 && i < l->n; i++) {
    sl_prov_query q = {0};
    q.id = l->nodes[i].id;
    sl_prov_list *c;
    rc = sl_prov_find(p, &c, SL_PROV_CONTEXT, &q);
    if (rc) break;
    if (c->n) {
      l->nodes[i] = c->nodes[0];
      c->n = 0;
    }
    sl_prov_list_free(c);
  }
  if (rc >= 0) rc = load_events(p, l, &ecap, kind, id);
  if (rc < 0) {
    sl_prov_list_free(l);
    return rc;
  }
  *out = l;
  return 0;
}

/* ---- lineage ---- */

typedef struct seen {
  int64_t *ids; /* kind in the low bit: id*2 + (artifact ? 1 : 0) */
  int *depth;
  size_t n, cap;
} seen;

static bool seen_has(const seen *s, int64_t key) {
  for (size_t i = 0; i < s->n; i++)
    if (s->ids[i] == key) return true;
  return false;
}

static int seen_add(seen *s, int64_t key, int depth) {
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 32;
    int64_t *ni = sl__realloc(s->ids, nc * sizeof *ni);
    if (!ni) return sl__oom("lineage");
    s->ids = ni;
    int *nd = sl__realloc(s->depth, nc * sizeof *nd);
    if (!nd) return sl__oom("lineage");
    s->depth = nd;
    s->cap = nc;
  }
  s->ids[s->n] = key;
  s->depth[s->n++] = depth;
  return 0;
}

static bool is_in(int t) { return t == SL_PROV_EV_INPUT || t == SL_PROV_EV_DECLARED_INPUT || t == SL_PROV_EV_INTERNAL_INPUT; }
static bool is_out(int t) {
  return t == SL_PROV_EV_OUTPUT || t == SL_PROV_EV_DECLARED_OUTPUT || t == SL_PROV_EV_INTERNAL_OUTPUT;
}

/* Breadth-first walk, one query per node on the frontier (lineage is interactive: a few hundred nodes). */
static int walk(sl_prov *p, seen *s, sl_prov_list *l, size_t *ecap, int dir, int max_depth, int64_t start_key) {
  size_t head = 0;
  int rc = seen_add(s, start_key, 0);
  while (!rc && head < s->n) {
    int64_t key = s->ids[head];
    int d = s->depth[head++];
    if (max_depth && d >= max_depth) continue;
    bool art = key & 1;
    int64_t id = key >> 1;
    sl_prov_list tmp = {0};
    size_t tcap = 0;
    rc = load_events(p, &tmp, &tcap, art ? SL_PROV_ARTIFACT : SL_PROV_EXECUTION, id);
    /* Upstream of an artifact is its producer: the earliest output from an execution that does not merely
     * re-emit it (CACHED executions, Resolvers), as for graphlets; all outputs when only re-emitters exist. */
    int64_t producer = -1, pms = INT64_MAX;
    if (dir == SL_PROV_UP && art)
      for (size_t i = 0; i < tmp.nevents; i++)
        if (is_out(tmp.events[i].type) && !tmp.events[i].reemit && tmp.events[i].ms < pms)
          pms = tmp.events[i].ms, producer = tmp.events[i].execution_id;
    for (size_t i = 0; !rc && i < tmp.nevents; i++) {
      sl_prov_event *e = &tmp.events[i];
      if (producer >= 0 && e->execution_id != producer) continue;
      /* up: artifact <- its producing execution (output event), execution <- its inputs;
       * down: artifact -> consuming executions (input event), execution -> its outputs. */
      bool follow = dir == SL_PROV_UP ? (art ? is_out(e->type) : is_in(e->type))
                                      : (art ? is_in(e->type) : is_out(e->type));
      if (!follow) continue;
      int64_t nk = art ? e->execution_id * 2 : e->artifact_id * 2 + 1;
      if (seen_has(s, nk)) continue;
      if ((rc = seen_add(s, nk, d + 1))) break;
      if ((rc = grow((void **)&l->events, ecap, l->nevents + 1, sizeof *l->events))) break;
      l->events[l->nevents++] = *e;
      e->path = NULL;
    }
    for (size_t i = 0; i < tmp.nevents; i++) sl__free(tmp.events[i].path);
    sl__free(tmp.events);
  }
  return rc;
}

int sl_prov_lineage(sl_prov *p, sl_prov_list **out, sl_prov_kind kind, int64_t id, int direction, int max_depth) {
  *out = NULL;
  if (kind != SL_PROV_ARTIFACT && kind != SL_PROV_EXECUTION)
    return sl__err(SL_EINVAL, "lineage starts at an artifact or an execution");
  sl_prov_query q0 = {0};
  q0.id = id;
  sl_prov_list *start;
  int rc = sl_prov_find(p, &start, kind, &q0);
  if (rc) return rc;
  if (!start->n) {
    sl_prov_list_free(start);
    return sl__err(SL_ENOTFOUND, "no %s with id %lld", kind == SL_PROV_ARTIFACT ? "artifact" : "execution",
                   (long long)id);
  }
  sl_prov_list_free(start);
  sl_prov_list *l = sl__calloc(1, sizeof *l);
  if (!l) return sl__oom("lineage");
  size_t ecap = 0, ncap = 0;
  seen all = {0};
  int64_t key = id * 2 + (kind == SL_PROV_ARTIFACT ? 1 : 0);
  for (int dir = SL_PROV_UP; !rc && dir <= SL_PROV_DOWN; dir++) {
    if (!(direction & dir)) continue;
    seen s = {0};
    rc = walk(p, &s, l, &ecap, dir, max_depth, key);
    for (size_t i = 0; !rc && i < s.n; i++)
      if (!seen_has(&all, s.ids[i])) rc = seen_add(&all, s.ids[i], dir == SL_PROV_UP ? -s.depth[i] : s.depth[i]);
    sl__free(s.ids);
    sl__free(s.depth);
  }
  for (size_t i = 0; !rc && i < all.n; i++) {
    sl_prov_query q = {0};
    q.id = all.ids[i] >> 1;
    sl_prov_list *one;
    rc = sl_prov_find(p, &one, (all.ids[i] & 1) ? SL_PROV_ARTIFACT : SL_PROV_EXECUTION, &q);
    if (rc) break;
    if (one->n && !(rc = grow((void **)&l->nodes, &ncap, l->n + 1, sizeof *l->nodes))) {
      l->nodes[l->n] = one->nodes[0];
      l->nodes[l->n++].depth = all.depth[i];
      one->n = 0;
    }
    sl_prov_list_free(one);
  }
  sl__free(all.ids);
  sl__free(all.depth);
  if (rc) {
    sl_prov_list_free(l);
    return rc;
  }
  *out = l;
  return 0;
}

/* ---- export ---- */

static json_t *prop_json(const sl_prov_prop *pr) {
  switch (pr->type) {
  case SL_PROV_T_INT: return json_integer(pr->i);
  case SL_PROV_T_DOUBLE: return isfinite(pr->d) ? json_real(pr->d) : json_null();
  case SL_PROV_T_BOOL: return json_boolean(pr->i);
  case SL_PROV_T_STRING:
  case SL_PROV_T_STRUCT: return json_string(pr->s ? pr->s : "");
  case SL_PROV_T_PROTO: {
    json_t *o = json_object();
    json_object_set_new(o, "bytes", json_integer((json_int_t)pr->len));
    return o;
  }
  default: return json_null();
  }
}

static json_t *nodes_json(const sl_prov_list *l, sl_prov_kind kind) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < l->n; i++) {
    const sl_prov_node *n = &l->nodes[i];
    json_t *o = json_object(), *props = json_object(), *custom = json_object();
    json_object_set_new(o, "id", json_integer(n->id));
    json_object_set_new(o, "type", json_string(n->type_name ? n->type_name : ""));
    json_object_set_new(o, "type_id", json_integer(n->type_id));
    if (n->name) json_object_set_new(o, "name", json_string(n->name));
    if (kind == SL_PROV_ARTIFACT) json_object_set_new(o, "uri", n->uri ? json_string(n->uri) : json_null());
    if (kind != SL_PROV_CONTEXT) json_object_set_new(o, "state", json_string(sl_prov_state_name(kind, n->state)));
    json_object_set_new(o, "create_time_since_epoch", json_integer(n->create_ms));
    json_object_set_new(o, "last_update_time_since_epoch", json_integer(n->update_ms));
    if (n->depth) json_object_set_new(o, "depth", json_integer(n->depth));
    for (size_t j = 0; j < n->nprops; j++)
      json_object_set_new(n->props[j].custom ? custom : props, n->props[j].name, prop_json(&n->props[j]));
    json_object_set_new(o, "properties", props);
    json_object_set_new(o, "custom_properties", custom);
    json_array_append_new(a, o);
  }
  return a;
}

int sl_prov_list_to_json(const sl_prov_list *l, char **json) {
  *json = NULL;
  json_t *root = json_object(), *nodes = json_array(), *evs = json_array();
  if (!root || !nodes || !evs) {
    json_decref(root);
    json_decref(nodes);
    json_decref(evs);
    return sl__oom("json");
  }
  for (size_t i = 0; i < l->n; i++) {
    sl_prov_list one = {(sl_prov_node *)&l->nodes[i], 1, NULL, 0};
    json_t *a = nodes_json(&one, l->nodes[i].kind);
    json_t *o = json_array_get(a, 0);
    static const char *K[] = {"execution", "artifact", "context"};
    json_object_set_new(o, "kind", json_string(K[l->nodes[i].kind]));
    json_object_set_new(o, "depth", json_integer(l->nodes[i].depth));
    json_array_append(nodes, o);
    json_decref(a);
  }
  for (size_t i = 0; i < l->nevents; i++) {
    const sl_prov_event *e = &l->events[i];
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(e->id));
    json_object_set_new(o, "artifact_id", json_integer(e->artifact_id));
    json_object_set_new(o, "execution_id", json_integer(e->execution_id));
    json_object_set_new(o, "type", json_string(sl_prov_event_name(e->type)));
    json_object_set_new(o, "milliseconds_since_epoch", json_integer(e->ms));
    json_object_set_new(o, "path", e->path ? json_string(e->path) : json_null());
    json_array_append_new(evs, o);
  }
  json_object_set_new(root, "nodes", nodes);
  json_object_set_new(root, "events", evs);
  char *s = json_dumps(root, JSON_INDENT(2));
  json_decref(root);
  if (!s) return sl__oom("json");
  *json = sl__strdup(s);
  sl__free(s);
  return *json ? 0 : sl__oom("json");
}

static int pairs_json(sl_prov *p, json_t *root, const char *key, const char *sql, const char *c1, const char *c2) {
  sl__pstmt *st;
  int rc = sl__pdb_prepare(p->db, &st, sql);
  if (rc) return rc;
  json_t *a = json_array();
  while ((rc = sl__pstmt_step(st)) == 1) {
    json_t *o = json_object();
    json_object_set_new(o, c1, json_integer(sl__pstmt_i64(st, 0)));
    json_object_set_new(o, c2, json_integer(sl__pstmt_i64(st, 1)));
    json_array_append_new(a, o);
  }
  sl__pstmt_free(st);
  json_object_set_new(root, key, a);
  return rc < 0 ? rc : 0;
}

int sl_prov_export_json(sl_prov *p, char **json) {
  *json = NULL;
  json_t *root = json_object();
  if (!root) return sl__oom("export");
  json_object_set_new(root, "schema_version", json_integer(10));
  int rc = 0;
  sl_prov_list *types = NULL;
  if (!(rc = sl_prov_types(p, &types))) {
    json_t *a = json_array();
    static const char *K[] = {"execution", "artifact", "context"};
    for (size_t i = 0; i < types->n; i++) {
      const sl_prov_node *t = &types->nodes[i];
      json_t *o = json_object(), *pr = json_object();
      json_object_set_new(o, "id", json_integer(t->id));
      json_object_set_new(o, "name", json_string(t->type_name));
      json_object_set_new(o, "kind", json_string(t->kind >= 0 && t->kind <= 2 ? K[t->kind] : "?"));
      if (t->name) json_object_set_new(o, "base_type", json_string(t->name));
      static const char *PT[] = {"UNKNOWN", "INT", "DOUBLE", "STRING", "STRUCT", "PROTO", "BOOLEAN"};
      for (size_t j = 0; j < t->nprops; j++)
        json_object_set_new(pr, t->props[j].name,
                            json_string(t->props[j].type >= 0 && t->props[j].type <= 6 ? PT[t->props[j].type] : "?"));
      json_object_set_new(o, "properties", pr);
      json_array_append_new(a, o);
    }
    json_object_set_new(root, "types", a);
    sl_prov_list_free(types);
  }
  static const char *NAMES[3] = {"executions", "artifacts", "contexts"};
  for (int k = 0; !rc && k < 3; k++) {
    sl_prov_list *l;
    if ((rc = sl_prov_find(p, &l, (sl_prov_kind)k, NULL))) break;
    json_object_set_new(root, NAMES[k], nodes_json(l, (sl_prov_kind)k));
    sl_prov_list_free(l);
  }
  if (!rc) {
    sl__pstmt *st;
    rc = sl__pdb_prepare(p->db, &st,
                         "SELECT e.id, e.artifact_id, e.execution_id, e.type, e.milliseconds_since_epoch, "
                         "p.is_index_step, p.step_index, p.step_key FROM Event e LEFT JOIN EventPath p ON "
                         "p.event_id = e.id ORDER BY e.id");
    json_t *a = json_array(), *cur = NULL;
    int64_t last = -1;
    while (!rc && (rc = sl__pstmt_step(st)) == 1) {
      rc = 0;
      int64_t id = sl__pstmt_i64(st, 0);
      if (id != last) {
        cur = json_object();
        json_object_set_new(cur, "id", json_integer(id));
        json_object_set_new(cur, "artifact_id", json_integer(sl__pstmt_i64(st, 1)));
        json_object_set_new(cur, "execution_id", json_integer(sl__pstmt_i64(st, 2)));
        json_object_set_new(cur, "type", json_string(sl_prov_event_name((int)sl__pstmt_i64(st, 3))));
        json_object_set_new(cur, "milliseconds_since_epoch", json_integer(sl__pstmt_i64(st, 4)));
        json_object_set_new(cur, "path", json_array());
        json_array_append_new(a, cur);
        last = id;
      }
      if (!sl__pstmt_null(st, 5)) {
        json_t *stp = json_object();
        if (sl__pstmt_i64(st, 5))
          json_object_set_new(stp, "index", json_integer(sl__pstmt_i64(st, 6)));
        else
          json_object_set_new(stp, "key", json_string(sl__pstmt_text(st, 7) ? sl__pstmt_text(st, 7) : ""));
        json_array_append_new(json_object_get(cur, "path"), stp);
      }
    }
    if (rc > 0) rc = 0;
    sl__pstmt_free(st);
    json_object_set_new(root, "events", a);
  }
  if (!rc)
    rc = pairs_json(p, root, "attributions", "SELECT context_id, artifact_id FROM Attribution ORDER BY id",
                    "context_id", "artifact_id");
  if (!rc)
    rc = pairs_json(p, root, "associations", "SELECT context_id, execution_id FROM Association ORDER BY id",
                    "context_id", "execution_id");
  if (!rc)
    rc = pairs_json(p, root, "parent_contexts",
                    "SELECT context_id, parent_context_id FROM ParentContext ORDER BY context_id, parent_context_id",
                    "context_id", "parent_context_id");
  if (rc < 0) {
    json_decref(root);
    return rc;
  }
  char *s = json_dumps(root, JSON_INDENT(2));
  json_decref(root);
  if (!s) return sl__oom("export");
  *json = sl__strdup(s);
  sl__free(s);
  return *json ? 0 : sl__oom("export");
}
