/* prov/store/pq_dlopen.h: libpq's functions as db_pg.c calls them. In the default build they are libpq's own (linked);
 * built with SL_POSTGRES_DLOPEN (the Python wheel, which cannot carry libpq's own dependencies sensibly) they are
 * pointers that pq_dlopen.c fills from libpq.so.5 when the first postgres:// store opens, so that a machine without
 * libpq runs everything else and is told what is missing when it asks for PostgreSQL. */
#ifndef SL_PQ_DLOPEN_H
#define SL_PQ_DLOPEN_H

#include <libpq-fe.h>

/* Every libpq function db_pg.c calls (a call to one not listed does not link in the SL_POSTGRES_DLOPEN build). */
#define SL__PQ_FNS(X) \
  X(PQclear) \
  X(PQconnectdbParams) \
  X(PQenterPipelineMode) \
  X(PQerrorMessage) \
  X(PQexec) \
  X(PQexitPipelineMode) \
  X(PQfinish) \
  X(PQfreemem) \
  X(PQgetResult) \
  X(PQgetisnull) \
  X(PQgetvalue) \
  X(PQntuples) \
  X(PQpipelineSync) \
  X(PQprepare) \
  X(PQputCopyData) \
  X(PQputCopyEnd) \
  X(PQresultErrorField) \
  X(PQresultErrorMessage) \
  X(PQresultStatus) \
  X(PQsendPrepare) \
  X(PQsendQuery) \
  X(PQsendQueryParams) \
  X(PQsendQueryPrepared) \
  X(PQsetSingleRowMode) \
  X(PQstatus) \
  X(PQunescapeBytea)

#ifdef SL_PQ_DLOPEN
#define SL__PQ_DECL(f) extern __typeof__(f) *sl__pq_##f;
SL__PQ_FNS(SL__PQ_DECL)
#undef SL__PQ_DECL
/* Loads libpq once (thread-safe); 0, or SL_ENOTFOUND with a message that names `where`, the library and how to
 * install it. */
int sl__pq_load(const char *where);
#ifndef SL__PQ_NO_RENAME /* pq_dlopen.c defines the pointers under their own names */
#define PQclear sl__pq_PQclear
#define PQconnectdbParams sl__pq_PQconnectdbParams
#define PQenterPipelineMode sl__pq_PQenterPipelineMode
#define PQerrorMessage sl__pq_PQerrorMessage
#define PQexec sl__pq_PQexec
#define PQexitPipelineMode sl__pq_PQexitPipelineMode
#define PQfinish sl__pq_PQfinish
#define PQfreemem sl__pq_PQfreemem
#define PQgetResult sl__pq_PQgetResult
#define PQgetisnull sl__pq_PQgetisnull
#define PQgetvalue sl__pq_PQgetvalue
#define PQntuples sl__pq_PQntuples
#define PQpipelineSync sl__pq_PQpipelineSync
#define PQprepare sl__pq_PQprepare
#define PQputCopyData sl__pq_PQputCopyData
#define PQputCopyEnd sl__pq_PQputCopyEnd
#define PQresultErrorField sl__pq_PQresultErrorField
#define PQresultErrorMessage sl__pq_PQresultErrorMessage
#define PQresultStatus sl__pq_PQresultStatus
#define PQsendPrepare sl__pq_PQsendPrepare
#define PQsendQuery sl__pq_PQsendQuery
#define PQsendQueryParams sl__pq_PQsendQueryParams
#define PQsendQueryPrepared sl__pq_PQsendQueryPrepared
#define PQsetSingleRowMode sl__pq_PQsetSingleRowMode
#define PQstatus sl__pq_PQstatus
#define PQunescapeBytea sl__pq_PQunescapeBytea
#endif
#else
static inline int sl__pq_load(const char *where) {
  (void)where;
  return 0;
}
#endif

#endif
