/* prov/analytics/analytics_int.h: the in-memory image of a store that the analytics work on (loaded once with set-based
 * queries by graphlets.c) and the graphlet set built from it, shared by graphlets.c, report.c and predict.c. */
#ifndef SL_PROV_AN_INTERNAL_H
#define SL_PROV_AN_INTERNAL_H

#include "prov/store/store_int.h"

/* Type flags, from the type's name or its base type (ParentType). */
enum {
  TF_TRAINER = 1 << 0,   /* *Trainer or mlmd.Train */
  TF_PUSHER = 1 << 1,    /* *Pusher or mlmd.Deploy */
  TF_RESOLVER = 1 << 2,  /* *Resolver / *resolver.Resolver */
  TF_MODEL = 1 << 3,     /* artifact Model or mlmd.Model */
  TF_PUSHED = 1 << 4,    /* artifact PushedModel */
  TF_EXAMPLES = 1 << 5,  /* artifact Examples or mlmd.Dataset */
  TF_ANOMALIES = 1 << 6, /* artifact ExampleAnomalies */
  TF_SCHEMA = 1 << 7,    /* artifact Schema */
};

typedef struct an_type {
  char *name;
  const char *short_name; /* points into name: after the last '.' for tfx.* names */
  int kind;
  unsigned flags;
} an_type;

typedef struct an_exec {
  int64_t id;
  int64_t create, update;
  double cost;
  double true_p;   /* NaN unless recorded */
  uint64_t code_fp; /* 0 unless recorded */
  int32_t type, pipe, run;
  int8_t state;
  bool cpu_known, in_graphlet, useful;
} an_exec;

typedef struct an_art {
  int64_t id, create, span; /* span INT64_MIN when absent */
  int32_t type, producer;   /* producer exec index or -1 */
  int32_t anomalies;        /* -1 when absent */
  int8_t pushed;            /* -1 when absent */
} an_art;

typedef struct an_event {
  int32_t art, exec;
  int64_t ms;
  int8_t type;
  bool baseline;
} an_event;

/* Per graphlet, beyond the public struct: the pre-decision facts features are built from. */
typedef struct an_g {
  int32_t trainer; /* exec index */
  int32_t pipe;
  size_t up_off, nup, down_off, ndown, span_off, nspan;
  int64_t schema;    /* newest Schema artifact id upstream, 0 none */
  double anomalies;  /* NaN when no ExampleAnomalies seen */
  uint64_t comp_hash; /* the pre-decision component set */
  int ncomp;
} an_g;

#define SL_NFEAT 16

struct sl_prov_graphlets {
  an_type *types;
  size_t ntypes;
  an_exec *ex;
  size_t nex;
  an_art *art;
  size_t nart;
  an_event *ev;
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
  an_g *gi;
  size_t ng;
  int64_t *pool; /* ids of upstream/downstream executions and spans */
  size_t npool;
  double *feat; /* ng x SL_NFEAT */
  int cost_basis; /* bit 1: cpu_seconds seen, bit 2: wall seen */
};

/* Loads and builds; `pipeline` restricts to one pipeline context. */
int sl__an_load(sl_prov *p, sl_prov_graphlets **out, const char *pipeline);

/* Features for a decision at time t in pipeline `pipe` given the pre-decision facts; `prior` is the list of that
 * pipeline's graphlet indices in start order, of which those starting before t are used. */
typedef struct an_facts {
  int64_t t;
  const int64_t *spans;
  size_t nspans;
  int64_t schema;
  double anomalies;
  uint64_t comp_hash;
  int ncomp;
  uint64_t code_fp;
} an_facts;
/* The pruning simulation with given predictions, one per graphlet starting at or after `from`, in set order. */
int sl__prov_simulate_p(const sl_prov_graphlets *g, int64_t from, const double *pred, sl_prov_sim **out);
void sl__an_features(const sl_prov_graphlets *g, const size_t *prior, size_t nprior, const an_facts *f, double *out);

#endif
