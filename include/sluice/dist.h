/* sluice/dist.h: running pipelines over the ranks of a distributed job: which rank this process is, and (with MPI)
 * offloading the part of a spec above its `offload` op to worker ranks. See docs/distributed.md.
 * Thread rules: call sl_dist_init and sl_dist_finalize from the main thread, once each; the rest from one thread. */
#ifndef SLUICE_DIST_H
#define SLUICE_DIST_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "pipeline.h"
#include "trace.h"

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

/* ---- planning the cut (src/plan/plan_dist.c) ---- */
/* The machines the offload plan is for. Every field left 0 takes its default. */
typedef struct sl_offload_opts {
  int version;           /* SL_OFFLOAD_OPTS_VERSION */
  int workers;           /* worker ranks per trainer at most; 0: 1 */
  double link_bandwidth; /* bytes/s a trainer can receive; 0: 1.25e9 (10 Gb/s) */
  double worker_cores;   /* cores of one worker rank; 0: the traced machine's */
  double trainer_cores;  /* cores of the trainer rank; 0: the traced machine's */
  /* Added in version 2: */
  double recv_bandwidth; /* bytes a trainer receives and unpacks per CPU second of its own: the transport's CPU,
                          * charged to the trainer's cores; 0: not charged */
  /* Added in version 3: */
  double send_bandwidth; /* bytes a worker packs and sends per CPU second of its own, charged to the workers'
                          * cores; 0: recv_bandwidth (version 2 charged both ends alike) */
  double min_gain;       /* a cut is taken only when its rate beats the trainer alone by this fraction (the
                          * model's error on one machine, so that a plan does not pick an offload that measures
                          * slower); 0: 0.10; a negative value: any gain */
} sl_offload_opts;
#define SL_OFFLOAD_OPTS_VERSION 3
#define SL_OFFLOAD_OPTS_INIT {SL_OFFLOAD_OPTS_VERSION}

/* The model's choice: where to cut, how many workers, and what it predicts. Rates are elements/s of the traced
 * pipeline's output (one trainer). */
typedef struct sl_offload_plan {
  int cut;                  /* index in the spec's top-level ops of the op the offload goes before; 0: none pays */
  double bytes_per_element; /* shipped over the link per output element at the cut */
  double worker_cpu;        /* CPU seconds per output element above the cut (on the workers) */
  double trainer_cpu;       /* CPU seconds per output element below the cut (on the trainer) */
  int workers;              /* workers the trainer needs (at most opts.workers) */
  double predicted;         /* with the cut and `workers` workers */
  double predicted_local;   /* the trainer alone, no offload */
  const char *limit;        /* what bounds `predicted`: "trainer", "workers" or "link" (static string) */
} sl_offload_plan;

/* Plans an offload from trace `t`: for each cut between top-level ops, the elements/s one trainer gets is the
 * least of its cores over the CPU below the cut, the workers' cores over the CPU above it (each side plus the
 * transport CPU of the bytes shipped, with opts.recv_bandwidth and opts.send_bandwidth), and the link over the
 * bytes shipped per element; it picks the cut with the highest rate (the fewest bytes among equals), if that beats
 * the trainer alone by opts.min_gain, and the fewest workers that reach it. *spec (may be NULL) gets the traced spec with one {"op": "offload"} at the cut (an offload
 * already in it moved there); free with sl_free(). Errors: SL_EINVAL for a trace with no elements. */
SL_EXTERN int sl_plan_offload(char **spec, sl_offload_plan *out, const sl_trace *t, const sl_offload_opts *opts);

#ifdef __cplusplus
}
#endif

#endif
