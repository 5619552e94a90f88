/* prov/store/schema.c: the MLMD v10 schema (tables, unique keys, secondary indexes), as
 * ml_metadata/util/metadata_source_query_config.cc writes it, in one template each backend words its own way
 * (db_int.h), and the check an existing database must pass. */
#include <stdio.h>
#include <string.h>

#include "prov/store/store_int.h"

#define SL_MLMD_VERSION 10

/* MLMD's DDL (SQLite's, as MLMD writes it) as a template (sl__pdb_sql): identifiers in backquotes, and the types
 * the backends write their own way as tokens (PostgreSQL, as MLMD's PostgreSQL source: SERIAL keys, BIGINT times and
 * integers, BOOLEAN flags, BYTEA blobs; identifiers unquoted, so they fold to lower case as MLMD's do). */
static const char *const DDL[] = {
    "CREATE TABLE IF NOT EXISTS `Type` ( `id` {KEY}, `name` VARCHAR(255) NOT NULL, "
    "`version` VARCHAR(255), `type_kind` {KIND} NOT NULL, `description` TEXT, `input_type` TEXT, "
    "`output_type` TEXT, `external_id` VARCHAR(255) UNIQUE)",
    "CREATE TABLE IF NOT EXISTS `ParentType` ( `type_id` INT NOT NULL, `parent_type_id` INT NOT NULL, "
    "PRIMARY KEY (`type_id`, `parent_type_id`))",
    "CREATE TABLE IF NOT EXISTS `TypeProperty` ( `type_id` INT NOT NULL, `name` VARCHAR(255) NOT NULL, "
    "`data_type` INT NULL, PRIMARY KEY (`type_id`, `name`))",
    "CREATE TABLE IF NOT EXISTS `Artifact` ( `id` {KEY}, `type_id` INT NOT NULL, "
    "`uri` TEXT, `state` INT, `name` VARCHAR(255), `external_id` VARCHAR(255) UNIQUE, "
    "`create_time_since_epoch` {I64} NOT NULL DEFAULT 0, `last_update_time_since_epoch` {I64} NOT NULL DEFAULT 0, "
    "{UQ_ARTIFACT}UNIQUE(`type_id`, `name`))",
    "CREATE TABLE IF NOT EXISTS `ArtifactProperty` ( `artifact_id` INT NOT NULL, `name` VARCHAR(255) NOT NULL, "
    "`is_custom_property` {FLAG} NOT NULL, `int_value` {I64}, `double_value` {F64}, `string_value` TEXT, "
    "`byte_value` {BLOB}, `proto_value` {BLOB}, `bool_value` BOOLEAN, "
    "PRIMARY KEY (`artifact_id`, `name`, `is_custom_property`))",
    "CREATE TABLE IF NOT EXISTS `Execution` ( `id` {KEY}, `type_id` INT NOT NULL, "
    "`last_known_state` INT, `name` VARCHAR(255), `external_id` VARCHAR(255) UNIQUE, "
    "`create_time_since_epoch` {I64} NOT NULL DEFAULT 0, `last_update_time_since_epoch` {I64} NOT NULL DEFAULT 0, "
    "{UQ_EXECUTION}UNIQUE(`type_id`, `name`))",
    "CREATE TABLE IF NOT EXISTS `ExecutionProperty` ( `execution_id` INT NOT NULL, `name` VARCHAR(255) NOT NULL, "
    "`is_custom_property` {FLAG} NOT NULL, `int_value` {I64}, `double_value` {F64}, `string_value` TEXT, "
    "`byte_value` {BLOB}, `proto_value` {BLOB}, `bool_value` BOOLEAN, "
    "PRIMARY KEY (`execution_id`, `name`, `is_custom_property`))",
    "CREATE TABLE IF NOT EXISTS `Context` ( `id` {KEY}, `type_id` INT NOT NULL, "
    "`name` VARCHAR(255) NOT NULL, `external_id` VARCHAR(255) UNIQUE, "
    "`create_time_since_epoch` {I64} NOT NULL DEFAULT 0, `last_update_time_since_epoch` {I64} NOT NULL DEFAULT 0, "
    "UNIQUE(`type_id`, `name`))",
    "CREATE TABLE IF NOT EXISTS `ContextProperty` ( `context_id` INT NOT NULL, `name` VARCHAR(255) NOT NULL, "
    "`is_custom_property` {FLAG} NOT NULL, `int_value` {I64}, `double_value` {F64}, `string_value` TEXT, "
    "`byte_value` {BLOB}, `proto_value` {BLOB}, `bool_value` BOOLEAN, "
    "PRIMARY KEY (`context_id`, `name`, `is_custom_property`))",
    "CREATE TABLE IF NOT EXISTS `ParentContext` ( `context_id` INT NOT NULL, `parent_context_id` INT NOT NULL, "
    "PRIMARY KEY (`context_id`, `parent_context_id`))",
    "CREATE TABLE IF NOT EXISTS `Event` ( `id` {KEY}, `artifact_id` INT NOT NULL, "
    "`execution_id` INT NOT NULL, `type` INT NOT NULL, `milliseconds_since_epoch` {I64}, "
    "{UQ_EVENT}UNIQUE(`artifact_id`, `execution_id`, `type`))",
    "CREATE TABLE IF NOT EXISTS `EventPath` ( `event_id` INT NOT NULL, `is_index_step` {FLAG} NOT NULL, "
    "`step_index` INT, `step_key` TEXT)",
    "CREATE TABLE IF NOT EXISTS `Association` ( `id` {KEY}, `context_id` INT NOT NULL, "
    "`execution_id` INT NOT NULL, UNIQUE(`context_id`, `execution_id`))",
    "CREATE TABLE IF NOT EXISTS `Attribution` ( `id` {KEY}, `context_id` INT NOT NULL, "
    "`artifact_id` INT NOT NULL, UNIQUE(`context_id`, `artifact_id`))",
    "CREATE TABLE IF NOT EXISTS `MLMDEnv` ( `schema_version` INTEGER PRIMARY KEY)",
    "CREATE INDEX IF NOT EXISTS `idx_artifact_uri` ON `Artifact`(`uri`)",
    "CREATE INDEX IF NOT EXISTS `idx_artifact_create_time_since_epoch` ON `Artifact`(`create_time_since_epoch`)",
    "CREATE INDEX IF NOT EXISTS `idx_artifact_last_update_time_since_epoch` ON "
    "`Artifact`(`last_update_time_since_epoch`)",
    "CREATE INDEX IF NOT EXISTS `idx_event_execution_id` ON `Event`(`execution_id`)",
    "CREATE INDEX IF NOT EXISTS `idx_parentcontext_parent_context_id` ON `ParentContext`(`parent_context_id`)",
    "CREATE INDEX IF NOT EXISTS `idx_type_name` ON `Type`(`name`)",
    "CREATE INDEX IF NOT EXISTS `idx_execution_create_time_since_epoch` ON `Execution`(`create_time_since_epoch`)",
    "CREATE INDEX IF NOT EXISTS `idx_execution_last_update_time_since_epoch` ON "
    "`Execution`(`last_update_time_since_epoch`)",
    "CREATE INDEX IF NOT EXISTS `idx_context_create_time_since_epoch` ON `Context`(`create_time_since_epoch`)",
    "CREATE INDEX IF NOT EXISTS `idx_context_last_update_time_since_epoch` ON "
    "`Context`(`last_update_time_since_epoch`)",
    "CREATE INDEX IF NOT EXISTS `idx_eventpath_event_id` ON `EventPath`(`event_id`)",
    "CREATE INDEX IF NOT EXISTS `idx_artifact_property_int` ON `ArtifactProperty`(`name`, `is_custom_property`, "
    "`int_value`){NN_INT}",
    "CREATE INDEX IF NOT EXISTS `idx_artifact_property_double` ON `ArtifactProperty`(`name`, "
    "`is_custom_property`, `double_value`){NN_DOUBLE}",
    "CREATE INDEX IF NOT EXISTS `idx_artifact_property_string` ON `ArtifactProperty`(`name`, "
    "`is_custom_property`, `string_value`){NN_STRING}",
    "CREATE INDEX IF NOT EXISTS `idx_execution_property_int` ON `ExecutionProperty`(`name`, "
    "`is_custom_property`, `int_value`){NN_INT}",
    "CREATE INDEX IF NOT EXISTS `idx_execution_property_double` ON `ExecutionProperty`(`name`, "
    "`is_custom_property`, `double_value`){NN_DOUBLE}",
    "CREATE INDEX IF NOT EXISTS `idx_execution_property_string` ON `ExecutionProperty`(`name`, "
    "`is_custom_property`, `string_value`){NN_STRING}",
    "CREATE INDEX IF NOT EXISTS `idx_context_property_int` ON `ContextProperty`(`name`, `is_custom_property`, "
    "`int_value`){NN_INT}",
    "CREATE INDEX IF NOT EXISTS `idx_context_property_double` ON `ContextProperty`(`name`, "
    "`is_custom_property`, `double_value`){NN_DOUBLE}",
    "CREATE INDEX IF NOT EXISTS `idx_context_property_string` ON `ContextProperty`(`name`, "
    "`is_custom_property`, `string_value`){NN_STRING}",
    "CREATE INDEX IF NOT EXISTS `idx_type_external_id` ON `Type`(`external_id`)",
    "CREATE INDEX IF NOT EXISTS `idx_artifact_external_id` ON `Artifact`(`external_id`)",
    "CREATE INDEX IF NOT EXISTS `idx_execution_external_id` ON `Execution`(`external_id`)",
    "CREATE INDEX IF NOT EXISTS `idx_context_external_id` ON `Context`(`external_id`)",
    "INSERT INTO `MLMDEnv`(`schema_version`) VALUES(10)",
    /* The library's simple types, which it inserts when it opens a store without them (and so cannot open one
     * read-only): artifact kinds 1, execution 0, in its order. */
    "INSERT INTO `Type`(`name`, `type_kind`) VALUES('mlmd.Dataset', 1), ('mlmd.Model', 1), ('mlmd.Metrics', 1), "
    "('mlmd.Statistics', 1), ('mlmd.Train', 0), ('mlmd.Transform', 0), ('mlmd.Process', 0), ('mlmd.Evaluate', 0), "
    "('mlmd.Deploy', 0)",
};

static const char *const REQUIRED[] = {"type", "parenttype", "typeproperty", "artifact", "artifactproperty",
                                       "execution", "executionproperty", "context", "contextproperty",
                                       "parentcontext", "event", "eventpath", "association", "attribution"};

static bool has(char **names, size_t n, const char *t) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(names[i], t)) return true;
  return false;
}

/* 1 when the database holds no table of its own (the backend's table list leaves its bookkeeping tables out). */
static bool empty_db(char **names, size_t n) { return n == 0; }

static int check(sl_prov *p, char **names, size_t n) {
  if (!has(names, n, "mlmdenv")) {
    if (has(names, n, "type") && has(names, n, "artifact") && has(names, n, "execution"))
      return sl__err(SL_EVERSION, "%s: MLMD schema version 0 found (no MLMDEnv table); sluice reads and writes "
                                  "version %d",
                     p->uri, SL_MLMD_VERSION);
    return sl__err(SL_ECORRUPT, "%s: not an ML Metadata database (no MLMDEnv table)", p->uri);
  }
  sl__pstmt *st;
  int rc = sl__pdb_prepare(p->db, &st, "SELECT schema_version FROM MLMDEnv");
  if (rc) return rc;
  rc = sl__pstmt_step(st);
  int64_t v = rc == 1 ? sl__pstmt_i64(st, 0) : -1;
  sl__pstmt_free(st);
  if (rc < 0) return rc;
  if (rc == 0) return sl__err(SL_ECORRUPT, "%s: MLMDEnv holds no schema version", p->uri);
  /* Never migrated here: an older store is upgraded by the library on request, a newer one is not ours to read. */
  if (v != SL_MLMD_VERSION)
    return sl__err(SL_EVERSION, "%s: MLMD schema version %lld found; sluice reads and writes version %d (%s)", p->uri,
                   (long long)v, SL_MLMD_VERSION,
                   v < SL_MLMD_VERSION ? "an older store: the ml-metadata library upgrades it when opened with "
                                         "enable_upgrade_migration=True"
                                       : "written by a newer ml-metadata than sluice knows");
  for (size_t i = 0; i < sizeof REQUIRED / sizeof *REQUIRED; i++)
    if (!has(names, n, REQUIRED[i]))
      return sl__err(SL_ECORRUPT, "%s: MLMD schema version 10 but table %s is missing", p->uri, REQUIRED[i]);
  return 0;
}

/* Runs DDL statement i in the backend's words. */
static int ddl(sl_prov *p, size_t i) {
  char *sql = sl__pdb_sql(p->db, DDL[i]);
  if (!sql) return sl__oom("MLMD schema statement");
  int rc = sl__pdb_exec(p->db, sql);
  sl__free(sql);
  return rc;
}

static int create(sl_prov *p) {
  for (size_t i = 0; i < sizeof DDL / sizeof *DDL; i++) {
    int rc = ddl(p, i);
    if (rc) return sl__err_wrap(rc, "creating the MLMD schema");
  }
  return 0;
}

/* A bulk load marks the store while MLMD's secondary indexes are dropped (the backend's flag, sl__pdb_mark_set,
 * attached to MLMDEnv where it needs a table), set before the first is dropped and
 * cleared after the last is re-created, so a load that died midway (killed, a crash) is told apart from a store
 * that never had some index (another MLMD release's; left alone). */
#define MARK_TABLE "MLMDEnv"

/* A store a bulk load left without its indexes gets them back when it can be written; a read-only one is refused
 * (it would answer right, but slowly, with nothing saying why). */
static int check_indexes(sl_prov *p) {
  bool on;
  int rc = sl__pdb_mark_get(p->db, MARK_TABLE, &on);
  if (rc || !on) return rc;
  if (sl__pdb_readonly(p->db))
    return sl__err(SL_ECORRUPT, "%s: a bulk load that did not reach its end left the store without MLMD's secondary "
                                "indexes; open it writable once to re-create them",
                   p->uri);
  return sl__prov_indexes(p, true);
}

/* Whether a PostgreSQL store's int_value columns are INTEGER (the library's) rather than BIGINT (sluice's). */
int sl__prov_int_width(sl_prov *p) {
  p->int32 = false;
  const char *q = sl__pdb_dialect_of(p->db)->narrow_ints;
  if (!q) return 0;
  sl__pstmt *st;
  int rc = sl__pdb_prepare(p->db, &st, q);
  if (rc) return rc;
  rc = sl__pstmt_step(st);
  p->int32 = rc == 1 && sl__pstmt_i64(st, 0) > 0;
  sl__pstmt_free(st);
  return rc < 0 ? rc : 0;
}

int sl__prov_widen_ddl(sl_prov *p) {
  static const char *const T[] = {"ArtifactProperty", "ExecutionProperty", "ContextProperty"};
  int rc = 0;
  for (size_t i = 0; !rc && i < 3; i++) {
    char sql[96];
    snprintf(sql, sizeof sql, "ALTER TABLE %s ALTER COLUMN int_value TYPE BIGINT", T[i]);
    if ((rc = sl__pdb_exec(p->db, sql))) rc = sl__err_wrap(rc, "%s: widening %s.int_value", p->uri, T[i]);
  }
  return rc;
}

/* Verifies the schema, creating it in an empty database when allowed. Creation happens under the write lock
 * (sl__pdb_begin, and lock SCHEMA_LOCK where the backend needs one more), re-checking inside, so racing processes
 * create it once. */
#define SCHEMA_LOCK 7310001
int sl__prov_schema(sl_prov *p, bool allow_create) {
  char **names;
  size_t n;
  int rc = sl__pdb_tables(p->db, &names, &n);
  if (rc) return rc;
  bool empty = empty_db(names, n);
  if (!empty || !allow_create) {
    rc = empty ? sl__err(SL_ENOTFOUND, "%s: empty database (no MLMD schema); create it with 'sluice prov init'",
                         p->uri)
               : check(p, names, n);
    sl__pdb_names_free(names, n);
    if (!rc) rc = sl__prov_int_width(p);
    return rc ? rc : check_indexes(p);
  }
  sl__pdb_names_free(names, n);
  rc = sl__pdb_begin(p->db);
  if (rc) return rc;
  rc = sl__pdb_lock(p->db, SCHEMA_LOCK);
  if (!rc) rc = sl__pdb_tables(p->db, &names, &n);
  if (!rc) {
    if (empty_db(names, n))
      rc = create(p);
    else
      rc = check(p, names, n);
    sl__pdb_names_free(names, n);
  }
  if (rc) {
    sl__pdb_exec(p->db, "ROLLBACK");
    return rc;
  }
  return sl__pdb_exec(p->db, "COMMIT");
}

/* Drops (create false) or re-creates MLMD's secondary indexes, for bulk loads into a fresh store: building an
 * index once over sorted data is much cheaper than maintaining it row by row. The unique keys stay. */
int sl__prov_indexes(sl_prov *p, bool create_them) {
  if (!create_them) {
    int rc = sl__pdb_mark_set(p->db, MARK_TABLE, true);
    if (rc) return sl__err_wrap(rc, "marking the store for a bulk load");
  }
  for (size_t i = 0; i < sizeof DDL / sizeof *DDL; i++) {
    if (strncmp(DDL[i], "CREATE INDEX IF NOT EXISTS ", 27)) continue;
    int rc;
    if (create_them) {
      rc = ddl(p, i);
    } else {
      /* "CREATE INDEX IF NOT EXISTS <name> ON ..." -> "DROP INDEX IF EXISTS <name>" */
      const char *name = DDL[i] + 27, *sp = strchr(name, ' ');
      char tmpl[160], *sql;
      snprintf(tmpl, sizeof tmpl, "DROP INDEX IF EXISTS %.*s", (int)(sp - name), name);
      if (!(sql = sl__pdb_sql(p->db, tmpl))) return sl__oom("MLMD index statement");
      rc = sl__pdb_exec(p->db, sql);
      sl__free(sql);
    }
    if (rc) return sl__err_wrap(rc, "%s MLMD's indexes", create_them ? "re-creating" : "dropping");
  }
  if (create_them) {
    int rc = sl__pdb_mark_set(p->db, MARK_TABLE, false);
    if (rc) return sl__err_wrap(rc, "clearing the store's bulk load mark");
  }
  return 0;
}
