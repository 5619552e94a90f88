/* prov/store/db_pg.c: the PostgreSQL backend of db_backend.h (libpq; built with SL_WITH_POSTGRES). Statements are
 * prepared once per connection and their results streamed in single-row mode; bulk loads go through COPY buffers,
 * with ids taken from the sequences a block at a time and writes whose result is not needed queued in pipeline
 * mode. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_int.h"
#include "prov/store/db_backend.h"
#include "prov/store/pq_dlopen.h" /* libpq-fe.h, linked or loaded at the first open */

#define MAXP 24         /* parameters of a statement */
#define ID_BLOCK 1024   /* ids taken from a sequence per round trip */
#define COPY_MAX (8 << 20) /* bytes buffered before the COPY buffers are sent */
/* The flag sl__pdb_mark_set keeps as a comment on a table (no quote: spliced into SQL). */
static const char PG_MARK[] = "sluice: bulk load under way, MLMD secondary indexes dropped";

/* A COPY buffer: rows as COPY text for one table, straight into it or (rows with a key) into a session's staging
 * table merged into it after the COPY, as the single-row statements' ON CONFLICT would. */
typedef struct copy_slot {
  const sl__pdb_bulk_spec *spec;
  char *copy, *setup, *after; /* setup and after: NULL for rows straight into the table */
  char *buf;
  size_t len, cap;
} copy_slot;

typedef struct pg_db {
  sl__pdb base;
  PGconn *pg;
  int nstmts; /* prepared statement names */
  /* Pipeline mode (bulk writes): statements whose results are not needed are queued and their results read at the
   * next round trip. */
  bool pipe;
  int pending;
  bool bulk;
  copy_slot copy[SL__PDB_NBULK];
  size_t copy_bytes;
  int64_t seq; /* order of the staged rows */
  /* Bulk ids, a block per round trip; ids left over when a load ends are skipped. */
  int64_t pool[SL__PDB_NIDS][ID_BLOCK];
  int pool_n[SL__PDB_NIDS], pool_at[SL__PDB_NIDS];
  sl__pstmt *ids[SL__PDB_NIDS];
} pg_db;

typedef struct pg_stmt {
  sl__pstmt base;
  char name[32];
  int nparams;
  char *pv[MAXP];
  int plen[MAXP], pfmt[MAXP];
  PGresult *res;
  int row, nrows; /* pipeline mode: rows of a whole result */
  bool running;
  unsigned char *unesc; /* last unescaped bytea */
} pg_stmt;

#define PDB(db) ((pg_db *)(db))
#define PST(st) ((pg_stmt *)(st))

static int pg_err(pg_db *db, PGresult *r, const char *what) {
  const char *m = r ? PQresultErrorMessage(r) : PQerrorMessage(db->pg);
  char msg[512];
  snprintf(msg, sizeof msg, "%s", m && *m ? m : "unknown error");
  size_t l = strlen(msg);
  while (l && msg[l - 1] == '\n') msg[--l] = 0;
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  int code = SL_EIO;
  if (state && !strncmp(state, "23", 2)) code = SL_EINVAL; /* integrity constraint violation */
  if (PQstatus(db->pg) == CONNECTION_BAD) code = SL_EIO;
  return sl__err(code, "%s: %s: %s", db->base.where, what, msg);
}

static int pg_open(sl__pdb *base, const char *uri, bool create) {
  pg_db *db = PDB(base);
  int rc = sl__pq_load(base->where);
  if (rc) return rc;
  /* The password goes as a keyword of its own, never inside the URI libpq parses (and may quote in a message).
   * connect_timeout first: a value in the URI (expanded after it) wins; the password last: it wins. */
  char *rest, *pw;
  if ((rc = sl__uri_take_password(uri, &rest, &pw))) return rc;
  const char *kw[] = {"connect_timeout", "dbname", pw ? "password" : NULL, NULL};
  const char *val[] = {"5", rest, pw, NULL};
  db->pg = PQconnectdbParams(kw, val, 1);
  if (pw) explicit_bzero(pw, strlen(pw));
  sl__free(pw);
  sl__free(rest);
  if (!db->pg) return sl__oom("PostgreSQL connection");
  if (PQstatus(db->pg) != CONNECTION_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", PQerrorMessage(db->pg));
    size_t l = strlen(msg);
    while (l && (msg[l - 1] == '\n' || msg[l - 1] == ' ')) msg[--l] = 0;
    for (char *c = msg; *c; c++)
      if (*c == '\n') *c = ' ';
    return sl__err(SL_EIO, "%s: cannot connect: %s", base->where, msg);
  }
  PGresult *r = PQexec(db->pg, "SET client_min_messages = warning");
  PQclear(r);
  return 0;
}

static void pg_close(sl__pdb *base) {
  pg_db *db = PDB(base);
  for (int i = 0; i < SL__PDB_NIDS; i++) sl__pstmt_free(db->ids[i]);
  if (db->pg) PQfinish(db->pg);
  for (int i = 0; i < SL__PDB_NBULK; i++) { /* rows never flushed: the load was abandoned */
    sl__free(db->copy[i].buf);
    sl__free(db->copy[i].copy);
    sl__free(db->copy[i].setup);
    sl__free(db->copy[i].after);
  }
}

/* Pipeline mode: sends a sync and reads every queued result up to it. Results are grouped per query, each group
 * ending with a NULL; the group of query number `want` (0-based, -1: none) is kept in *mine. Returns the first
 * error among the queued queries. */
static int pl_sync(pg_db *db, int want, PGresult **mine) {
  PGconn *c = db->pg;
  if (mine) *mine = NULL;
  if (!PQpipelineSync(c)) return pg_err(db, NULL, "pipeline sync");
  int blk = 0, err = 0, expect = db->pending + (want >= 0 ? 1 : 0);
  for (;;) {
    PGresult *r = PQgetResult(c);
    if (!r) {
      if (++blk > expect + 1) {
        err = err ? err : sl__err(SL_EIO, "%s: pipeline lost its sync point", db->base.where);
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

/* Runs one simple query (several statements: the result of each in turn); the first error wins. */
static int simple(pg_db *db, const char *sql, const char *what, ExecStatusType ok) {
  int rc = 0;
  if (!PQsendQuery(db->pg, sql)) return pg_err(db, NULL, what);
  PGresult *r;
  while ((r = PQgetResult(db->pg)) != NULL) {
    if (PQresultStatus(r) != ok && !rc) rc = pg_err(db, r, what);
    PQclear(r);
  }
  return rc;
}

/* Sends one COPY buffer: setup, the COPY, then the merge. */
static int copy_send(pg_db *db, copy_slot *s) {
  PGconn *c = db->pg;
  int rc = s->setup ? simple(db, s->setup, "COPY setup", PGRES_COMMAND_OK) : 0;
  if (rc) return rc;
  PGresult *r = PQexec(c, s->copy);
  if (PQresultStatus(r) != PGRES_COPY_IN) rc = pg_err(db, r, "COPY");
  PQclear(r);
  if (rc) return rc;
  if (PQputCopyData(c, s->buf, (int)s->len) != 1) rc = pg_err(db, NULL, "COPY data");
  /* End the COPY even after a failed write, so the connection leaves COPY state; the error wins. */
  if (PQputCopyEnd(c, rc ? "sluice: write failed" : NULL) != 1 && !rc) rc = pg_err(db, NULL, "COPY end");
  while ((r = PQgetResult(c)) != NULL) {
    if (PQresultStatus(r) != PGRES_COMMAND_OK && !rc) rc = pg_err(db, r, "COPY");
    PQclear(r);
  }
  if (!rc && s->after) rc = simple(db, s->after, "COPY merge", PGRES_COMMAND_OK);
  return rc;
}

/* Sends the COPY buffers in slot order (COPY is not allowed in pipeline mode: the queued statements are synced
 * first and the mode left and re-entered). Returns the first error; the buffers are emptied either way. */
static int copy_flush(pg_db *db) {
  if (!db->copy_bytes) return 0;
  bool was = db->pipe;
  int rc = 0;
  if (was) {
    rc = pl_sync(db, -1, NULL);
    if (!PQexitPipelineMode(db->pg) && !rc) rc = pg_err(db, NULL, "exit pipeline mode");
    db->pipe = false;
  }
  for (int i = 0; i < SL__PDB_NBULK; i++) {
    if (!db->copy[i].len) continue;
    if (!rc) rc = copy_send(db, &db->copy[i]);
    db->copy[i].len = 0;
  }
  db->copy_bytes = 0;
  if (was) {
    if (PQenterPipelineMode(db->pg)) db->pipe = true;
    else if (!rc) rc = pg_err(db, NULL, "enter pipeline mode");
  }
  return rc;
}

static int pg_bulk_flush(sl__pdb *base) { return copy_flush(PDB(base)); }

/* Makes room for `more` bytes in COPY buffer s. */
static int copy_room(copy_slot *s, size_t more) {
  size_t need;
  if (!sl__add_ok(s->len, more, &need)) return sl__oom("COPY buffer");
  if (need <= s->cap) return 0;
  size_t nc = s->cap ? s->cap : 65536;
  while (nc < need) {
    if (!sl__mul_ok(nc, 2, &nc)) return sl__oom("COPY buffer");
  }
  char *nb = sl__realloc(s->buf, nc);
  if (!nb) return sl__oom("COPY buffer");
  s->buf = nb;
  s->cap = nc;
  return 0;
}

static char *fmt(size_t n, const char *f, ...) __attribute__((format(printf, 2, 3)));
static char *fmt(size_t n, const char *f, ...) {
  char *s = sl__malloc(n);
  if (!s) return NULL;
  va_list ap;
  va_start(ap, f);
  vsnprintf(s, n, f, ap);
  va_end(ap);
  return s;
}

/* The slot's COPY, made when it takes its first row. Rows with a key go through a staging table of the target's
 * columns and a column of their order, merged into the target with DISTINCT ON the key (the last row wins, as the
 * last single-row upsert would) or, without `update`, in order with the rows already there kept. */
static int copy_text(copy_slot *s, const sl__pdb_bulk_spec *sp) {
  size_t n = 2 * strlen(sp->table) + 3 * strlen(sp->cols) + (sp->key ? 2 * strlen(sp->key) : 0) +
             (sp->update ? strlen(sp->update) : 0) + 256;
  if (!sp->key) {
    s->copy = fmt(n, "COPY %s(%s) FROM STDIN", sp->table, sp->cols);
    return s->copy ? 0 : sl__oom("COPY statement");
  }
  char stage[96];
  snprintf(stage, sizeof stage, "sl_stage_%s", sp->table);
  for (char *c = stage; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
  s->copy = fmt(n, "COPY %s(sl_seq, %s) FROM STDIN", stage, sp->cols);
  s->setup = fmt(n, "CREATE TEMP TABLE IF NOT EXISTS %s AS SELECT CAST(0 AS BIGINT) AS sl_seq, %s FROM %s WITH NO DATA",
                 stage, sp->cols, sp->table);
  if (sp->update)
    s->after = fmt(n, "INSERT INTO %s(%s) SELECT DISTINCT ON (%s) %s FROM %s ORDER BY %s, sl_seq DESC ON CONFLICT(%s) "
                      "DO UPDATE SET %s; TRUNCATE %s",
                   sp->table, sp->cols, sp->key, sp->cols, stage, sp->key, sp->key, sp->update, stage);
  else
    s->after = fmt(n, "INSERT INTO %s(%s) SELECT %s FROM %s ORDER BY sl_seq ON CONFLICT DO NOTHING; TRUNCATE %s",
                   sp->table, sp->cols, sp->cols, stage, stage);
  return s->copy && s->setup && s->after ? 0 : sl__oom("COPY statement");
}

/* A value as COPY text: numbers printed, text escaped (backslash, tab, newline, carriage return), NULL as \N. */
static int copy_value(copy_slot *s, const sl__pdb_val *v, char end) {
  char num[40];
  const char *t = num;
  size_t l;
  switch (v->type) {
  case SL__V_INT: l = (size_t)snprintf(num, sizeof num, "%lld", (long long)v->i); break;
  case SL__V_DOUBLE:
    if (isnan(v->d)) l = (size_t)snprintf(num, sizeof num, "NaN");
    else if (isinf(v->d)) l = (size_t)snprintf(num, sizeof num, v->d > 0 ? "Infinity" : "-Infinity");
    else l = (size_t)snprintf(num, sizeof num, "%.17g", v->d);
    break;
  case SL__V_TEXT: t = v->s, l = v->n; break;
  default: t = "\\N", l = 2; break;
  }
  size_t room;
  if (!sl__mul_ok(l, 2, &room) || !sl__add_ok(room, 1, &room)) return sl__oom("COPY buffer");
  int rc = copy_room(s, room);
  if (rc) return rc;
  char *o = s->buf + s->len;
  for (size_t k = 0; k < l; k++) {
    char ch = t[k];
    if (v->type == SL__V_TEXT && (ch == '\\' || ch == '\t' || ch == '\n' || ch == '\r')) {
      *o++ = '\\';
      ch = ch == '\t' ? 't' : ch == '\n' ? 'n' : ch == '\r' ? 'r' : '\\';
    }
    *o++ = ch;
  }
  *o++ = end;
  s->len = (size_t)(o - s->buf);
  return 0;
}

static int pg_bulk_row(sl__pdb *base, int slot, const sl__pdb_bulk_spec *spec, const sl__pdb_val *vals) {
  pg_db *db = PDB(base);
  copy_slot *s = &db->copy[slot];
  if (s->spec && s->spec != spec) return sl__err(SL_ERROR, "COPY slot %d holds another table's rows", slot);
  for (int i = 0; i < spec->ncols; i++)
    if (vals[i].type == SL__V_BLOB) { /* bytea goes by a statement, after the rows buffered so far */
      int rc = copy_flush(db);
      return rc ? rc : 1;
    }
  if (!s->spec) {
    int rc = copy_text(s, spec);
    if (rc) return rc;
    s->spec = spec;
  }
  size_t before = s->len;
  int rc = 0;
  if (spec->key) {
    sl__pdb_val seq = {SL__V_INT, ++db->seq, 0, NULL, 0};
    rc = copy_value(s, &seq, '\t');
  }
  for (int i = 0; !rc && i < spec->ncols; i++) rc = copy_value(s, &vals[i], i + 1 < spec->ncols ? '\t' : '\n');
  if (rc) {
    s->len = before;
    return rc;
  }
  db->copy_bytes += s->len - before;
  /* A few MB per COPY: large enough that the per-command cost vanishes, small enough to bound memory. */
  return db->copy_bytes >= COPY_MAX ? copy_flush(db) : 0;
}

static int pg_bulk(sl__pdb *base, int stage) {
  pg_db *db = PDB(base);
  if (stage == SL__BULK_END) return 0;
  bool on = stage == SL__BULK_BEGIN;
  memset(db->pool_n, 0, sizeof db->pool_n);
  memset(db->pool_at, 0, sizeof db->pool_at);
  db->bulk = on;
  if (db->pipe == on) return 0;
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

static bool pg_bulk_rows(sl__pdb *base) { return PDB(base)->bulk; }

/* The next id of `table`, from a block taken from its sequence in one round trip. */
static int pg_bulk_id(sl__pdb *base, int which, const char *table, int64_t *id) {
  pg_db *db = PDB(base);
  if (db->pool_at[which] == db->pool_n[which]) {
    int rc;
    if (!db->ids[which]) {
      char sql[200], low[64];
      snprintf(low, sizeof low, "%s", table);
      for (char *c = low; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
      snprintf(sql, sizeof sql, "SELECT nextval(pg_get_serial_sequence('%s', 'id')) FROM generate_series(1, %d)", low,
               ID_BLOCK);
      if ((rc = sl__pdb_prepare(base, &db->ids[which], sql))) return rc;
      sl__pstmt_bulk_safe(db->ids[which]);
    }
    sl__pstmt *st = db->ids[which];
    sl__pstmt_reset(st);
    int n = 0;
    while ((rc = sl__pstmt_step(st)) == 1)
      if (n < ID_BLOCK) db->pool[which][n++] = sl__pstmt_i64(st, 0);
    sl__pstmt_reset(st);
    if (rc < 0) return rc;
    if (!n) return sl__err(SL_ERROR, "%s: the id sequence returned no ids", base->where);
    db->pool_n[which] = n;
    db->pool_at[which] = 0;
  }
  *id = db->pool[which][db->pool_at[which]++];
  return 0;
}

/* ---- SQL and statements ---- */

static int pg_exec(sl__pdb *base, const char *sql) {
  pg_db *db = PDB(base);
  int rc = copy_flush(db); /* COMMIT and the like see every buffered row */
  if (rc) return rc;
  if (db->pipe) {
    if (!PQsendQueryParams(db->pg, sql, 0, NULL, NULL, NULL, NULL, 0)) return pg_err(db, NULL, "send");
    PGresult *r;
    rc = pl_sync(db, db->pending, &r);
    if (r) PQclear(r);
    return rc;
  }
  PGresult *r = PQexec(db->pg, sql);
  ExecStatusType s = PQresultStatus(r);
  rc = (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) ? 0 : pg_err(db, r, "SQL");
  PQclear(r);
  return rc;
}

static int pg_begin(sl__pdb *base) { return pg_exec(base, "BEGIN"); }

static int pg_lock(sl__pdb *base, int64_t key) {
  char sql[64];
  snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%lld)", (long long)key);
  return pg_exec(base, sql);
}

static int pg_mark_get(sl__pdb *base, const char *table, bool *on) {
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT obj_description('%s'::regclass, 'pg_class')", table);
  sl__pstmt *st;
  int rc = sl__pdb_prepare(base, &st, sql);
  if (rc) return rc;
  rc = sl__pstmt_step(st);
  *on = rc == 1 && sl__pstmt_text(st, 0) && !strcmp(sl__pstmt_text(st, 0), PG_MARK);
  sl__pstmt_free(st);
  return rc < 0 ? rc : 0;
}

static int pg_mark_set(sl__pdb *base, const char *table, bool on) {
  char sql[200];
  if (on) snprintf(sql, sizeof sql, "COMMENT ON TABLE %s IS '%s'", table, PG_MARK);
  else snprintf(sql, sizeof sql, "COMMENT ON TABLE %s IS NULL", table);
  return pg_exec(base, sql);
}

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

static int pg_prepare(sl__pstmt *base, const char *sql) {
  pg_stmt *st = PST(base);
  pg_db *db = PDB(base->db);
  char *q = pg_sql(sql, &st->nparams);
  if (!q) return sl__oom("statement");
  if (st->nparams > MAXP) {
    sl__free(q);
    st->nparams = 0;
    return sl__err(SL_EINVAL, "too many parameters in statement");
  }
  snprintf(st->name, sizeof st->name, "sl%d", ++db->nstmts);
  PGresult *r = NULL;
  if (db->pipe) {
    if (!PQsendPrepare(db->pg, st->name, q, 0, NULL)) {
      sl__free(q);
      return pg_err(db, NULL, "prepare");
    }
    int rc = pl_sync(db, db->pending, &r);
    if (rc || !r) {
      if (r) PQclear(r);
      sl__free(q);
      return rc ? rc : sl__err(SL_EIO, "%s: prepare returned nothing", db->base.where);
    }
  } else {
    r = PQprepare(db->pg, st->name, q, 0, NULL);
  }
  sl__free(q);
  int rc = PQresultStatus(r) != PGRES_COMMAND_OK ? pg_err(db, r, "prepare") : 0;
  PQclear(r);
  if (rc) st->name[0] = 0; /* nothing to deallocate */
  return rc;
}

static void clear_params(pg_stmt *st) {
  for (int i = 0; i < MAXP; i++) {
    sl__free(st->pv[i]);
    st->pv[i] = NULL;
    st->plen[i] = st->pfmt[i] = 0;
  }
}

static void drain(pg_stmt *st) {
  pg_db *db = PDB(st->base.db);
  if (st->res) PQclear(st->res);
  st->res = NULL;
  st->row = st->nrows = 0;
  if (st->unesc) PQfreemem(st->unesc);
  st->unesc = NULL;
  if (st->running && !db->pipe) {
    PGresult *r;
    while ((r = PQgetResult(db->pg)) != NULL) PQclear(r);
  }
  st->running = false;
}

static void pg_reset(sl__pstmt *base) {
  drain(PST(base));
  clear_params(PST(base));
}

static void pg_finalize(sl__pstmt *base) {
  pg_stmt *st = PST(base);
  pg_db *db = PDB(base->db);
  pg_reset(base);
  /* Deallocate so long-lived connections do not accumulate statements. */
  if (st->name[0] && !db->pipe && PQstatus(db->pg) == CONNECTION_OK) {
    char q[64];
    snprintf(q, sizeof q, "DEALLOCATE %s", st->name);
    PQclear(PQexec(db->pg, q));
  }
}

static int pg_bind(sl__pstmt *base, int i, const sl__pdb_val *v) {
  pg_stmt *st = PST(base);
  if (i < 1 || i > st->nparams) return sl__err(SL_EINVAL, "parameter %d out of range", i);
  char *s = NULL;
  int len = 0, fmt_ = 0;
  switch (v->type) {
  case SL__V_INT:
    if (!(s = sl__malloc(24))) return sl__oom("parameter");
    snprintf(s, 24, "%lld", (long long)v->i);
    break;
  case SL__V_DOUBLE:
    if (!(s = sl__malloc(40))) return sl__oom("parameter");
    if (isnan(v->d)) snprintf(s, 40, "NaN");
    else if (isinf(v->d)) snprintf(s, 40, v->d > 0 ? "Infinity" : "-Infinity");
    else snprintf(s, 40, "%.17g", v->d);
    break;
  case SL__V_TEXT:
    if (!(s = sl__strndup(v->s, v->n))) return sl__oom("parameter");
    break;
  case SL__V_BLOB:
    if (v->n > INT32_MAX) return sl__err(SL_EINVAL, "blob too large");
    if (!(s = sl__malloc(v->n ? v->n : 1))) return sl__oom("parameter");
    if (v->n) memcpy(s, v->s, v->n);
    len = (int)v->n, fmt_ = 1;
    break;
  default: break;
  }
  sl__free(st->pv[i - 1]);
  st->pv[i - 1] = s;
  st->plen[i - 1] = len;
  st->pfmt[i - 1] = fmt_;
  return 0;
}

static int send(pg_stmt *st) {
  pg_db *db = PDB(st->base.db);
  if (!PQsendQueryPrepared(db->pg, st->name, st->nparams, (const char *const *)st->pv, st->plen, st->pfmt, 0))
    return pg_err(db, NULL, "send");
  return 0;
}

/* Pipeline mode: one round trip that also collects the queued statements' results; then rows from the whole
 * result. */
static int step_pipelined(pg_stmt *st) {
  pg_db *db = PDB(st->base.db);
  if (!st->running) {
    int rc = send(st);
    if (rc) return rc;
    PGresult *r;
    if ((rc = pl_sync(db, db->pending, &r))) return rc;
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

static int pg_step(sl__pstmt *base) {
  pg_stmt *st = PST(base);
  pg_db *db = PDB(base->db);
  if (st->unesc) {
    PQfreemem(st->unesc);
    st->unesc = NULL;
  }
  if (db->copy_bytes && !base->bulk_safe && !st->running) {
    int rc = copy_flush(db); /* the statement may read rows still in the COPY buffers */
    if (rc) return rc;
  }
  if (db->pipe) return step_pipelined(st);
  if (st->res) {
    PQclear(st->res);
    st->res = NULL;
  }
  if (!st->running) {
    int rc = send(st);
    if (rc) return rc;
    st->running = true;
    PQsetSingleRowMode(db->pg);
  }
  for (;;) {
    PGresult *r = PQgetResult(db->pg);
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
    int e = pg_err(db, r, "query");
    PQclear(r);
    drain(st);
    return e;
  }
}

static int pg_defer(sl__pstmt *base) {
  pg_stmt *st = PST(base);
  pg_db *db = PDB(base->db);
  if (!db->pipe) {
    int rc = pg_step(base);
    while (rc == 1) rc = pg_step(base);
    pg_reset(base);
    return rc;
  }
  int rc = send(st);
  if (rc) return rc;
  db->pending++;
  clear_params(st);
  /* Collect the queued results now and then, so libpq does not buffer an unbounded run of them. */
  if (db->pending >= 16384) return pl_sync(db, -1, NULL);
  return 0;
}

static void pg_column(sl__pstmt *base, int c, int type, sl__pdb_val *out) {
  pg_stmt *st = PST(base);
  if (!st->res || PQgetisnull(st->res, st->row, c)) {
    out->type = SL__V_NULL;
    return;
  }
  const char *v = PQgetvalue(st->res, st->row, c);
  out->type = type == SL__V_NULL ? SL__V_INT : type;
  switch (type) {
  case SL__V_INT: out->i = v[0] == 't' ? 1 : v[0] == 'f' ? 0 : strtoll(v, NULL, 10); break;
  case SL__V_DOUBLE: out->d = strtod(v, NULL); break;
  case SL__V_TEXT: out->s = v; break;
  case SL__V_BLOB:
    if (st->unesc) PQfreemem(st->unesc);
    st->unesc = PQunescapeBytea((const unsigned char *)v, &out->n);
    out->s = (const char *)st->unesc;
    break;
  default: break;
  }
}

static const sl__pdb_dialect PG_SQL = {
    .name = "postgresql",
    .tables = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()",
    .lock_name = "SELECT pg_advisory_xact_lock(hashtext(?))",
    .returning = true,
    .writable_cte = true,
    .keep_quotes = false,
    /* MLMD's PostgreSQL source: SERIAL keys, BIGINT times and integers, BOOLEAN flags, BYTEA blobs. */
    .types = {[SL__T_KEY] = "SERIAL PRIMARY KEY", [SL__T_I64] = "BIGINT", [SL__T_FLAG] = "BOOLEAN",
              [SL__T_KIND] = "SMALLINT", [SL__T_F64] = "DOUBLE PRECISION", [SL__T_BLOB] = "BYTEA",
              [SL__T_UQA] = "CONSTRAINT UniqueArtifactTypeName ", [SL__T_UQX] = "CONSTRAINT UniqueExecutionTypeName ",
              [SL__T_UQE] = "CONSTRAINT UniqueEvent ", [SL__T_NNI] = "", [SL__T_NND] = "", [SL__T_NNS] = ""},
    .proto_text = false,
    .path_order = "p.ctid",
    .narrow_ints = "SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND "
                   "column_name = 'int_value' AND data_type = 'integer'",
};

const sl__pdb_vt sl__pdb_postgres = {
    .sql = &PG_SQL,
    .db_size = sizeof(pg_db),
    .stmt_size = sizeof(pg_stmt),
    .open = pg_open,
    .close = pg_close,
    .readonly = NULL,
    .exec = pg_exec,
    .begin = pg_begin,
    .lock = pg_lock,
    .mark_get = pg_mark_get,
    .mark_set = pg_mark_set,
    .prepare = pg_prepare,
    .finalize = pg_finalize,
    .bind = pg_bind,
    .step = pg_step,
    .defer = pg_defer,
    .reset = pg_reset,
    .column = pg_column,
    .last_id = NULL,
    .bulk = pg_bulk,
    .bulk_rows = pg_bulk_rows,
    .bulk_id = pg_bulk_id,
    .bulk_row = pg_bulk_row,
    .bulk_flush = pg_bulk_flush,
};
