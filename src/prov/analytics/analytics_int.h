/* prov/analytics/analytics_int.h: the in-memory image of a store that the analytics work on (loaded once with
 * set-based queries by graphlets_load.c) and the graphlet set built from it (graphlets.c), shared by the loader,
 * the builder, features.c, waste.c, stats.c and predict.c. */
#ifndef SL_PROV_AN_INTERNAL_H
#define SL_PROV_AN_INTERNAL_H

#include "prov/store/store_int.h"

/* Type flags, from the type's name or its base type (ParentType). */
enum {
  SL__AN_TRAINER = 1 << 0,   /* *Trainer or mlmd.Train */
  SL__AN_PUSHER = 1 << 1,    /* *Pusher or mlmd.Deploy */
  SL__AN_RESOLVER = 1 << 2,  /* *Resolver / *resolver.Resolver */
  SL__AN_MODEL = 1 << 3,     /* artifact Model or mlmd.Model */
  SL__AN_PUSHED = 1 << 4,    /* artifact PushedModel */
  SL__AN_EXAMPLES = 1 << 5,  /* artifact Examples or mlmd.Dataset */
  SL__AN_ANOMALIES = 1 << 6, /* artifact ExampleAnomalies */
  SL__AN_SCHEMA = 1 << 7,    /* artifact Schema */
};

typedef struct sl__an_type {
  char *name;
  const char *short_name; /* points into name: after the last '.' for tfx.* names */
  int kind;
  unsigned flags;
} sl__an_type;

typedef struct sl__an_exec {
  int64_t id;
  int64_t create, update;
  double cost;
  double true_p;   /* NaN unless recorded */
  uint64_t code_fp; /* 0 unless recorded */
  int32_t type, pipe, run;
  int8_t state;
  bool cpu_known, in_graphlet, useful;
} sl__an_exec;

typedef struct sl__an_art {
  int64_t id, create, span; /* span INT64_MIN when absent */
  int32_t type, producer;   /* producer exec index or -1 */
  int32_t anomalies;        /* -1 when absent */
  int8_t pushed;            /* -1 when absent */
  bool side;                /* a Transform's pre/post_transform_* Schema, statistics or anomalies (not the pipeline's) */
} sl__an_art;

typedef struct sl__an_event {
  int32_t art, exec;
  int64_t ms;
  int8_t type;
  bool baseline;
} sl__an_event;

/* Per graphlet, beyond the public struct: the pre-decision facts features are built from. */
typedef struct sl__an_graphlet {
  int32_t trainer; /* exec index */
  int32_t pipe;
  size_t up_off, nup, down_off, ndown, span_off, nspan;
  int64_t schema;    /* newest Schema artifact id upstream, 0 none */
  double anomalies;  /* NaN when no ExampleAnomalies seen */
  uint64_t comp_hash; /* the pre-decision component set */
  int ncomp;
} sl__an_graphlet;

#define SL__AN_NFEAT 16

struct sl_prov_graphlets {
  sl__an_type *types;
  size_t ntypes;
  sl__an_exec *ex;
  size_t nex;
  sl__an_art *art;
  size_t nart;
  sl__an_event *ev;
  size_t nev;
  /* CSR: events by execution */
  size_t *ex_ev_off;
  int32_t *ex_ev;
  char **pipes; /* pipeline context names, by pipe index */
  int64_t *pipe_ids;
  size_t npipes;
  size_t nruns;
  /* graphlets */
  sl_prov_graphlet *g;
  sl__an_graphlet *gi;
  size_t ng;
  int64_t *pool; /* ids of upstream/downstream executions and spans */
  size_t npool;
  double *feat; /* ng x SL__AN_NFEAT */
  int cost_basis; /* bit 1: cpu_seconds seen, bit 2: wall seen */
};

/* Growable arrays: grows *v (of *cap elements of `elem` bytes) to hold `need`; SL_ENOMEM on failure. */
int sl__an_grow(void **v, size_t *cap, size_t need, size_t elem);

/* id -> dense index tables. Ids are MLMD autoincrement keys: dense enough for a direct table. */
typedef struct sl__an_idmap {
  int32_t *ix; /* -1 where no row has that id */
  int64_t max;
} sl__an_idmap;
/* Builds the table of n ids read `stride` bytes apart; SL_ERROR for ids beyond 2^31. */
int sl__an_idmap_build(sl__an_idmap *m, const int64_t *ids, size_t n, size_t stride);
static inline int32_t sl__an_idmap_get(const sl__an_idmap *m, int64_t id) {
  return id >= 0 && id <= m->max ? m->ix[id] : -1;
}

/* Loads the store's tables into g's flat arrays (graphlets_load.c); `ctx` (0: all) restricts to one pipeline
 * context. */
int sl__an_load_store(sl_prov_graphlets *g, sl_prov *p, int64_t ctx);
/* The id of the pipeline context named `pipeline`; SL_ENOTFOUND (saying which) when there is none. */
int sl__an_pipeline_ctx(int64_t *ctx, sl_prov *p, const char *pipeline);
/* Loads and builds; `pipeline` restricts to one pipeline context. */
int sl__an_load(sl_prov_graphlets **out, sl_prov *p, const char *pipeline);

/* Features for a decision at time t in pipeline `pipe` given the pre-decision facts; `prior` is the list of that
 * pipeline's graphlet indices in start order, of which those starting before t are used. */
typedef struct sl__an_facts {
  int64_t t;
  const int64_t *spans;
  size_t nspans;
  int64_t schema;
  double anomalies;
  uint64_t comp_hash;
  int ncomp;
  uint64_t code_fp;
} sl__an_facts;
/* A small name -> (total, wasted) accumulator (waste.c, characterize.c); names are borrowed from the set. */
typedef struct sl__an_acc {
  sl_prov_waste_row *rows;
  size_t n, cap;
  int32_t *slot; /* per key index (pipeline or type) -> row, -1 unset */
} sl__an_acc;
int sl__an_acc_add(sl__an_acc *a, int32_t key, const char *name, double total, double wasted);
/* qsort order of sl_prov_waste_row: total descending, then name. */
int sl__an_by_total(const void *x, const void *y);

/* The pruning simulation with given predictions, one per graphlet starting at or after `from`, in set order. */
int sl__prov_simulate_p(sl_prov_sim **out, const sl_prov_graphlets *g, int64_t from, const double *pred);
/* sl_prov_train on the features whose bit is set in `keep` (bit j: feature j) only: the ablation's feature groups.
 * The model remembers the mask; sl_prov_simulate and sl_prov_model_predict apply it. */
int sl__prov_train_masked(sl_prov_model **model, sl_prov_train_report *rep, const sl_prov_graphlets *g,
                          const sl_prov_train_opts *o, uint32_t keep);
void sl__an_features(const sl_prov_graphlets *g, const size_t *prior, size_t nprior, const sl__an_facts *f,
                     double *out);

#endif
