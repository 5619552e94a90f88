/* sluice/prov.h: the provenance store (ML Metadata schema v10 on SQLite or PostgreSQL), the recording of
 * sluice's own runs, and the analytics over production pipelines (graphlets, wasted compute, the deployment
 * predictor, the pruning simulation, the corpus generator). See docs/provenance.md.
 *
 * Thread rules: an sl_prov handle is used by one thread at a time (it owns one database connection); open one
 * handle per thread. Several processes and threads may write one store at once (SQLite in WAL mode with a busy
 * timeout; PostgreSQL's own concurrency). Results returned by the sl_prov_* query functions are owned by the
 * caller and freed with their _free function (strings and arrays with sl_free); all _free functions accept NULL. */
#ifndef SLUICE_PROV_H
#define SLUICE_PROV_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- enums of MLMD (metadata_store.proto) ---- */
typedef enum { SL_PROV_EXECUTION = 0, SL_PROV_ARTIFACT = 1, SL_PROV_CONTEXT = 2 } sl_prov_kind;
enum { SL_PROV_A_UNKNOWN = 0, SL_PROV_A_PENDING, SL_PROV_A_LIVE, SL_PROV_A_MARKED_FOR_DELETION, SL_PROV_A_DELETED,
       SL_PROV_A_ABANDONED, SL_PROV_A_REFERENCE };
enum { SL_PROV_E_UNKNOWN = 0, SL_PROV_E_NEW, SL_PROV_E_RUNNING, SL_PROV_E_COMPLETE, SL_PROV_E_FAILED,
       SL_PROV_E_CACHED, SL_PROV_E_CANCELED };
enum { SL_PROV_EV_UNKNOWN = 0, SL_PROV_EV_DECLARED_OUTPUT, SL_PROV_EV_DECLARED_INPUT, SL_PROV_EV_INPUT,
       SL_PROV_EV_OUTPUT, SL_PROV_EV_INTERNAL_INPUT, SL_PROV_EV_INTERNAL_OUTPUT, SL_PROV_EV_PENDING_OUTPUT };
typedef enum { SL_PROV_T_UNKNOWN = 0, SL_PROV_T_INT, SL_PROV_T_DOUBLE, SL_PROV_T_STRING, SL_PROV_T_STRUCT,
               SL_PROV_T_PROTO, SL_PROV_T_BOOL } sl_prov_ptype;

/* Names of the enum values ("COMPLETE", "OUTPUT", "INT"...); "?" when out of range. */
SL_EXTERN const char *sl_prov_state_name(sl_prov_kind kind, int state);
SL_EXTERN const char *sl_prov_event_name(int type);

/* ---- the store ---- */
typedef struct sl_prov sl_prov;

enum { SL_PROV_CREATE = 1 }; /* create the database (SQLite file) and the schema when empty */

/* Opens a store. `uri` is a file path, "sqlite:PATH", or a libpq URI "postgresql://..." (a connect_timeout of
 * 5 s applies unless the URI sets one). An existing database must hold MLMD schema version 10: another version
 * is SL_EVERSION with a message naming the version found; a database without the MLMD tables, or a file that
 * is not SQLite, is SL_ECORRUPT; an empty database without SL_PROV_CREATE is SL_ENOTFOUND. */
SL_EXTERN int sl_prov_open(sl_prov **out, const char *uri, unsigned flags);
SL_EXTERN void sl_prov_close(sl_prov *p);
/* "sqlite" or "postgresql". */
SL_EXTERN const char *sl_prov_backend(const sl_prov *p);
/* PostgreSQL stores the ml-metadata library created (1.17.1) have INTEGER int_value columns, which cannot hold the
 * sizes and millisecond times sluice records: writing such an INT is SL_EINVAL naming the property and this call.
 * It widens those columns to BIGINT, as sluice creates them (the library reads and writes either), in one
 * transaction; *changed tells whether there was anything to widen (never on SQLite). Explicit, never implied by
 * opening: `sluice prov init DB --widen-ints`. */
SL_EXTERN int sl_prov_widen_ints(bool *changed, sl_prov *p);

/* Transactions. Every single write below is atomic on its own; group writes with begin/commit for atomicity
 * and speed. On SQLite, begin takes the write lock at once (BEGIN IMMEDIATE), waiting up to the busy timeout. */
SL_EXTERN int sl_prov_begin(sl_prov *p);
SL_EXTERN int sl_prov_commit(sl_prov *p);
SL_EXTERN int sl_prov_rollback(sl_prov *p);

/* Bulk loading (the corpus generator, imports): between sl_prov_bulk_begin and sl_prov_bulk_end, writes favour
 * speed over durability. On SQLite, synchronous=OFF and a large page cache (a crash may lose the last
 * transactions), and inside a transaction the rows are gathered and inserted 1,024 at a time (the same rows and ids
 * as one by one); on PostgreSQL, writes whose results are not needed are pipelined or copied. Either way a write's
 * error may surface later: at a read, the commit, or bulk_end; roll the transaction back then. Into a store without
 * executions, MLMD's secondary indexes are dropped and re-created by bulk_end, the store marked meanwhile (after a
 * load killed before its end, sl_prov_open re-creates them, or refuses a read-only store). Group the writes with
 * begin/commit inside as usual. Begin outside a transaction (SL_EINVAL otherwise). bulk_end restores the settings
 * and returns the first error; it does nothing outside a bulk load. */
SL_EXTERN int sl_prov_bulk_begin(sl_prov *p);
SL_EXTERN int sl_prov_bulk_end(sl_prov *p);

/* A property value. `s` is used for STRING/STRUCT (JSON text), `bytes`/`len` for PROTO. */
typedef struct sl_prov_value {
  sl_prov_ptype type;
  int64_t i; /* INT, BOOL (0/1) */
  double d;  /* DOUBLE */
  const char *s;
  const void *bytes;
  size_t len;
} sl_prov_value;
static inline sl_prov_value sl_prov_int(int64_t v) { sl_prov_value x = {SL_PROV_T_INT, v, 0, 0, 0, 0}; return x; }
static inline sl_prov_value sl_prov_double(double v) { sl_prov_value x = {SL_PROV_T_DOUBLE, 0, v, 0, 0, 0}; return x; }
static inline sl_prov_value sl_prov_string(const char *v) { sl_prov_value x = {SL_PROV_T_STRING, 0, 0, v, 0, 0}; return x; }
static inline sl_prov_value sl_prov_bool(bool v) { sl_prov_value x = {SL_PROV_T_BOOL, v ? 1 : 0, 0, 0, 0, 0}; return x; }

/* A declared property of a type. */
typedef struct sl_prov_type_prop {
  const char *name;
  sl_prov_ptype type;
} sl_prov_type_prop;

/* Finds or creates the type `name` of `kind`, with its declared properties (added when missing) and, when
 * `base` is not NULL, a parent link to the system type `base` ("mlmd.Train", "mlmd.Model"...). *id receives
 * the type's id. SL_EINVAL when a type of that name exists with another kind. */
SL_EXTERN int sl_prov_put_type(int64_t *id, sl_prov *p, sl_prov_kind kind, const char *name, const sl_prov_type_prop *props,
                     size_t nprops, const char *base);
/* The id of type `name` of `kind`; SL_ENOTFOUND when absent. */
SL_EXTERN int sl_prov_type_id(int64_t *id, sl_prov *p, sl_prov_kind kind, const char *name);

/* Inserts nodes. `name` may be NULL for artifacts and executions (MLMD's names are unique per type).
 * Times are milliseconds since the epoch; 0 means now. */
SL_EXTERN int sl_prov_put_artifact(int64_t *id, sl_prov *p, int64_t type_id, const char *uri, const char *name, int state,
                         int64_t create_ms);
SL_EXTERN int sl_prov_put_execution(int64_t *id, sl_prov *p, int64_t type_id, const char *name, int state, int64_t create_ms,
                          int64_t update_ms);
/* Finds or creates the context (type_id, name). */
SL_EXTERN int sl_prov_put_context(int64_t *id, sl_prov *p, int64_t type_id, const char *name, int64_t create_ms);
SL_EXTERN int sl_prov_set_execution_state(sl_prov *p, int64_t execution_id, int state, int64_t update_ms);
/* Sets (inserts or replaces) a declared (`custom` false) or custom property of an artifact, execution or
 * context. */
SL_EXTERN int sl_prov_set_property(sl_prov *p, sl_prov_kind kind, int64_t id, const char *name, bool custom,
                         const sl_prov_value *v);

/* One step of an event path: a key (`key` not NULL) or an index. */
typedef struct sl_prov_step {
  const char *key;
  int64_t index;
} sl_prov_step;
/* Records an event of `type` (SL_PROV_EV_*) between an artifact and an execution, with its path. */
SL_EXTERN int sl_prov_put_event(int64_t *id, sl_prov *p, int64_t artifact_id, int64_t execution_id, int type, int64_t ms,
                      const sl_prov_step *path, size_t npath);
/* Attribution (artifact in context), Association (execution in context), ParentContext. Idempotent. */
SL_EXTERN int sl_prov_attribute(sl_prov *p, int64_t context_id, int64_t artifact_id);
SL_EXTERN int sl_prov_associate(sl_prov *p, int64_t context_id, int64_t execution_id);
SL_EXTERN int sl_prov_set_parent_context(sl_prov *p, int64_t context_id, int64_t parent_context_id);

/* ---- reading ---- */
typedef struct sl_prov_prop {
  char *name;
  bool custom;
  sl_prov_ptype type; /* which member holds the value */
  int64_t i;
  double d;
  char *s;     /* STRING, STRUCT */
  void *bytes; /* PROTO */
  size_t len;
} sl_prov_prop;

/* An artifact, execution, context or type, as read from the store. */
typedef struct sl_prov_node {
  sl_prov_kind kind;
  int64_t id;
  int64_t type_id;
  char *type_name;
  char *name; /* NULL when unnamed */
  char *uri;  /* artifacts only */
  int state;  /* artifact state or execution last_known_state */
  int64_t create_ms, update_ms;
  sl_prov_prop *props;
  size_t nprops;
  int depth; /* lineage results: hops from the start node; 0 otherwise */
} sl_prov_node;

typedef struct sl_prov_event {
  int64_t id, artifact_id, execution_id;
  int type;
  int64_t ms;
  char *path; /* the steps joined: "examples:0" */
  bool reemit; /* the execution only re-emits the artifact (CACHED, or a Resolver) */
} sl_prov_event;

/* A set of nodes (and, for lineage, the events joining them). */
typedef struct sl_prov_list {
  sl_prov_node *nodes;
  size_t n;
  sl_prov_event *events;
  size_t nevents;
} sl_prov_list;
SL_EXTERN void sl_prov_list_free(sl_prov_list *l);

/* A query: every set field must match. Zero/NULL fields are not used. */
typedef struct sl_prov_query {
  const char *type_name; /* nodes of this type */
  int64_t context_id;    /* artifacts attributed to / executions associated with this context; contexts: its
                            children */
  int64_t id;            /* one node */
  const char *name;      /* by name */
  size_t limit;          /* at most this many (0: all), in id order */
} sl_prov_query;

/* Nodes of `kind` matching `q` (NULL: all), ordered by id, with their properties. */
SL_EXTERN int sl_prov_find(sl_prov_list **out, sl_prov *p, sl_prov_kind kind, const sl_prov_query *q);
/* Types of every kind (node.kind is the type's kind; name in type_name; declared properties with type only). */
SL_EXTERN int sl_prov_types(sl_prov_list **out, sl_prov *p);
/* The events of an artifact (kind ARTIFACT) or execution, and the contexts of it, in a list whose nodes are
 * the contexts. */
SL_EXTERN int sl_prov_neighbours(sl_prov_list **out, sl_prov *p, sl_prov_kind kind, int64_t id);

enum { SL_PROV_UP = 1, SL_PROV_DOWN = 2, SL_PROV_BOTH = 3 };
/* Lineage walk from an artifact or execution: upstream (what it was made from), downstream (what was made
 * from it) or both, up to `max_depth` hops (0: unlimited). The list holds the start node (depth 0), every
 * artifact and execution reached with its depth, and the events crossed. SL_ENOTFOUND for an unknown id. */
SL_EXTERN int sl_prov_lineage(sl_prov_list **out, sl_prov *p, sl_prov_kind kind, int64_t id, int direction, int max_depth);

/* The whole store as one JSON document (types, artifacts, executions, contexts, events with paths,
 * attributions, associations, parent contexts, properties). *json is freed with sl_free. */
SL_EXTERN int sl_prov_export_json(char **json, sl_prov *p);
/* A list (nodes with kind and depth, events) as JSON; *json freed with sl_free. */
SL_EXTERN int sl_prov_list_to_json(char **json, const sl_prov_list *l);

/* ---- sluice's own runs ---- */
typedef struct sl_prov_output {
  const char *path;
  const char *type; /* artifact type: "sluice.Trace", "sluice.Spec" (tuned spec), or another name */
} sl_prov_output;

/* One run of sluice run/trace/optimize. Strings are borrowed for the call. */
typedef struct sl_prov_run {
  int version;          /* SL_PROV_RUN_VERSION */
  const char *kind;     /* execution type: "sluice.Run" or "sluice.Optimize" (NULL: "sluice.Run") */
  const char *pipeline; /* the spec's name: the `pipeline` context */
  const char *spec_path; /* optional: the spec file, recorded as an input artifact of type sluice.Spec */
  const char *const *inputs; /* data files read: artifacts of type sluice.Data with size and mtime */
  size_t ninputs;
  const sl_prov_output *outputs;
  size_t noutputs;
  double throughput;     /* elements per second */
  const char *bottleneck; /* the bottleneck op, NULL if none */
  double cpu_seconds;
  double elapsed; /* wall seconds */
  bool failed;
  const char *error; /* when failed */
  int64_t start_ms;  /* 0: now minus elapsed */
  /* Version 2 (version 1 structs are still accepted): a run recorded in two steps, so that one killed midway stays
   * visible. `running` records its start: the execution in state RUNNING (property state "RUNNING") with its spec
   * and inputs, no figures. A later call with `execution_id` set to that id finishes it: state COMPLETE or FAILED,
   * figures and outputs (spec_path and inputs are not recorded again; start is the execution's create time). */
  bool running;
  int64_t execution_id; /* 0: a new execution */
  bool canceled;        /* stopped before its end by the user (Ctrl-C, SIGTERM): state CANCELED, unless failed */
  double busiest_load; /* the busiest op's CPU over (its parallelism x elapsed): 1 = at its limit; 0: unknown */
  /* Version 3: the online tuner that ran (`run --tuner`), recorded when the run is finished. NULL: none. */
  const char *tuner;         /* its name ("sluice", "autotune"): custom property tuner */
  int tuner_solves;          /* its solves (re-optimisations): custom property tuner_solves */
  const char *tuner_changes; /* optional: its changes, a JSON array (sl_tuner_log's JSON, SL_EINVAL if not an
                              * array), in custom property tuner_changes as STRING: MLMD values have no list type
                              * and a STRUCT's top level is a map, so the list is JSON text, as `run --json` gives */
} sl_prov_run;
#define SL_PROV_RUN_VERSION 3
#define SL_PROV_RUN_INIT {SL_PROV_RUN_VERSION}

/* Records a run into the store at `uri` (created when missing) in one transaction: an execution of type
 * run->kind (state COMPLETE or FAILED, custom properties throughput, bottleneck, cpu_seconds, elapsed, error)
 * (and busiest_load when known; tuner, tuner_solves, tuner_changes when run->tuner is set) associated with a `pipeline` context named run->pipeline and a `pipeline_run` context, INPUT events from the
 * input files (each stat'ed: uri, custom properties size and mtime; SL_EIO naming a file that cannot be
 * stat'ed) and OUTPUT events to the outputs. *execution_id (may be NULL) receives the execution's id. Safe to
 * call from several processes at once on one store. */
SL_EXTERN int sl_prov_record_run(int64_t *execution_id, const char *uri, const sl_prov_run *run);

/* ---- analytics (docs/provenance.md defines every term) ---- */

/* One model graphlet. Ids are MLMD execution ids. */
typedef struct sl_prov_graphlet {
  int64_t trainer_id;
  int64_t pipeline_ctx; /* the pipeline context id (0 if none) */
  const char *pipeline; /* its name; owned by the set */
  int64_t start_ms;     /* the decision point: trainer creation */
  int64_t outcome_ms;   /* when the outcome was recorded (last downstream update) */
  int trainer_state;
  bool pushed;
  bool has_pusher; /* a Pusher/Deploy execution or PushedModel artifact is downstream */
  double cost;       /* all its executions */
  double prunable;   /* the trainer and everything downstream: what pruning saves */
  int64_t *upstream; size_t nupstream;     /* producers, transitively (and run steps before the trainer) */
  int64_t *downstream; size_t ndownstream; /* same-run consumers of the model, transitively */
  int64_t *spans; size_t nspans;           /* input spans (Examples' span property) */
  double true_p; /* a generator's true P(push) where recorded (NaN otherwise) */
} sl_prov_graphlet;

typedef struct sl_prov_graphlets sl_prov_graphlets;
/* Loads the store (or the one pipeline context named `pipeline` when not NULL) with set-based queries and
 * computes every graphlet, outcome, cost, waste and feature. SL_ENOTFOUND when the store holds no trainer
 * execution (neither a type named *Trainer nor one based on mlmd.Train) or the pipeline is unknown. */
SL_EXTERN int sl_prov_graphlets_load(sl_prov_graphlets **out, sl_prov *p, const char *pipeline);
SL_EXTERN void sl_prov_graphlets_free(sl_prov_graphlets *g);
SL_EXTERN size_t sl_prov_graphlets_count(const sl_prov_graphlets *g);
/* The i-th graphlet, in (pipeline, start time) order. Valid while the set lives. */
SL_EXTERN const sl_prov_graphlet *sl_prov_graphlets_at(const sl_prov_graphlets *g, size_t i);
/* "cpu_seconds" when every execution's cost came from that property, "wall" when none did, "mixed" otherwise. */
SL_EXTERN const char *sl_prov_graphlets_cost_basis(const sl_prov_graphlets *g);

/* Features (docs/provenance.md), computed only from what was recorded before each graphlet's decision point. */
SL_EXTERN size_t sl_prov_feature_count(void);
SL_EXTERN const char *sl_prov_feature_name(size_t j);
/* The feature row of graphlet i (sl_prov_feature_count() values; NaN where unknown). */
SL_EXTERN const double *sl_prov_graphlets_features(const sl_prov_graphlets *g, size_t i);

/* Wasted computation (the cost of every execution none of whose graphlets pushed). */
typedef struct sl_prov_waste_row {
  const char *name; /* pipeline or component type (short name); owned by the report */
  double total, wasted;
} sl_prov_waste_row;
typedef struct sl_prov_waste {
  double total, wasted;   /* over all executions */
  double unattributed;    /* cost of executions in no graphlet (counted as wasted) */
  sl_prov_waste_row *pipelines; size_t npipelines;   /* by wasted, descending */
  sl_prov_waste_row *components; size_t ncomponents; /* by wasted, descending */
} sl_prov_waste;
SL_EXTERN int sl_prov_waste_compute(sl_prov_waste **out, const sl_prov_graphlets *g);
SL_EXTERN void sl_prov_waste_free(sl_prov_waste *w);

/* The characterization (`sluice prov stats`). */
typedef struct sl_prov_topology {
  char *components; /* sorted short type names joined by "," */
  size_t count;
} sl_prov_topology;
typedef struct sl_prov_stats {
  size_t pipelines, graphlets, executions, artifacts;
  double days;                    /* from the first to the last execution */
  double lifespan_days[5];        /* min, p25, median, p75, max of per-pipeline lifespans */
  double graphlets_per_pipeline[7]; /* min, p25, median, p75, p90, max, mean */
  /* Daily rates, NaN when the store spans less than a day (`days` < 1): a rate over minutes extrapolated to a
   * day says nothing the span and the counts do not (a 10-minute store would read "880 graphlets per day"). */
  double runs_per_day;            /* graphlets per pipeline per day of its lifespan (at least a day), mean */
  double graphlets_per_day;       /* all pipelines together: graphlets / days */
  double push_rate;               /* share of graphlets that pushed */
  double failed_trainers;         /* share of graphlets whose trainer failed */
  sl_prov_waste_row *compute; size_t ncompute; /* compute by component type (total), descending */
  double total_compute;
  sl_prov_topology *topologies; size_t ntopologies; /* by count, descending */
} sl_prov_stats;
SL_EXTERN int sl_prov_stats_compute(sl_prov_stats **out, const sl_prov_graphlets *g);
SL_EXTERN void sl_prov_stats_free(sl_prov_stats *s);

/* The predictor: an XGBoost random forest (booster gbtree, many parallel trees, row and column subsampling,
 * eta 1, one boosting round) over the features, trained on the earliest `train_share` of graphlets by decision
 * time and tested on the rest. A field left 0 takes the default written beside it. */
typedef struct sl_prov_train_opts {
  int version;         /* SL_PROV_TRAIN_OPTS_VERSION */
  double train_share;  /* share of graphlets (earliest first) that train, in (0, 1); 0: 0.7 */
  int trees;           /* parallel trees of the forest; 0: 100 */
  int max_depth;       /* 0: 8 */
  double subsample;    /* row subsampling per tree, in (0, 1]; 0: 0.63 */
  double colsample;    /* colsample_bynode, in (0, 1]; 0: 0.6 */
  int threads;         /* XGBoost threads; 0: 2 */
  uint64_t seed;       /* 0: 42 (so seed 0 cannot be asked for; it would train as 42) */
} sl_prov_train_opts;
#define SL_PROV_TRAIN_OPTS_VERSION 1
#define SL_PROV_TRAIN_OPTS_INIT {SL_PROV_TRAIN_OPTS_VERSION}

typedef struct sl_prov_model sl_prov_model;
typedef struct sl_prov_train_report {
  size_t ntrain, ntest;
  int64_t train_from_ms, train_to_ms, test_from_ms, test_to_ms;
  double train_push_rate, test_push_rate;
  double roc_auc, pr_auc;
  double *importance; /* per feature (sl_prov_feature_count()), total gain normalised to sum 1 */
} sl_prov_train_report;
SL_EXTERN int sl_prov_train(sl_prov_model **model, sl_prov_train_report *rep, const sl_prov_graphlets *g,
                  const sl_prov_train_opts *o);
SL_EXTERN void sl_prov_train_report_dispose(sl_prov_train_report *r);
/* Saves/loads the model as one JSON file: format, feature list, training and test windows, metrics, the chosen
 * threshold and the XGBoost model (its JSON). Loading checks the feature list matches this build's. */
SL_EXTERN int sl_prov_model_save(const sl_prov_model *m, const char *path);
SL_EXTERN int sl_prov_model_load(sl_prov_model **out, const char *path);
SL_EXTERN void sl_prov_model_free(sl_prov_model *m);
/* P(push) for one feature row. */
SL_EXTERN int sl_prov_model_predict(double *p, sl_prov_model *m, const double *features);
/* The test window start (ms) the model recorded, and its chosen threshold (set by sl_prov_simulate). */
SL_EXTERN int64_t sl_prov_model_test_from(const sl_prov_model *m);
SL_EXTERN double sl_prov_model_threshold(const sl_prov_model *m);
SL_EXTERN void sl_prov_model_set_threshold(sl_prov_model *m, double t);

/* The pruning simulation over the test window (graphlets with start >= the model's test start). */
typedef struct sl_prov_sim_row {
  double threshold;
  size_t pruned;          /* graphlets pruned */
  double saved_waste;     /* wasted compute saved (pruned graphlets that did not push) */
  double saved_share;     /* of the window's wasted compute */
  double lost_compute;    /* compute of pruned graphlets that would have pushed */
  double push_recall, cadence, staleness_ratio;
  bool fresh; /* cadence >= 0.99 and staleness_ratio <= 1.05 */
} sl_prov_sim_row;
typedef struct sl_prov_sim {
  size_t ngraphlets, npushes;
  double window_waste;   /* wasted compute of the window */
  double prunable_waste; /* the part pruning can reach (trainer and downstream of non-pushing graphlets) */
  sl_prov_sim_row *rows; size_t nrows;
  int best;              /* row with the largest saving that keeps freshness (-1: none) */
  int best_recall99;     /* the same, also keeping push recall >= 99% (-1: none) */
  bool has_truth;        /* the corpus carries true probabilities */
  sl_prov_sim_row *truth_rows; size_t ntruth;
  int truth_best, truth_best_recall99;
} sl_prov_sim;
/* Sweeps thresholds 0, 0.01, ... 0.99 (the model's predictions, and the true probabilities where recorded), and
 * sets the model's threshold to the largest saving that keeps freshness and 99% push recall. */
SL_EXTERN int sl_prov_simulate(sl_prov_sim **out, const sl_prov_graphlets *g, sl_prov_model *m);
SL_EXTERN void sl_prov_sim_free(sl_prov_sim *s);

/* The decision for the next run of `pipeline` (a `pipeline` context name): features as if its trainer started at
 * `now_ms` (0: just after the pipeline's last record), loading only that pipeline, and P(push) from the model (or,
 * with m NULL, the pipeline's Laplace-smoothed push rate among earlier graphlets alike in having new data).
 * `threshold` < 0 takes the model's threshold (0.1 without a model); train = P(push) >= threshold.
 * SL_ENOTFOUND for an unknown pipeline or one without graphlets. */
typedef struct sl_prov_decision {
  double p_push;
  double threshold;
  bool train;
  double *features; /* sl_prov_feature_count() values, owned by the caller: free with sl_free */
} sl_prov_decision;
SL_EXTERN int sl_prov_should_train(sl_prov_decision *out, sl_prov *p, const char *pipeline, sl_prov_model *m, double threshold,
                         int64_t now_ms);

/* ---- the synthetic corpus (docs/corpus.md) ---- */
/* A field left 0 takes the default written beside it. */
typedef struct sl_prov_gen_opts {
  int version;   /* SL_PROV_GEN_OPTS_VERSION */
  int pipelines; /* 1..1000000; 0: 50 (3000 at paper scale) */
  int days;      /* 1..3650; 0: 120 */
  uint64_t seed; /* 0: 1 (seeds 0 and 1 make the same corpus) */
  void (*progress)(int done, int total, void *payload); /* after each pipeline; NULL: none */
  void *payload;
  /* Version 2 (version 1 structs are still accepted). Optional: when *cancel becomes nonzero (a signal handler may
   * set it) the corpus stops before its next pipeline with SL_ECANCELED; the pipelines written so far stay, each
   * whole (one transaction each), and the bulk load is ended (indexes re-created). NULL: never. */
  const volatile sig_atomic_t *cancel;
} sl_prov_gen_opts;
#define SL_PROV_GEN_OPTS_VERSION 2
#define SL_PROV_GEN_OPTS_INIT {SL_PROV_GEN_OPTS_VERSION}
typedef struct sl_prov_gen_report {
  int64_t pipelines, runs, executions, artifacts, events, pushed;
  int64_t cause[6]; /* non-pushes by cause: trainer failure, no new data, drift, structure change, code change,
                       other */
} sl_prov_gen_report;
/* Writes the corpus into store p (types found or created; one transaction per pipeline, inside a bulk load, so
 * call it outside a transaction). `rep` may be NULL. Errors: SL_EVERSION for options of another version, SL_EINVAL
 * naming an option out of range, the store's errors. */
SL_EXTERN int sl_prov_gen(sl_prov_gen_report *rep, sl_prov *p, const sl_prov_gen_opts *o);

#ifdef __cplusplus
}
#endif
#endif
