/* prov/corpus/gen_prov.c: the synthetic production corpus (`sluice prov gen`): TFX pipelines written into an MLMD
 * store the way TFX writes them (contexts pipeline/pipeline_run/node, component execution types, Examples with
 * span/version/split_names, blessings, PushedModel with `pushed`, INPUT/OUTPUT events with [key, index] paths,
 * `cpu_seconds`), through the public store API only. Every modelling assumption and its parameter is documented in
 * docs/corpus.md; the constants below carry the same names. Deterministic for a seed: each pipeline draws from its
 * own stream. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/core_int.h"
#include "sluice/fn.h" /* sl_rng */
#include "sluice/prov.h"

/* ---- parameters (docs/corpus.md explains each) ---- */
#define T_START_MS 1736121600000LL /* 2025-01-06 00:00 UTC */
#define P_FULL_LIFE 0.6            /* share of pipelines alive the whole window */
#define P_LATE_START 0.2           /* share starting late (the rest end early) */
#define RATE_MU (-0.02)            /* log-normal runs/day: mean ~1.47/day alive, ~1.25/day over the window */
#define RATE_SIGMA 0.9
#define RATE_MIN 0.1
#define RATE_MAX 24.0
#define P_TRANSFORM 0.7
#define P_TUNER 0.15
#define P_TUNER_RUN 0.1
#define P_INFRAVAL 0.35
#define P_PUSHER 0.93
#define P_EVALUATOR 0.9
#define P_WARM_START 0.3
#define NODATA_MIN 0.03 /* per-pipeline chance a run finds no new span: uniform in [NODATA_MIN, NODATA_MAX] */
#define NODATA_MAX 0.28
#define NODATA_FACTOR 0.01
#define DRIFT_AR 0.8
#define DRIFT_NOISE 0.35
#define DRIFT_SHOCK_P 0.05
#define DRIFT_SHOCK_SD 1.5
#define DRIFT_OK 0.8    /* below: no effect on blessing */
#define DRIFT_BAD 1.1   /* above: blessing factor DRIFT_FLOOR */
#define DRIFT_FLOOR 0.01
#define ANOM_BASE 0.1   /* anomalies ~ Poisson(ANOM_BASE + ANOM_SLOPE * max(0, drift - DRIFT_OK)) */
#define ANOM_SLOPE 12.0
#define P_STRUCT_CHANGE 0.012
#define STRUCT_FACTOR1 0.05
#define STRUCT_FACTOR2 0.3
#define P_SCHEMA_CHANGE 0.02
#define SCHEMA_FACTOR 0.3
#define P_CODE_CHANGE 0.15
#define CODE_FACTOR 0.92
#define P_TRAINER_FAIL 0.03
#define P_TRAINER_FAIL_STRUCT 0.1
#define P_INFRA_OK 0.97
#define P_PUSH_OK 0.99
#define BASE_A 0.8 /* base push propensity b = BASE_A + BASE_B * sqrt(u) */
#define BASE_B 0.18

enum { C_EXAMPLEGEN, C_STATS, C_SCHEMA, C_VALIDATOR, C_TRANSFORM, C_TUNER, C_RESOLVER, C_TRAINER, C_EVALUATOR,
       C_INFRA, C_PUSHER, C_N };
static const char *const COMP_TYPE[C_N] = {
    "tfx.components.example_gen.csv_example_gen.component.CsvExampleGen",
    "tfx.components.statistics_gen.component.StatisticsGen",
    "tfx.components.schema_gen.component.SchemaGen",
    "tfx.components.example_validator.component.ExampleValidator",
    "tfx.components.transform.component.Transform",
    "tfx.components.tuner.component.Tuner",
    "tfx.dsl.components.common.resolver.Resolver",
    "tfx.components.trainer.component.Trainer",
    "tfx.components.evaluator.component.Evaluator",
    "tfx.components.infra_validator.component.InfraValidator",
    "tfx.components.pusher.component.Pusher",
};
static const char *const COMP_NODE[C_N] = {"CsvExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator",
                                           "Transform", "Tuner", "Resolver", "Trainer", "Evaluator",
                                           "InfraValidator", "Pusher"};
static const char *const COMP_BASE[C_N] = {NULL, NULL, NULL, NULL, "mlmd.Transform", NULL, NULL, "mlmd.Train",
                                           "mlmd.Evaluate", NULL, "mlmd.Deploy"};
/* CPU seconds of each component at pipeline scale 1 (the Trainer and Transform also grow with the window). */
static const double COMP_CPU[C_N] = {400, 250, 20, 30, 300, 8000, 1, 3000, 400, 150, 10};

enum { A_EXAMPLES, A_STATS, A_ANOMALIES, A_SCHEMA, A_TGRAPH, A_HPARAMS, A_MODEL, A_MODELRUN, A_EVAL, A_BLESSING,
       A_INFRA, A_PUSHED, A_N };
static const char *const ART_TYPE[A_N] = {"Examples", "ExampleStatistics", "ExampleAnomalies", "Schema",
                                          "TransformGraph", "HyperParameters", "Model", "ModelRun",
                                          "ModelEvaluation", "ModelBlessing", "InfraBlessing", "PushedModel"};
static const char *const ART_BASE[A_N] = {"mlmd.Dataset", "mlmd.Statistics", NULL, NULL, NULL, NULL, "mlmd.Model",
                                          NULL, "mlmd.Metrics", NULL, NULL, NULL};
static const char *const DOMAINS[] = {"ads", "search", "feed", "spam", "fraud", "churn", "ranking", "vision",
                                      "speech", "forecast"};

/* ---- a small deterministic generator: sl_rng, under the short names this file uses ---- */
typedef sl_rng rng;
static uint64_t rnext(rng *r) { return sl_rng_u64(r); }
static double runif(rng *r) { return sl_rng_uniform(r); }
static double rnorm(rng *r) { return sl__rng_normal(r); }
static int rpois(rng *r, double mean) {
  double l = exp(-mean), p = 1;
  int k = 0;
  do {
    k++;
    p *= runif(r);
  } while (p > l && k < 1000);
  return k - 1;
}

typedef struct gen {
  sl_prov *p;
  int64_t tex[C_N], tart[A_N], t_pipe, t_run, t_node;
  sl_prov_gen_report *rep;
  char suffix[32]; /* after every pipeline's name: "" or ".sSEED" beside a corpus holding the plain names */
} gen;

typedef struct pipe_state {
  char name[64];
  int64_t ctx, node[C_N];
  rng r;
  double rate, scale, cores, base, nodata_p, drift_x;
  bool transform, tuner, infra, pusher, evaluator, warm;
  int window;
  int64_t *ex_ids; /* Examples artifact per span */
  int64_t nspans, cap;
  int64_t stats, anomalies, schema, hparams, model, blessed_model;
  int struct_pen; /* runs left under a structure-change penalty */
  int code_version;
} pipe_state;

static int put_exec(gen *G, pipe_state *P, int64_t *id, int comp, int state, int64_t run_ctx, int64_t *t,
                    double cpu) {
  int64_t start = *t;
  int64_t dur = (int64_t)((cpu / P->cores + 20.0) * 1000.0);
  int rc = sl_prov_put_execution(id, G->p, G->tex[comp], NULL, state, start, start + dur);
  if (rc) return rc;
  *t = start + dur + 1000;
  sl_prov_value v = sl_prov_double(cpu);
  if ((rc = sl_prov_set_property(G->p, SL_PROV_EXECUTION, *id, "cpu_seconds", true, &v)) ||
      (rc = sl_prov_associate(G->p, P->ctx, *id)) || (rc = sl_prov_associate(G->p, run_ctx, *id)) ||
      (rc = sl_prov_associate(G->p, P->node[comp], *id)))
    return rc;
  G->rep->executions++;
  return 0;
}

static int ev(gen *G, int64_t art, int64_t exec, int type, int64_t ms, const char *key, int64_t index) {
  sl_prov_step path[2] = {{key, 0}, {NULL, index}};
  G->rep->events++;
  return sl_prov_put_event(NULL, G->p, art, exec, type, ms, path, 2);
}

static int put_art(gen *G, pipe_state *P, int64_t *id, int type, int64_t run_ctx, int64_t exec_id, int64_t ms,
                   const char *key) {
  char uri[160];
  snprintf(uri, sizeof uri, "gs://tfx/%s/%s/%s/%lld", P->name, ART_TYPE[type], key, (long long)exec_id);
  int rc = sl_prov_put_artifact(id, G->p, G->tart[type], uri, NULL, SL_PROV_A_LIVE, ms);
  if (rc || (rc = sl_prov_attribute(G->p, P->ctx, *id)) || (rc = sl_prov_attribute(G->p, run_ctx, *id))) return rc;
  G->rep->artifacts++;
  return ev(G, *id, exec_id, SL_PROV_EV_OUTPUT, ms, key, 0);
}

static int set_int(gen *G, int64_t art, const char *name, bool custom, int64_t v) {
  sl_prov_value x = sl_prov_int(v);
  return sl_prov_set_property(G->p, SL_PROV_ARTIFACT, art, name, custom, &x);
}
static int set_str(gen *G, int64_t art, const char *name, bool custom, const char *v) {
  sl_prov_value x = sl_prov_string(v);
  return sl_prov_set_property(G->p, SL_PROV_ARTIFACT, art, name, custom, &x);
}

static double cpu_of(pipe_state *P, int comp) {
  double c = COMP_CPU[comp] * P->scale * exp(0.25 * rnorm(&P->r));
  if (comp == C_TRAINER || comp == C_TRANSFORM) c *= sqrt((double)P->window);
  return c;
}

#define TRY(x)                                                                                                        \
  do {                                                                                                                \
    if ((rc = (x))) return rc;                                                                                        \
  } while (0)

/* One run, as it unfolds: what was drawn for it, the ids its stages hand on, and how it ends. */
typedef struct run_state {
  int64_t runno, run, cur; /* run number, its pipeline_run context, the clock */
  bool nodata, schema_change, code_change, tuner_runs;
  double drift;
  int64_t newest, k;                      /* the newest Examples; spans in the rolling window */
  int64_t tgraph, texamples, base_model;  /* Transform's outputs; the warm-start model */
  double f_nodata, f_drift, f_struct, f_schema, f_code, p_infra, p_push; /* the outcome's factors */
  bool fails, blessed, infra_ok, push_ok, pushed;
  int64_t trainer; /* the Trainer execution */
} run_state;

/* What happens this run, drawn before anything is written so the stream does not depend on the store. */
static void run_draw(pipe_state *P, run_state *R) {
  rng *r = &P->r;
  R->nodata = P->nspans > 0 && runif(r) < P->nodata_p;
  if (!R->nodata) {
    P->drift_x = DRIFT_AR * P->drift_x + DRIFT_NOISE * rnorm(r);
    if (runif(r) < DRIFT_SHOCK_P) P->drift_x += DRIFT_SHOCK_SD * rnorm(r);
  }
  R->drift = fabs(P->drift_x);
  R->schema_change = P->schema == 0 || runif(r) < P_SCHEMA_CHANGE;
  bool struct_change = R->runno > 0 && runif(r) < P_STRUCT_CHANGE;
  if (struct_change) {
    if (runif(r) < 0.5) P->transform = !P->transform;
    else P->infra = !P->infra;
    P->struct_pen = 2;
  }
  R->code_change = R->runno > 0 && runif(r) < P_CODE_CHANGE;
  if (R->code_change) P->code_version++;
  R->tuner_runs = P->tuner && (P->hparams == 0 || runif(r) < P_TUNER_RUN);
}

/* ExampleGen: a new span, or (no new data) a cached execution re-emitting the latest Examples. */
static int run_examplegen(gen *G, pipe_state *P, run_state *R) {
  int rc;
  int64_t x, a;
  if (R->nodata) {
    TRY(put_exec(G, P, &x, C_EXAMPLEGEN, SL_PROV_E_CACHED, R->run, &R->cur, 1));
    TRY(ev(G, P->ex_ids[P->nspans - 1], x, SL_PROV_EV_OUTPUT, R->cur, "examples", 0));
  } else {
    TRY(put_exec(G, P, &x, C_EXAMPLEGEN, SL_PROV_E_COMPLETE, R->run, &R->cur, cpu_of(P, C_EXAMPLEGEN)));
    TRY(put_art(G, P, &a, A_EXAMPLES, R->run, x, R->cur, "examples"));
    TRY(set_int(G, a, "span", false, P->nspans));
    TRY(set_int(G, a, "version", false, 0));
    TRY(set_str(G, a, "split_names", false, "[\"train\", \"eval\"]"));
    if (P->nspans == P->cap) {
      int64_t nc = P->cap ? P->cap * 2 : 256;
      int64_t *n = sl__realloc(P->ex_ids, (size_t)nc * sizeof *n);
      if (!n) return sl__oom("corpus spans");
      P->ex_ids = n;
      P->cap = nc;
    }
    P->ex_ids[P->nspans++] = a;
  }
  R->newest = P->ex_ids[P->nspans - 1];
  return 0;
}

/* StatisticsGen, SchemaGen and ExampleValidator: cached on no new data (SchemaGen: unless the schema changes). */
static int run_validate(gen *G, pipe_state *P, run_state *R) {
  int rc;
  int64_t x, run = R->run, *cur = &R->cur;
  if (R->nodata) {
    TRY(put_exec(G, P, &x, C_STATS, SL_PROV_E_CACHED, run, cur, 1));
    TRY(ev(G, R->newest, x, SL_PROV_EV_INPUT, *cur, "examples", 0));
    TRY(ev(G, P->stats, x, SL_PROV_EV_OUTPUT, *cur, "statistics", 0));
  } else {
    TRY(put_exec(G, P, &x, C_STATS, SL_PROV_E_COMPLETE, run, cur, cpu_of(P, C_STATS)));
    TRY(ev(G, R->newest, x, SL_PROV_EV_INPUT, *cur, "examples", 0));
    TRY(put_art(G, P, &P->stats, A_STATS, run, x, *cur, "statistics"));
    TRY(set_int(G, P->stats, "span", false, P->nspans - 1));
    TRY(set_str(G, P->stats, "split_names", false, "[\"train\", \"eval\"]"));
  }
  if (R->schema_change) {
    TRY(put_exec(G, P, &x, C_SCHEMA, SL_PROV_E_COMPLETE, run, cur, cpu_of(P, C_SCHEMA)));
    TRY(ev(G, P->stats, x, SL_PROV_EV_INPUT, *cur, "statistics", 0));
    TRY(put_art(G, P, &P->schema, A_SCHEMA, run, x, *cur, "schema"));
  } else {
    TRY(put_exec(G, P, &x, C_SCHEMA, SL_PROV_E_CACHED, run, cur, 1));
    TRY(ev(G, P->stats, x, SL_PROV_EV_INPUT, *cur, "statistics", 0));
    TRY(ev(G, P->schema, x, SL_PROV_EV_OUTPUT, *cur, "schema", 0));
  }
  if (R->nodata) {
    TRY(put_exec(G, P, &x, C_VALIDATOR, SL_PROV_E_CACHED, run, cur, 1));
    TRY(ev(G, P->stats, x, SL_PROV_EV_INPUT, *cur, "statistics", 0));
    TRY(ev(G, P->schema, x, SL_PROV_EV_INPUT, *cur, "schema", 0));
    TRY(ev(G, P->anomalies, x, SL_PROV_EV_OUTPUT, *cur, "anomalies", 0));
  } else {
    TRY(put_exec(G, P, &x, C_VALIDATOR, SL_PROV_E_COMPLETE, run, cur, cpu_of(P, C_VALIDATOR)));
    TRY(ev(G, P->stats, x, SL_PROV_EV_INPUT, *cur, "statistics", 0));
    TRY(ev(G, P->schema, x, SL_PROV_EV_INPUT, *cur, "schema", 0));
    TRY(put_art(G, P, &P->anomalies, A_ANOMALIES, run, x, *cur, "anomalies"));
    TRY(set_int(G, P->anomalies, "span", false, P->nspans - 1));
    TRY(set_str(G, P->anomalies, "split_names", false, "[\"train\", \"eval\"]"));
    double mean = ANOM_BASE + ANOM_SLOPE * (R->drift > DRIFT_OK ? R->drift - DRIFT_OK : 0);
    TRY(set_int(G, P->anomalies, "num_anomalies", true, rpois(&P->r, mean)));
  }
  return 0;
}

/* What the Trainer takes in: the rolling window of spans (handed on by a Resolver, re-emitting existing Examples),
 * Transform's outputs, the Tuner's hyperparameters, and for a warm start the last model. */
static int run_prepare(gen *G, pipe_state *P, run_state *R) {
  int rc;
  int64_t x, rx, run = R->run, *cur = &R->cur, k;
  k = R->k = P->window < P->nspans ? P->window : P->nspans;
  TRY(put_exec(G, P, &rx, C_RESOLVER, SL_PROV_E_COMPLETE, run, cur, cpu_of(P, C_RESOLVER)));
  for (int64_t i = 0; i < k; i++) TRY(ev(G, P->ex_ids[P->nspans - k + i], rx, SL_PROV_EV_OUTPUT, *cur, "examples", i));
  if (P->transform) {
    TRY(put_exec(G, P, &x, C_TRANSFORM, SL_PROV_E_COMPLETE, run, cur, cpu_of(P, C_TRANSFORM)));
    for (int64_t i = 0; i < k; i++) TRY(ev(G, P->ex_ids[P->nspans - k + i], x, SL_PROV_EV_INPUT, *cur, "examples", i));
    TRY(ev(G, P->schema, x, SL_PROV_EV_INPUT, *cur, "schema", 0));
    TRY(put_art(G, P, &R->tgraph, A_TGRAPH, run, x, *cur, "transform_graph"));
    TRY(put_art(G, P, &R->texamples, A_EXAMPLES, run, x, *cur, "transformed_examples"));
    TRY(set_int(G, R->texamples, "span", false, P->nspans - 1));
    TRY(set_int(G, R->texamples, "version", false, 0));
    TRY(set_str(G, R->texamples, "split_names", false, "[\"train\", \"eval\"]"));
  }
  if (P->tuner) {
    if (R->tuner_runs) {
      TRY(put_exec(G, P, &x, C_TUNER, SL_PROV_E_COMPLETE, run, cur, cpu_of(P, C_TUNER)));
      TRY(ev(G, R->newest, x, SL_PROV_EV_INPUT, *cur, "examples", 0));
      TRY(ev(G, P->schema, x, SL_PROV_EV_INPUT, *cur, "schema", 0));
      TRY(put_art(G, P, &P->hparams, A_HPARAMS, run, x, *cur, "best_hyperparameters"));
    } else {
      TRY(put_exec(G, P, &x, C_TUNER, SL_PROV_E_CACHED, run, cur, 1));
      TRY(ev(G, P->hparams, x, SL_PROV_EV_OUTPUT, *cur, "best_hyperparameters", 0));
    }
  }
  if (P->warm && P->model) {
    TRY(put_exec(G, P, &x, C_RESOLVER, SL_PROV_E_COMPLETE, run, cur, cpu_of(P, C_RESOLVER)));
    TRY(ev(G, P->model, x, SL_PROV_EV_OUTPUT, *cur, "model", 0));
    R->base_model = P->model;
  }
  return 0;
}

/* The outcome's probability (the factors docs/corpus.md lists), and the draws that decide it. */
static void run_outcome(pipe_state *P, run_state *R) {
  rng *r = &P->r;
  R->f_nodata = R->nodata ? NODATA_FACTOR : 1;
  R->f_drift = R->drift <= DRIFT_OK ? 1
               : R->drift >= DRIFT_BAD
                   ? DRIFT_FLOOR
                   : 1 - (1 - DRIFT_FLOOR) * (R->drift - DRIFT_OK) / (DRIFT_BAD - DRIFT_OK);
  R->f_struct = P->struct_pen == 2 ? STRUCT_FACTOR1 : P->struct_pen == 1 ? STRUCT_FACTOR2 : 1;
  R->f_schema = R->schema_change && R->runno > 0 ? SCHEMA_FACTOR : 1;
  R->f_code = R->code_change ? CODE_FACTOR : 1;
  double p_fail = P_TRAINER_FAIL + (P->struct_pen ? P_TRAINER_FAIL_STRUCT : 0);
  double p_bless = P->base * R->f_nodata * R->f_drift * R->f_struct * R->f_schema * R->f_code;
  R->p_infra = P->infra ? P_INFRA_OK : 1;
  R->p_push = P->pusher ? (1 - p_fail) * p_bless * R->p_infra * P_PUSH_OK : 0;
  R->fails = runif(r) < p_fail;
  R->blessed = runif(r) < p_bless;
  R->infra_ok = runif(r) < R->p_infra;
  R->push_ok = runif(r) < P_PUSH_OK;
  if (P->struct_pen) P->struct_pen--;
}

/* The Trainer: its inputs, the code fingerprint and the true push probability (for checking the predictor). */
static int run_trainer(gen *G, pipe_state *P, run_state *R) {
  int rc;
  int64_t tr, k = R->k, cur;
  double tcpu = cpu_of(P, C_TRAINER);
  TRY(put_exec(G, P, &tr, C_TRAINER, R->fails ? SL_PROV_E_FAILED : SL_PROV_E_COMPLETE, R->run, &R->cur,
               R->fails ? tcpu * (0.1 + 0.9 * runif(&P->r)) : tcpu));
  R->trainer = tr;
  cur = R->cur;
  if (P->transform) {
    TRY(ev(G, R->texamples, tr, SL_PROV_EV_INPUT, cur, "examples", 0));
    TRY(ev(G, R->tgraph, tr, SL_PROV_EV_INPUT, cur, "transform_graph", 0));
  } else {
    for (int64_t i = 0; i < k; i++)
      TRY(ev(G, P->ex_ids[P->nspans - k + i], tr, SL_PROV_EV_INPUT, cur, "examples", i));
  }
  TRY(ev(G, P->schema, tr, SL_PROV_EV_INPUT, cur, "schema", 0));
  if (P->tuner) TRY(ev(G, P->hparams, tr, SL_PROV_EV_INPUT, cur, "hyperparameters", 0));
  if (R->base_model) TRY(ev(G, R->base_model, tr, SL_PROV_EV_INPUT, cur, "base_model", 0));
  char fp[48];
  snprintf(fp, sizeof fp, "git:%08llx", (unsigned long long)(sl__mix64((uint64_t)P->code_version ^ P->ctx) >> 32));
  sl_prov_value v = sl_prov_string(fp);
  TRY(sl_prov_set_property(G->p, SL_PROV_EXECUTION, tr, "code_fingerprint", true, &v));
  v = sl_prov_double(R->p_push);
  TRY(sl_prov_set_property(G->p, SL_PROV_EXECUTION, tr, "gen_true_p_push", true, &v));
  return 0;
}

/* After a Trainer that did not fail: Evaluator (against the last blessed model), InfraValidator and Pusher. */
static int run_deploy(gen *G, pipe_state *P, run_state *R) {
  int rc;
  int64_t x, model, mrun, run = R->run, *cur = &R->cur;
  TRY(put_art(G, P, &model, A_MODEL, run, R->trainer, *cur, "model"));
  TRY(put_art(G, P, &mrun, A_MODELRUN, run, R->trainer, *cur, "model_run"));
  P->model = model;
  int64_t blessing = 0, infra = 0;
  if (P->evaluator) {
    int64_t baseline = 0;
    if (P->blessed_model) {
      TRY(put_exec(G, P, &x, C_RESOLVER, SL_PROV_E_COMPLETE, run, cur, cpu_of(P, C_RESOLVER)));
      TRY(ev(G, P->blessed_model, x, SL_PROV_EV_OUTPUT, *cur, "model", 0));
      baseline = P->blessed_model;
    }
    TRY(put_exec(G, P, &x, C_EVALUATOR, SL_PROV_E_COMPLETE, run, cur, cpu_of(P, C_EVALUATOR)));
    TRY(ev(G, model, x, SL_PROV_EV_INPUT, *cur, "model", 0));
    TRY(ev(G, R->newest, x, SL_PROV_EV_INPUT, *cur, "examples", 0));
    if (baseline) TRY(ev(G, baseline, x, SL_PROV_EV_INPUT, *cur, "baseline_model", 0));
    int64_t evalart;
    TRY(put_art(G, P, &evalart, A_EVAL, run, x, *cur, "evaluation"));
    TRY(put_art(G, P, &blessing, A_BLESSING, run, x, *cur, "blessing"));
    TRY(set_int(G, blessing, "blessed", true, R->blessed));
  }
  if (P->infra) {
    TRY(put_exec(G, P, &x, C_INFRA, SL_PROV_E_COMPLETE, run, cur, cpu_of(P, C_INFRA)));
    TRY(ev(G, model, x, SL_PROV_EV_INPUT, *cur, "model", 0));
    TRY(ev(G, R->newest, x, SL_PROV_EV_INPUT, *cur, "examples", 0));
    TRY(put_art(G, P, &infra, A_INFRA, run, x, *cur, "blessing"));
    TRY(set_int(G, infra, "blessed", true, R->infra_ok));
  }
  if (!P->pusher) return 0;
  bool ok = R->blessed && R->infra_ok;
  R->pushed = ok && R->push_ok;
  TRY(put_exec(G, P, &x, C_PUSHER, R->pushed || !ok ? SL_PROV_E_COMPLETE : SL_PROV_E_FAILED, run, cur,
               cpu_of(P, C_PUSHER)));
  TRY(ev(G, model, x, SL_PROV_EV_INPUT, *cur, "model", 0));
  if (blessing) TRY(ev(G, blessing, x, SL_PROV_EV_INPUT, *cur, "model_blessing", 0));
  if (infra) TRY(ev(G, infra, x, SL_PROV_EV_INPUT, *cur, "infra_blessing", 0));
  int64_t pm;
  TRY(put_art(G, P, &pm, A_PUSHED, run, x, *cur, "pushed_model"));
  TRY(set_int(G, pm, "pushed", true, R->pushed));
  if (R->pushed) {
    char dest[128];
    snprintf(dest, sizeof dest, "gs://serving/%s/%lld", P->name, (long long)R->runno);
    TRY(set_str(G, pm, "pushed_destination", true, dest));
    TRY(set_int(G, pm, "pushed_version", true, R->runno));
    P->blessed_model = model;
  }
  return 0;
}

/* A run that pushed nothing: the non-push attributed to one cause, drawn in proportion to each factor's -log (its
 * share of the odds). */
static int run_cause(pipe_state *P, const run_state *R) {
  if (R->fails) return 0;
  double w[6] = {0, -log(R->f_nodata), -log(R->f_drift), -log(R->f_struct * R->f_schema), -log(R->f_code),
                 -log(P->base * R->p_infra * P_PUSH_OK) + (P->pusher ? 0 : 10)};
  double tot = 0;
  for (int i = 1; i < 6; i++) tot += w[i];
  double u = runif(&P->r) * tot;
  for (int i = 1; i < 6; i++) {
    if (u < w[i]) return i;
    u -= w[i];
  }
  return 5;
}

/* One pipeline run at time t. */
static int run_once(gen *G, pipe_state *P, int64_t runno, int64_t t) {
  int rc;
  run_state R = {.runno = runno, .cur = t};
  char rname[96];
  snprintf(rname, sizeof rname, "%s.run-%06lld", P->name, (long long)runno);
  TRY(sl_prov_put_context(&R.run, G->p, G->t_run, rname, t));
  TRY(sl_prov_set_parent_context(G->p, R.run, P->ctx));
  G->rep->runs++;
  run_draw(P, &R);
  TRY(run_examplegen(G, P, &R));
  TRY(run_validate(G, P, &R));
  TRY(run_prepare(G, P, &R));
  run_outcome(P, &R);
  TRY(run_trainer(G, P, &R));
  if (!R.fails) TRY(run_deploy(G, P, &R));
  if (R.pushed) G->rep->pushed++;
  else G->rep->cause[run_cause(P, &R)]++;
  return 0;
}

static int setup_types(gen *G) {
  int rc;
  sl_prov_type_prop ex[] = {{"span", SL_PROV_T_INT}, {"version", SL_PROV_T_INT}, {"split_names", SL_PROV_T_STRING}};
  sl_prov_type_prop st[] = {{"span", SL_PROV_T_INT}, {"split_names", SL_PROV_T_STRING}};
  for (int i = 0; i < C_N; i++)
    TRY(sl_prov_put_type(&G->tex[i], G->p, SL_PROV_EXECUTION, COMP_TYPE[i], NULL, 0, COMP_BASE[i]));
  for (int i = 0; i < A_N; i++) {
    const sl_prov_type_prop *pp = i == A_EXAMPLES ? ex : (i == A_STATS || i == A_ANOMALIES) ? st : NULL;
    size_t np = i == A_EXAMPLES ? 3 : (i == A_STATS || i == A_ANOMALIES) ? 2 : 0;
    TRY(sl_prov_put_type(&G->tart[i], G->p, SL_PROV_ARTIFACT, ART_TYPE[i], pp, np, ART_BASE[i]));
  }
  TRY(sl_prov_put_type(&G->t_pipe, G->p, SL_PROV_CONTEXT, "pipeline", NULL, 0, NULL));
  TRY(sl_prov_put_type(&G->t_run, G->p, SL_PROV_CONTEXT, "pipeline_run", NULL, 0, NULL));
  TRY(sl_prov_put_type(&G->t_node, G->p, SL_PROV_CONTEXT, "node", NULL, 0, NULL));
  return 0;
}

/* Pipeline i's name (its rng's first draw picks the domain), with G's suffix. */
static void pipe_name(char *out, size_t n, const gen *G, const sl_prov_gen_opts *o, int i, rng *r) {
  sl_rng_seed(r, sl__mix64(o->seed * 0x100000001b3ull + (uint64_t)i + 1));
  snprintf(out, n, "p%04d-%s%s", i, DOMAINS[rnext(r) % (sizeof DOMAINS / sizeof *DOMAINS)], G->suffix);
}

/* Whether a pipeline of the corpus (names with G's suffix) is in the store already: the first such name in `which`. */
static int any_taken(bool *taken, char *which, size_t n, gen *G, const sl_prov_gen_opts *o) {
  *taken = false;
  for (int i = 0; i < o->pipelines && !*taken; i++) {
    rng r;
    pipe_name(which, n, G, o, i, &r);
    sl_prov_query q = {.type_name = "pipeline", .name = which, .limit = 1};
    sl_prov_list *l;
    int rc = sl_prov_find(&l, G->p, SL_PROV_CONTEXT, &q);
    if (rc) return rc;
    *taken = l->n > 0;
    sl_prov_list_free(l);
  }
  return 0;
}

/* A second corpus (prov gen --append) must not merge into the first's pipelines and runs, which get-or-create by
 * name would do: the corpus takes its seed as a suffix when a plain name is taken, and is refused when a suffixed
 * one is too (the same seed again, after a killed gen). Decided before anything is written. */
static int pick_names(gen *G, const sl_prov_gen_opts *o) {
  char name[96];
  bool taken;
  int rc = any_taken(&taken, name, sizeof name, G, o);
  if (rc || !taken) return rc;
  snprintf(G->suffix, sizeof G->suffix, ".s%llu", (unsigned long long)o->seed);
  rc = any_taken(&taken, name, sizeof name, G, o);
  if (rc || !taken) return rc;
  return sl__err(SL_EINVAL, "gen: pipeline '%s' is already in the store (a gen with seed %llu wrote it, perhaps "
                 "killed midway); a corpus is added only under names of its own: choose another seed",
                 name, (unsigned long long)o->seed);
}

static int gen_pipeline(gen *G, const sl_prov_gen_opts *o, int i) {
  pipe_state P;
  memset(&P, 0, sizeof P);
  rng *r = &P.r;
  pipe_name(P.name, sizeof P.name, G, o, i, r); /* seeds r: pipeline i draws from its own stream */
  double D = o->days, start = 0, end = D, u = runif(r);
  if (u >= P_FULL_LIFE) {
    if (u < P_FULL_LIFE + P_LATE_START)
      start = runif(r) * 0.7 * D;
    else
      end = D * (0.3 + 0.7 * runif(r));
  }
  P.rate = exp(RATE_MU + RATE_SIGMA * rnorm(r));
  if (P.rate < RATE_MIN) P.rate = RATE_MIN;
  if (P.rate > RATE_MAX) P.rate = RATE_MAX;
  P.scale = exp(0.8 * rnorm(r));
  static const double CORES[] = {4, 8, 16, 32};
  P.cores = CORES[rnext(r) % 4];
  P.transform = runif(r) < P_TRANSFORM;
  P.tuner = runif(r) < P_TUNER;
  P.infra = runif(r) < P_INFRAVAL;
  P.pusher = runif(r) < P_PUSHER;
  P.evaluator = runif(r) < P_EVALUATOR;
  P.warm = runif(r) < P_WARM_START;
  static const int WIN[] = {1, 1, 1, 3, 3, 7, 7, 7, 14, 14};
  P.window = WIN[rnext(r) % 10];
  P.base = BASE_A + BASE_B * sqrt(runif(r));
  P.nodata_p = NODATA_MIN + (NODATA_MAX - NODATA_MIN) * runif(r);
  P.drift_x = 0.3 * rnorm(r);
  int rc = sl_prov_begin(G->p);
  if (rc) return rc;
  int64_t t0 = T_START_MS + (int64_t)(start * 86400000.0);
  if (!(rc = sl_prov_put_context(&P.ctx, G->p, G->t_pipe, P.name, t0))) {
    sl_prov_value v = sl_prov_string(P.name);
    rc = sl_prov_set_property(G->p, SL_PROV_CONTEXT, P.ctx, "pipeline_name", true, &v);
  }
  for (int c = 0; !rc && c < C_N; c++) {
    char nn[128];
    snprintf(nn, sizeof nn, "%s.%s", P.name, COMP_NODE[c]);
    if (!(rc = sl_prov_put_context(&P.node[c], G->p, G->t_node, nn, t0)))
      rc = sl_prov_set_parent_context(G->p, P.node[c], P.ctx);
  }
  /* Runs: scheduled every 1/rate days with 5% jitter, from start to end of life. */
  double interval = 86400000.0 / P.rate;
  double t = (double)t0 + runif(r) * interval;
  int64_t tend = T_START_MS + (int64_t)(end * 86400000.0);
  for (int64_t runno = 0; !rc && (int64_t)t < tend; runno++) {
    rc = run_once(G, &P, runno, (int64_t)t);
    t += interval * (1 + 0.05 * rnorm(r));
  }
  sl__free(P.ex_ids);
  if (rc) {
    char keep[1024]; /* the error that stopped the pipeline, not the rollback's */
    snprintf(keep, sizeof keep, "%s", sl_error_last());
    sl_prov_rollback(G->p);
    return sl__err(rc, "%s", keep);
  }
  G->rep->pipelines++;
  return sl_prov_commit(G->p);
}

int sl_prov_gen(sl_prov_gen_report *rep, sl_prov *p, const sl_prov_gen_opts *o) {
  sl_prov_gen_report local;
  if (!rep) rep = &local;
  memset(rep, 0, sizeof *rep);
  if (!o || o->version < 1 || o->version > SL_PROV_GEN_OPTS_VERSION)
    return sl__err(SL_EVERSION, "gen: options version");
  /* Fields left 0 take their defaults (prov.h). A version 1 struct ends before `cancel`: read only its fields. */
  sl_prov_gen_opts oo;
  memset(&oo, 0, sizeof oo);
  memcpy(&oo, o, o->version == 1 ? offsetof(sl_prov_gen_opts, cancel) : sizeof oo);
  if (!oo.pipelines) oo.pipelines = 50;
  if (!oo.days) oo.days = 120;
  if (!oo.seed) oo.seed = 1;
  o = &oo;
  if (o->pipelines < 1 || o->pipelines > 1000000) return sl__err(SL_EINVAL, "gen: pipelines must be 1..1000000");
  if (o->days < 1 || o->days > 3650) return sl__err(SL_EINVAL, "gen: days must be 1..3650");
  gen G = {0};
  G.p = p;
  G.rep = rep;
  int rc = setup_types(&G);
  if (!rc) rc = pick_names(&G, o);
  if (!rc) rc = sl_prov_bulk_begin(p);
  for (int i = 0; !rc && i < o->pipelines; i++) {
    if (o->cancel && *o->cancel) {
      rc = sl__err(SL_ECANCELED, "cancelled after %d of %d pipelines (each written whole)", i, o->pipelines);
      break;
    }
    rc = gen_pipeline(&G, o, i);
    if (o->progress) o->progress(i + 1, o->pipelines, o->payload);
  }
  int rc2 = sl_prov_bulk_end(p);
  if (!rc) rc = rc2;
  return rc;
}
