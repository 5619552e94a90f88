/* prov/store/store.c: the store handle: open (and verify the MLMD v10 schema), close, transactions, the cache of
 * prepared statements the writers share, and the enum names. Writes are in store_write.c, queries in
 * store_query.c, lineage in store_lineage.c, the JSON export in store_export.c. */
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

static const char *const SQL[SL__Q_NQ] = {
    [SL__Q_TYPE_FIND] = "SELECT id, type_kind FROM Type WHERE name = ? ORDER BY id LIMIT 1",
    [SL__Q_TYPE_INS] = "INSERT INTO Type(name, type_kind) VALUES(?, ?) RETURNING id",
    [SL__Q_TYPE_PROP_INS] = "INSERT INTO TypeProperty(type_id, name, data_type) VALUES(?, ?, ?) ON CONFLICT DO NOTHING",
    [SL__Q_PARENT_TYPE_INS] = "INSERT INTO ParentType(type_id, parent_type_id) VALUES(?, ?) ON CONFLICT DO NOTHING",
    [SL__Q_ART_INS] = "INSERT INTO Artifact(type_id, uri, state, name, create_time_since_epoch, "
                  "last_update_time_since_epoch) VALUES(?, ?, ?, ?, ?, ?) RETURNING id",
    [SL__Q_EXEC_INS] = "INSERT INTO Execution(type_id, last_known_state, name, create_time_since_epoch, "
                   "last_update_time_since_epoch) VALUES(?, ?, ?, ?, ?) RETURNING id",
    [SL__Q_CTX_FIND] = "SELECT id FROM Context WHERE type_id = ? AND name = ?",
    [SL__Q_CTX_INS] = "INSERT INTO Context(type_id, name, create_time_since_epoch, last_update_time_since_epoch) "
                  "VALUES(?, ?, ?, ?) RETURNING id",
    [SL__Q_EXEC_STATE] = "UPDATE Execution SET last_known_state = ?, last_update_time_since_epoch = ? WHERE id = ?",
    [SL__Q_APROP] = "INSERT INTO ArtifactProperty(artifact_id, name, is_custom_property, int_value, double_value, "
                "string_value, proto_value, bool_value) VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(artifact_id, "
                "name, is_custom_property) DO UPDATE SET int_value = excluded.int_value, double_value = "
                "excluded.double_value, string_value = excluded.string_value, proto_value = excluded.proto_value, "
                "bool_value = excluded.bool_value",
    [SL__Q_EPROP] = "INSERT INTO ExecutionProperty(execution_id, name, is_custom_property, int_value, double_value, "
                "string_value, proto_value, bool_value) VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(execution_id, "
                "name, is_custom_property) DO UPDATE SET int_value = excluded.int_value, double_value = "
                "excluded.double_value, string_value = excluded.string_value, proto_value = excluded.proto_value, "
                "bool_value = excluded.bool_value",
    [SL__Q_CPROP] = "INSERT INTO ContextProperty(context_id, name, is_custom_property, int_value, double_value, "
                "string_value, proto_value, bool_value) VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(context_id, "
                "name, is_custom_property) DO UPDATE SET int_value = excluded.int_value, double_value = "
                "excluded.double_value, string_value = excluded.string_value, proto_value = excluded.proto_value, "
                "bool_value = excluded.bool_value",
    [SL__Q_EVENT_INS] = "INSERT INTO Event(artifact_id, execution_id, type, milliseconds_since_epoch) "
                    "VALUES(?, ?, ?, ?) RETURNING id",
    [SL__Q_PATH_INS] = "INSERT INTO EventPath(event_id, is_index_step, step_index, step_key) VALUES(?, ?, ?, ?)",
    [SL__Q_ATTR] = "INSERT INTO Attribution(context_id, artifact_id) VALUES(?, ?) ON CONFLICT DO NOTHING",
    [SL__Q_ASSOC] = "INSERT INTO Association(context_id, execution_id) VALUES(?, ?) ON CONFLICT DO NOTHING",
    [SL__Q_PARENT_CTX] = "INSERT INTO ParentContext(context_id, parent_context_id) VALUES(?, ?) ON CONFLICT DO NOTHING",
    /* The name's lock, where the backend needs one (sl__pdb_dialect.lock_name; the text is the backend's). */
    [SL__Q_NAME_LOCK] = NULL,
    /* Where INSERT may sit inside WITH (sl__pdb_dialect.writable_cte): an event and its [key, index] path in one
     * statement (one round trip instead of three). */
    [SL__Q_EVENT_CTE] = "WITH e AS (INSERT INTO Event(artifact_id, execution_id, type, milliseconds_since_epoch) "
                    "VALUES(?, ?, ?, ?) RETURNING id) INSERT INTO EventPath(event_id, is_index_step, step_index, "
                    "step_key) SELECT id, false, CAST(NULL AS INTEGER), CAST(? AS TEXT) FROM e UNION ALL SELECT id, "
                    "true, CAST(? AS INTEGER), CAST(NULL AS TEXT) FROM e",
    /* Likewise, bulk loads: find-or-create a context in one round trip (after the name's lock, queued before it). */
    [SL__Q_CTX_PUT_CTE] = "WITH f AS (SELECT id FROM Context WHERE type_id = ? AND name = ?), i AS (INSERT INTO "
                          "Context(type_id, name, create_time_since_epoch, last_update_time_since_epoch) SELECT ?, ?, "
                          "?, ? WHERE NOT EXISTS (SELECT 1 FROM f) RETURNING id) SELECT id FROM f UNION ALL SELECT id "
                          "FROM i",
};

int sl__prov_stmt(sl_prov *p, int which, sl__pstmt **out) {
  if (!p->q[which]) {
    const char *sql = which == SL__Q_NAME_LOCK ? sl__pdb_dialect_of(p->db)->lock_name : SQL[which];
    if (!sql) return sl__err(SL_ERROR, "%s: statement %d is not for this backend", p->uri, which);
    int rc = sl__pdb_prepare_insert(p->db, &p->q[which], sql);
    if (rc) return rc;
    /* Types, contexts and locks need not wait for the bulk rows (they hold none of those). */
    if (which == SL__Q_TYPE_FIND || which == SL__Q_TYPE_INS || which == SL__Q_CTX_FIND || which == SL__Q_CTX_INS ||
        which == SL__Q_NAME_LOCK || which == SL__Q_CTX_PUT_CTE)
      sl__pstmt_bulk_safe(p->q[which]);
  } else {
    sl__pstmt_reset(p->q[which]);
  }
  *out = p->q[which];
  return 0;
}

int sl_prov_open(sl_prov **out, const char *uri, unsigned flags) {
  *out = NULL;
  sl__redact_note(uri); /* before any message can name it */
  sl_prov *p = sl__calloc(1, sizeof *p);
  if (!p) return sl__oom("store");
  p->uri = sl__redact_dup(uri); /* for messages: no password */
  if (!p->uri) {
    sl__free(p);
    return sl__oom("store");
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
  for (int i = 0; i < SL__Q_NQ; i++) sl__pstmt_free(p->q[i]);
  sl__pdb_close(p->db);
  sl__free(p->uri);
  sl__free(p);
}

const char *sl_prov_backend(const sl_prov *p) { return sl__pdb_dialect_of(p->db)->name; }

int sl_prov_begin(sl_prov *p) {
  if (p->in_txn) return sl__err(SL_EINVAL, "a transaction is already open");
  int rc = sl__pdb_begin(p->db);
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

int sl_prov_bulk_begin(sl_prov *p) {
  if (p->bulk) return sl__err(SL_EINVAL, "%s: a bulk load is already under way", p->uri);
  if (p->in_txn) return sl__err(SL_EINVAL, "%s: begin a bulk load outside a transaction", p->uri);
  p->bulk = true;
  /* Into a store without executions, load without the secondary indexes and build them once at the end. */
  sl__pstmt *st;
  int rc = sl__pdb_prepare(p->db, &st, "SELECT count(*) FROM Execution");
  if (!rc) {
    rc = sl__pstmt_step(st);
    p->bulk_indexes = rc == 1 && sl__pstmt_i64(st, 0) == 0;
    rc = rc < 0 ? rc : 0;
    sl__pstmt_free(st);
  }
  if (!rc && p->bulk_indexes) rc = sl__prov_indexes(p, false);
  /* From here the backend loads rows its fastest way (db_int.h). */
  if (!rc) rc = sl__pdb_bulk(p->db, SL__BULK_BEGIN);
  if (rc) {
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", sl_error_last());
    sl_prov_bulk_end(p);
    return sl__err(rc, "%s", keep);
  }
  return 0;
}

int sl_prov_bulk_end(sl_prov *p) {
  if (!p->bulk) return 0;
  p->bulk = false;
  int rc = sl__pdb_bulk(p->db, SL__BULK_ROWS_END);
  if (p->bulk_indexes) {
    p->bulk_indexes = false;
    int rc2 = sl__prov_indexes(p, true);
    if (!rc) rc = rc2;
  }
  int rc2 = sl__pdb_bulk(p->db, SL__BULK_END);
  return rc ? rc : rc2;
}

/* The transaction is the store's (here); the DDL is schema.c's, which so calls nothing of this file. */
int sl_prov_widen_ints(bool *changed, sl_prov *p) {
  *changed = false;
  int rc = sl__prov_int_width(p);
  if (rc || !p->int32) return rc;
  bool own;
  if ((rc = sl__prov_txn_begin(p, &own))) return rc;
  rc = sl__prov_txn_end(p, own, sl__prov_widen_ddl(p));
  if (!rc) {
    p->int32 = false;
    *changed = true;
  }
  return rc;
}
