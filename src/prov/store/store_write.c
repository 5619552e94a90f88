/* prov/store/store_write.c: writes to the MLMD store: types, artifacts, executions, contexts, properties, events
 * and the attribution/association/parent-context pairs. Find-or-create is serialised across PostgreSQL sessions
 * by an advisory lock on the name; SQLite's write lock already serialises it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "prov/store/store_int.h"

/* Serialises find-or-create of a name across PostgreSQL sessions (SQLite's write lock already does). */
static int pg_name_lock(sl_prov *p, const char *name) {
  if (!sl__pdb_is_pg(p->db)) return 0;
  sl__pstmt *st;
  int rc = sl__prov_stmt(p, SL__Q_NAME_LOCK, &st);
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
  rc = pg_name_lock(p, name);
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
    rc = pg_name_lock(p, base);
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

/* PostgreSQL bulk loads: the next id of pool `which` (0 artifacts, 1 executions, 2 events), refilled from the
 * table's sequence 1024 at a time (one round trip per block instead of one per row); the row itself then goes into
 * a COPY buffer (db.c), sent a few MB at a time. */
static bool bulk_ids(const sl_prov *p) { return p->bulk && sl__pdb_is_pg(p->db); }
static int take_id(sl_prov *p, int which, int64_t *id) {
  if (p->idat[which] == p->idn[which]) {
    sl__pstmt *st;
    int rc = sl__prov_stmt(p, which == 2 ? SL__Q_IDS_EVENT : which ? SL__Q_IDS_EXEC : SL__Q_IDS_ART, &st);
    if (rc) return rc;
    int n = 0;
    while ((rc = sl__pstmt_step(st)) == 1)
      if (n < (int)(sizeof p->idpool[which] / sizeof p->idpool[which][0])) p->idpool[which][n++] = sl__pstmt_i64(st, 0);
    sl__pstmt_reset(st);
    if (rc < 0) return rc;
    if (!n) return sl__err(SL_ERROR, "%s: the id sequence returned no ids", p->uri);
    p->idn[which] = n;
    p->idat[which] = 0;
  }
  *id = p->idpool[which][p->idat[which]++];
  return 0;
}

/* SQLite bulk loads inside a transaction: rows go into multi-row INSERT batches (db.c) and the ids are assigned
 * here, continuing the table's AUTOINCREMENT counter; the write lock the transaction holds keeps that counter ours,
 * so the ids and rows are those single-row INSERTs would have written. */
static bool lite_batch(const sl_prov *p) { return p->bulk && p->in_txn && !sl__pdb_is_pg(p->db); }
static int lite_take_id(sl_prov *p, int which, int64_t *id) {
  if (!p->lite_next[which]) {
    sl__pstmt *st;
    int rc = sl__prov_stmt(p, which == 2 ? SL__Q_SEQ_EVENT : which ? SL__Q_SEQ_EXEC : SL__Q_SEQ_ART, &st);
    if (rc) return rc;
    rc = sl__pstmt_step(st);
    if (rc == 1) p->lite_next[which] = sl__pstmt_i64(st, 0);
    sl__pstmt_reset(st);
    if (rc < 0) return rc;
    if (rc == 0 || p->lite_next[which] < 1) return sl__err(SL_ERROR, "%s: no next id for a bulk load", p->uri);
  }
  *id = p->lite_next[which]++;
  return 0;
}
#define VI(x) ((sl__pdb_val){SL__V_INT, (x), 0, NULL, 0})
static sl__pdb_val vtext(const char *s) {
  return s ? (sl__pdb_val){SL__V_TEXT, 0, 0, s, strlen(s)} : (sl__pdb_val){SL__V_NULL, 0, 0, NULL, 0};
}
static const sl__pdb_batch_spec BATCH_ART = {"INSERT OR FAIL INTO Artifact(id, type_id, uri, state, name, "
                                             "create_time_since_epoch, last_update_time_since_epoch) VALUES", "", 7};
static const sl__pdb_batch_spec BATCH_EXEC = {"INSERT OR FAIL INTO Execution(id, type_id, last_known_state, name, "
                                              "create_time_since_epoch, last_update_time_since_epoch) VALUES", "", 6};
static const sl__pdb_batch_spec BATCH_EVENT = {
    "INSERT OR FAIL INTO Event(id, artifact_id, execution_id, type, milliseconds_since_epoch) VALUES", "", 5};
static const sl__pdb_batch_spec BATCH_PATH = {
    "INSERT OR FAIL INTO EventPath(event_id, is_index_step, step_index, step_key) VALUES", "", 4};
#define BATCH_PROP(TABLE, KEY)                                                                                        \
  {"INSERT OR FAIL INTO " TABLE "(" KEY ", name, is_custom_property, int_value, double_value, string_value, proto_value, "    \
   "bool_value) VALUES",                                                                                              \
   " ON CONFLICT(" KEY ", name, is_custom_property) DO UPDATE SET int_value = excluded.int_value, double_value = "     \
   "excluded.double_value, string_value = excluded.string_value, proto_value = excluded.proto_value, bool_value = "   \
   "excluded.bool_value",                                                                                             \
   8}
static const sl__pdb_batch_spec BATCH_APROP = BATCH_PROP("ArtifactProperty", "artifact_id");
static const sl__pdb_batch_spec BATCH_EPROP = BATCH_PROP("ExecutionProperty", "execution_id");
static const sl__pdb_batch_spec BATCH_CPROP = BATCH_PROP("ContextProperty", "context_id");
static const sl__pdb_batch_spec BATCH_ASSOC = {"INSERT OR FAIL INTO Association(context_id, execution_id) VALUES",
                                               " ON CONFLICT DO NOTHING", 2};
static const sl__pdb_batch_spec BATCH_ATTR = {"INSERT OR FAIL INTO Attribution(context_id, artifact_id) VALUES",
                                              " ON CONFLICT DO NOTHING", 2};
static const sl__pdb_batch_spec BATCH_PCTX = {"INSERT OR FAIL INTO ParentContext(context_id, parent_context_id) VALUES",
                                              " ON CONFLICT DO NOTHING", 2};
enum { BSLOT_ART, BSLOT_EXEC, BSLOT_EVENT, BSLOT_PATH, BSLOT_APROP, BSLOT_EPROP, BSLOT_CPROP, BSLOT_ASSOC,
       BSLOT_ATTR, BSLOT_PCTX };

/* The COPY buffers of a PostgreSQL bulk load (db.c): new rows straight into their tables; properties and
 * memberships through a session's staging table merged with the same ON CONFLICT as the single-row statements
 * (the last value of a property wins; a membership is kept once). */
static const sl__pdb_copy_spec COPY_ART = {"COPY Artifact(id, type_id, uri, state, name, create_time_since_epoch, "
                                           "last_update_time_since_epoch) FROM STDIN", NULL, NULL};
static const sl__pdb_copy_spec COPY_EXEC = {"COPY Execution(id, type_id, last_known_state, name, "
                                            "create_time_since_epoch, last_update_time_since_epoch) FROM STDIN", NULL,
                                            NULL};
static const sl__pdb_copy_spec COPY_EVENT = {
    "COPY Event(id, artifact_id, execution_id, type, milliseconds_since_epoch) FROM STDIN", NULL, NULL};
static const sl__pdb_copy_spec COPY_PATH = {"COPY EventPath(event_id, is_index_step, step_index, step_key) FROM STDIN",
                                            NULL, NULL};
#define STAGE_PROP(T, TABLE, KEY)                                                                                      \
  {"COPY sl_stage_" T "(id, name, custom, i, d, s, b) FROM STDIN",                                                    \
   "CREATE TEMP TABLE IF NOT EXISTS sl_stage_" T " (seq BIGSERIAL, id INT, name TEXT, custom BOOLEAN, i BIGINT, "   \
   "d DOUBLE PRECISION, s TEXT, b BOOLEAN)",                                                                         \
   "INSERT INTO " TABLE "(" KEY ", name, is_custom_property, int_value, double_value, string_value, bool_value) "     \
   "SELECT DISTINCT ON (id, name, custom) id, name, custom, i, d, s, b FROM sl_stage_" T " ORDER BY id, name, "      \
   "custom, seq DESC ON CONFLICT(" KEY ", name, is_custom_property) DO UPDATE SET int_value = excluded.int_value, "   \
   "double_value = excluded.double_value, string_value = excluded.string_value, proto_value = NULL, bool_value = "    \
   "excluded.bool_value; TRUNCATE sl_stage_" T}
static const sl__pdb_copy_spec COPY_APROP = STAGE_PROP("aprop", "ArtifactProperty", "artifact_id");
static const sl__pdb_copy_spec COPY_EPROP = STAGE_PROP("eprop", "ExecutionProperty", "execution_id");
#define STAGE_PAIR(T, TABLE, B)                                                                                        \
  {"COPY sl_stage_" T "(c, x) FROM STDIN", "CREATE TEMP TABLE IF NOT EXISTS sl_stage_" T " (seq BIGSERIAL, c INT, x INT)", \
   "INSERT INTO " TABLE "(context_id, " B ") SELECT c, x FROM sl_stage_" T " ORDER BY seq ON CONFLICT DO NOTHING; "   \
   "TRUNCATE sl_stage_" T}
static const sl__pdb_copy_spec COPY_ASSOC = STAGE_PAIR("assoc", "Association", "execution_id");
static const sl__pdb_copy_spec COPY_ATTR = STAGE_PAIR("attr", "Attribution", "artifact_id");
enum { SLOT_ART, SLOT_EXEC, SLOT_EVENT, SLOT_PATH, SLOT_APROP, SLOT_EPROP, SLOT_ASSOC, SLOT_ATTR };

int sl_prov_put_artifact(int64_t *id, sl_prov *p, int64_t type_id, const char *uri, const char *name, int state,
                         int64_t create_ms) {
  if (!create_ms) create_ms = sl__prov_now_ms();
  if (bulk_ids(p)) {
    int64_t nid;
    int rc = take_id(p, 0, &nid);
    if (rc) return rc;
    char a[24], b[24], c[24], d[24];
    snprintf(a, sizeof a, "%lld", (long long)nid);
    snprintf(b, sizeof b, "%lld", (long long)type_id);
    snprintf(c, sizeof c, "%d", state);
    snprintf(d, sizeof d, "%lld", (long long)create_ms);
    const char *v[] = {a, b, uri, c, name, d, d};
    if ((rc = sl__pdb_copy_row(p->db, SLOT_ART, &COPY_ART, v, 7))) return rc;
    if (id) *id = nid;
    return 0;
  }
  if (lite_batch(p)) {
    int64_t nid;
    int rc = lite_take_id(p, 0, &nid);
    if (rc) return rc;
    sl__pdb_val v[] = {VI(nid), VI(type_id), vtext(uri), VI(state), vtext(name), VI(create_ms), VI(create_ms)};
    if ((rc = sl__pdb_batch_row(p->db, BSLOT_ART, &BATCH_ART, v))) return rc;
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
  if (bulk_ids(p)) {
    int64_t nid;
    int rc = take_id(p, 1, &nid);
    if (rc) return rc;
    char a[24], b[24], c[24], d[24], e[24];
    snprintf(a, sizeof a, "%lld", (long long)nid);
    snprintf(b, sizeof b, "%lld", (long long)type_id);
    snprintf(c, sizeof c, "%d", state);
    snprintf(d, sizeof d, "%lld", (long long)create_ms);
    snprintf(e, sizeof e, "%lld", (long long)update_ms);
    const char *v[] = {a, b, c, name, d, e};
    if ((rc = sl__pdb_copy_row(p->db, SLOT_EXEC, &COPY_EXEC, v, 6))) return rc;
    if (id) *id = nid;
    return 0;
  }
  if (lite_batch(p)) {
    int64_t nid;
    int rc = lite_take_id(p, 1, &nid);
    if (rc) return rc;
    sl__pdb_val v[] = {VI(nid), VI(type_id), VI(state), vtext(name), VI(create_ms), VI(update_ms)};
    if ((rc = sl__pdb_batch_row(p->db, BSLOT_EXEC, &BATCH_EXEC, v))) return rc;
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

/* PostgreSQL bulk loads: an event and its path as COPY rows. */
static int event_copy(int64_t *id, sl_prov *p, int64_t artifact_id, int64_t execution_id, int type, int64_t ms,
                      const sl_prov_step *path, size_t npath) {
  int64_t eid;
  int rc = take_id(p, 2, &eid);
  if (rc) return rc;
  char a[24], b[24], c[24], d[24], e[24];
  snprintf(a, sizeof a, "%lld", (long long)eid);
  snprintf(b, sizeof b, "%lld", (long long)artifact_id);
  snprintf(c, sizeof c, "%lld", (long long)execution_id);
  snprintf(d, sizeof d, "%d", type);
  snprintf(e, sizeof e, "%lld", (long long)ms);
  const char *v[] = {a, b, c, d, e};
  if ((rc = sl__pdb_copy_row(p->db, SLOT_EVENT, &COPY_EVENT, v, 5))) return rc;
  for (size_t i = 0; i < npath; i++) {
    char ix[24];
    snprintf(ix, sizeof ix, "%lld", (long long)path[i].index);
    const char *pv[] = {a, path[i].key ? "f" : "t", path[i].key ? NULL : ix, path[i].key};
    if ((rc = sl__pdb_copy_row(p->db, SLOT_PATH, &COPY_PATH, pv, 4))) return rc;
  }
  if (id) *id = eid;
  return 0;
}

/* SQLite bulk loads: an event and its path as batched rows. */
static int event_batch(int64_t *id, sl_prov *p, int64_t artifact_id, int64_t execution_id, int type, int64_t ms,
                       const sl_prov_step *path, size_t npath) {
  int64_t eid;
  int rc = lite_take_id(p, 2, &eid);
  if (rc) return rc;
  sl__pdb_val v[] = {VI(eid), VI(artifact_id), VI(execution_id), VI(type), VI(ms)};
  if ((rc = sl__pdb_batch_row(p->db, BSLOT_EVENT, &BATCH_EVENT, v))) return rc;
  for (size_t i = 0; i < npath; i++) {
    bool idx = path[i].key == NULL;
    sl__pdb_val pv[] = {VI(eid), VI(idx ? 1 : 0), idx ? VI(path[i].index) : vtext(NULL),
                        idx ? vtext(NULL) : vtext(path[i].key)};
    if ((rc = sl__pdb_batch_row(p->db, BSLOT_PATH, &BATCH_PATH, pv))) return rc;
  }
  if (id) *id = eid;
  return 0;
}

int sl_prov_put_context(int64_t *id, sl_prov *p, int64_t type_id, const char *name, int64_t create_ms) {
  if (!name) return sl__err(SL_EINVAL, "context name is NULL");
  if (bulk_ids(p)) {
    /* The name's lock queued, then find-or-create in one statement: one round trip instead of three. */
    sl__pstmt *st;
    int rc = sl__prov_stmt(p, SL__Q_NAME_LOCK, &st);
    if (!rc && !(rc = sl__pstmt_bind_text(st, 1, name))) rc = exec_done(st);
    if (!rc) rc = sl__prov_stmt(p, SL__Q_CTX_PUT_PG, &st);
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
  rc = pg_name_lock(p, name);
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
  /* The execution may still be a row in a COPY buffer: send those first, or the queued UPDATE would miss it. */
  int rc = bulk_ids(p) ? sl__pdb_copy_flush(p->db) : 0;
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

/* PostgreSQL bulk loads: a property value as a staged COPY row. */
static int prop_copy(sl_prov *p, sl_prov_kind kind, int64_t id, const char *name, bool custom, const sl_prov_value *v) {
  char a[24], num[40];
  snprintf(a, sizeof a, "%lld", (long long)id);
  const char *vals[7] = {a, name, custom ? "t" : "f", NULL, NULL, NULL, NULL};
  switch (v->type) {
  case SL_PROV_T_INT: snprintf(num, sizeof num, "%lld", (long long)v->i), vals[3] = num; break;
  case SL_PROV_T_DOUBLE:
    if (isnan(v->d)) snprintf(num, sizeof num, "NaN");
    else if (isinf(v->d)) snprintf(num, sizeof num, v->d > 0 ? "Infinity" : "-Infinity");
    else snprintf(num, sizeof num, "%.17g", v->d);
    vals[4] = num;
    break;
  case SL_PROV_T_STRING:
  case SL_PROV_T_STRUCT:
    if (!v->s) return sl__err(SL_EINVAL, "property '%s': string value is NULL", name);
    vals[5] = v->s;
    break;
  case SL_PROV_T_BOOL: vals[6] = v->i ? "t" : "f"; break;
  default: return sl__err(SL_EINVAL, "property '%s': unknown value type %d", name, (int)v->type);
  }
  return kind == SL_PROV_ARTIFACT ? sl__pdb_copy_row(p->db, SLOT_APROP, &COPY_APROP, vals, 7)
                                  : sl__pdb_copy_row(p->db, SLOT_EPROP, &COPY_EPROP, vals, 7);
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
  rc = sl__mlmd_value_store(&enc, &tmp, v, name, !sl__pdb_is_pg(p->db));
  if (!rc) rc = set_property(p, kind, id, name, custom, &enc);
  sl__free(tmp);
  return rc;
}

static int set_property(sl_prov *p, sl_prov_kind kind, int64_t id, const char *name, bool custom,
                        const sl_prov_value *v) {
  int which = kind == SL_PROV_ARTIFACT ? SL__Q_APROP : kind == SL_PROV_EXECUTION ? SL__Q_EPROP : SL__Q_CPROP;
  int rc = 0;
  if (bulk_ids(p)) {
    if (kind != SL_PROV_CONTEXT && v->type != SL_PROV_T_PROTO) return prop_copy(p, kind, id, name, custom, v);
    /* Written by a statement: after the staged values of the same key, so the last write still wins. */
    if ((rc = sl__pdb_copy_flush(p->db))) return rc;
  }
  if (lite_batch(p)) {
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
    return kind == SL_PROV_ARTIFACT    ? sl__pdb_batch_row(p->db, BSLOT_APROP, &BATCH_APROP, b)
           : kind == SL_PROV_EXECUTION ? sl__pdb_batch_row(p->db, BSLOT_EPROP, &BATCH_EPROP, b)
                                       : sl__pdb_batch_row(p->db, BSLOT_CPROP, &BATCH_CPROP, b);
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
  if (bulk_ids(p)) return event_copy(id, p, artifact_id, execution_id, type, ms, path, npath);
  if (lite_batch(p)) return event_batch(id, p, artifact_id, execution_id, type, ms, path, npath);
  if (!id && npath == 2 && path[0].key && !path[1].key && sl__pdb_is_pg(p->db)) {
    /* TFX's [key, index] path, id not wanted: one statement. */
    sl__pstmt *st;
    int rc = sl__prov_stmt(p, SL__Q_EVENT_PG2, &st);
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
  if (bulk_ids(p) && (which == SL__Q_ASSOC || which == SL__Q_ATTR)) {
    char x[24], y[24];
    snprintf(x, sizeof x, "%lld", (long long)a);
    snprintf(y, sizeof y, "%lld", (long long)b);
    const char *v[] = {x, y};
    return which == SL__Q_ASSOC ? sl__pdb_copy_row(p->db, SLOT_ASSOC, &COPY_ASSOC, v, 2)
                                : sl__pdb_copy_row(p->db, SLOT_ATTR, &COPY_ATTR, v, 2);
  }
  if (lite_batch(p)) {
    sl__pdb_val v[] = {VI(a), VI(b)};
    return which == SL__Q_ASSOC  ? sl__pdb_batch_row(p->db, BSLOT_ASSOC, &BATCH_ASSOC, v)
           : which == SL__Q_ATTR ? sl__pdb_batch_row(p->db, BSLOT_ATTR, &BATCH_ATTR, v)
                                 : sl__pdb_batch_row(p->db, BSLOT_PCTX, &BATCH_PCTX, v);
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
