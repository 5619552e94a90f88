/* prov/store/db.c: the SQLite and PostgreSQL backends behind prov/db.h. SQLite runs in WAL mode with a busy timeout
 * so several processes can write; PostgreSQL statements are prepared once per connection and their results
 * streamed in single-row mode. */
#include "prov/store/db_int.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core_int.h"

/* libpq is optional (SL_WITH_POSTGRES): without SL_HAVE_POSTGRES every handle is SQLite, the PostgreSQL fields
 * stay NULL and opening a postgres:// URI says the build lacks it. */
#ifdef SL_HAVE_POSTGRES
#include <libpq-fe.h>
#else
typedef void PGconn;
typedef void PGresult;
#endif

#define SL_PDB_BUSY_MS 60000
#define SL_PDB_NCOPY 8
#define SL_PDB_NBATCH 12
/* Rows per multi-row INSERT: the statement's fixed cost (cursors opened, MLMD's AUTOINCREMENT counter read and
 * written back, halt and reset) is paid once per 1,024 rows; the remainder goes as 512, 256, ..., 1 rows. (prov gen
 * at 300 pipelines, CPU: 256 rows a statement 0.93x of 64 rows, 1,024 rows 0.95x of 256.) An SQLite built
 * with fewer host parameters than rows x columns gets statements of fewer rows. */
#define SL_PDB_BATCH_ROWS 1024
#define SL_PDB_BATCH_SIZES 11

/* A batched value: text and blobs live in the slot's arena, by offset (the arena may move as it grows). */
typedef struct bval {
  int type;
  int64_t i;
  double d;
  size_t off, n;
} bval;
typedef struct batch_slot {
  const sl__pdb_batch_spec *spec;
  bval *v; /* SL_PDB_BATCH_ROWS x ncols */
  int rows;
  char *arena;
  size_t alen, acap;
  sqlite3_stmt *st[SL_PDB_BATCH_SIZES]; /* 1024, 512, ..., 1 rows */
} batch_slot;

struct sl__pdb {
  sqlite3 *lite;
  PGconn *pg;
  int nstmts; /* PostgreSQL prepared statement names */
  char *where; /* the uri for messages (without password) */
  /* PostgreSQL pipeline mode (bulk writes): statements whose results are not needed are queued and their results
   * read at the next round trip. */
  bool pipe;
  int pending;
  /* COPY buffers (PostgreSQL bulk loads): rows as COPY text per slot, sent by copy_flush. */
  struct {
    const sl__pdb_copy_spec *spec;
    char *buf;
    size_t len, cap;
  } copy[SL_PDB_NCOPY];
  size_t copy_bytes;
  /* Row batches (SQLite bulk loads): rows per slot, inserted by multi-row INSERTs (batch_flush). */
  batch_slot batch[SL_PDB_NBATCH];
  int batch_rows;
};

#define SL_PDB_MAXP 24
struct sl__pstmt {
  sl__pdb *db;
  sqlite3_stmt *ls;
  /* PostgreSQL */
  char name[32];
  int nparams;
  char *pv[SL_PDB_MAXP];
  int plen[SL_PDB_MAXP], pfmt[SL_PDB_MAXP];
  PGresult *res;
  int row, nrows; /* pipeline mode: rows of a whole result */
  bool running;
  bool copy_safe;       /* reads no table that COPY buffers hold rows for: runs without flushing them */
  unsigned char *unesc; /* last unescaped bytea */
};

bool sl__pdb_is_pg(const sl__pdb *db) { return db->pg != NULL; }

bool sl__pdb_readonly(sl__pdb *db) { return db->lite && sqlite3_db_readonly(db->lite, "main") == 1; }

static bool is_pg_uri(const char *u) { return !strncmp(u, "postgresql://", 13) || !strncmp(u, "postgres://", 11); }

/* "host=h password=pw dbname=d": libpq's other form, which would otherwise become a SQLite file of that name (the
 * password in a file name). */
static bool is_conninfo(const char *u) {
  static const char *const KEYS[] = {"host", "hostaddr", "port", "dbname", "user", "password", "sslmode", "service"};
  for (size_t i = 0; i < sizeof KEYS / sizeof *KEYS; i++) {
    size_t n = strlen(KEYS[i]);
    if (strncmp(u, KEYS[i], n)) continue;
    const char *c = u + n;
    while (*c == ' ') c++;
    if (*c == '=') return true;
  }
  return false;
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

static int open_sqlite(sl__pdb *db, const char *path, bool create) {
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
  if (immutable) {
    /* file: URI with the path percent-encoded where it must be. */
    size_t n = strlen(path);
    fileuri = sl__malloc(n * 3 + 32);
    if (!fileuri) return sl__oom("database uri");
    char *w = fileuri + sprintf(fileuri, "file:");
    for (const char *c = path; *c; c++) {
      if (*c == '%' || *c == '?' || *c == '#') w += sprintf(w, "%%%02X", (unsigned char)*c);
      else *w++ = *c;
    }
    strcpy(w, "?immutable=1");
  }
  int rc = sqlite3_open_v2(fileuri ? fileuri : path, &db->lite, fl, NULL);
  sl__free(fileuri);
  if (rc != SQLITE_OK) {
    int e = sl__err(SL_EIO, "%s: cannot open: %s", path, db->lite ? sqlite3_errmsg(db->lite) : sqlite3_errstr(rc));
    return e;
  }
  sqlite3_busy_timeout(db->lite, SL_PDB_BUSY_MS);
  sqlite3_extended_result_codes(db->lite, 0);
  /* Reading the schema is the first touch of the file: it tells SQLite files from others. */
  rc = sqlite3_exec(db->lite, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
  if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
    return sl__err(SL_ECORRUPT, "%s: not an SQLite database (%s)", path, sqlite3_errmsg(db->lite));
  if (rc != SQLITE_OK) return sl__err(SL_EIO, "%s: %s", path, sqlite3_errmsg(db->lite));
  /* A new store gets 16 KiB pages (SQLite's default is 4 KiB): a provenance store is written in long appends and
   * read in whole-table scans, and larger pages mean a quarter of the page writes, reads and B-tree cells to
   * split (prov gen at 300 pipelines: about a sixth less CPU). It must be set before WAL initialises the file. */
  if (fresh && !ro) sqlite3_exec(db->lite, "PRAGMA page_size=16384", NULL, NULL, NULL);
  /* WAL lets readers and one writer work at once across processes; NORMAL sync is durable at checkpoints and
   * never corrupts. journal_mode needs a moment of exclusive access: the busy timeout covers it. */
  rc = ro ? SQLITE_OK : sqlite3_exec(db->lite, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return sl__err(SL_EIO, "%s: cannot enable WAL: %s", path, sqlite3_errmsg(db->lite));
  sqlite3_exec(db->lite, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
  sqlite3_exec(db->lite, "PRAGMA cache_size=-65536", NULL, NULL, NULL); /* 64 MiB */
  /* Statement journals (each upsert in a transaction has one) in memory, not in temporary files. */
  sqlite3_exec(db->lite, "PRAGMA temp_store=MEMORY", NULL, NULL, NULL);
  return 0;
}

#ifdef SL_HAVE_POSTGRES
static int open_pg(sl__pdb *db, const char *uri) {
  /* connect_timeout first: a value in the URI (expanded after it) wins. */
  const char *kw[] = {"connect_timeout", "dbname", NULL};
  const char *val[] = {"5", uri, NULL};
  db->pg = PQconnectdbParams(kw, val, 1);
  if (!db->pg) return sl__oom("PostgreSQL connection");
  if (PQstatus(db->pg) != CONNECTION_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", PQerrorMessage(db->pg));
    size_t l = strlen(msg);
    while (l && (msg[l - 1] == '\n' || msg[l - 1] == ' ')) msg[--l] = 0;
    for (char *c = msg; *c; c++)
      if (*c == '\n') *c = ' ';
    return sl__err(SL_EIO, "%s: cannot connect: %s", db->where, msg);
  }
  PGresult *r = PQexec(db->pg, "SET client_min_messages = warning");
  PQclear(r);
  return 0;
}
#else
static int open_pg(sl__pdb *db, const char *uri) {
  return sl__err(SL_EINVAL, "%s: built without PostgreSQL support (SL_WITH_POSTGRES=OFF)", db->where);
}
#endif

int sl__pdb_open(sl__pdb **out, const char *uri, bool create) {
  *out = NULL;
  if (!uri || !*uri) return sl__err(SL_EINVAL, "empty store URI");
  sl__pdb *db = sl__calloc(1, sizeof *db);
  if (!db) return sl__oom("store handle");
  db->where = sl__redact_dup(uri); /* for messages: no password */
  if (!db->where) {
    sl__free(db);
    return sl__oom("store uri");
  }
  int rc;
  if (is_conninfo(uri))
    rc = sl__err(SL_EINVAL, "'%s': a libpq key=value connection string; name the store with a postgresql:// URI "
                 "(or sqlite:PATH for a file of that name)", db->where);
  else if (is_pg_uri(uri))
    rc = open_pg(db, uri);
  else
    rc = open_sqlite(db, !strncmp(uri, "sqlite:", 7) ? uri + 7 : uri, create);
  if (rc) {
    sl__pdb_close(db);
    return rc;
  }
  *out = db;
  return 0;
}

void sl__pdb_close(sl__pdb *db) {
  if (!db) return;
  for (int i = 0; i < SL_PDB_NBATCH; i++) { /* rows never flushed: the load was abandoned */
    for (int k = 0; k < SL_PDB_BATCH_SIZES; k++) sqlite3_finalize(db->batch[i].st[k]);
    sl__free(db->batch[i].v);
    sl__free(db->batch[i].arena);
  }
  if (db->lite) sqlite3_close_v2(db->lite);
#ifdef SL_HAVE_POSTGRES
  if (db->pg) PQfinish(db->pg);
#endif
  for (int i = 0; i < SL_PDB_NCOPY; i++) sl__free(db->copy[i].buf); /* rows never flushed: the load was abandoned */
  sl__free(db->where);
  sl__free(db);
}

#ifdef SL_HAVE_POSTGRES
static int pg_err(sl__pdb *db, PGresult *r, const char *what) {
  const char *m = r ? PQresultErrorMessage(r) : PQerrorMessage(db->pg);
  char msg[512];
  snprintf(msg, sizeof msg, "%s", m && *m ? m : "unknown error");
  size_t l = strlen(msg);
  while (l && msg[l - 1] == '\n') msg[--l] = 0;
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  int code = SL_EIO;
  if (state && !strncmp(state, "23", 2)) code = SL_EINVAL; /* integrity constraint violation */
  if (PQstatus(db->pg) == CONNECTION_BAD) code = SL_EIO;
  return sl__err(code, "%s: %s: %s", db->where, what, msg);
}

/* Pipeline mode: sends a sync and reads every queued result up to it. Results are grouped per query, each group
 * ending with a NULL; the group of query number `want` (0-based, -1: none) is kept in *mine. Returns the first
 * error among the queued queries. */
static int pl_sync(sl__pdb *db, int want, PGresult **mine) {
  PGconn *c = db->pg;
  if (mine) *mine = NULL;
  if (!PQpipelineSync(c)) return pg_err(db, NULL, "pipeline sync");
  int blk = 0, err = 0, expect = db->pending + (want >= 0 ? 1 : 0);
  for (;;) {
    PGresult *r = PQgetResult(c);
    if (!r) {
      if (++blk > expect + 1) {
        err = err ? err : sl__err(SL_EIO, "%s: pipeline lost its sync point", db->where);
        break;
      }
      continue;
    }
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_PIPELINE_SYNC) {
      PQclear(r);
      break;
    }
    if (st == PGRES_FATAL_ERROR && !err) err = pg_err(db, r, "query");
    if (mine && blk == want && !*mine && (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)) {
      *mine = r;
      continue;
    }
    PQclear(r);
  }
  db->pending = 0;
  if (err && mine && *mine) {
    PQclear(*mine);
    *mine = NULL;
  }
  return err;
}

/* Sends the COPY buffers, each as one COPY ... FROM STDIN (COPY is not allowed in pipeline mode: the queued
 * statements are synced first and the mode left and re-entered). Returns the first error; the buffers are emptied
 * either way. */
static int copy_flush(sl__pdb *db) {
  if (!db->copy_bytes) return 0;
  PGconn *c = db->pg;
  bool was = db->pipe;
  int rc = 0;
  if (was) {
    rc = pl_sync(db, -1, NULL);
    if (!PQexitPipelineMode(c) && !rc) rc = pg_err(db, NULL, "exit pipeline mode");
    db->pipe = false;
  }
  for (int i = 0; i < SL_PDB_NCOPY; i++) {
    if (!db->copy[i].len) continue;
    const sl__pdb_copy_spec *sp = db->copy[i].spec;
    if (!rc && sp->setup) {
      PGresult *r = PQexec(c, sp->setup);
      if (PQresultStatus(r) != PGRES_COMMAND_OK) rc = pg_err(db, r, "COPY setup");
      PQclear(r);
    }
    if (!rc) {
      PGresult *r = PQexec(c, sp->copy);
      if (PQresultStatus(r) != PGRES_COPY_IN) rc = pg_err(db, r, "COPY");
      PQclear(r);
      if (!rc && PQputCopyData(c, db->copy[i].buf, (int)db->copy[i].len) != 1) rc = pg_err(db, NULL, "COPY data");
      /* End the COPY even after a failed write, so the connection leaves COPY state; the error wins. */
      if (PQputCopyEnd(c, rc ? "sluice: write failed" : NULL) != 1 && !rc) rc = pg_err(db, NULL, "COPY end");
      while ((r = PQgetResult(c)) != NULL) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK && !rc) rc = pg_err(db, r, "COPY");
        PQclear(r);
      }
    }
    if (!rc && sp->after) {
      /* Several statements in one simple query: the result of each in turn. */
      if (!PQsendQuery(c, sp->after)) rc = pg_err(db, NULL, "COPY merge");
      PGresult *r;
      while ((r = PQgetResult(c)) != NULL) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK && !rc) rc = pg_err(db, r, "COPY merge");
        PQclear(r);
      }
    }
    db->copy[i].len = 0;
  }
  db->copy_bytes = 0;
  if (was) {
    if (PQenterPipelineMode(c)) db->pipe = true;
    else if (!rc) rc = pg_err(db, NULL, "enter pipeline mode");
  }
  return rc;
}

/* Makes room for `more` bytes in COPY buffer `slot`. */
static int copy_room(sl__pdb *db, int slot, size_t more) {
  size_t need;
  if (!sl__add_ok(db->copy[slot].len, more, &need)) return sl__oom("COPY buffer");
  if (need <= db->copy[slot].cap) return 0;
  size_t nc = db->copy[slot].cap ? db->copy[slot].cap : 65536;
  while (nc < need) {
    if (!sl__mul_ok(nc, 2, &nc)) return sl__oom("COPY buffer");
  }
  char *nb = sl__realloc(db->copy[slot].buf, nc);
  if (!nb) return sl__oom("COPY buffer");
  db->copy[slot].buf = nb;
  db->copy[slot].cap = nc;
  return 0;
}

int sl__pdb_copy_row(sl__pdb *db, int slot, const sl__pdb_copy_spec *spec, const char *const *vals, int n) {
  if (!db->pg || slot < 0 || slot >= SL_PDB_NCOPY) return sl__err(SL_ERROR, "COPY buffers are PostgreSQL's");
  db->copy[slot].spec = spec;
  size_t before = db->copy[slot].len;
  for (int i = 0; i < n; i++) {
    /* A value escaped (backslash, tab, newline, carriage return) takes at most twice its length; \N is NULL. */
    size_t l = vals[i] ? strlen(vals[i]) : 0, room;
    if (!sl__mul_ok(l, 2, &room) || !sl__add_ok(room, 3, &room)) return sl__oom("COPY buffer");
    int rc = copy_room(db, slot, room);
    if (rc) {
      db->copy[slot].len = before;
      return rc;
    }
    char *o = db->copy[slot].buf + db->copy[slot].len;
    if (!vals[i]) {
      *o++ = '\\';
      *o++ = 'N';
    }
    for (size_t k = 0; k < l; k++) {
      char ch = vals[i][k];
      if (ch == '\\' || ch == '\t' || ch == '\n' || ch == '\r') {
        *o++ = '\\';
        ch = ch == '\t' ? 't' : ch == '\n' ? 'n' : ch == '\r' ? 'r' : '\\';
      }
      *o++ = ch;
    }
    *o++ = i + 1 < n ? '\t' : '\n';
    db->copy[slot].len = (size_t)(o - db->copy[slot].buf);
  }
  db->copy_bytes += db->copy[slot].len - before;
  /* A few MB per COPY: large enough that the per-command cost vanishes, small enough to bound memory. */
  return db->copy_bytes >= ((size_t)8 << 20) ? copy_flush(db) : 0;
}

int sl__pdb_copy_flush(sl__pdb *db) { return db->pg ? copy_flush(db) : 0; }

void sl__pstmt_copy_safe(sl__pstmt *st) { st->copy_safe = true; }

int sl__pdb_pipeline(sl__pdb *db, bool on) {
  if (!db->pg || db->pipe == on) return 0;
  if (on) {
    if (!PQenterPipelineMode(db->pg)) return pg_err(db, NULL, "enter pipeline mode");
    db->pipe = true;
    return 0;
  }
  int rc = copy_flush(db);
  int rc2 = pl_sync(db, -1, NULL);
  if (!rc) rc = rc2;
  if (!PQexitPipelineMode(db->pg) && !rc) rc = pg_err(db, NULL, "exit pipeline mode");
  db->pipe = false;
  return rc;
}
#else
int sl__pdb_pipeline(sl__pdb *db, bool on) { return 0; }
int sl__pdb_copy_row(sl__pdb *db, int slot, const sl__pdb_copy_spec *spec, const char *const *vals, int n) {
  return sl__err(SL_ERROR, "COPY buffers are PostgreSQL's");
}
int sl__pdb_copy_flush(sl__pdb *db) { return 0; }
void sl__pstmt_copy_safe(sl__pstmt *st) { st->copy_safe = true; }
#endif

static int lite_err(sl__pdb *db, const char *what) {
  int e = sqlite3_errcode(db->lite);
  int code = e == SQLITE_CONSTRAINT ? SL_EINVAL : e == SQLITE_CORRUPT || e == SQLITE_NOTADB ? SL_ECORRUPT : SL_EIO;
  /* a full disk says so: SQLite's unix VFS turns ENOSPC into SQLITE_FULL and keeps no errno for it */
  if (e == SQLITE_FULL)
    return sl__err(code, "%s: %s: %s (ENOSPC: %s)", db->where, what, sqlite3_errmsg(db->lite), strerror(ENOSPC));
  int os = sqlite3_system_errno(db->lite);
  if (os && (e == SQLITE_IOERR || e == SQLITE_CANTOPEN || e == SQLITE_READONLY))
    return sl__err(code, "%s: %s: %s (%s)", db->where, what, sqlite3_errmsg(db->lite), strerror(os));
  return sl__err(code, "%s: %s: %s", db->where, what, sqlite3_errmsg(db->lite));
}

/* ---- Row batches (SQLite bulk loads) ---- */

int sl__pdb_batch_row(sl__pdb *db, int slot, const sl__pdb_batch_spec *spec, const sl__pdb_val *vals) {
  if (!db->lite || slot < 0 || slot >= SL_PDB_NBATCH) return sl__err(SL_ERROR, "row batches are SQLite's");
  if (spec->ncols < 1 || spec->ncols > SL_PDB_MAXP) return sl__err(SL_ERROR, "row batch: bad column count");
  batch_slot *b = &db->batch[slot];
  if (b->spec && b->spec != spec) return sl__err(SL_ERROR, "row batch slot %d holds another table's rows", slot);
  b->spec = spec;
  if (!b->v) {
    b->v = sl__calloc((size_t)SL_PDB_BATCH_ROWS * (size_t)spec->ncols, sizeof *b->v);
    if (!b->v) return sl__oom("row batch");
  }
  size_t need = b->alen;
  for (int c = 0; c < spec->ncols; c++)
    if ((vals[c].type == SL__V_TEXT || vals[c].type == SL__V_BLOB) && !sl__add_ok(need, vals[c].n, &need))
      return sl__oom("row batch");
  if (need > b->acap) {
    size_t nc = b->acap ? b->acap : 16384;
    while (nc < need)
      if (!sl__mul_ok(nc, 2, &nc)) return sl__oom("row batch");
    char *na = sl__realloc(b->arena, nc);
    if (!na) return sl__oom("row batch");
    b->arena = na;
    b->acap = nc;
  }
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
  return b->rows == SL_PDB_BATCH_ROWS ? sl__pdb_batch_flush(db) : 0;
}

/* The statement inserting 64 >> k rows of slot i, prepared on first use. */
static int batch_stmt(sl__pdb *db, int i, int k, sqlite3_stmt **out) {
  batch_slot *b = &db->batch[i];
  if (!b->st[k]) {
    int rows = SL_PDB_BATCH_ROWS >> k, nc = b->spec->ncols;
    size_t hl = strlen(b->spec->head), tl = strlen(b->spec->tail), len = hl + tl + (size_t)rows * ((size_t)nc * 2 + 2) + 1;
    char *sql = sl__malloc(len), *w = sql;
    if (!sql) return sl__oom("row batch statement");
    memcpy(w, b->spec->head, hl);
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
    memcpy(w, b->spec->tail, tl + 1);
    int rc = sqlite3_prepare_v3(db->lite, sql, -1, SQLITE_PREPARE_PERSISTENT, &b->st[k], NULL);
    sl__free(sql);
    if (rc != SQLITE_OK) return lite_err(db, "prepare row batch");
  }
  *out = b->st[k];
  return 0;
}

static int batch_flush1(sl__pdb *db, int i) {
  batch_slot *b = &db->batch[i];
  int nc = b->spec->ncols, at = 0, rc = 0;
  while (!rc && at < b->rows) {
    int k = 0, maxp = sqlite3_limit(db->lite, SQLITE_LIMIT_VARIABLE_NUMBER, -1);
    while (k + 1 < SL_PDB_BATCH_SIZES &&
           ((SL_PDB_BATCH_ROWS >> k) > b->rows - at || (SL_PDB_BATCH_ROWS >> k) * nc > maxp))
      k++;
    int rows = SL_PDB_BATCH_ROWS >> k;
    sqlite3_stmt *st = NULL;
    if ((rc = batch_stmt(db, i, k, &st))) break;
    const bval *v = b->v + (size_t)at * (size_t)nc;
    int br = SQLITE_OK;
    for (int j = 0; br == SQLITE_OK && j < rows * nc; j++) {
      switch (v[j].type) {
      case SL__V_INT: br = sqlite3_bind_int64(st, j + 1, v[j].i); break;
      case SL__V_DOUBLE: br = sqlite3_bind_double(st, j + 1, v[j].d); break;
      case SL__V_TEXT: br = sqlite3_bind_text64(st, j + 1, b->arena + v[j].off, v[j].n, SQLITE_STATIC, SQLITE_UTF8); break;
      case SL__V_BLOB: br = sqlite3_bind_blob64(st, j + 1, v[j].n ? b->arena + v[j].off : "", v[j].n, SQLITE_STATIC); break;
      default: br = sqlite3_bind_null(st, j + 1); break;
      }
    }
    if (br != SQLITE_OK) {
      rc = br == SQLITE_NOMEM ? sl__oom("SQLite bind") : lite_err(db, "bind row batch");
    } else if (sqlite3_step(st) != SQLITE_DONE) {
      rc = sl__err(sqlite3_errcode(db->lite) == SQLITE_CONSTRAINT ? SL_EINVAL : SL_EIO, "%s: %s (one of %d rows "
                   "batched for it): %s", db->where, b->spec->head, rows, sqlite3_errmsg(db->lite));
    }
    sqlite3_reset(st);
    at += rows;
  }
  db->batch_rows -= b->rows;
  b->rows = 0;
  b->alen = 0;
  return rc;
}

int sl__pdb_batch_flush(sl__pdb *db) {
  int rc = 0;
  for (int i = 0; db->batch_rows && i < SL_PDB_NBATCH; i++) {
    if (!db->batch[i].rows) continue;
    int r = batch_flush1(db, i);
    if (!rc) rc = r;
  }
  return rc;
}

static void batch_discard(sl__pdb *db) {
  for (int i = 0; i < SL_PDB_NBATCH; i++) db->batch[i].rows = 0, db->batch[i].alen = 0;
  db->batch_rows = 0;
}

int sl__pdb_exec(sl__pdb *db, const char *sql) {
#ifdef SL_HAVE_POSTGRES
  if (db->pg && db->copy_bytes) {
    int rc = copy_flush(db); /* COMMIT and the like see every buffered row */
    if (rc) return rc;
  }
  if (db->pg && db->pipe) {
    if (!PQsendQueryParams(db->pg, sql, 0, NULL, NULL, NULL, NULL, 0)) return pg_err(db, NULL, "send");
    int want = db->pending;
    PGresult *r;
    int rc = pl_sync(db, want, &r);
    if (r) PQclear(r);
    return rc;
  }
  if (db->pg) {
    PGresult *r = PQexec(db->pg, sql);
    ExecStatusType s = PQresultStatus(r);
    int rc = (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) ? 0 : pg_err(db, r, "SQL");
    PQclear(r);
    return rc;
  }
#endif
  if (db->batch_rows) {
    /* COMMIT and the like see every batched row; a ROLLBACK drops them with the rest of the transaction. */
    if (!strncmp(sql, "ROLLBACK", 8)) {
      batch_discard(db);
    } else {
      int rc = sl__pdb_batch_flush(db);
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

void sl__pdb_names_free(char **names, size_t n) {
  if (!names) return;
  for (size_t i = 0; i < n; i++) sl__free(names[i]);
  sl__free(names);
}

int sl__pdb_tables(sl__pdb *db, char ***names, size_t *n) {
  *names = NULL;
  *n = 0;
  sl__pstmt *st;
  int rc = sl__pdb_prepare(db, &st,
                           db->pg ? "SELECT table_name FROM information_schema.tables WHERE table_schema = "
                                    "current_schema()"
                                  : "SELECT name FROM sqlite_master WHERE type = 'table'");
  if (rc) return rc;
  char **v = NULL;
  size_t k = 0, cap = 0;
  while ((rc = sl__pstmt_step(st)) == 1) {
    if (k == cap) {
      cap = cap ? cap * 2 : 32;
      char **nv = sl__realloc(v, cap * sizeof *v);
      if (!nv) {
        rc = sl__oom("table list");
        break;
      }
      v = nv;
    }
    char *s = sl__strdup(sl__pstmt_text(st, 0));
    if (!s) {
      rc = sl__oom("table name");
      break;
    }
    for (char *c = s; *c; c++) *c = (char)tolower((unsigned char)*c);
    v[k++] = s;
  }
  sl__pstmt_free(st);
  if (rc < 0) {
    sl__pdb_names_free(v, k);
    return rc;
  }
  *names = v;
  *n = k;
  return 0;
}

#ifdef SL_HAVE_POSTGRES
/* `?` -> `$n` outside quotes. */
static char *pg_sql(const char *sql, int *np) {
  size_t n = strlen(sql);
  char *o = sl__malloc(n * 4 + 1);
  if (!o) return NULL;
  size_t j = 0;
  int k = 0;
  char q = 0;
  for (size_t i = 0; i < n; i++) {
    char c = sql[i];
    if (q) {
      if (c == q) q = 0;
    } else if (c == '\'' || c == '"') {
      q = c;
    } else if (c == '?') {
      j += (size_t)sprintf(o + j, "$%d", ++k);
      continue;
    }
    o[j++] = c;
  }
  o[j] = 0;
  *np = k;
  return o;
}
#endif

int sl__pdb_prepare(sl__pdb *db, sl__pstmt **out, const char *sql) {
  *out = NULL;
  sl__pstmt *st = sl__calloc(1, sizeof *st);
  if (!st) return sl__oom("statement");
  st->db = db;
#ifdef SL_HAVE_POSTGRES
  if (db->pg) {
    char *q = pg_sql(sql, &st->nparams);
    if (!q) {
      sl__free(st);
      return sl__oom("statement");
    }
    if (st->nparams > SL_PDB_MAXP) {
      sl__free(q);
      sl__free(st);
      return sl__err(SL_EINVAL, "too many parameters in statement");
    }
    snprintf(st->name, sizeof st->name, "sl%d", ++db->nstmts);
    PGresult *r = NULL;
    if (db->pipe) {
      if (!PQsendPrepare(db->pg, st->name, q, 0, NULL)) {
        sl__free(q);
        sl__free(st);
        return pg_err(db, NULL, "prepare");
      }
      int want = db->pending;
      int rc = pl_sync(db, want, &r);
      if (rc || !r) {
        if (r) PQclear(r);
        sl__free(q);
        sl__free(st);
        return rc ? rc : sl__err(SL_EIO, "%s: prepare returned nothing", db->where);
      }
    } else {
      r = PQprepare(db->pg, st->name, q, 0, NULL);
    }
    sl__free(q);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      int rc = pg_err(db, r, "prepare");
      PQclear(r);
      sl__free(st);
      return rc;
    }
    PQclear(r);
    *out = st;
    return 0;
  }
#endif
  {
    if (sqlite3_prepare_v2(db->lite, sql, -1, &st->ls, NULL) != SQLITE_OK) {
      int rc = lite_err(db, "prepare");
      sl__free(st);
      return rc;
    }
  }
  *out = st;
  return 0;
}

int sl__pdb_prepare_insert(sl__pdb *db, sl__pstmt **out, const char *sql) {
  static const char RET[] = " RETURNING id";
  size_t n = strlen(sql), r = sizeof RET - 1;
  if (db->pg || n < r || strcmp(sql + n - r, RET)) return sl__pdb_prepare(db, out, sql);
  char *q = sl__strndup(sql, n - r);
  if (!q) return sl__oom("statement");
  int rc = sl__pdb_prepare(db, out, q);
  sl__free(q);
  return rc;
}

int sl__pstmt_insert(sl__pstmt *st, int64_t *id) {
  int rc = sl__pstmt_step(st);
  if (st->ls) {
    if (rc == 0 && id) *id = sqlite3_last_insert_rowid(st->db->lite);
    if (rc == 1) rc = 0; /* a RETURNING statement prepared directly */
  } else if (rc == 1) {
    if (id) *id = sl__pstmt_i64(st, 0);
    rc = 0;
  } else if (rc == 0) {
    rc = sl__err(SL_ERROR, "insert returned no id");
  }
  sl__pstmt_reset(st);
  return rc;
}

static void pg_clear_params(sl__pstmt *st) {
  for (int i = 0; i < SL_PDB_MAXP; i++) {
    sl__free(st->pv[i]);
    st->pv[i] = NULL;
    st->plen[i] = st->pfmt[i] = 0;
  }
}

static void pg_drain(sl__pstmt *st) {
#ifdef SL_HAVE_POSTGRES
  if (st->res) PQclear(st->res);
  st->res = NULL;
  st->row = st->nrows = 0;
  if (st->unesc) PQfreemem(st->unesc);
  st->unesc = NULL;
  if (st->running && !st->db->pipe) {
    PGresult *r;
    while ((r = PQgetResult(st->db->pg)) != NULL) PQclear(r);
  }
#endif
  st->running = false;
}

void sl__pstmt_reset(sl__pstmt *st) {
  if (!st) return;
  if (st->ls) {
    sqlite3_reset(st->ls);
    sqlite3_clear_bindings(st->ls);
  } else {
    pg_drain(st);
    pg_clear_params(st);
  }
}

void sl__pstmt_free(sl__pstmt *st) {
  if (!st) return;
  if (st->ls) {
    sqlite3_finalize(st->ls);
  } else {
    pg_drain(st);
    pg_clear_params(st);
#ifdef SL_HAVE_POSTGRES
    /* Deallocate so long-lived connections do not accumulate statements. */
    if (st->db && st->db->pg && !st->db->pipe && PQstatus(st->db->pg) == CONNECTION_OK) {
      char q[64];
      snprintf(q, sizeof q, "DEALLOCATE %s", st->name);
      PQclear(PQexec(st->db->pg, q));
    }
#endif
  }
  sl__free(st);
}

static int pg_set(sl__pstmt *st, int i, char *v, int len, int fmt) {
  if (i < 1 || i > st->nparams) {
    sl__free(v);
    return sl__err(SL_EINVAL, "parameter %d out of range", i);
  }
  sl__free(st->pv[i - 1]);
  st->pv[i - 1] = v;
  st->plen[i - 1] = len;
  st->pfmt[i - 1] = fmt;
  return 0;
}

static int lite_bind_rc(sl__pstmt *st, int rc) {
  return rc == SQLITE_OK ? 0 : rc == SQLITE_NOMEM ? sl__oom("SQLite bind") : lite_err(st->db, "bind");
}

int sl__pstmt_bind_i64(sl__pstmt *st, int i, int64_t v) {
  if (st->ls) return lite_bind_rc(st, sqlite3_bind_int64(st->ls, i, v));
  char *s = sl__malloc(24);
  if (!s) return sl__oom("parameter");
  snprintf(s, 24, "%lld", (long long)v);
  return pg_set(st, i, s, 0, 0);
}

int sl__pstmt_bind_f64(sl__pstmt *st, int i, double v) {
  if (st->ls) return lite_bind_rc(st, sqlite3_bind_double(st->ls, i, v));
  char *s = sl__malloc(40);
  if (!s) return sl__oom("parameter");
  if (isnan(v))
    snprintf(s, 40, "NaN");
  else if (isinf(v))
    snprintf(s, 40, v > 0 ? "Infinity" : "-Infinity");
  else
    snprintf(s, 40, "%.17g", v);
  return pg_set(st, i, s, 0, 0);
}

int sl__pstmt_bind_text(sl__pstmt *st, int i, const char *s) {
  if (!s) return sl__pstmt_bind_null(st, i);
  if (st->ls) return lite_bind_rc(st, sqlite3_bind_text(st->ls, i, s, -1, SQLITE_TRANSIENT));
  char *c = sl__strdup(s);
  if (!c) return sl__oom("parameter");
  return pg_set(st, i, c, 0, 0);
}

int sl__pstmt_bind_blob(sl__pstmt *st, int i, const void *b, size_t n) {
  if (st->ls) return lite_bind_rc(st, sqlite3_bind_blob64(st->ls, i, b ? b : "", n, SQLITE_TRANSIENT));
  if (n > INT32_MAX) return sl__err(SL_EINVAL, "blob too large");
  char *c = sl__malloc(n ? n : 1);
  if (!c) return sl__oom("parameter");
  if (n) memcpy(c, b, n);
  return pg_set(st, i, c, (int)n, 1);
}

int sl__pstmt_bind_null(sl__pstmt *st, int i) {
  if (st->ls) return lite_bind_rc(st, sqlite3_bind_null(st->ls, i));
  return pg_set(st, i, NULL, 0, 0);
}

int sl__pstmt_step(sl__pstmt *st) {
  if (st->ls) {
    if (st->db->batch_rows && !st->copy_safe) {
      int rc = sl__pdb_batch_flush(st->db); /* the statement may read or write rows still batched */
      if (rc) return rc;
    }
    int rc = sqlite3_step(st->ls);
    if (rc == SQLITE_ROW) return 1;
    if (rc == SQLITE_DONE) return 0;
    int e = lite_err(st->db, "step");
    sqlite3_reset(st->ls);
    return e;
  }
#ifndef SL_HAVE_POSTGRES
  return sl__err(SL_ERROR, "statement without a database");
#else
  PGconn *c = st->db->pg;
  if (st->unesc) {
    PQfreemem(st->unesc);
    st->unesc = NULL;
  }
  if (st->db->copy_bytes && !st->copy_safe && !st->running) {
    int rc = copy_flush(st->db); /* the statement may read rows still in the COPY buffers */
    if (rc) return rc;
  }
  if (st->db->pipe) {
    /* Pipeline mode: one round trip that also collects the queued statements' results; then rows from the
     * whole result. */
    if (!st->running) {
      if (!PQsendQueryPrepared(c, st->name, st->nparams, (const char *const *)st->pv, st->plen, st->pfmt, 0))
        return pg_err(st->db, NULL, "send");
      int want = st->db->pending;
      PGresult *r;
      int rc = pl_sync(st->db, want, &r);
      if (rc) return rc;
      st->res = r;
      st->row = -1;
      st->nrows = r && PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : 0;
      st->running = true;
    }
    if (++st->row < st->nrows) return 1;
    if (st->res) PQclear(st->res);
    st->res = NULL;
    st->row = st->nrows = 0;
    st->running = false;
    return 0;
  }
  if (st->res) {
    PQclear(st->res);
    st->res = NULL;
  }
  if (!st->running) {
    if (!PQsendQueryPrepared(c, st->name, st->nparams, (const char *const *)st->pv, st->plen, st->pfmt, 0))
      return pg_err(st->db, NULL, "send");
    st->running = true;
    PQsetSingleRowMode(c);
  }
  for (;;) {
    PGresult *r = PQgetResult(c);
    if (!r) {
      st->running = false;
      return 0;
    }
    ExecStatusType s = PQresultStatus(r);
    if (s == PGRES_SINGLE_TUPLE) {
      st->res = r;
      return 1;
    }
    if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK) {
      PQclear(r);
      continue; /* the end marker; the loop reads the terminating NULL */
    }
    int e = pg_err(st->db, r, "query");
    PQclear(r);
    pg_drain(st);
    return e;
  }
#endif
}

bool sl__pstmt_null(sl__pstmt *st, int c) {
  if (st->ls) return sqlite3_column_type(st->ls, c) == SQLITE_NULL;
#ifdef SL_HAVE_POSTGRES
  return !st->res || PQgetisnull(st->res, st->row, c);
#else
  return true;
#endif
}

int64_t sl__pstmt_i64(sl__pstmt *st, int c) {
  if (st->ls) return sqlite3_column_int64(st->ls, c);
#ifdef SL_HAVE_POSTGRES
  if (sl__pstmt_null(st, c)) return 0;
  const char *v = PQgetvalue(st->res, st->row, c);
  if (v[0] == 't') return 1;
  if (v[0] == 'f') return 0;
  return strtoll(v, NULL, 10);
#else
  return 0;
#endif
}

double sl__pstmt_f64(sl__pstmt *st, int c) {
  if (st->ls) return sqlite3_column_double(st->ls, c);
#ifdef SL_HAVE_POSTGRES
  if (sl__pstmt_null(st, c)) return 0;
  return strtod(PQgetvalue(st->res, st->row, c), NULL);
#else
  return 0;
#endif
}

const char *sl__pstmt_text(sl__pstmt *st, int c) {
  if (st->ls) return (const char *)sqlite3_column_text(st->ls, c);
#ifdef SL_HAVE_POSTGRES
  if (sl__pstmt_null(st, c)) return NULL;
  return PQgetvalue(st->res, st->row, c);
#else
  return NULL;
#endif
}

const void *sl__pstmt_blob(sl__pstmt *st, int c, size_t *n) {
  if (st->ls) {
    *n = (size_t)sqlite3_column_bytes(st->ls, c);
    return sqlite3_column_blob(st->ls, c);
  }
  *n = 0;
#ifdef SL_HAVE_POSTGRES
  if (sl__pstmt_null(st, c)) return NULL;
  if (st->unesc) PQfreemem(st->unesc);
  st->unesc = PQunescapeBytea((const unsigned char *)PQgetvalue(st->res, st->row, c), n);
  return st->unesc;
#else
  return NULL;
#endif
}

int sl__pstmt_defer(sl__pstmt *st) {
  if (st->ls || !st->db->pipe) {
    int rc = sl__pstmt_step(st);
    while (rc == 1) rc = sl__pstmt_step(st);
    sl__pstmt_reset(st);
    return rc;
  }
#ifdef SL_HAVE_POSTGRES
  if (!PQsendQueryPrepared(st->db->pg, st->name, st->nparams, (const char *const *)st->pv, st->plen, st->pfmt, 0))
    return pg_err(st->db, NULL, "send");
  st->db->pending++;
  pg_clear_params(st);
  /* Collect the queued results now and then, so libpq does not buffer an unbounded run of them. */
  if (st->db->pending >= 16384) return pl_sync(st->db, -1, NULL);
#endif
  return 0;
}
