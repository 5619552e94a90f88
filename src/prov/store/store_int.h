/* prov/store/store_int.h: the store handle shared by the files of src/prov (store, analytics, generator). */
#ifndef SL_PROV_INTERNAL_H
#define SL_PROV_INTERNAL_H

#include "core/core_int.h"
#include "prov/store/db_int.h"
#include "sluice/prov.h"

/* Cached statements, prepared on first use. */
enum {
  SL__Q_TYPE_FIND, SL__Q_TYPE_INS, SL__Q_TYPE_PROP_INS, SL__Q_PARENT_TYPE_INS, SL__Q_ART_INS, SL__Q_EXEC_INS,
  SL__Q_CTX_FIND, SL__Q_CTX_INS, SL__Q_EXEC_STATE, SL__Q_APROP, SL__Q_EPROP, SL__Q_CPROP, SL__Q_EVENT_INS,
  SL__Q_PATH_INS, SL__Q_ATTR, SL__Q_ASSOC, SL__Q_PARENT_CTX, SL__Q_NAME_LOCK, SL__Q_EVENT_CTE, SL__Q_CTX_PUT_CTE,
  SL__Q_NQ
};

struct sl_prov {
  sl__pdb *db;
  sl__pstmt *q[SL__Q_NQ];
  int in_txn;
  char *uri;
  bool bulk;         /* between sl_prov_bulk_begin and _end */
  bool bulk_indexes; /* the bulk load dropped MLMD's secondary indexes: re-create them at the end */
  /* PostgreSQL store whose int_value columns are INTEGER (as the ml-metadata library creates them): an INT beyond
   * 32 bits is refused with a message naming sl_prov_widen_ints rather than the server's range error. */
  bool int32;
};

int sl__prov_stmt(sl_prov *p, int which, sl__pstmt **out);
int64_t sl__prov_now_ms(void);
/* Verifies the MLMD v10 schema (creating it in an empty database when allowed). */
int sl__prov_schema(sl_prov *p, bool allow_create);
/* Drops or re-creates MLMD's secondary indexes (bulk loads). */
int sl__prov_indexes(sl_prov *p, bool create_them);
/* An event's path steps in the order they were written: EventPath has no step number, and MLMD reads the rows
 * in the table's order (insertion order, as the physical row order here); a join alone does not keep it. */
/* 0, or SL_EINVAL naming the property and sl_prov_widen_ints when v does not fit the store's INTEGER int_value. */
int sl__prov_int_fits(sl_prov *p, const char *name, int64_t v);
/* Runs fn inside a transaction unless one is open. */
int sl__prov_txn_begin(sl_prov *p, bool *own);
/* Sets p->int32: whether the store's int_value columns are INTEGER (the library's on PostgreSQL; schema.c). */
int sl__prov_int_width(sl_prov *p);
/* Widens them to BIGINT, inside the caller's transaction (schema.c; sl_prov_widen_ints opens it). */
int sl__prov_widen_ddl(sl_prov *p);
int sl__prov_txn_end(sl_prov *p, bool own, int rc);
/* Grows *v (of *cap elements of `elem` bytes, new ones zeroed) to hold `need`; SL_ENOMEM naming the list. */
int sl__prov_grow(void **v, size_t *cap, size_t need, size_t elem);
/* Appends to l->events the events touching one artifact or execution (kind), with their paths (store_query.c). */
int sl__prov_load_events(sl_prov *p, sl_prov_list *l, size_t *cap, sl_prov_kind kind, int64_t id);

/* Values the ml-metadata library's way (mlmd_value.c). The library keeps a STRUCT as "mlmd-struct::" + base64 of
 * a serialized google.protobuf.Struct in string_value and a PROTO as its serialized Any in proto_value (as base64
 * text on SQLite, the bytes on PostgreSQL);
 * the API keeps JSON text (an object) and raw bytes. The decoders return 1, with no error set, for a value not in
 * that form (kept as it is: a STRING, raw bytes), SL_ENOMEM. */
int sl__mlmd_struct_encode(char **out, const char *json, const char *name);
int sl__mlmd_struct_decode(char **json_out, const char *s);
int sl__mlmd_proto_encode(char **out, size_t *outlen, const void *bytes, size_t len);
int sl__mlmd_proto_decode(void **out, size_t *outlen, const void *b64, size_t len);
/* *enc = v with a STRUCT or PROTO encoded as stored, a PROTO in base64 when b64 (*tmp holds the encoding: sl__free
 * it). A PROTO that is not a serialized Any with a type_url is SL_EINVAL (the library cannot read it). */
int sl__mlmd_value_store(sl_prov_value *enc, char **tmp, const sl_prov_value *v, const char *name, bool b64);

#endif
