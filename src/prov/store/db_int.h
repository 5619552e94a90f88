/* prov/store/db_int.h: one small SQL interface over the store's backends (db_sqlite.c, db_pg.c), so the store and
 * the analytics are written once and name no backend. SQL uses `?` placeholders; values are bound, never spliced
 * into the text. Where SQL differs between backends, the backend's dialect supplies it (sl__pdb_dialect).
 * A statement is stepped row by row (PostgreSQL in single-row mode, so large results stream); a connection may run
 * one statement at a time, so finish (or reset) one before stepping another. */
#ifndef SL_PROV_DB_H
#define SL_PROV_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl__pdb sl__pdb;
typedef struct sl__pstmt sl__pstmt;

/* What a backend's SQL says its own way. DDL templates (sl__pdb_sql) write identifiers in backquotes, which a
 * dialect keeps or drops, and these column types as {KEY} {I64} {FLAG} {KIND} {F64} {BLOB}. */
enum { SL__T_KEY, SL__T_I64, SL__T_FLAG, SL__T_KIND, SL__T_F64, SL__T_BLOB,
       /* where the ml-metadata library words its DDL differently per backend: the names of its unique keys
        * ({UQ_ARTIFACT} {UQ_EXECUTION} {UQ_EVENT}: "CONSTRAINT name " or nothing), and whether its property
        * indexes are partial ({NN_INT} {NN_DOUBLE} {NN_STRING}: " WHERE ... IS NOT NULL" or nothing) */
       SL__T_UQA, SL__T_UQX, SL__T_UQE, SL__T_NNI, SL__T_NND, SL__T_NNS, SL__T_N };
typedef struct sl__pdb_dialect {
  const char *name;         /* "sqlite", "postgresql" (sl_prov_backend) */
  const char *tables;       /* SELECT the names of the database's own tables (bookkeeping tables left out) */
  const char *lock_name;    /* takes a lock on the name bound to its `?` until the transaction ends; NULL: the
                             * write lock sl__pdb_begin takes already serialises writers */
  bool returning;           /* INSERT ... RETURNING id runs as written (else sl__pdb_prepare_insert drops it) */
  bool writable_cte;        /* INSERT inside WITH: several writes in one statement (one round trip) */
  bool keep_quotes;         /* identifiers keep their backquotes */
  const char *types[SL__T_N];
  bool proto_text;          /* a PROTO value is stored as base64 text (the library does so where blobs are text) */
  const char *path_order;   /* ORDER BY term that keeps an event's path steps in the order they were written */
  const char *narrow_ints;  /* counts int_value columns of a 32-bit type (the library's on PostgreSQL); NULL: none
                             * can be */
} sl__pdb_dialect;

/* Opens the database named by uri ("postgresql://", "postgres://", "sqlite:PATH" or a path). With `create`, a
 * missing SQLite file is created. */
int sl__pdb_open(sl__pdb **out, const char *uri, bool create);
void sl__pdb_close(sl__pdb *db);
const sl__pdb_dialect *sl__pdb_dialect_of(const sl__pdb *db);
/* A DDL template in the backend's own words (sl__malloc'd; NULL on allocation failure). */
char *sl__pdb_sql(const sl__pdb *db, const char *tmpl);
/* True for a store opened read-only (a refused write otherwise reports itself). */
bool sl__pdb_readonly(sl__pdb *db);
/* Runs SQL without parameters or results (DDL, COMMIT, ROLLBACK). */
int sl__pdb_exec(sl__pdb *db, const char *sql);
/* Begins a transaction that holds the write lock from the start (racing writers wait here, not at a later
 * statement); a bulk load's ids are read afresh in it. */
int sl__pdb_begin(sl__pdb *db);
/* Takes lock number `key` until the transaction ends, for what begin's write lock does not cover (SQLite's covers
 * everything: nothing to do). */
int sl__pdb_lock(sl__pdb *db, int64_t key);
/* A flag kept with the database outside every table's rows, on or off (the store marks a bulk load under way with
 * it); `table` is a table of the database the backend may attach it to. */
int sl__pdb_mark_get(sl__pdb *db, const char *table, bool *on);
int sl__pdb_mark_set(sl__pdb *db, const char *table, bool on);
/* Names of the tables in the database, lower-cased, in *names (count *n); free with sl__pdb_names_free. */
int sl__pdb_tables(sl__pdb *db, char ***names, size_t *n);
void sl__pdb_names_free(char **names, size_t n);

int sl__pdb_prepare(sl__pdb *db, sl__pstmt **out, const char *sql);
/* Prepares an INSERT ending in " RETURNING id": a dialect without `returning` drops the clause (on SQLite it costs
 * an ephemeral table per row) and sl__pstmt_insert returns the last inserted row's id instead. */
int sl__pdb_prepare_insert(sl__pdb *db, sl__pstmt **out, const char *sql);
/* Steps an INSERT prepared by sl__pdb_prepare_insert and resets it; *id receives the new row's id. */
int sl__pstmt_insert(sl__pstmt *st, int64_t *id);
void sl__pstmt_free(sl__pstmt *st);
/* Bind 1-based parameters. */
int sl__pstmt_bind_i64(sl__pstmt *st, int i, int64_t v);
int sl__pstmt_bind_f64(sl__pstmt *st, int i, double v);
int sl__pstmt_bind_text(sl__pstmt *st, int i, const char *s); /* NULL binds NULL */
int sl__pstmt_bind_blob(sl__pstmt *st, int i, const void *b, size_t n);
int sl__pstmt_bind_null(sl__pstmt *st, int i);
/* Runs a statement whose result is not needed: during a bulk load the backend may queue it (PostgreSQL's pipeline
 * mode: its error is reported at the next round trip), else it runs to completion; then it is reset. */
int sl__pstmt_defer(sl__pstmt *st);
/* 1: a row is ready; 0: done; < 0: error (message set). */
int sl__pstmt_step(sl__pstmt *st);
/* Ends the current execution and clears bindings, ready to bind again. */
void sl__pstmt_reset(sl__pstmt *st);
/* Column getters for the current row (0-based). Text/blob pointers are valid until the next step/reset. */
bool sl__pstmt_null(sl__pstmt *st, int c);
int64_t sl__pstmt_i64(sl__pstmt *st, int c);
double sl__pstmt_f64(sl__pstmt *st, int c);
const char *sl__pstmt_text(sl__pstmt *st, int c);
const void *sl__pstmt_blob(sl__pstmt *st, int c, size_t *n);

/* ---- Bulk loads ----
 * Between sl__pdb_bulk(db, SL__BULK_BEGIN) and (db, SL__BULK_ROWS_END) the backend loads rows its fastest way:
 * SQLite as multi-row INSERTs (only inside a transaction, whose write lock keeps the AUTOINCREMENT counters ours),
 * PostgreSQL through COPY buffers, with writes whose result is not needed queued in pipeline mode. Rows go in per
 * table in the order they came, so a table's rows and ids are those single-row INSERTs would give. */
enum { SL__V_NULL, SL__V_INT, SL__V_DOUBLE, SL__V_TEXT, SL__V_BLOB };
typedef struct sl__pdb_val {
  int type;
  int64_t i;
  double d;
  const char *s; /* TEXT, BLOB: n bytes */
  size_t n;
} sl__pdb_val;
/* A table's bulk rows: `cols` (ncols of them) of `table`; with `key`, a row whose key exists already is merged:
 * `update` (a DO UPDATE SET list over `excluded`) or, when NULL, the row is dropped (key "": any unique key). */
typedef struct sl__pdb_bulk_spec {
  const char *table, *cols;
  int ncols;
  const char *key, *update;
} sl__pdb_bulk_spec;
#define SL__PDB_NBULK 12 /* bulk row slots */
#define SL__PDB_NIDS 4   /* bulk id sequences */
/* The stages of a bulk load: BEGIN (the backend's loading settings), ROWS_END (every row and queued statement sent,
 * their errors reported), END (after the store's own work on the loaded tables: settings back to normal). */
enum { SL__BULK_BEGIN, SL__BULK_ROWS_END, SL__BULK_END };
int sl__pdb_bulk(sl__pdb *db, int stage);
/* True when rows go to sl__pdb_bulk_row now. */
bool sl__pdb_bulk_rows(sl__pdb *db);
/* The id the next row of `table` (an INTEGER key `id` the database assigns) takes; `which` (0..SL__PDB_NIDS-1)
 * names the table's sequence for the load. */
int sl__pdb_bulk_id(sl__pdb *db, int which, const char *table, int64_t *id);
/* Appends a row of spec->ncols values (copied) to slot `slot` (0..SL__PDB_NBULK-1; one spec per slot).
 * 0: taken; 1: not taken (a value the backend's bulk path cannot carry): write it by a statement, which the rows
 * taken so far now precede; < 0: error. Taken rows are sent when the slot fills, before a statement not marked
 * bulk-safe steps, before sl__pdb_exec (COMMIT; a ROLLBACK drops SQLite's), at sl__pdb_bulk_flush and when the load
 * ends; their errors surface there. */
int sl__pdb_bulk_row(sl__pdb *db, int slot, const sl__pdb_bulk_spec *spec, const sl__pdb_val *vals);
int sl__pdb_bulk_flush(sl__pdb *db);
/* Marks a statement that reads no table bulk rows are written to (types, contexts, locks): it steps without sending
 * them first. */
void sl__pstmt_bulk_safe(sl__pstmt *st);

#endif
