/* dist/dist_int.h: inside src/dist/: the wire format (dist_wire.c) and the MPI half (dist_mpi.c, built with
 * SL_WITH_MPI), called by dist.c. */
#ifndef SL_DIST_INT_H
#define SL_DIST_INT_H

#include "sluice.h"

/* Packs element e into one message: *out (sl__malloc'd, freed with sl__free) of *len bytes. SL_EINVAL for an element
 * over 2 GiB. */
int sl__dist_pack(void **out, size_t *len, const sl_elem *e);
/* Packs e into *buf of *cap bytes, replaced by a larger one (sl__malloc'd, *cap updated) when too small; *len gets
 * the message's size. The caller frees *buf with sl__free, after a failure too. */
int sl__dist_pack_into(void **buf, size_t *cap, size_t *len, const sl_elem *e);
/* Unpacks message `msg` (the element takes references to it: payloads are not copied); component names go through
 * intern(ctx, name, len), which returns a name that outlives the element. SL_ECORRUPT naming rank `from` for a
 * malformed message. */
int sl__dist_unpack(sl_elem *out, sl_buf *msg, const char *(*intern)(void *ctx, const char *name, size_t len),
                    void *ctx, int from);

/* True when the environment says an MPI launcher started this process (Open MPI's or PMI's variables). */
bool sl__mpi_launched(void);
/* Initialises MPI (MPI_THREAD_SERIALIZED), fills rank/size/worker and registers the engine hooks. */
int sl__mpi_init(sl_dist_info *info, int workers);
int sl__mpi_serve(uint64_t *sent, const sl_pipeline *p);
int sl__mpi_finalize(void);

#endif
