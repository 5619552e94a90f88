/* prov/store/db_sqlite.c: the SQLite backend of db_backend.h. WAL mode with a busy timeout so several processes can
 * write; bulk loads as multi-row INSERTs whose ids continue the AUTOINCREMENT counters under the transaction's
 * write lock. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core_int.h"
#include "prov/store/db_backend.h"

#define BUSY_MS 60000
#define MAXP 24 /* columns of a bulk row */
/* Rows per multi-row INSERT: the statement's fixed cost (cursors opened, MLMD's AUTOINCREMENT counter read and
 * written back, halt and reset) is paid once per 1,024 rows; the remainder goes as 512, 256, ..., 1 rows (docs/
 * benchmarks.md has the measurements). An SQLite built with fewer host parameters than rows x columns gets
 * statements of fewer rows. */
#define BATCH_ROWS 1024
#define BATCH_SIZES 11
/* The flag sl__pdb_mark_set keeps in the header's user_version, which MLMD leaves 0. */
#define LITE_MARK 1936483947 /* "slbk" */

/* A batched value: text and blobs live in the slot's arena, by offset (the arena may move as it grows). */
typedef struct bval {
  int type;
  int64_t i;
  double d;
  size_t off, n;
} bval;
typedef struct batch_slot {
  const sl__pdb_bulk_spec *spec;
  char *head, *tail; /* "INSERT OR FAIL INTO T(cols) VALUES", "" or its ON CONFLICT clause */
  bval *v;           /* BATCH_ROWS x ncols */
  int rows;
  char *arena;
  size_t alen, acap;
  sqlite3_stmt *st[BATCH_SIZES]; /* 1024, 512, ..., 1 rows */
} batch_slot;

typedef struct lite_db {
  sl__pdb base;
  sqlite3 *lite;
  bool bulk;
  batch_slot batch[SL__PDB_NBULK];
  int batch_rows;
  /* The next id of each bulk id sequence, read at its first row in each transaction (0: not read yet). */
  int64_t next[SL__PDB_NIDS];
  sqlite3_stmt *seq[SL__PDB_NIDS];
} lite_db;

typedef struct lite_stmt {
  sl__pstmt base;
  sqlite3_stmt *ls;
} lite_stmt;

#define LDB(db) ((lite_db *)(db))
#define LST(st) ((lite_stmt *)(st))

static int lite_err(lite_db *db, const char *what) {
  int e = sqlite3_errcode(db->lite);
  int code = e == SQLITE_CONSTRAINT ? SL_EINVAL : e == SQLITE_CORRUPT || e == SQLITE_NOTADB ? SL_ECORRUPT : SL_EIO;
  /* a full disk says so: SQLite's unix VFS turns ENOSPC into SQLITE_FULL and keeps no errno for it */
  if (e == SQLITE_FULL)
    return sl__err(code, "%s: %s: %s (ENOSPC: %s)", db->base.where, what, sqlite3_errmsg(db->lite), strerror(ENOSPC));
  int os = sqlite3_system_errno(db->lite);
  if (os && (e == SQLITE_IOERR || e == SQLITE_CANTOPEN || e == SQLITE_READONLY))
    return sl__err(code, "%s: %s: %s (%s)", db->base.where, what, sqlite3_errmsg(db->lite), strerror(os));
  return sl__err(code, "%s: %s: %s", db->base.where, what, sqlite3_errmsg(db->lite));
}

/* How a reader without write access opens a WAL store. It must see what is committed in the -wal, and must leave
 * no -wal or -shm of its own behind (in a shared directory the owner could not write them, and its next write
 * would fail). Nothing in the -wal: immutable, which reads the file as it is and creates nothing. Committed
 * transactions in the -wal: a read-only open through the existing -shm index, or, with none, a refusal saying
 * what to do. */
static int readonly_mode(const char *path, bool *immutable) {
  char side[4200];
  struct stat st;
  snprintf(side, sizeof side, "%s-wal", path);
  bool wal = stat(side, &st) == 0 && st.st_size > 0;
  snprintf(side, sizeof side, "%s-shm", path);
  bool shm = stat(side, &st) == 0 && access(side, R_OK) == 0;
  *immutable = !wal;
  if (wal && !shm)
    return sl__err(SL_EIO, "%s: committed transactions wait in %s-wal, and a reader without write access to the "
                   "store and its directory cannot build the -shm index that reading them needs: open the store once "
                   "with write access (any 'sluice prov' command by its owner checkpoints it), or let readers write "
                   "the directory", path, path);
  return 0;
}

/* file: URI of path (percent-encoded where it must be) opening it immutable. */
static char *immutable_uri(const char *path) {
  size_t n = strlen(path);
  char *fileuri = sl__malloc(n * 3 + 32);
  if (!fileuri) return NULL;
  char *w = fileuri + sprintf(fileuri, "file:");
  for (const char *c = path; *c; c++) {
    if (*c == '%' || *c == '?' || *c == '#') w += sprintf(w, "%%%02X", (unsigned char)*c);
    else *w++ = *c;
  }
  strcpy(w, "?immutable=1");
  return fileuri;
}

/* Page size, journal and cache of a store just opened. */
static int lite_setup(lite_db *db, const char *path, bool fresh, bool ro) {
  /* Reading the schema is the first touch of the file: it tells SQLite files from others. */
  int rc = sqlite3_exec(db->lite, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
  if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
    return sl__err(SL_ECORRUPT, "%s: not an SQLite database (%s)", path, sqlite3_errmsg(db->lite));
  if (rc != SQLITE_OK) return sl__err(SL_EIO, "%s: %s", path, sqlite3_errmsg(db->lite));
  /* A new store gets 16 KiB pages (SQLite's default is 4 KiB): a provenance store is written in long appends and
   * read in whole-table scans, and larger pages mean a quarter of the page writes, reads and B-tree cells to
   * split (prov gen at 300 pipelines: about a sixth less CPU). It must be set before WAL initialises the file. */
  if (fresh && !ro) sqlite3_exec(db->lite, "PRAGMA page_size=16384", NULL, NULL, NULL);
  /* WAL lets readers and one writer work at once across processes; NORMAL sync is durable at checkpoints and
   * never corrupts. journal_mode needs a moment of exclusive access: the busy timeout covers it. Only a store this
   * open creates is switched: WAL is a property of the file, and another tool's store (TFX's, which ml-metadata
   * opens in rollback-journal mode) is theirs to keep as it is, even when sluice writes to it. */
  rc = ro || !fresh ? SQLITE_OK : sqlite3_exec(db->lite, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return sl__err(SL_EIO, "%s: cannot enable WAL: %s", path, sqlite3_errmsg(db->lite));
  sqlite3_exec(db->lite, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
  sqlite3_exec(db->lite, "PRAGMA cache_size=-65536", NULL, NULL, NULL); /* 64 MiB */
  /* Statement journals (each upsert in a transaction has one) in memory, not in temporary files. */
  sqlite3_exec(db->lite, "PRAGMA temp_store=MEMORY", NULL, NULL, NULL);
  return 0;
}

static int lite_open(sl__pdb *base, const char *path, bool create) {
  lite_db *db = LDB(base);
  struct stat sb;
  bool fresh = false; /* no file yet, or an empty one: its page size is still ours to choose */
  if (stat(path, &sb) != 0) {
    if (!create) return sl__err(SL_ENOTFOUND, "%s: no such database file", path);
    fresh = true;
  } else if (!S_ISREG(sb.st_mode)) {
    return sl__err(SL_EIO, "%s: not a regular file", path);
  } else {
    fresh = create && sb.st_size == 0;
  }
  /* A store we may not write (someone else's TFX database) opens read-only: the analytics only read. WAL needs
   * the directory writable too (for its -wal and -shm files). */
  bool ro = false, immutable = false;
  if (!create && access(path, R_OK) == 0) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
      *(slash == dir ? slash + 1 : slash) = 0;
    else
      snprintf(dir, sizeof dir, ".");
    ro = access(path, W_OK) != 0 || access(dir, W_OK) != 0;
    if (ro) {
      int rc = readonly_mode(path, &immutable);
      if (rc) return rc;
    }
  }
  int fl = (ro ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | (create ? SQLITE_OPEN_CREATE : 0) |
           SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;
  char *fileuri = NULL;
  if (immutable && !(fileuri = immutable_uri(path))) return sl__oom("database uri");
  int rc = sqlite3_open_v2(fileuri ? fileuri : path, &db->lite, fl, NULL);
  sl__free(fileuri);
  if (rc != SQLITE_OK)
    return sl__err(SL_EIO, "%s: cannot open: %s", path, db->lite ? sqlite3_errmsg(db->lite) : sqlite3_errstr(rc));
  sqlite3_busy_timeout(db->lite, BUSY_MS);
  sqlite3_extended_result_codes(db->lite, 0);
  return lite_setup(db, path, fresh, ro);
}

static void lite_close(sl__pdb *base) {
  lite_db *db = LDB(base);
  for (int i = 0; i < SL__PDB_NBULK; i++) { /* rows never flushed: the load was abandoned */
    for (int k = 0; k < BATCH_SIZES; k++) sqlite3_finalize(db->batch[i].st[k]);
    sl__free(db->batch[i].v);
    sl__free(db->batch[i].arena);
    sl__free(db->batch[i].head);
    sl__free(db->batch[i].tail);
  }
  for (int i = 0; i < SL__PDB_NIDS; i++) sqlite3_finalize(db->seq[i]);
  if (db->lite) sqlite3_close_v2(db->lite);
}

static bool lite_readonly(sl__pdb *base) {
  lite_db *db = LDB(base);
  return db->lite && sqlite3_db_readonly(db->lite, "main") == 1;
}

/* ---- Row batches (bulk loads) ---- */

/* The slot's statement text, made when the slot takes its first row. */
static int batch_text(batch_slot *b, const sl__pdb_bulk_spec *spec) {
  size_t n = strlen(spec->table) + strlen(spec->cols) + 32;
  b->head = sl__malloc(n);
  if (!b->head) return sl__oom("row batch");
  snprintf(b->head, n, "INSERT OR FAIL INTO %s(%s) VALUES", spec->table, spec->cols);
  n = (spec->key ? strlen(spec->key) : 0) + (spec->update ? strlen(spec->update) : 0) + 48;
  b->tail = sl__malloc(n);
  if (!b->tail) return sl__oom("row batch");
  if (!spec->key) snprintf(b->tail, n, "%s", "");
  else if (!spec->update) snprintf(b->tail, n, " ON CONFLICT DO NOTHING");
  else snprintf(b->tail, n, " ON CONFLICT(%s) DO UPDATE SET %s", spec->key, spec->update);
  return 0;
}

static int lite_bulk_row(sl__pdb *base, int slot, const sl__pdb_bulk_spec *spec, const sl__pdb_val *vals);
static int lite_bulk_flush(sl__pdb *base);

/* Room in the slot's arena for the row's text and blobs. */
static int arena_room(batch_slot *b, const sl__pdb_bulk_spec *spec, const sl__pdb_val *vals) {
  size_t need = b->alen;
  for (int c = 0; c < spec->ncols; c++)
    if ((vals[c].type == SL__V_TEXT || vals[c].type == SL__V_BLOB) && !sl__add_ok(need, vals[c].n, &need))
      return sl__oom("row batch");
  if (need <= b->acap) return 0;
  size_t nc = b->acap ? b->acap : 16384;
  while (nc < need)
    if (!sl__mul_ok(nc, 2, &nc)) return sl__oom("row batch");
  char *na = sl__realloc(b->arena, nc);
  if (!na) return sl__oom("row batch");
  b->arena = na;
  b->acap = nc;
  return 0;
}

static int lite_bulk_row(sl__pdb *base, int slot, const sl__pdb_bulk_spec *spec, const sl__pdb_val *vals) {
  lite_db *db = LDB(base);
  if (spec->ncols < 1 || spec->ncols > MAXP) return sl__err(SL_ERROR, "row batch: bad column count");
  batch_slot *b = &db->batch[slot];
  if (b->spec && b->spec != spec) return sl__err(SL_ERROR, "row batch slot %d holds another table's rows", slot);
  if (!b->spec) {
    int rc = batch_text(b, spec);
    if (rc) return rc;
    b->spec = spec;
  }
  if (!b->v) {
    b->v = sl__calloc((size_t)BATCH_ROWS * (size_t)spec->ncols, sizeof *b->v);
    if (!b->v) return sl__oom("row batch");
  }
  int rc = arena_room(b, spec, vals);
  if (rc) return rc;
  bval *o = b->v + (size_t)b->rows * (size_t)spec->ncols;
  for (int c = 0; c < spec->ncols; c++) {
    o[c].type = vals[c].type;
    o[c].i = vals[c].i;
    o[c].d = vals[c].d;
    if (vals[c].type == SL__V_TEXT || vals[c].type == SL__V_BLOB) {
      o[c].off = b->alen;
      o[c].n = vals[c].n;
      if (vals[c].n) memcpy(b->arena + b->alen, vals[c].s, vals[c].n);
      b->alen += vals[c].n;
    }
  }
  b->rows++;
  db->batch_rows++;
  return b->rows == BATCH_ROWS ? lite_bulk_flush(base) : 0;
}

/* The statement inserting BATCH_ROWS >> k rows of slot i, prepared on first use. */
static int batch_stmt(lite_db *db, int i, int k, sqlite3_stmt **out) {
  batch_slot *b = &db->batch[i];
  if (!b->st[k]) {
    int rows = BATCH_ROWS >> k, nc = b->spec->ncols;
    size_t hl = strlen(b->head), tl = strlen(b->tail), len = hl + tl + (size_t)rows * ((size_t)nc * 2 + 2) + 1;
    char *sql = sl__malloc(len), *w = sql;
    if (!sql) return sl__oom("row batch statement");
    memcpy(w, b->head, hl);
    w += hl;
    for (int r = 0; r < rows; r++) {
      *w++ = r ? ',' : ' ';
      *w++ = '(';
      for (int c = 0; c < nc; c++) {
        if (c) *w++ = ',';
        *w++ = '?';
      }
      *w++ = ')';
    }
    memcpy(w, b->tail, tl + 1);
    int rc = sqlite3_prepare_v3(db->lite, sql, -1, SQLITE_PREPARE_PERSISTENT, &b->st[k], NULL);
    sl__free(sql);
    if (rc != SQLITE_OK) return lite_err(db, "prepare row batch");
  }
  *out = b->st[k];
  return 0;
}

static int bind_val(sqlite3_stmt *st, int i, const sl__pdb_val *v, void (*keep)(void *)) {
  switch (v->type) {
  case SL__V_INT: return sqlite3_bind_int64(st, i, v->i);
  case SL__V_DOUBLE: return sqlite3_bind_double(st, i, v->d);
  case SL__V_TEXT: return sqlite3_bind_text64(st, i, v->s, v->n, keep, SQLITE_UTF8);
  case SL__V_BLOB: return sqlite3_bind_blob64(st, i, v->n ? v->s : "", v->n, keep);
  default: return sqlite3_bind_null(st, i);
  }
}

static int batch_flush1(lite_db *db, int i) {
  batch_slot *b = &db->batch[i];
  int nc = b->spec->ncols, at = 0, rc = 0;
  while (!rc && at < b->rows) {
    int k = 0, maxp = sqlite3_limit(db->lite, SQLITE_LIMIT_VARIABLE_NUMBER, -1);
    while (k + 1 < BATCH_SIZES && ((BATCH_ROWS >> k) > b->rows - at || (BATCH_ROWS >> k) * nc > maxp)) k++;
    int rows = BATCH_ROWS >> k;
    sqlite3_stmt *st = NULL;
    if ((rc = batch_stmt(db, i, k, &st))) break;
    const bval *v = b->v + (size_t)at * (size_t)nc;
    int br = SQLITE_OK;
    for (int j = 0; br == SQLITE_OK && j < rows * nc; j++) {
      sl__pdb_val x = {v[j].type, v[j].i, v[j].d, b->arena + v[j].off, v[j].n};
      br = bind_val(st, j + 1, &x, SQLITE_STATIC);
    }
    if (br != SQLITE_OK) {
      rc = br == SQLITE_NOMEM ? sl__oom("SQLite bind") : lite_err(db, "bind row batch");
    } else if (sqlite3_step(st) != SQLITE_DONE) {
      rc = sl__err(sqlite3_errcode(db->lite) == SQLITE_CONSTRAINT ? SL_EINVAL : SL_EIO, "%s: %s (one of %d rows "
                   "batched for it): %s", db->base.where, b->head, rows, sqlite3_errmsg(db->lite));
    }
    sqlite3_reset(st);
    at += rows;
  }
  db->batch_rows -= b->rows;
  b->rows = 0;
  b->alen = 0;
  return rc;
}

static int lite_bulk_flush(sl__pdb *base) {
  lite_db *db = LDB(base);
  int rc = 0;
  for (int i = 0; db->batch_rows && i < SL__PDB_NBULK; i++) {
    if (!db->batch[i].rows) continue;
    int r = batch_flush1(db, i);
    if (!rc) rc = r;
  }
  return rc;
}

static void batch_discard(lite_db *db) {
  for (int i = 0; i < SL__PDB_NBULK; i++) db->batch[i].rows = 0, db->batch[i].alen = 0;
  db->batch_rows = 0;
}

/* The id AUTOINCREMENT would give next: the larger of the table's counter and its largest id, plus one. */
static int lite_bulk_id(sl__pdb *base, int which, const char *table, int64_t *id) {
  lite_db *db = LDB(base);
  if (!db->next[which]) {
    int rc = lite_bulk_flush(base); /* the counter must see every row batched so far */
    if (rc) return rc;
    if (!db->seq[which]) {
      char sql[256];
      snprintf(sql, sizeof sql, "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = '%s'), 0), "
                                "coalesce((SELECT max(id) FROM %s), 0)) + 1", table, table);
      if (sqlite3_prepare_v2(db->lite, sql, -1, &db->seq[which], NULL) != SQLITE_OK) return lite_err(db, "prepare");
    }
    rc = sqlite3_step(db->seq[which]);
    if (rc == SQLITE_ROW) db->next[which] = sqlite3_column_int64(db->seq[which], 0);
    int e = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : lite_err(db, "step");
    sqlite3_reset(db->seq[which]);
    if (e) return e;
    if (rc != SQLITE_ROW || db->next[which] < 1)
      return sl__err(SL_ERROR, "%s: no next id for a bulk load", base->where);
  }
  *id = db->next[which]++;
  return 0;
}

/* Durability per transaction is not needed while loading (nor while the store re-creates its indexes after); a big
 * page cache keeps a large transaction from spilling pages to the WAL over and over. Both are hints: a failure only
 * costs speed. The rows themselves go in at each COMMIT. */
static int lite_bulk(sl__pdb *base, int stage) {
  lite_db *db = LDB(base);
  db->bulk = stage == SL__BULK_BEGIN;
  if (stage == SL__BULK_BEGIN) {
    sqlite3_exec(db->lite, "PRAGMA synchronous=OFF", NULL, NULL, NULL);
    sqlite3_exec(db->lite, "PRAGMA cache_size=-524288", NULL, NULL, NULL);
  } else if (stage == SL__BULK_END) {
    sqlite3_exec(db->lite, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
  }
  return 0;
}

/* Batches only inside a transaction: its write lock keeps the AUTOINCREMENT counters the ids continue ours. */
static bool lite_bulk_rows(sl__pdb *base) {
  lite_db *db = LDB(base);
  return db->bulk && !sqlite3_get_autocommit(db->lite);
}

/* ---- SQL and statements ---- */

static int lite_exec(sl__pdb *base, const char *sql) {
  lite_db *db = LDB(base);
  if (db->batch_rows) {
    /* COMMIT and the like see every batched row; a ROLLBACK drops them with the rest of the transaction. */
    if (!strncmp(sql, "ROLLBACK", 8)) {
      batch_discard(db);
    } else {
      int rc = lite_bulk_flush(base);
      if (rc) return rc;
    }
  }
  /* SQLite ends the transaction itself on some errors (SQLITE_FULL among them): a ROLLBACK then has nothing to do,
   * and its "no transaction is active" would replace the error that matters. */
  if (!strncmp(sql, "ROLLBACK", 8) && sqlite3_get_autocommit(db->lite)) return 0;
  char *em = NULL;
  if (sqlite3_exec(db->lite, sql, NULL, NULL, &em) != SQLITE_OK) {
    int rc = lite_err(db, "SQL");
    sqlite3_free(em);
    return rc;
  }
  return 0;
}

static int lite_begin(sl__pdb *base) {
  memset(LDB(base)->next, 0, sizeof LDB(base)->next); /* another process may have written since our last one */
  return lite_exec(base, "BEGIN IMMEDIATE");
}

static int lite_mark_get(sl__pdb *base, const char *table, bool *on) {
  lite_db *db = LDB(base);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->lite, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK) return lite_err(db, "prepare");
  int rc = sqlite3_step(st);
  *on = rc == SQLITE_ROW && sqlite3_column_int64(st, 0) == LITE_MARK;
  int e = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : lite_err(db, "step");
  sqlite3_finalize(st);
  return e;
}

static int lite_mark_set(sl__pdb *base, const char *table, bool on) {
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d", on ? LITE_MARK : 0);
  return lite_exec(base, sql);
}

static int lite_prepare(sl__pstmt *st, const char *sql) {
  lite_db *db = LDB(st->db);
  return sqlite3_prepare_v2(db->lite, sql, -1, &LST(st)->ls, NULL) != SQLITE_OK ? lite_err(db, "prepare") : 0;
}

static void lite_finalize(sl__pstmt *st) { sqlite3_finalize(LST(st)->ls); }

static int lite_bind(sl__pstmt *st, int i, const sl__pdb_val *v) {
  int rc = bind_val(LST(st)->ls, i, v, SQLITE_TRANSIENT);
  return rc == SQLITE_OK ? 0 : rc == SQLITE_NOMEM ? sl__oom("SQLite bind") : lite_err(LDB(st->db), "bind");
}

static int lite_step(sl__pstmt *st) {
  lite_db *db = LDB(st->db);
  if (db->batch_rows && !st->bulk_safe) {
    int rc = lite_bulk_flush(st->db); /* the statement may read or write rows still batched */
    if (rc) return rc;
  }
  int rc = sqlite3_step(LST(st)->ls);
  if (rc == SQLITE_ROW) return 1;
  if (rc == SQLITE_DONE) return 0;
  int e = lite_err(db, "step");
  sqlite3_reset(LST(st)->ls);
  return e;
}

static void lite_reset(sl__pstmt *st) {
  sqlite3_reset(LST(st)->ls);
  sqlite3_clear_bindings(LST(st)->ls);
}

static int lite_defer(sl__pstmt *st) {
  int rc = lite_step(st);
  while (rc == 1) rc = lite_step(st);
  lite_reset(st);
  return rc;
}

static void lite_column(sl__pstmt *st, int c, int type, sl__pdb_val *out) {
  sqlite3_stmt *s = LST(st)->ls;
  out->type = type;
  switch (type) {
  case SL__V_INT: out->i = sqlite3_column_int64(s, c); break;
  case SL__V_DOUBLE: out->d = sqlite3_column_double(s, c); break;
  case SL__V_TEXT: out->s = (const char *)sqlite3_column_text(s, c); break;
  case SL__V_BLOB:
    out->n = (size_t)sqlite3_column_bytes(s, c);
    out->s = sqlite3_column_blob(s, c);
    break;
  default: out->type = sqlite3_column_type(s, c) == SQLITE_NULL ? SL__V_NULL : SL__V_INT; break;
  }
}

static int64_t lite_last_id(sl__pdb *base) { return sqlite3_last_insert_rowid(LDB(base)->lite); }

static const sl__pdb_dialect LITE_SQL = {
    .name = "sqlite",
    .tables = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
    .lock_name = NULL,
    .returning = false,
    .writable_cte = false,
    .keep_quotes = true,
    .types = {[SL__T_KEY] = "INTEGER PRIMARY KEY AUTOINCREMENT", [SL__T_I64] = "INT", [SL__T_FLAG] = "TINYINT(1)",
              [SL__T_KIND] = "TINYINT(1)", [SL__T_F64] = "DOUBLE", [SL__T_BLOB] = "BLOB", [SL__T_UQA] = "",
              [SL__T_UQX] = "", [SL__T_UQE] = "", [SL__T_NNI] = " WHERE `int_value` IS NOT NULL",
              [SL__T_NND] = " WHERE `double_value` IS NOT NULL", [SL__T_NNS] = " WHERE `string_value` IS NOT NULL"},
    .proto_text = true,
    .path_order = "p.rowid",
    .narrow_ints = NULL, /* SQLite's integers are 64-bit whatever the declared type */
};

const sl__pdb_vt sl__pdb_sqlite = {
    .sql = &LITE_SQL,
    .db_size = sizeof(lite_db),
    .stmt_size = sizeof(lite_stmt),
    .open = lite_open,
    .close = lite_close,
    .readonly = lite_readonly,
    .exec = lite_exec,
    .begin = lite_begin,
    .lock = NULL,
    .mark_get = lite_mark_get,
    .mark_set = lite_mark_set,
    .prepare = lite_prepare,
    .finalize = lite_finalize,
    .bind = lite_bind,
    .step = lite_step,
    .defer = lite_defer,
    .reset = lite_reset,
    .column = lite_column,
    .last_id = lite_last_id,
    .bulk = lite_bulk,
    .bulk_rows = lite_bulk_rows,
    .bulk_id = lite_bulk_id,
    .bulk_row = lite_bulk_row,
    .bulk_flush = lite_bulk_flush,
};
