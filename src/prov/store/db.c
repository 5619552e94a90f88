/* prov/store/db.c: the dispatcher of db_int.h: picks the backend a uri names, allocates the handles, and does what
 * is the same for every backend (messages without passwords, the RETURNING rule, DDL templates, the table list);
 * the rest goes through the backend's methods (db_backend.h). */
#include "prov/store/db_backend.h"

#include <ctype.h>
#include <string.h>

#include "core/core_int.h"

static bool uri_names_postgres(const char *u) {
  return !strncmp(u, "postgresql://", 13) || !strncmp(u, "postgres://", 11);
}

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

int sl__pdb_open(sl__pdb **out, const char *uri, bool create) {
  *out = NULL;
  if (!uri || !*uri) return sl__err(SL_EINVAL, "empty store URI");
  sl__redact_note(uri); /* before any message can name it */
  const sl__pdb_vt *vt = uri_names_postgres(uri) ? &sl__pdb_postgres : &sl__pdb_sqlite;
  const char *target = vt == &sl__pdb_sqlite && !strncmp(uri, "sqlite:", 7) ? uri + 7 : uri;
  sl__pdb *db = sl__calloc(1, vt->db_size);
  if (!db) return sl__oom("store handle");
  db->vt = vt;
  db->where = sl__redact_dup(uri); /* for messages: no password */
  if (!db->where) {
    sl__free(db);
    return sl__oom("store uri");
  }
  int rc = is_conninfo(uri) ? sl__err(SL_EINVAL, "'%s': a libpq key=value connection string; name the store with a "
                                                 "postgresql:// URI (or sqlite:PATH for a file of that name)",
                                      db->where)
                            : vt->open(db, target, create);
  if (rc) {
    sl__pdb_close(db);
    return rc;
  }
  *out = db;
  return 0;
}

void sl__pdb_close(sl__pdb *db) {
  if (!db) return;
  db->vt->close(db);
  sl__free(db->where);
  sl__free(db);
}

const sl__pdb_dialect *sl__pdb_dialect_of(const sl__pdb *db) { return db->vt->sql; }

/* Writes the expansion of tmpl to o (when not NULL); returns its length. */
static size_t expand(const sl__pdb_dialect *d, const char *tmpl, char *o) {
  static const char *const TOK[SL__T_N] = {"{KEY}",         "{I64}",          "{FLAG}",      "{KIND}",
                                            "{F64}",         "{BLOB}",         "{UQ_ARTIFACT}", "{UQ_EXECUTION}",
                                            "{UQ_EVENT}",    "{NN_INT}",       "{NN_DOUBLE}", "{NN_STRING}"};
  size_t n = 0;
  for (const char *c = tmpl; *c;) {
    int t = 0;
    if (*c == '{')
      while (t < SL__T_N && strncmp(c, TOK[t], strlen(TOK[t]))) t++;
    if (*c == '{' && t < SL__T_N) {
      size_t l = strlen(d->types[t]);
      if (o) memcpy(o + n, d->types[t], l);
      n += l;
      c += strlen(TOK[t]);
      continue;
    }
    if (*c != '`' || d->keep_quotes) {
      if (o) o[n] = *c;
      n++;
    }
    c++;
  }
  if (o) o[n] = 0;
  return n;
}

char *sl__pdb_sql(const sl__pdb *db, const char *tmpl) {
  char *o = sl__malloc(expand(db->vt->sql, tmpl, NULL) + 1);
  if (o) expand(db->vt->sql, tmpl, o);
  return o;
}

bool sl__pdb_readonly(sl__pdb *db) { return db->vt->readonly && db->vt->readonly(db); }

int sl__pdb_exec(sl__pdb *db, const char *sql) { return db->vt->exec(db, sql); }

int sl__pdb_begin(sl__pdb *db) { return db->vt->begin(db); }

int sl__pdb_lock(sl__pdb *db, int64_t key) { return db->vt->lock ? db->vt->lock(db, key) : 0; }

int sl__pdb_mark_get(sl__pdb *db, const char *table, bool *on) { return db->vt->mark_get(db, table, on); }

int sl__pdb_mark_set(sl__pdb *db, const char *table, bool on) { return db->vt->mark_set(db, table, on); }

void sl__pdb_names_free(char **names, size_t n) {
  if (!names) return;
  for (size_t i = 0; i < n; i++) sl__free(names[i]);
  sl__free(names);
}

int sl__pdb_tables(sl__pdb *db, char ***names, size_t *n) {
  *names = NULL;
  *n = 0;
  sl__pstmt *st;
  int rc = sl__pdb_prepare(db, &st, db->vt->sql->tables);
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

/* ---- statements ---- */

int sl__pdb_prepare(sl__pdb *db, sl__pstmt **out, const char *sql) {
  *out = NULL;
  sl__pstmt *st = sl__calloc(1, db->vt->stmt_size);
  if (!st) return sl__oom("statement");
  st->db = db;
  int rc = db->vt->prepare(st, sql);
  if (rc) {
    db->vt->finalize(st);
    sl__free(st);
    return rc;
  }
  *out = st;
  return 0;
}

int sl__pdb_prepare_insert(sl__pdb *db, sl__pstmt **out, const char *sql) {
  static const char RET[] = " RETURNING id";
  size_t n = strlen(sql), r = sizeof RET - 1;
  if (db->vt->sql->returning || n < r || strcmp(sql + n - r, RET)) return sl__pdb_prepare(db, out, sql);
  char *q = sl__strndup(sql, n - r);
  if (!q) return sl__oom("statement");
  int rc = sl__pdb_prepare(db, out, q);
  sl__free(q);
  return rc;
}

int sl__pstmt_insert(sl__pstmt *st, int64_t *id) {
  int rc = sl__pstmt_step(st);
  if (!st->db->vt->sql->returning) {
    if (rc == 0 && id) *id = st->db->vt->last_id(st->db);
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

void sl__pstmt_free(sl__pstmt *st) {
  if (!st) return;
  st->db->vt->finalize(st);
  sl__free(st);
}

void sl__pstmt_reset(sl__pstmt *st) {
  if (st) st->db->vt->reset(st);
}

int sl__pstmt_step(sl__pstmt *st) { return st->db->vt->step(st); }

int sl__pstmt_defer(sl__pstmt *st) { return st->db->vt->defer(st); }

void sl__pstmt_bulk_safe(sl__pstmt *st) { st->bulk_safe = true; }

static int bind(sl__pstmt *st, int i, sl__pdb_val v) { return st->db->vt->bind(st, i, &v); }

int sl__pstmt_bind_i64(sl__pstmt *st, int i, int64_t v) { return bind(st, i, (sl__pdb_val){SL__V_INT, v, 0, NULL, 0}); }

int sl__pstmt_bind_f64(sl__pstmt *st, int i, double v) {
  return bind(st, i, (sl__pdb_val){SL__V_DOUBLE, 0, v, NULL, 0});
}

int sl__pstmt_bind_text(sl__pstmt *st, int i, const char *s) {
  if (!s) return sl__pstmt_bind_null(st, i);
  return bind(st, i, (sl__pdb_val){SL__V_TEXT, 0, 0, s, strlen(s)});
}

int sl__pstmt_bind_blob(sl__pstmt *st, int i, const void *b, size_t n) {
  return bind(st, i, (sl__pdb_val){SL__V_BLOB, 0, 0, b, n});
}

int sl__pstmt_bind_null(sl__pstmt *st, int i) { return bind(st, i, (sl__pdb_val){SL__V_NULL, 0, 0, NULL, 0}); }

static sl__pdb_val column(sl__pstmt *st, int c, int type) {
  sl__pdb_val v = {SL__V_NULL, 0, 0, NULL, 0};
  st->db->vt->column(st, c, type, &v);
  return v;
}

bool sl__pstmt_null(sl__pstmt *st, int c) { return column(st, c, SL__V_NULL).type == SL__V_NULL; }

int64_t sl__pstmt_i64(sl__pstmt *st, int c) { return column(st, c, SL__V_INT).i; }

double sl__pstmt_f64(sl__pstmt *st, int c) { return column(st, c, SL__V_DOUBLE).d; }

const char *sl__pstmt_text(sl__pstmt *st, int c) { return column(st, c, SL__V_TEXT).s; }

const void *sl__pstmt_blob(sl__pstmt *st, int c, size_t *n) {
  sl__pdb_val v = column(st, c, SL__V_BLOB);
  *n = v.n;
  return v.s;
}

/* ---- bulk loads ---- */

int sl__pdb_bulk(sl__pdb *db, int stage) { return db->vt->bulk(db, stage); }

bool sl__pdb_bulk_rows(sl__pdb *db) { return db->vt->bulk_rows(db); }

int sl__pdb_bulk_id(sl__pdb *db, int which, const char *table, int64_t *id) {
  if (which < 0 || which >= SL__PDB_NIDS)
    return sl__err(SL_ERROR, "%s: bulk id sequence %d out of range", db->where, which);
  return db->vt->bulk_id(db, which, table, id);
}

int sl__pdb_bulk_row(sl__pdb *db, int slot, const sl__pdb_bulk_spec *spec, const sl__pdb_val *vals) {
  if (slot < 0 || slot >= SL__PDB_NBULK)
    return sl__err(SL_ERROR, "%s: bulk row slot %d out of range", db->where, slot);
  return db->vt->bulk_row(db, slot, spec, vals);
}

int sl__pdb_bulk_flush(sl__pdb *db) { return db->vt->bulk_flush(db); }
