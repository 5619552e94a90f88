/* sluice/dist.h: running pipelines over the ranks of a distributed job: which rank this process is, and (with MPI)
 * offloading the part of a spec above its `offload` op to worker ranks. See docs/distributed.md.
 * Thread rules: call sl_dist_init and sl_dist_finalize from the main thread, once each; the rest from one thread. */
#ifndef SLUICE_DIST_H
#define SLUICE_DIST_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* This process's place in the job. */
typedef struct sl_dist_info {
  int rank;      /* in the job (0 when not launched by mpirun or torchrun) */
  int size;      /* ranks in the job (1 when not launched) */
  int workers;   /* worker ranks: the last `workers` ranks of the job (0: every rank is a trainer) */
  bool launched; /* a launcher started it: MPI's, torchrun's or Slurm's rank variables are set */
  bool mpi;      /* MPI is initialised (libsluice built with MPI, started by an MPI launcher) */
  bool worker;   /* this rank is a worker: it runs sl_dist_serve instead of consuming */
} sl_dist_info;

/* True when libsluice was built with MPI (SL_WITH_MPI). */
SL_EXTERN bool sl_dist_has_mpi(void);
/* Finds this process's rank. Under an MPI launcher (with MPI built in) it initialises MPI and registers shard
 * "auto" (the job's size and rank; with workers, each worker's part) and, on trainers when workers > 0, the
 * transport of `offload` with the engine; call it before building pipelines. Without MPI it reads the launcher's
 * variables. Errors: SL_EINVAL when workers > 0 without MPI, or when workers leave no trainer. */
SL_EXTERN int sl_dist_init(sl_dist_info *out, int workers);
/* On a worker rank: runs the part of `p` above its `offload` op (sources sharded among the workers) and streams
 * the elements to the trainers as they ask for them, until every trainer has stopped. *sent counts the elements
 * sent. An error of the pipeline is sent to the trainers too and returned. */
SL_EXTERN int sl_dist_serve(uint64_t *sent, const sl_pipeline *p);
/* Removes the engine's hooks and finalises MPI (when sl_dist_init initialised it). Returns 0 or SL_ERROR. */
SL_EXTERN int sl_dist_finalize(void);

#ifdef __cplusplus
}
#endif

#endif
