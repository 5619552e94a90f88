/* prov/store/db_pg_off.c: what stands in for the PostgreSQL backend (db_pg.c) in a build without libpq
 * (SL_WITH_POSTGRES=OFF): opening a postgres:// URI says so. No other method is reached, as no handle opens. */
#include "core/core_int.h"
#include "prov/store/db_backend.h"

static int off_open(sl__pdb *db, const char *uri, bool create) {
  return sl__err(SL_EINVAL, "%s: built without PostgreSQL support (SL_WITH_POSTGRES=OFF)", db->where);
}

static void off_close(sl__pdb *db) {}

static const sl__pdb_dialect OFF_SQL = {.name = "postgresql", .tables = "", .types = {"", "", "", "", "", ""}};

const sl__pdb_vt sl__pdb_postgres = {
    .sql = &OFF_SQL, .db_size = sizeof(sl__pdb), .stmt_size = sizeof(sl__pstmt), .open = off_open, .close = off_close};
