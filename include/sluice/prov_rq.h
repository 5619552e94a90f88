/* sluice/prov_rq.h: the production-pipeline questions answered from a provenance store beyond graphlets and waste:
 * how much repeated executions re-process the same input (overlap), which feature groups carry the deployment
 * prediction (ablation), and how the runs sluice recorded used their machine (fleet). See docs/provenance.md.
 * Results are owned by the caller and freed with their _free function (which accepts NULL). */
#ifndef SLUICE_PROV_RQ_H
#define SLUICE_PROV_RQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "prov.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- overlap: re-processed input (docs/provenance.md has the definition) ---- */
typedef struct sl_prov_overlap_row {
  const char *name;     /* execution type (short name) or pipeline; owned by the report */
  size_t executions;    /* COMPLETE executions with Examples inputs */
  size_t with_overlap;  /* of those, with at least one re-processed Examples input */
  double mean_overlap;  /* mean over them of re-processed / all Examples inputs */
  double cost;          /* their cost */
  double recomputed_cost; /* sum of cost x overlap */
  double reusable_cost; /* the part kept output could have saved (executions that materialize Examples) */
} sl_prov_overlap_row;
typedef struct sl_prov_overlap {
  sl_prov_overlap_row total;
  double all_compute;                                   /* the cost of every execution in the set */
  sl_prov_overlap_row *types; size_t ntypes;            /* by recomputed cost, descending */
  sl_prov_overlap_row *pipelines; size_t npipelines;    /* by recomputed cost, descending */
} sl_prov_overlap;
/* Computes the overlap of the executions in a loaded set (sl_prov_graphlets_load), without touching the store. */
SL_EXTERN int sl_prov_overlap_compute(sl_prov_overlap **out, const sl_prov_graphlets *g);
SL_EXTERN void sl_prov_overlap_free(sl_prov_overlap *o);

/* ---- ablation: the predictor on feature groups ---- */
enum { SL_PROV_FG_INPUT = 1, SL_PROV_FG_HISTORY = 2, SL_PROV_FG_CODE = 4 };
/* The group a feature belongs to (SL_PROV_FG_*), 0 for an index out of range. */
SL_EXTERN unsigned sl_prov_feature_group(size_t j);

typedef struct sl_prov_ablation_opts {
  int version;                 /* SL_PROV_ABLATION_OPTS_VERSION */
  int seeds;                   /* repetitions with seeds 1..K; 0: 5 */
  sl_prov_train_opts train;    /* the forest; version 0 or fields 0 take sl_prov_train's defaults (seed is set) */
} sl_prov_ablation_opts;
#define SL_PROV_ABLATION_OPTS_VERSION 1
#define SL_PROV_ABLATION_OPTS_INIT {SL_PROV_ABLATION_OPTS_VERSION, 0, SL_PROV_TRAIN_OPTS_INIT}

typedef struct sl_prov_ablation_group {
  const char *name;     /* "input", "history", "code", "input+history", "all" */
  unsigned mask;        /* SL_PROV_FG_* bits */
  size_t nfeatures;
  double roc_auc, roc_auc_sd;   /* mean and standard deviation over the seeds */
  double pr_auc, pr_auc_sd;
  double saved_share, saved_share_sd; /* wasted compute saved at the largest freshness-keeping threshold (0: none) */
} sl_prov_ablation_group;
typedef struct sl_prov_ablation {
  int seeds;
  size_t ntrain, ntest;
  sl_prov_ablation_group *groups; size_t ngroups;
} sl_prov_ablation;
/* Trains and tests the predictor (the same time-ordered split as sl_prov_train) on each feature group, the
 * other features withheld, K times with seeds 1..K. */
SL_EXTERN int sl_prov_ablation_run(sl_prov_ablation **out, const sl_prov_graphlets *g, const sl_prov_ablation_opts *o);
SL_EXTERN void sl_prov_ablation_free(sl_prov_ablation *a);

/* ---- fleet: the runs sluice recorded (`sluice run --record`) ---- */
typedef struct sl_prov_fleet_op {
  char *op;      /* the busiest op as recorded ("ops[3] (map decode_jpeg)") */
  size_t count;  /* runs where it was the busiest */
} sl_prov_fleet_op;
typedef struct sl_prov_fleet_row {
  char *pipeline;        /* the spec's name; "(all)" for the overall row */
  size_t runs;           /* COMPLETE sluice.Run executions */
  size_t failed;
  size_t known;          /* runs that recorded the busiest op's load */
  size_t input_bound;    /* of those, the busiest op at its limit (busiest_load >= 0.8) */
  double cpu_seconds, elapsed;
  double throughput;     /* median of the runs' elements/s */
  double bound;          /* the best known achievable rate: the largest LP bound recorded, or the best throughput
                            of a sluice.Optimize of the spec; 0 unknown */
  double headroom;       /* bound / median throughput; 0 unknown. Overall: the pipelines' headroom weighted by
                            their runs (bound 0) */
  sl_prov_fleet_op *ops; size_t nops; /* by count, descending */
} sl_prov_fleet_row;
typedef struct sl_prov_fleet {
  sl_prov_fleet_row all;
  sl_prov_fleet_row *pipelines; size_t npipelines; /* by runs, descending */
} sl_prov_fleet;
/* Reads the sluice.Run and sluice.Optimize executions of the store. A store without recorded runs gives an empty
 * report (no error). */
SL_EXTERN int sl_prov_fleet_compute(sl_prov_fleet **out, sl_prov *p);
SL_EXTERN void sl_prov_fleet_free(sl_prov_fleet *f);

#ifdef __cplusplus
}
#endif
#endif
