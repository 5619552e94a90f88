/* prov/store/db_backend.h: what a storage backend implements (db_sqlite.c, db_pg.c; db_pg_off.c when the build has
 * no libpq), and the handle db.c dispatches through. Private to src/prov/store/: the rest of the store sees only
 * db_int.h. */
#ifndef SL_PROV_DB_BACKEND_H
#define SL_PROV_DB_BACKEND_H

#include "prov/store/db_int.h"

/* Every backend's handle and statement start with these; the backend's own fields follow. */
struct sl__pdb {
  const struct sl__pdb_vt *vt;
  char *where; /* the uri for messages (without password) */
};
struct sl__pstmt {
  sl__pdb *db;
  bool bulk_safe; /* reads no table bulk rows are written to: steps without sending them */
};

/* Methods take the handle or statement db.c allocated (db_size / stmt_size bytes, zeroed). A method left NULL is
 * not needed by that backend: db.c does the neutral thing (documented in db_int.h). */
typedef struct sl__pdb_vt {
  const sl__pdb_dialect *sql;
  size_t db_size, stmt_size;
  /* target: the path (SQLite) or the uri. On failure close() is still called. */
  int (*open)(sl__pdb *db, const char *target, bool create);
  void (*close)(sl__pdb *db);
  bool (*readonly)(sl__pdb *db);
  int (*exec)(sl__pdb *db, const char *sql);
  int (*begin)(sl__pdb *db);
  int (*lock)(sl__pdb *db, int64_t key);
  int (*mark_get)(sl__pdb *db, const char *table, bool *on);
  int (*mark_set)(sl__pdb *db, const char *table, bool on);
  /* Statements. On a failed prepare finalize() is still called. */
  int (*prepare)(sl__pstmt *st, const char *sql);
  void (*finalize)(sl__pstmt *st);
  int (*bind)(sl__pstmt *st, int i, const sl__pdb_val *v);
  int (*step)(sl__pstmt *st);
  int (*defer)(sl__pstmt *st);
  void (*reset)(sl__pstmt *st);
  /* Column c of the current row as `type` (SL__V_INT, _DOUBLE, _TEXT, _BLOB) in *out; out->type SL__V_NULL for
   * NULL. */
  void (*column)(sl__pstmt *st, int c, int type, sl__pdb_val *out);
  int64_t (*last_id)(sl__pdb *db); /* the row id the last INSERT gave (dialects without `returning`) */
  /* Bulk loads (db_int.h). */
  int (*bulk)(sl__pdb *db, int stage);
  bool (*bulk_rows)(sl__pdb *db);
  int (*bulk_id)(sl__pdb *db, int which, const char *table, int64_t *id);
  int (*bulk_row)(sl__pdb *db, int slot, const sl__pdb_bulk_spec *spec, const sl__pdb_val *vals);
  int (*bulk_flush)(sl__pdb *db);
} sl__pdb_vt;

extern const sl__pdb_vt sl__pdb_sqlite;
extern const sl__pdb_vt sl__pdb_postgres; /* db_pg.c, or db_pg_off.c (open says the build lacks it) */

#endif
