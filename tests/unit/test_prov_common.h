/* test_prov_common.h: what the provenance tests share: a fresh store per case on SQLite (a temp file) or on the
 * PostgreSQL server the ctest fixture started (tools/pg_start.sh; its directory in $SL_PG_DIR), one database
 * per case. PostgreSQL cases are skipped when no server was started (running a test binary by hand). */
#ifndef TEST_PROV_COMMON_H
#define TEST_PROV_COMMON_H

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

typedef struct tp_backend {
  const char *name; /* "sqlite" or "postgresql" */
  char uri[1024];
  char *dir;
} tp_backend;

/* The admin URI of the fixture's server, or NULL. */
static inline const char *tp_pg_admin(void) {
  static char uri[512];
  const char *d = getenv("SL_PG_DIR");
  if (!d || !*d) return NULL;
  char path[1024];
  snprintf(path, sizeof path, "%s/uri", d);
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  if (!fgets(uri, sizeof uri, f)) uri[0] = 0;
  fclose(f);
  uri[strcspn(uri, "\r\n")] = 0;
  return uri[0] ? uri : NULL;
}

static inline void tp_pg_sql(const char *uri, const char *sql) {
  PGconn *c = PQconnectdb(uri);
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  PGresult *r = PQexec(c, sql);
  if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
    fprintf(stderr, "pg: %s: %s", sql, PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
}

/* Fresh, empty database for one case: fills b->uri. Returns false (and skips) when the backend is absent. */
static inline bool tp_fresh(tp_backend *b, const char *tag) {
  if (!strcmp(b->name, "sqlite")) {
    b->dir = tu_tmpdir(tag);
    snprintf(b->uri, sizeof b->uri, "%s/mlmd.sqlite", b->dir);
    return true;
  }
  const char *admin = tp_pg_admin();
  if (!admin) return false;
  char sql[256], db[128];
  snprintf(db, sizeof db, "t_%s_%d", tag, (int)getpid());
  for (char *c = db; *c; c++)
    if (*c == '-') *c = '_';
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", db);
  tp_pg_sql(admin, sql);
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
  tp_pg_sql(admin, sql);
  snprintf(b->uri, sizeof b->uri, "%.*s/%s", (int)(strrchr(admin, '/') - admin), admin, db);
  return true;
}

static inline void tp_done(tp_backend *b) {
  if (b->dir) {
    tu_rmtree(b->dir);
    free(b->dir);
    b->dir = NULL;
  }
  if (!strcmp(b->name, "postgresql") && tp_pg_admin()) {
    const char *db = strrchr(b->uri, '/') + 1;
    char sql[256];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", db);
    tp_pg_sql(tp_pg_admin(), sql);
  }
}

#define TP_BEGIN(state, tag)                                                                                  \
  tp_backend *B = *(tp_backend **)(state);                                                                    \
  if (!tp_fresh(B, tag)) {                                                                                    \
    skip();                                                                                                   \
  }

static inline sl_prov *tp_open(tp_backend *b) {
  sl_prov *p = NULL;
  int rc = sl_prov_open(&p, b->uri, SL_PROV_CREATE);
  if (rc) fprintf(stderr, "open %s: %s\n", b->uri, sl_error_last());
  assert_int_equal(rc, 0);
  return p;
}

#endif
