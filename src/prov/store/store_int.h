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
};

int sl__prov_stmt(sl_prov *p, int which, sl__pstmt **out);
int64_t sl__prov_now_ms(void);
/* Verifies the MLMD v10 schema (creating it in an empty database when allowed). */
int sl__prov_schema(sl_prov *p, bool allow_create);
/* Drops or re-creates MLMD's secondary indexes (bulk loads). */
int sl__prov_indexes(sl_prov *p, bool create_them);
/* Runs fn inside a transaction unless one is open. */
int sl__prov_txn_begin(sl_prov *p, bool *own);
int sl__prov_txn_end(sl_prov *p, bool own, int rc);
/* Grows *v (of *cap elements of `elem` bytes, new ones zeroed) to hold `need`; SL_ENOMEM naming the list. */
int sl__prov_grow(void **v, size_t *cap, size_t need, size_t elem);
/* Appends to l->events the events touching one artifact or execution (kind), with their paths (store_query.c). */
int sl__prov_load_events(sl_prov *p, sl_prov_list *l, size_t *cap, sl_prov_kind kind, int64_t id);

#endif
