/* prov/store/store_write.c: writes to the MLMD store: types, artifacts, executions, contexts, properties, events
 * and the attribution/association/parent-context pairs. Find-or-create is serialised across sessions by a lock on
 * the name where the backend needs one (its write lock otherwise already does). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "prov/store/store_int.h"

static int insert_id(sl__pstmt *st, int64_t *id) { return sl__pstmt_insert(st, id); }

/* A write whose result is not needed: queued where the backend can (bulk loads), else run now. */
static int exec_done(sl__pstmt *st) {
  int rc = sl__pstmt_defer(st);
  return rc < 0 ? rc : 0;
}

/* Serialises find-or-create of a name across sessions, where the backend needs a lock for it (the write lock of its
 * transactions otherwise already does); `queued`: the lock may wait in the backend's queue (bulk loads). */
static int name_lock(sl_prov *p, const char *name, bool queued) {
  if (!sl__pdb_dialect_of(p->db)->lock_name) return 0;
  sl__pstmt *st;
  int rc = sl__prov_stmt(p, SL__Q_NAME_LOCK, &st);
  if (rc) return rc;
  rc = sl__pstmt_bind_text(st, 1, name);
  if (!rc && queued) return exec_done(st);
  if (!rc) rc = sl__pstmt_step(st);
  sl__pstmt_reset(st);
  return rc < 0 ? rc : 0;
}

static int type_find(sl_prov *p, const char *name, int64_t *id, int *kind) {
  sl__pstmt *st;
  int rc = sl__prov_stmt(p, SL__Q_TYPE_FIND, &st);
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
  if ((rc = sl__prov_stmt(p, SL__Q_TYPE_INS, &st))) return rc;
  if ((rc = sl__pstmt_bind_text(st, 1, name)) || (rc = sl__pstmt_bind_i64(st, 2, kind))) return rc;
  return insert_id(st, id);
}

int sl_prov_put_type(int64_t *id, sl_prov *p, sl_prov_kind kind, const char *name, const sl_prov_type_prop *props,
                     size_t nprops, const char *base) {
  if (!name || !*name) return sl__err(SL_EINVAL, "type name is empty");
  if (kind < SL_PROV_EXECUTION || kind > SL_PROV_CONTEXT) return sl__err(SL_EINVAL, "bad type kind %d", kind);
  bool own;
  int rc = sl__prov_txn_begin(p, &own);
  if (rc) return rc;
  int64_t tid = 0;
  rc = name_lock(p, name, false);
  if (!rc) rc = type_put1(p, &tid, kind, name);
  for (size_t i = 0; !rc && i < nprops; i++) {
    sl__pstmt *st;
    if ((rc = sl__prov_stmt(p, SL__Q_TYPE_PROP_INS, &st))) break;
    if ((rc = sl__pstmt_bind_i64(st, 1, tid)) || (rc = sl__pstmt_bind_text(st, 2, props[i].name)) ||
        (rc = sl__pstmt_bind_i64(st, 3, props[i].type)))
      break;
    rc = exec_done(st);
  }
  if (!rc && base) {
    int64_t bid = 0;
    rc = name_lock(p, base, false);
    if (!rc) rc = type_put1(p, &bid, kind, base);
    sl__pstmt *st;
    if (!rc && !(rc = sl__prov_stmt(p, SL__Q_PARENT_TYPE_INS, &st))) {
      if (!(rc = sl__pstmt_bind_i64(st, 1, tid)) && !(rc = sl__pstmt_bind_i64(st, 2, bid))) rc = exec_done(st);
    }
  }
  rc = sl__prov_txn_end(p, own, rc);
  if (!rc && id) *id = tid;
  return rc;
}

int sl_prov_type_id(int64_t *id, sl_prov *p, sl_prov_kind kind, const char *name) {
  int k, rc = type_find(p, name, id, &k);
  if (rc == SL_ENOTFOUND || (!rc && k != (int)kind))
    return sl__err(SL_ENOTFOUND, "no %s type named '%s'",
                   kind == SL_PROV_ARTIFACT ? "artifact" : kind == SL_PROV_EXECUTION ? "execution" : "context", name);
  return rc;
}

/* Bulk loads (db_int.h): rows go to the backend's bulk path, the ids of artifacts, executions and events taken
 * beforehand (sl__pdb_bulk_id), so no row waits on a round trip; the ids and rows are those single-row INSERTs would
 * have written. */
static bool bulk(sl_prov *p) { return p->bulk && sl__pdb_bulk_rows(p->db); }
enum { ID_ART, ID_EXEC, ID_EVENT };
static int take_id(sl_prov *p, int which, int64_t *id) {
  static const char *const TABLE[] = {"Artifact", "Execution", "Event"};
  return sl__pdb_bulk_id(p->db, which, TABLE[which], id);
}
#define VI(x) ((sl__pdb_val){SL__V_INT, (x), 0, NULL, 0})
static sl__pdb_val vtext(const char *s) {
  return s ? (sl__pdb_val){SL__V_TEXT, 0, 0, s, strlen(s)} : (sl__pdb_val){SL__V_NULL, 0, 0, NULL, 0};
}
/* The tables' bulk rows, with the same ON CONFLICT as the single-row statements (store.c): the last value of a
 * property wins; a membership is kept once. */
static const sl__pdb_bulk_spec BULK_ART = {
    "Artifact", "id, type_id, uri, state, name, create_time_since_epoch, last_update_time_since_epoch", 7};
static const sl__pdb_bulk_spec BULK_EXEC = {
    "Execution", "id, type_id, last_known_state, name, create_time_since_epoch, last_update_time_since_epoch", 6};
static const sl__pdb_bulk_spec BULK_EVENT = {"Event", "id, artifact_id, execution_id, type, milliseconds_since_epoch",
                                             5};
static const sl__pdb_bulk_spec BULK_PATH = {"EventPath", "event_id, is_index_step, step_index, step_key", 4};
#define BULK_PROP(TABLE, KEY)                                                                                         \
  {TABLE, KEY ", name, is_custom_property, int_value, double_value, string_value, proto_value, bool_value", 8,         \
   KEY ", name, is_custom_property",                                                                                  \
   "int_value = excluded.int_value, double_value = excluded.double_value, string_value = excluded.string_value, "     \
   "proto_value = excluded.proto_value, bool_value = excluded.bool_value"}
static const sl__pdb_bulk_spec BULK_APROP = BULK_PROP("ArtifactProperty", "artifact_id");
static const sl__pdb_bulk_spec BULK_EPROP = BULK_PROP("ExecutionProperty", "execution_id");
static const sl__pdb_bulk_spec BULK_CPROP = BULK_PROP("ContextProperty", "context_id");
static const sl__pdb_bulk_spec BULK_ASSOC = {"Association", "context_id, execution_id", 2, ""};
static const sl__pdb_bulk_spec BULK_ATTR = {"Attribution", "context_id, artifact_id", 2, ""};
static const sl__pdb_bulk_spec BULK_PCTX = {"ParentContext", "context_id, parent_context_id", 2, ""};
enum { SLOT_ART, SLOT_EXEC, SLOT_EVENT, SLOT_PATH, SLOT_APROP, SLOT_EPROP, SLOT_CPROP, SLOT_ASSOC, SLOT_ATTR,
       SLOT_PCTX };

/* A bulk row that has no statement to fall back on (no blob in it: every backend takes it). */
static int bulk_row(sl_prov *p, int slot, const sl__pdb_bulk_spec *spec, const sl__pdb_val *v) {
  int rc = sl__pdb_bulk_row(p->db, slot, spec, v);
  return rc == 1 ? sl__err(SL_ERROR, "%s: a bulk row of %s was refused", p->uri, spec->table) : rc;
}

int sl_prov_put_artifact(int64_t *id, sl_prov *p, int64_t type_id, const char *uri, const char *name, int state,
                         int64_t create_ms) {
  if (!create_ms) create_ms = sl__prov_now_ms();
  if (bulk(p)) {
    int64_t nid;
    int rc = take_id(p, ID_ART, &nid);
    if (rc) return rc;
    sl__pdb_val v[] = {VI(nid), VI(type_id), vtext(uri), VI(state), vtext(name), VI(create_ms), VI(create_ms)};
    if ((rc = bulk_row(p, SLOT_ART, &BULK_ART, v))) return rc;
    if (id) *id = nid;
    return 0;
  }
  sl__pstmt *st;
  int rc = sl__prov_stmt(p, SL__Q_ART_INS, &st);
  if (rc) return rc;
  if ((rc = sl__pstmt_bind_i64(st, 1, type_id)) || (rc = sl__pstmt_bind_text(st, 2, uri)) ||
      (rc = sl__pstmt_bind_i64(st, 3, state)) || (rc = sl__pstmt_bind_text(st, 4, name)) ||
      (rc = sl__pstmt_bind_i64(st, 5, create_ms)) || (rc = sl__pstmt_bind_i64(st, 6, create_ms)))
    return rc;
  return insert_id(st, id);
}

int sl_prov_put_execution(int64_t *id, sl_prov *p, int64_t type_id, const char *name, int state, int64_t create_ms,
                          int64_t update_ms) {
  if (!create_ms) create_ms = sl__prov_now_ms();
  if (!update_ms) update_ms = create_ms;
  if (bulk(p)) {
    int64_t nid;
    int rc = take_id(p, ID_EXEC, &nid);
    if (rc) return rc;
    sl__pdb_val v[] = {VI(nid), VI(type_id), VI(state), vtext(name), VI(create_ms), VI(update_ms)};
    if ((rc = bulk_row(p, SLOT_EXEC, &BULK_EXEC, v))) return rc;
    if (id) *id = nid;
    return 0;
  }
  sl__pstmt *st;
  int rc = sl__prov_stmt(p, SL__Q_EXEC_INS, &st);
  if (rc) return rc;
  if ((rc = sl__pstmt_bind_i64(st, 1, type_id)) || (rc = sl__pstmt_bind_i64(st, 2, state)) ||
      (rc = sl__pstmt_bind_text(st, 3, name)) || (rc = sl__pstmt_bind_i64(st, 4, create_ms)) ||
      (rc = sl__pstmt_bind_i64(st, 5, update_ms)))
    return rc;
  return insert_id(st, id);
}

/* Bulk loads: an event and its path as bulk rows. */
static int event_bulk(int64_t *id, sl_prov *p, int64_t artifact_id, int64_t execution_id, int type, int64_t ms,
                      const sl_prov_step *path, size_t npath) {
  int64_t eid;
  int rc = take_id(p, ID_EVENT, &eid);
  if (rc) return rc;
  sl__pdb_val v[] = {VI(eid), VI(artifact_id), VI(execution_id), VI(type), VI(ms)};
  if ((rc = bulk_row(p, SLOT_EVENT, &BULK_EVENT, v))) return rc;
  for (size_t i = 0; i < npath; i++) {
    bool idx = path[i].key == NULL;
    sl__pdb_val pv[] = {VI(eid), VI(idx ? 1 : 0), idx ? VI(path[i].index) : vtext(NULL),
                        idx ? vtext(NULL) : vtext(path[i].key)};
    if ((rc = bulk_row(p, SLOT_PATH, &BULK_PATH, pv))) return rc;
  }
  if (id) *id = eid;
  return 0;
}

int sl_prov_put_context(int64_t *id, sl_prov *p, int64_t type_id, const char *name, int64_t create_ms) {
  if (!name) return sl__err(SL_EINVAL, "context name is NULL");
  if (bulk(p) && sl__pdb_dialect_of(p->db)->writable_cte) {
    /* The name's lock queued, then find-or-create in one statement: one round trip instead of three. */
    sl__pstmt *st;
    int rc = name_lock(p, name, true);
    if (!rc) rc = sl__prov_stmt(p, SL__Q_CTX_PUT_CTE, &st);
    if (rc) return rc;
    if (!create_ms) create_ms = sl__prov_now_ms();
    if ((rc = sl__pstmt_bind_i64(st, 1, type_id)) || (rc = sl__pstmt_bind_text(st, 2, name)) ||
        (rc = sl__pstmt_bind_i64(st, 3, type_id)) || (rc = sl__pstmt_bind_text(st, 4, name)) ||
        (rc = sl__pstmt_bind_i64(st, 5, create_ms)) || (rc = sl__pstmt_bind_i64(st, 6, create_ms)))
      return rc;
    rc = sl__pstmt_step(st);
    if (rc == 1) *id = sl__pstmt_i64(st, 0), rc = 0;
    else if (rc == 0) rc = sl__err(SL_ERROR, "%s: context '%s' neither found nor created", p->uri, name);
    sl__pstmt_reset(st);
    return rc;
  }
  bool own;
  int rc = sl__prov_txn_begin(p, &own);
  if (rc) return rc;
  rc = name_lock(p, name, false);
  sl__pstmt *st;
  if (!rc && !(rc = sl__prov_stmt(p, SL__Q_CTX_FIND, &st))) {
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
  if (!rc && !(rc = sl__prov_stmt(p, SL__Q_CTX_INS, &st))) {
    if (!create_ms) create_ms = sl__prov_now_ms();
    if (!(rc = sl__pstmt_bind_i64(st, 1, type_id)) && !(rc = sl__pstmt_bind_text(st, 2, name)) &&
        !(rc = sl__pstmt_bind_i64(st, 3, create_ms)) && !(rc = sl__pstmt_bind_i64(st, 4, create_ms)))
      rc = insert_id(st, id);
  }
  return sl__prov_txn_end(p, own, rc);
}

int sl_prov_set_execution_state(sl_prov *p, int64_t execution_id, int state, int64_t update_ms) {
  /* The execution may still be a bulk row: send those first, or a queued UPDATE would miss it. */
  int rc = bulk(p) ? sl__pdb_bulk_flush(p->db) : 0;
  if (rc) return rc;
  sl__pstmt *st;
  rc = sl__prov_stmt(p, SL__Q_EXEC_STATE, &st);
  if (rc) return rc;
  if (!update_ms) update_ms = sl__prov_now_ms();
  if ((rc = sl__pstmt_bind_i64(st, 1, state)) || (rc = sl__pstmt_bind_i64(st, 2, update_ms)) ||
      (rc = sl__pstmt_bind_i64(st, 3, execution_id)))
    return rc;
  return exec_done(st);
}

static int set_property(sl_prov *p, sl_prov_kind kind, int64_t id, const char *name, bool custom,
                        const sl_prov_value *v);

int sl__prov_int_fits(sl_prov *p, const char *name, int64_t v) {
  if (!p->int32 || (v <= INT32_MAX && v >= INT32_MIN)) return 0;
  return sl__err(SL_EINVAL, "%s: property '%s' = %lld does not fit the store's int_value columns (INTEGER, as the "
                            "ml-metadata library creates them on PostgreSQL); widen them to BIGINT with 'sluice prov "
                            "init DB --widen-ints' (the library reads either)",
                 p->uri, name, (long long)v);
}

/* STRUCT and PROTO values are stored encoded as the ml-metadata library stores them (mlmd_value.c). */
int sl_prov_set_property(sl_prov *p, sl_prov_kind kind, int64_t id, const char *name, bool custom,
                         const sl_prov_value *v) {
  if (!name || !v) return sl__err(SL_EINVAL, "property name or value is NULL");
  int rc = v->type == SL_PROV_T_INT ? sl__prov_int_fits(p, name, v->i) : 0;
  if (rc) return rc;
  sl_prov_value enc;
  char *tmp;
  rc = sl__mlmd_value_store(&enc, &tmp, v, name, sl__pdb_dialect_of(p->db)->proto_text);
  if (!rc) rc = set_property(p, kind, id, name, custom, &enc);
  sl__free(tmp);
  return rc;
}

static int set_property(sl_prov *p, sl_prov_kind kind, int64_t id, const char *name, bool custom,
                        const sl_prov_value *v) {
  int which = kind == SL_PROV_ARTIFACT ? SL__Q_APROP : kind == SL_PROV_EXECUTION ? SL__Q_EPROP : SL__Q_CPROP;
  int rc = 0;
  if (bulk(p)) {
    sl__pdb_val b[8] = {VI(id), vtext(name), VI(custom ? 1 : 0)}; /* the rest NULL */
    switch (v->type) {
    case SL_PROV_T_INT: b[3] = VI(v->i); break;
    case SL_PROV_T_DOUBLE: b[4] = (sl__pdb_val){SL__V_DOUBLE, 0, v->d, NULL, 0}; break;
    case SL_PROV_T_STRING:
    case SL_PROV_T_STRUCT:
      if (!v->s) return sl__err(SL_EINVAL, "property '%s': string value is NULL", name);
      b[5] = vtext(v->s);
      break;
    case SL_PROV_T_PROTO: b[6] = (sl__pdb_val){SL__V_BLOB, 0, 0, (const char *)v->bytes, v->len}; break;
    case SL_PROV_T_BOOL: b[7] = VI(v->i ? 1 : 0); break;
    default: return sl__err(SL_EINVAL, "property '%s': unknown value type %d", name, (int)v->type);
    }
    rc = kind == SL_PROV_ARTIFACT    ? sl__pdb_bulk_row(p->db, SLOT_APROP, &BULK_APROP, b)
         : kind == SL_PROV_EXECUTION ? sl__pdb_bulk_row(p->db, SLOT_EPROP, &BULK_EPROP, b)
                                     : sl__pdb_bulk_row(p->db, SLOT_CPROP, &BULK_CPROP, b);
    /* 1: a value the backend's bulk path cannot carry (a proto, through COPY text): written by the statement below,
     * after the bulk rows before it, so the last write still wins. */
    if (rc != 1) return rc;
  }
  sl__pstmt *st;
  rc = sl__prov_stmt(p, which, &st);
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

int sl_prov_put_event(int64_t *id, sl_prov *p, int64_t artifact_id, int64_t execution_id, int type, int64_t ms,
                      const sl_prov_step *path, size_t npath) {
  if (!ms) ms = sl__prov_now_ms();
  if (bulk(p)) return event_bulk(id, p, artifact_id, execution_id, type, ms, path, npath);
  if (!id && npath == 2 && path[0].key && !path[1].key && sl__pdb_dialect_of(p->db)->writable_cte) {
    /* TFX's [key, index] path, id not wanted: one statement. */
    sl__pstmt *st;
    int rc = sl__prov_stmt(p, SL__Q_EVENT_CTE, &st);
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
  if (!(rc = sl__prov_stmt(p, SL__Q_EVENT_INS, &st))) {
    if (!ms) ms = sl__prov_now_ms();
    if (!(rc = sl__pstmt_bind_i64(st, 1, artifact_id)) && !(rc = sl__pstmt_bind_i64(st, 2, execution_id)) &&
        !(rc = sl__pstmt_bind_i64(st, 3, type)) && !(rc = sl__pstmt_bind_i64(st, 4, ms)))
      rc = insert_id(st, &eid);
  }
  for (size_t i = 0; !rc && i < npath; i++) {
    if ((rc = sl__prov_stmt(p, SL__Q_PATH_INS, &st))) break;
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
  if (bulk(p)) {
    sl__pdb_val v[] = {VI(a), VI(b)};
    return which == SL__Q_ASSOC  ? bulk_row(p, SLOT_ASSOC, &BULK_ASSOC, v)
           : which == SL__Q_ATTR ? bulk_row(p, SLOT_ATTR, &BULK_ATTR, v)
                                 : bulk_row(p, SLOT_PCTX, &BULK_PCTX, v);
  }
  sl__pstmt *st;
  int rc = sl__prov_stmt(p, which, &st);
  if (rc) return rc;
  if ((rc = sl__pstmt_bind_i64(st, 1, a)) || (rc = sl__pstmt_bind_i64(st, 2, b))) return rc;
  return exec_done(st);
}
int sl_prov_attribute(sl_prov *p, int64_t c, int64_t a) { return pair(p, SL__Q_ATTR, c, a); }
int sl_prov_associate(sl_prov *p, int64_t c, int64_t e) { return pair(p, SL__Q_ASSOC, c, e); }
int sl_prov_set_parent_context(sl_prov *p, int64_t c, int64_t parent) { return pair(p, SL__Q_PARENT_CTX, c, parent); }
