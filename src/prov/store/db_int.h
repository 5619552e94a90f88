/* prov/store/db_int.h: one small SQL interface over SQLite and libpq, so the store and the analytics are written once.
 * SQL uses `?` placeholders (rewritten to $n for PostgreSQL); values are bound, never spliced into the text.
 * A statement is stepped row by row (PostgreSQL in single-row mode, so large results stream). */
#ifndef SL_PROV_DB_H
#define SL_PROV_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl__pdb sl__pdb;
typedef struct sl__pstmt sl__pstmt;

/* Opens the database named by uri ("postgresql://", "postgres://", "sqlite:PATH" or a path). With `create`, a
 * missing SQLite file is created. */
int sl__pdb_open(sl__pdb **out, const char *uri, bool create);
void sl__pdb_close(sl__pdb *db);
bool sl__pdb_is_pg(const sl__pdb *db);
/* True for an SQLite store opened read-only (PostgreSQL: false; a refused write reports itself). */
bool sl__pdb_readonly(sl__pdb *db);
/* Runs SQL without parameters or results (DDL, BEGIN). */
int sl__pdb_exec(sl__pdb *db, const char *sql);
/* Names of the tables in the database, lower-cased, in *names (count *n); free with sl__pdb_names_free. */
int sl__pdb_tables(sl__pdb *db, char ***names, size_t *n);
void sl__pdb_names_free(char **names, size_t n);

int sl__pdb_prepare(sl__pdb *db, sl__pstmt **out, const char *sql);
/* Prepares an INSERT ending in " RETURNING id": on SQLite the clause is dropped (it costs an ephemeral table per
 * row) and sl__pstmt_insert returns sqlite3_last_insert_rowid instead. */
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
/* PostgreSQL pipeline mode for bulk writes (no-op on SQLite): statements run with sl__pstmt_defer are queued and
 * their errors reported at the next round trip (a step, an exec, a prepare, or leaving the mode). */
int sl__pdb_pipeline(sl__pdb *db, bool on);
/* Runs a statement whose result is not needed: queued in pipeline mode, else run to completion; then reset. */
int sl__pstmt_defer(sl__pstmt *st);
/* PostgreSQL COPY buffers for bulk loads (SL_ERROR on SQLite): appends a row of n text values (NULL: SQL NULL) to
 * buffer `slot` (0..7), sent as spec->copy ("COPY t(cols) FROM STDIN"), after spec->setup and followed by
 * spec->after when set (a staging table merged into its target with ON CONFLICT, then emptied); the spec outlives
 * the load. The buffers are sent, in slot order, when together they pass 8 MB, before any statement not marked
 * copy-safe steps, before sl__pdb_exec (COMMIT), and when pipeline mode ends; their errors surface there. */
typedef struct sl__pdb_copy_spec {
  const char *copy, *setup, *after;
} sl__pdb_copy_spec;
int sl__pdb_copy_row(sl__pdb *db, int slot, const sl__pdb_copy_spec *spec, const char *const *vals, int n);
int sl__pdb_copy_flush(sl__pdb *db);
/* Marks a statement that reads no table the COPY buffers or row batches write (types, contexts, sequences): it
 * steps without flushing them. */
void sl__pstmt_copy_safe(sl__pstmt *st);
/* SQLite row batches for bulk loads (SL_ERROR on PostgreSQL): appends a row of spec->ncols typed values to slot
 * `slot` (0..11); a slot's rows go in by one multi-row `spec->head (?, ...), (...) spec->tail` per 1,024, in the
 * order they came, so a table's rows and ids are those single-row INSERTs would give. The values are copied. The
 * batches are flushed when a slot fills, before any statement not marked copy-safe steps, and before
 * sl__pdb_exec (COMMIT), which report their errors; a ROLLBACK through sl__pdb_exec drops them. */
enum { SL__V_NULL, SL__V_INT, SL__V_DOUBLE, SL__V_TEXT, SL__V_BLOB };
typedef struct sl__pdb_val {
  int type;
  int64_t i;
  double d;
  const char *s; /* TEXT, BLOB: n bytes */
  size_t n;
} sl__pdb_val;
typedef struct sl__pdb_batch_spec {
  const char *head; /* "INSERT INTO T(cols) VALUES" */
  const char *tail; /* "" or an ON CONFLICT clause */
  int ncols;
} sl__pdb_batch_spec;
int sl__pdb_batch_row(sl__pdb *db, int slot, const sl__pdb_batch_spec *spec, const sl__pdb_val *vals);
int sl__pdb_batch_flush(sl__pdb *db);
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

#endif
