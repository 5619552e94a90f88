/* dist/dist_int.h: the MPI half of src/dist/ (dist_mpi.c, built with SL_WITH_MPI), called by dist.c. */
#ifndef SL_DIST_INT_H
#define SL_DIST_INT_H

#include "sluice.h"

/* True when the environment says an MPI launcher started this process (Open MPI's or PMI's variables). */
bool sl__mpi_launched(void);
/* Initialises MPI (MPI_THREAD_SERIALIZED), fills rank/size/worker and registers the engine hooks. */
int sl__mpi_init(sl_dist_info *info, int workers);
int sl__mpi_serve(uint64_t *sent, const sl_pipeline *p);
int sl__mpi_finalize(void);

#endif
