/* test_prov_analytics.c: graphlets, outcomes, waste, features, the simulation and the predictor on small
 * hand-built stores with answers worked out by hand, plus a generated corpus for the predictor, the
 * no-future-leak check and the generator's determinism.
 * SL_TEST_TIMEOUT(180) */
#include <math.h>
#include <sqlite3.h>

#include "prov/analytics/analytics_int.h"
#include "prov/store/db_int.h"
#include "test_prov_common.h"

#define assert_double_equal(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) <= (eps))
#define H (3600 * 1000LL)
#define BASE (1000LL * H) /* hour 0 */

/* A tiny builder over the public API. */
typedef struct hb {
  sl_prov *p;
  int64_t exgen, trainer, evaluator, pusher, resolver;
  int64_t examples, model, blessing, pushedmodel, tpipe, trun;
} hb;

static void hb_init(hb *b, sl_prov *p) {
  b->p = p;
  assert_int_equal(sl_prov_put_type(&b->exgen, p, SL_PROV_EXECUTION,
                                    "tfx.components.example_gen.csv_example_gen.component.CsvExampleGen", NULL, 0,
                                    NULL),
                   0);
  assert_int_equal(sl_prov_put_type(&b->trainer, p, SL_PROV_EXECUTION, "tfx.components.trainer.component.Trainer",
                                    NULL, 0, NULL),
                   0);
  assert_int_equal(sl_prov_put_type(&b->evaluator, p, SL_PROV_EXECUTION,
                                    "tfx.components.evaluator.component.Evaluator", NULL, 0, NULL),
                   0);
  assert_int_equal(sl_prov_put_type(&b->pusher, p, SL_PROV_EXECUTION, "tfx.components.pusher.component.Pusher", NULL,
                                    0, NULL),
                   0);
  assert_int_equal(sl_prov_put_type(&b->resolver, p, SL_PROV_EXECUTION, "tfx.dsl.components.common.resolver.Resolver",
                                    NULL, 0, NULL),
                   0);
  sl_prov_type_prop ex[] = {{"span", SL_PROV_T_INT}};
  assert_int_equal(sl_prov_put_type(&b->examples, p, SL_PROV_ARTIFACT, "Examples", ex, 1, NULL), 0);
  assert_int_equal(sl_prov_put_type(&b->model, p, SL_PROV_ARTIFACT, "Model", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&b->blessing, p, SL_PROV_ARTIFACT, "ModelBlessing", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&b->pushedmodel, p, SL_PROV_ARTIFACT, "PushedModel", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&b->tpipe, p, SL_PROV_CONTEXT, "pipeline", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&b->trun, p, SL_PROV_CONTEXT, "pipeline_run", NULL, 0, NULL), 0);
}

static int64_t ctx(hb *b, int64_t type, const char *name) {
  int64_t c;
  assert_int_equal(sl_prov_put_context(&c, b->p, type, name, BASE), 0);
  return c;
}

/* An execution from hour t to t + dur with cpu_seconds `cpu` (cpu < 0: none), in a pipeline and run. */
static int64_t ex(hb *b, int64_t type, int state, double t, double dur, double cpu, int64_t pipe, int64_t run) {
  int64_t id;
  assert_int_equal(sl_prov_put_execution(&id, b->p, type, NULL, state, BASE + (int64_t)(t * H),
                                         BASE + (int64_t)((t + dur) * H)),
                   0);
  if (cpu >= 0) {
    sl_prov_value v = sl_prov_double(cpu);
    assert_int_equal(sl_prov_set_property(b->p, SL_PROV_EXECUTION, id, "cpu_seconds", true, &v), 0);
  }
  if (pipe) assert_int_equal(sl_prov_associate(b->p, pipe, id), 0);
  if (run) assert_int_equal(sl_prov_associate(b->p, run, id), 0);
  return id;
}

static int64_t art(hb *b, int64_t type, double t) {
  int64_t id;
  assert_int_equal(sl_prov_put_artifact(&id, b->p, type, "uri", NULL, SL_PROV_A_LIVE, BASE + (int64_t)(t * H)), 0);
  return id;
}

static void ln(hb *b, int64_t a, int64_t e, int type, double t, const char *key) {
  sl_prov_step path[2] = {{key, 0}, {NULL, 0}};
  assert_int_equal(sl_prov_put_event(NULL, b->p, a, e, type, BASE + (int64_t)(t * H), path, 2), 0);
}

static void set_int(hb *b, int64_t a, const char *name, int64_t v) {
  sl_prov_value x = sl_prov_int(v);
  assert_int_equal(sl_prov_set_property(b->p, SL_PROV_ARTIFACT, a, name, true, &x), 0);
}

/* Trainer at hour t reading `in`, then a Pusher whose PushedModel has pushed = `pushed` (-1: no property). Returns
 * the trainer id; the model artifact in *model. */
static int64_t train_push(hb *b, int64_t pipe, int64_t run, double t, int64_t in, int pushed, int64_t *model) {
  int64_t tr = ex(b, b->trainer, SL_PROV_E_COMPLETE, t, 1, 10, pipe, run);
  ln(b, in, tr, SL_PROV_EV_INPUT, t, "examples");
  int64_t m = art(b, b->model, t + 1);
  ln(b, m, tr, SL_PROV_EV_OUTPUT, t + 1, "model");
  int64_t pu = ex(b, b->pusher, SL_PROV_E_COMPLETE, t + 1, 1, 1, pipe, run);
  ln(b, m, pu, SL_PROV_EV_INPUT, t + 1, "model");
  int64_t pm = art(b, b->pushedmodel, t + 2);
  ln(b, pm, pu, SL_PROV_EV_OUTPUT, t + 2, "pushed_model");
  if (pushed >= 0) set_int(b, pm, "pushed", pushed);
  if (model) *model = m;
  return tr;
}

static const sl_prov_graphlet *by_trainer(sl_prov_graphlets *g, int64_t tr) {
  for (size_t i = 0; i < sl_prov_graphlets_count(g); i++)
    if (sl_prov_graphlets_at(g, i)->trainer_id == tr) return sl_prov_graphlets_at(g, i);
  fail_msg("no graphlet for trainer %lld", (long long)tr);
  return NULL;
}

static bool has_id(const int64_t *v, size_t n, int64_t id) {
  for (size_t i = 0; i < n; i++)
    if (v[i] == id) return true;
  return false;
}

static tp_backend LITE = {"sqlite", "", NULL}, PG = {"postgresql", "", NULL};

/* A fresh store on the case's backend; false (the case skips) when the backend is absent. */
#define FRESH(p, tag)                                                                                                 \
  tp_backend *B = *(tp_backend **)state;                                                                              \
  if (!tp_fresh(B, tag)) skip();                                                                                      \
  sl_prov *p = tp_open(B)

static void shared_upstream_waste_outcomes_and_states(void **state) {
  FRESH(p, "graphlets");
  hb b;
  hb_init(&b, p);
  int64_t P = ctx(&b, b.tpipe, "P");
  int64_t r[8];
  char nm[16];
  for (int i = 0; i < 8; i++) {
    snprintf(nm, sizeof nm, "P.r%d", i);
    r[i] = ctx(&b, b.trun, nm);
  }
  /* U feeds T1 (pushed) and T2 (not): not waste. V feeds T3 and T4, neither pushed: waste. */
  int64_t U = ex(&b, b.exgen, SL_PROV_E_COMPLETE, 0, 1, 100, P, r[0]);
  int64_t E1 = art(&b, b.examples, 1);
  ln(&b, E1, U, SL_PROV_EV_OUTPUT, 1, "examples");
  set_int(&b, E1, "span", 1);
  int64_t M1;
  int64_t T1 = train_push(&b, P, r[1], 2, E1, 1, &M1);
  int64_t T2 = train_push(&b, P, r[2], 5, E1, 0, NULL);
  int64_t V = ex(&b, b.exgen, SL_PROV_E_COMPLETE, 8, 1, 200, P, r[3]);
  int64_t E2 = art(&b, b.examples, 9);
  ln(&b, E2, V, SL_PROV_EV_OUTPUT, 9, "examples");
  set_int(&b, E2, "span", 2);
  int64_t T3 = train_push(&b, P, r[3], 10, E2, 0, NULL);
  int64_t T4 = train_push(&b, P, r[4], 13, E2, 0, NULL);
  /* A failed trainer: no downstream. */
  int64_t T5 = ex(&b, b.trainer, SL_PROV_E_FAILED, 16, 1, 7, P, r[5]);
  ln(&b, E2, T5, SL_PROV_EV_INPUT, 16, "examples");
  /* A cached ExampleGen re-emitting E2 later: not E2's producer, but a step of its run before the trainer. */
  int64_t X = ex(&b, b.exgen, SL_PROV_E_CACHED, 19, 0.1, 5, P, r[6]);
  ln(&b, E2, X, SL_PROV_EV_OUTPUT, 19.1, "examples");
  int64_t T6 = train_push(&b, P, r[6], 20, E2, -1, NULL); /* no `pushed` property, Pusher COMPLETE: pushed */
  /* A later Evaluator reading M1 as its baseline is not downstream of T1. */
  int64_t M7;
  int64_t T7 = train_push(&b, P, r[7], 23, E2, 0, &M7);
  int64_t EV = ex(&b, b.evaluator, SL_PROV_E_COMPLETE, 24, 0.5, 3, P, r[7]);
  ln(&b, M7, EV, SL_PROV_EV_INPUT, 24, "model");
  ln(&b, M1, EV, SL_PROV_EV_INPUT, 24, "baseline_model");
  int64_t BL = art(&b, b.blessing, 24.5);
  ln(&b, BL, EV, SL_PROV_EV_OUTPUT, 24.5, "blessing");
  set_int(&b, BL, "blessed", 0);
  /* A second pipeline with no pusher at all. */
  int64_t Q = ctx(&b, b.tpipe, "Q"), q0 = ctx(&b, b.trun, "Q.r0");
  int64_t W = ex(&b, b.exgen, SL_PROV_E_COMPLETE, 0, 1, 50, Q, q0);
  int64_t E3 = art(&b, b.examples, 1);
  ln(&b, E3, W, SL_PROV_EV_OUTPUT, 1, "examples");
  int64_t TQ = ex(&b, b.trainer, SL_PROV_E_COMPLETE, 2, 1, 20, Q, q0);
  ln(&b, E3, TQ, SL_PROV_EV_INPUT, 2, "examples");
  int64_t MQ = art(&b, b.model, 3);
  ln(&b, MQ, TQ, SL_PROV_EV_OUTPUT, 3, "model");
  int64_t EQ = ex(&b, b.evaluator, SL_PROV_E_COMPLETE, 3, 1, 4, Q, q0);
  ln(&b, MQ, EQ, SL_PROV_EV_INPUT, 3, "model");

  sl_prov_graphlets *g;
  assert_int_equal(sl_prov_graphlets_load(&g, p, NULL), 0);
  assert_int_equal(sl_prov_graphlets_count(g), 8);
  assert_string_equal(sl_prov_graphlets_cost_basis(g), "cpu_seconds");
  const sl_prov_graphlet *g1 = by_trainer(g, T1), *g2 = by_trainer(g, T2), *g3 = by_trainer(g, T3),
                         *g4 = by_trainer(g, T4), *g5 = by_trainer(g, T5), *g6 = by_trainer(g, T6),
                         *g7 = by_trainer(g, T7), *gq = by_trainer(g, TQ);
  assert_true(g1->pushed);
  assert_false(g2->pushed);
  assert_true(g2->has_pusher);
  assert_false(g3->pushed);
  assert_false(g4->pushed);
  assert_true(has_id(g1->upstream, g1->nupstream, U));
  assert_true(has_id(g2->upstream, g2->nupstream, U));
  assert_true(has_id(g3->upstream, g3->nupstream, V));
  assert_int_equal(g1->nspans, 1);
  assert_int_equal(g1->spans[0], 1);
  assert_int_equal(g1->ndownstream, 1); /* its Pusher only: the later Evaluator read M1 as a baseline */
  assert_false(has_id(g1->downstream, g1->ndownstream, EV));
  assert_true(has_id(g7->downstream, g7->ndownstream, EV));
  assert_double_equal(g1->cost, 100 + 10 + 1, 1e-9);
  assert_double_equal(g1->prunable, 11, 1e-9);
  /* Failed trainer. */
  assert_int_equal(g5->trainer_state, SL_PROV_E_FAILED);
  assert_false(g5->pushed);
  assert_int_equal(g5->ndownstream, 0);
  assert_double_equal(g5->cost, 7 + 200, 1e-9);
  /* Cached step: in the graphlet (its run, before the trainer), not E2's producer. */
  assert_true(has_id(g6->upstream, g6->nupstream, X));
  assert_true(has_id(g6->upstream, g6->nupstream, V));
  assert_true(g6->pushed);
  assert_double_equal(g6->cost, 200 + 5 + 10 + 1, 1e-9);
  /* No pusher. */
  assert_false(gq->pushed);
  assert_false(gq->has_pusher);
  assert_true(has_id(gq->downstream, gq->ndownstream, EQ));
  assert_false(g7->pushed);

  /* Waste, by hand: V is shared by T3, T4, T5, T6, T7 and T6 pushed, so V is useful. Wasted: T2 + its Pusher
   * (11), T3 (11), T4 (11), T5 (7), T7 (11) + the Evaluator (3); in Q everything (50 + 20 + 4). */
  sl_prov_waste *w;
  assert_int_equal(sl_prov_waste_compute(&w, g), 0);
  double total = 100 + 200 + 5 + 7 + 3 + 6 * 11 + 50 + 20 + 4;
  assert_double_equal(w->total, total, 1e-6);
  assert_double_equal(w->wasted, 11 + 11 + 11 + 7 + 11 + 3 + 74, 1e-6);
  assert_double_equal(w->unattributed, 0, 1e-9);
  assert_string_equal(w->pipelines[0].name, "Q"); /* 74 wasted vs 54 in P */
  assert_double_equal(w->pipelines[0].wasted, 74, 1e-6);
  bool seen = false;
  for (size_t i = 0; i < w->ncomponents; i++)
    if (!strcmp(w->components[i].name, "CsvExampleGen")) {
      seen = true;
      assert_double_equal(w->components[i].total, 355, 1e-6);
      assert_double_equal(w->components[i].wasted, 50, 1e-6);
    }
  assert_true(seen);
  sl_prov_waste_free(w);

  sl_prov_stats *s;
  assert_int_equal(sl_prov_stats_compute(&s, g), 0);
  assert_int_equal(s->pipelines, 2);
  assert_int_equal(s->graphlets, 8);
  assert_double_equal(s->push_rate, 2.0 / 8.0, 1e-9);
  assert_double_equal(s->failed_trainers, 1.0 / 8.0, 1e-9);
  assert_true(s->ntopologies >= 2);
  sl_prov_stats_free(s);
  sl_prov_graphlets_free(g);

  /* One pipeline only. */
  assert_int_equal(sl_prov_graphlets_load(&g, p, "Q"), 0);
  assert_int_equal(sl_prov_graphlets_count(g), 1);
  sl_prov_graphlets_free(g);
  assert_int_equal(sl_prov_graphlets_load(&g, p, "nope"), SL_ENOTFOUND);
  sl_prov_close(p);
  tp_done(B);
}

/* What TFX writes (issue 51, tests/tfx): run 1 trains and pushes; run 2 on the same data is all CACHED, its
 * Trainer re-emitting run 1's Model and its Pusher run 1's PushedModel (pushed = 1). Run 1's Transform also writes
 * its own Schema and ExampleAnomalies (post_transform_*), after SchemaGen's and ExampleValidator's. */
static void tfx_cached_run_and_transform_side_outputs(void **state) {
  FRESH(p, "tfxcached");
  hb b;
  hb_init(&b, p);
  int64_t ttf, tsg, tval, tschema, tanom;
  assert_int_equal(sl_prov_put_type(&ttf, p, SL_PROV_EXECUTION, "tfx.components.transform.component.Transform", NULL,
                                    0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&tsg, p, SL_PROV_EXECUTION, "tfx.components.schema_gen.component.SchemaGen", NULL,
                                    0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&tval, p, SL_PROV_EXECUTION,
                                    "tfx.components.example_validator.component.ExampleValidator", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&tschema, p, SL_PROV_ARTIFACT, "Schema", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&tanom, p, SL_PROV_ARTIFACT, "ExampleAnomalies", NULL, 0, NULL), 0);
  int64_t P = ctx(&b, b.tpipe, "P"), r1 = ctx(&b, b.trun, "P.r1"), r2 = ctx(&b, b.trun, "P.r2");
  /* Run 1 (hours 0-7). */
  int64_t G1 = ex(&b, b.exgen, SL_PROV_E_COMPLETE, 0, 1, -1, P, r1);
  int64_t E1 = art(&b, b.examples, 1);
  ln(&b, E1, G1, SL_PROV_EV_OUTPUT, 1, "examples");
  set_int(&b, E1, "span", 1);
  int64_t SG = ex(&b, tsg, SL_PROV_E_COMPLETE, 1, 1, -1, P, r1);
  int64_t S = art(&b, tschema, 2);
  ln(&b, S, SG, SL_PROV_EV_OUTPUT, 2, "schema");
  int64_t VA = ex(&b, tval, SL_PROV_E_COMPLETE, 2, 1, -1, P, r1);
  int64_t A = art(&b, tanom, 3);
  ln(&b, A, VA, SL_PROV_EV_OUTPUT, 3, "anomalies");
  /* TFX 1.16's validator writes no num_anomalies: `blessed` per split, a STRUCT; one split has anomalies. */
  sl_prov_value bl = {SL_PROV_T_STRUCT, 0, 0, "{\"eval\": 0.0, \"train\": 1.0}", 0, 0};
  assert_int_equal(sl_prov_set_property(p, SL_PROV_ARTIFACT, A, "blessed", true, &bl), 0);
  int64_t TF = ex(&b, ttf, SL_PROV_E_COMPLETE, 3, 1, -1, P, r1);
  ln(&b, E1, TF, SL_PROV_EV_INPUT, 3, "examples");
  ln(&b, S, TF, SL_PROV_EV_INPUT, 3, "schema");
  int64_t E1t = art(&b, b.examples, 4), Spost = art(&b, tschema, 4), Apost = art(&b, tanom, 4);
  set_int(&b, E1t, "span", 1);
  set_int(&b, Apost, "num_anomalies", 5);
  ln(&b, E1t, TF, SL_PROV_EV_OUTPUT, 4, "transformed_examples");
  ln(&b, Spost, TF, SL_PROV_EV_OUTPUT, 4, "post_transform_schema");
  ln(&b, Apost, TF, SL_PROV_EV_OUTPUT, 4, "post_transform_anomalies");
  int64_t M1;
  int64_t T1 = train_push(&b, P, r1, 4, E1t, 1, &M1); /* Trainer hours 4-5 (cpu 10), Pusher 5-6 (cpu 1) */
  ln(&b, S, T1, SL_PROV_EV_INPUT, 4, "schema");
  int64_t PU1 = 0, PM1 = 0;
  sl_prov_list *l;
  sl_prov_query q = {0};
  q.type_name = "PushedModel";
  assert_int_equal(sl_prov_find(&l, p, SL_PROV_ARTIFACT, &q), 0);
  assert_int_equal(l->n, 1);
  PM1 = l->nodes[0].id;
  sl_prov_list_free(l);
  q.type_name = "tfx.components.pusher.component.Pusher";
  assert_int_equal(sl_prov_find(&l, p, SL_PROV_EXECUTION, &q), 0);
  PU1 = l->nodes[0].id;
  sl_prov_list_free(l);
  /* Run 2 (hours 10-11): everything CACHED, re-emitting run 1's artifacts. */
  int64_t G2 = ex(&b, b.exgen, SL_PROV_E_CACHED, 10, 0.1, -1, P, r2);
  ln(&b, E1, G2, SL_PROV_EV_OUTPUT, 10.1, "examples");
  int64_t T2 = ex(&b, b.trainer, SL_PROV_E_CACHED, 10.2, 0.1, -1, P, r2);
  ln(&b, E1t, T2, SL_PROV_EV_INPUT, 10.2, "examples");
  ln(&b, M1, T2, SL_PROV_EV_OUTPUT, 10.3, "model");
  int64_t PU2 = ex(&b, b.pusher, SL_PROV_E_CACHED, 10.4, 0.1, -1, P, r2);
  ln(&b, M1, PU2, SL_PROV_EV_INPUT, 10.4, "model");
  ln(&b, PM1, PU2, SL_PROV_EV_OUTPUT, 10.5, "pushed_model");
  /* A failed run 3 (hour 20) so that run 2's graphlet has a successor. */
  int64_t r3 = ctx(&b, b.trun, "P.r3");
  int64_t T3 = ex(&b, b.trainer, SL_PROV_E_FAILED, 20, 1, -1, P, r3);
  ln(&b, E1t, T3, SL_PROV_EV_INPUT, 20, "examples");

  sl_prov_graphlets *g;
  assert_int_equal(sl_prov_graphlets_load(&g, p, NULL), 0);
  assert_int_equal(sl_prov_graphlets_count(g), 3);
  const sl_prov_graphlet *g1 = by_trainer(g, T1), *g2 = by_trainer(g, T2), *g3 = by_trainer(g, T3);
  assert_true(g1->pushed);
  /* The cached run re-emitted the push: not a new one, and nothing to prune. */
  assert_int_equal(g2->trainer_state, SL_PROV_E_CACHED);
  assert_false(g2->pushed);
  assert_true(g2->has_pusher);
  assert_true(has_id(g2->downstream, g2->ndownstream, PU2));
  assert_double_equal(g2->prunable, 0, 1e-9);
  assert_true(has_id(g2->upstream, g2->nupstream, TF)); /* its input's producer, from run 1 */
  assert_true(has_id(g2->upstream, g2->nupstream, G2));
  assert_false(g3->pushed);
  (void)PU1;
  /* Spans: the Transform's output and its input, both span 1. */
  assert_int_equal(g1->nspans, 1);
  assert_int_equal(g1->spans[0], 1);
  /* Features of run 1's graphlet: the validator's anomalies (1 split not blessed), not Transform's own (5). */
  const double *f1 = sl_prov_graphlets_features(g, 0);
  assert_double_equal(f1[3], 1, 1e-9);
  /* Waste (seconds; the trainer and pusher of train_push have cpu_seconds 10 and 1, the rest wall time): run 2
   * trained nothing (not waste); run 3's failed trainer (1 h) is. Run 1 pushed. */
  sl_prov_waste *w;
  assert_int_equal(sl_prov_waste_compute(&w, g), 0);
  assert_string_equal(sl_prov_graphlets_cost_basis(g), "mixed");
  assert_double_equal(w->total, 4 * 3600 + 10 + 1 + 3 * 360 + 3600, 0.01); /* ms truncation of hour fractions */
  assert_double_equal(w->wasted, 1 * 3600, 0.01);
  sl_prov_waste_free(w);
  sl_prov_graphlets_free(g);
  /* should-train: the newest pipeline schema is SchemaGen's S, which run 1's graphlet read: not a change, though
   * Transform's post_transform_schema is newer. */
  sl_prov_decision d;
  assert_int_equal(sl_prov_should_train(&d, p, "P", NULL, -1, 0), 0);
  assert_double_equal(d.features[4], 0, 1e-9);
  sl_free(d.features);
  /* A pipeline that ran but never trained (the gate at its first run) trains; an unknown one is an error. */
  int64_t N = ctx(&b, b.tpipe, "N");
  ex(&b, b.exgen, SL_PROV_E_COMPLETE, 30, 1, -1, N, 0);
  assert_int_equal(sl_prov_should_train(&d, p, "N", NULL, -1, 0), 0);
  assert_true(d.train);
  assert_true(isnan(d.p_push));
  sl_free(d.features);
  assert_int_equal(sl_prov_should_train(&d, p, "nope", NULL, -1, 0), SL_ENOTFOUND);
  sl_prov_close(p);
  tp_done(B);
}

static void other_tool_base_types_without_runs(void **state) {
  FRESH(p, "othertool");
  int64_t ttrain, tdeploy, tprep, tdata, tblob, tpipe;
  assert_int_equal(sl_prov_put_type(&ttrain, p, SL_PROV_EXECUTION, "acme.FitModel", NULL, 0, "mlmd.Train"), 0);
  assert_int_equal(sl_prov_put_type(&tdeploy, p, SL_PROV_EXECUTION, "acme.Rollout", NULL, 0, "mlmd.Deploy"), 0);
  assert_int_equal(sl_prov_put_type(&tprep, p, SL_PROV_EXECUTION, "acme.Prepare", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&tdata, p, SL_PROV_ARTIFACT, "acme.Table", NULL, 0, "mlmd.Dataset"), 0);
  assert_int_equal(sl_prov_put_type(&tblob, p, SL_PROV_ARTIFACT, "acme.Blob", NULL, 0, "mlmd.Model"), 0);
  assert_int_equal(sl_prov_put_type(&tpipe, p, SL_PROV_CONTEXT, "pipeline", NULL, 0, NULL), 0);
  hb b = {0};
  b.p = p;
  int64_t P = ctx(&b, tpipe, "acme");
  /* Two rounds, no pipeline_run contexts, no cpu_seconds: wall time is the cost. The second deploy failed. */
  int64_t trs[2], deps[2];
  for (int i = 0; i < 2; i++) {
    double t = 10.0 * i;
    int64_t prep = ex(&b, tprep, SL_PROV_E_COMPLETE, t, 1, -1, P, 0);
    int64_t d = art(&b, tdata, t + 1);
    ln(&b, d, prep, SL_PROV_EV_OUTPUT, t + 1, "out");
    trs[i] = ex(&b, ttrain, SL_PROV_E_COMPLETE, t + 1, 2, -1, P, 0);
    ln(&b, d, trs[i], SL_PROV_EV_INPUT, t + 1, "in");
    int64_t m = art(&b, tblob, t + 3);
    ln(&b, m, trs[i], SL_PROV_EV_OUTPUT, t + 3, "model");
    deps[i] = ex(&b, tdeploy, i == 0 ? SL_PROV_E_COMPLETE : SL_PROV_E_FAILED, t + 3, 1, -1, P, 0);
    ln(&b, m, deps[i], SL_PROV_EV_INPUT, t + 3, "model");
    int64_t out = art(&b, tdata, t + 4);
    ln(&b, out, deps[i], SL_PROV_EV_OUTPUT, t + 4, "endpoint");
  }
  /* Between the rounds, a comparison reads round 0's model as its baseline: not downstream of round 0. */
  int64_t cmp = ex(&b, tprep, SL_PROV_E_COMPLETE, 5, 0.5, -1, P, 0);
  sl_prov_list *ml;
  sl_prov_query mq = {0};
  mq.type_name = "acme.Blob";
  assert_int_equal(sl_prov_find(&ml, p, SL_PROV_ARTIFACT, &mq), 0);
  ln(&b, ml->nodes[0].id, cmp, SL_PROV_EV_INPUT, 5, "baseline_model");
  sl_prov_list_free(ml);
  sl_prov_graphlets *g;
  assert_int_equal(sl_prov_graphlets_load(&g, p, NULL), 0);
  assert_int_equal(sl_prov_graphlets_count(g), 2);
  assert_string_equal(sl_prov_graphlets_cost_basis(g), "wall");
  assert_false(has_id(by_trainer(g, trs[0])->downstream, by_trainer(g, trs[0])->ndownstream, cmp));
  const sl_prov_graphlet *a = by_trainer(g, trs[0]), *c = by_trainer(g, trs[1]);
  assert_true(a->pushed); /* completed mlmd.Deploy with an output and no `pushed` property */
  assert_false(c->pushed);
  assert_true(has_id(a->downstream, a->ndownstream, deps[0]));
  assert_false(has_id(a->downstream, a->ndownstream, deps[1])); /* bounded by the next trainer */
  assert_double_equal(a->cost, 4 * 3600.0, 1e-6); /* prepare 1 h + train 2 h + deploy 1 h */
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  tp_done(B);

  /* Neither a *Trainer name nor mlmd.Train: a clear message. */
  assert_true(tp_fresh(B, "notrainer"));
  p = tp_open(B);
  assert_int_equal(sl_prov_put_type(&tprep, p, SL_PROV_EXECUTION, "acme.Prepare", NULL, 0, NULL), 0);
  b.p = p;
  ex(&b, tprep, SL_PROV_E_COMPLETE, 0, 1, -1, 0, 0);
  assert_int_equal(sl_prov_graphlets_load(&g, p, NULL), SL_ENOTFOUND);
  assert_non_null(strstr(sl_error_last(), "mlmd.Train"));
  assert_non_null(strstr(sl_error_last(), "Trainer"));
  sl_prov_close(p);
  tp_done(B);
}

/* The toy simulation worked by hand (see docs/provenance.md): one pipeline, graphlets at hours 0, 10, 20, 30
 * (trainer 10 + pusher 1 cpu-seconds each, outcome 2 h after start); A and C push. The test window starts at 10 h:
 * B, C, D with predictions 0.1, 0.6, 0.3. */
static void simulation_arithmetic_by_hand(void **state) {
  FRESH(p, "sim");
  hb b;
  hb_init(&b, p);
  int64_t P = ctx(&b, b.tpipe, "P");
  const int push[4] = {1, 0, 1, 0};
  char nm[16];
  for (int i = 0; i < 4; i++) {
    snprintf(nm, sizeof nm, "P.r%d", i);
    int64_t r = ctx(&b, b.trun, nm);
    int64_t eg = ex(&b, b.exgen, SL_PROV_E_COMPLETE, 10.0 * i - 0.5, 0.25, 0, P, r);
    int64_t e = art(&b, b.examples, 10.0 * i - 0.25);
    ln(&b, e, eg, SL_PROV_EV_OUTPUT, 10.0 * i - 0.25, "examples");
    train_push(&b, P, r, 10.0 * i, e, push[i], NULL);
  }
  sl_prov_graphlets *g;
  assert_int_equal(sl_prov_graphlets_load(&g, p, NULL), 0);
  assert_int_equal(sl_prov_graphlets_count(g), 4);
  double pred[3] = {0.1, 0.6, 0.3};
  sl_prov_sim *s;
  assert_int_equal(sl__prov_simulate_p(&s, g, BASE + 10 * H, pred), 0);
  assert_int_equal(s->ngraphlets, 3);
  assert_int_equal(s->npushes, 1);
  assert_double_equal(s->window_waste, 22, 1e-9); /* B and D: trainer + pusher; ExampleGens cost 0 */
  assert_double_equal(s->prunable_waste, 22, 1e-9);
  assert_false(s->has_truth);
  /* Threshold 0.50 prunes B and D: all the waste, no push lost. */
  const sl_prov_sim_row *r = &s->rows[50];
  assert_double_equal(r->threshold, 0.5, 1e-12);
  assert_int_equal(r->pruned, 2);
  assert_double_equal(r->saved_waste, 22, 1e-9);
  assert_double_equal(r->saved_share, 1, 1e-12);
  assert_double_equal(r->push_recall, 1, 1e-12);
  assert_double_equal(r->cadence, 1, 1e-12);
  assert_double_equal(r->staleness_ratio, 1, 1e-12);
  assert_true(r->fresh);
  /* Threshold 0.20 prunes B only. */
  assert_int_equal(s->rows[20].pruned, 1);
  assert_double_equal(s->rows[20].saved_share, 0.5, 1e-12);
  /* Threshold 0.70 also prunes C, the window's only push: recall 0, cadence 0, and staleness: the newest model's
   * age over [10 h, 32 h] is t - 2 h throughout (A's push at 2 h) instead of dropping to 0 at C's push (22 h):
   * (30^2 - 8^2) / 2 = 418 vs (20^2 - 8^2) / 2 + 10^2 / 2 = 218 hour^2. */
  r = &s->rows[70];
  assert_int_equal(r->pruned, 3);
  assert_double_equal(r->lost_compute, 11, 1e-9);
  assert_double_equal(r->push_recall, 0, 1e-12);
  assert_double_equal(r->cadence, 0, 1e-12);
  assert_double_equal(r->staleness_ratio, 418.0 / 218.0, 1e-9);
  assert_false(r->fresh);
  /* The best fresh row is the first that saves everything (0.31 .. 0.60 all save 22; the first is kept). */
  assert_int_equal(s->best, 31);
  assert_int_equal(s->best_recall99, 31);
  sl_prov_sim_free(s);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  tp_done(B);
}

/* Everything recorded after a decision point is changed; the features of every graphlet up to that point stay
 * bit for bit the same. */
static void features_never_see_the_future(void **state) {
  FRESH(p, "future");
  sl_prov_gen_opts o = SL_PROV_GEN_OPTS_INIT;
  o.pipelines = 3;
  o.days = 20;
  o.seed = 7;
  assert_int_equal(sl_prov_gen(NULL, p, &o), 0);
  sl_prov_graphlets *g;
  assert_int_equal(sl_prov_graphlets_load(&g, p, NULL), 0);
  size_t n = sl_prov_graphlets_count(g), nf = sl_prov_feature_count();
  assert_true(n > 20);
  /* The decision point: the middle graphlet's trainer start. */
  int64_t t = sl_prov_graphlets_at(g, n / 2)->start_ms;
  double *before = malloc(n * nf * sizeof *before);
  int64_t *ids = malloc(n * sizeof *ids);
  for (size_t i = 0; i < n; i++) {
    ids[i] = sl_prov_graphlets_at(g, i)->trainer_id;
    memcpy(before + i * nf, sl_prov_graphlets_features(g, i), nf * sizeof *before);
  }
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  /* Change the future: outcomes, states, costs, anomalies, times of everything created at or after t. */
  sl__pdb *db;
  assert_int_equal(sl__pdb_open(&db, B->uri, false), 0);
  char sql[1024];
  snprintf(sql, sizeof sql,
           "UPDATE ArtifactProperty SET int_value = 1 - int_value WHERE name IN ('pushed', 'blessed') AND "
           "artifact_id IN (SELECT id FROM Artifact WHERE create_time_since_epoch >= %lld)",
           (long long)t);
  assert_int_equal(sl__pdb_exec(db, sql), 0);
  snprintf(sql, sizeof sql,
           "UPDATE ArtifactProperty SET int_value = int_value + 17 WHERE name = 'num_anomalies' AND artifact_id IN "
           "(SELECT id FROM Artifact WHERE create_time_since_epoch > %lld)",
           (long long)t);
  assert_int_equal(sl__pdb_exec(db, sql), 0);
  snprintf(sql, sizeof sql,
           "UPDATE ExecutionProperty SET double_value = double_value * 3 WHERE execution_id IN (SELECT id FROM "
           "Execution WHERE create_time_since_epoch >= %lld)",
           (long long)t);
  assert_int_equal(sl__pdb_exec(db, sql), 0);
  snprintf(sql, sizeof sql,
           "UPDATE Execution SET last_known_state = 4, last_update_time_since_epoch = last_update_time_since_epoch + "
           "7200000 WHERE create_time_since_epoch > %lld",
           (long long)t);
  assert_int_equal(sl__pdb_exec(db, sql), 0);
  sl__pdb_close(db);
  p = tp_open(B);
  assert_int_equal(sl_prov_graphlets_load(&g, p, NULL), 0);
  assert_int_equal(sl_prov_graphlets_count(g), n);
  size_t checked = 0;
  for (size_t i = 0; i < n; i++) {
    const sl_prov_graphlet *x = sl_prov_graphlets_at(g, i);
    assert_int_equal(x->trainer_id, ids[i]);
    if (x->start_ms > t) continue;
    const double *f = sl_prov_graphlets_features(g, i);
    for (size_t j = 0; j < nf; j++) {
      double a = before[i * nf + j], b = f[j];
      if (!(a == b || (isnan(a) && isnan(b))))
        fail_msg("graphlet %zu feature %s changed: %g -> %g", i, sl_prov_feature_name(j), a, b);
    }
    checked++;
  }
  assert_true(checked > 5);
  free(before);
  free(ids);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  tp_done(B);
}

static void predictor_trains_saves_loads_and_decides(void **state) {
  FRESH(p, "train");
  sl_prov_gen_opts o = SL_PROV_GEN_OPTS_INIT;
  o.pipelines = 8;
  o.days = 60;
  o.seed = 3;
  sl_prov_gen_report rep;
  assert_int_equal(sl_prov_gen(&rep, p, &o), 0);
  assert_int_equal(rep.pipelines, 8);
  assert_true(rep.runs > 100);
  sl_prov_graphlets *g;
  assert_int_equal(sl_prov_graphlets_load(&g, p, NULL), 0);
  assert_int_equal(sl_prov_graphlets_count(g), (size_t)rep.runs);
  size_t pushed = 0;
  for (size_t i = 0; i < sl_prov_graphlets_count(g); i++) pushed += sl_prov_graphlets_at(g, i)->pushed;
  assert_int_equal(pushed, (size_t)rep.pushed);
  sl_prov_train_opts to = SL_PROV_TRAIN_OPTS_INIT;
  to.trees = 40;
  sl_prov_model *m;
  sl_prov_train_report r;
  assert_int_equal(sl_prov_train(&m, &r, g, &to), 0);
  assert_true(r.ntrain > r.ntest);
  assert_true(r.train_to_ms <= r.test_from_ms); /* time-ordered */
  assert_true(r.roc_auc > 0.65 && r.roc_auc <= 1);
  assert_true(r.pr_auc > 0.5 && r.pr_auc <= 1);
  double sum = 0;
  for (size_t j = 0; j < sl_prov_feature_count(); j++) sum += r.importance[j];
  assert_double_equal(sum, 1, 1e-6);
  sl_prov_sim *s;
  assert_int_equal(sl_prov_simulate(&s, g, m), 0);
  assert_true(s->has_truth);
  assert_int_equal(s->nrows, 100);
  assert_true(s->rows[0].pruned == 0 && s->rows[0].fresh);
  for (size_t i = 1; i < s->nrows; i++) assert_true(s->rows[i].pruned >= s->rows[i - 1].pruned);
  sl_prov_sim_free(s);
  /* Save, load: the same predictions. */
  char *mdir = tu_tmpdir("model");
  char path[1200];
  snprintf(path, sizeof path, "%s/model.json", mdir);
  assert_int_equal(sl_prov_model_save(m, path), 0);
  sl_prov_model *m2;
  assert_int_equal(sl_prov_model_load(&m2, path), 0);
  for (size_t i = 0; i < 20; i++) {
    double a, b2;
    assert_int_equal(sl_prov_model_predict(&a, m, sl_prov_graphlets_features(g, i)), 0);
    assert_int_equal(sl_prov_model_predict(&b2, m2, sl_prov_graphlets_features(g, i)), 0);
    assert_double_equal(a, b2, 1e-6);
  }
  assert_int_equal(sl_prov_model_test_from(m2), r.test_from_ms);
  /* should-train for one pipeline: a probability and a decision, with and without the model. */
  const char *pipe = sl_prov_graphlets_at(g, 0)->pipeline;
  char pipename[64];
  snprintf(pipename, sizeof pipename, "%s", pipe);
  sl_prov_decision d;
  assert_int_equal(sl_prov_should_train(&d, p, pipename, m2, -1, 0), 0);
  assert_true(d.p_push >= 0 && d.p_push <= 1);
  assert_int_equal(d.train, d.p_push >= d.threshold);
  sl_free(d.features);
  assert_int_equal(sl_prov_should_train(&d, p, pipename, NULL, 2.0, 0), 0);
  assert_false(d.train); /* threshold above any probability */
  sl_free(d.features);
  assert_int_equal(sl_prov_should_train(&d, p, "no-such-pipeline", NULL, -1, 0), SL_ENOTFOUND);
  /* A model file from another feature set is refused. */
  const char *badjson = "{\"format\": \"sluice.prov.model/1\", \"features\": [\"x\"]}";
  char *bad = tu_write_file(mdir, "bad.json", badjson, strlen(badjson));
  sl_prov_model *m3;
  assert_int_equal(sl_prov_model_load(&m3, bad), SL_EVERSION);
  free(bad);
  tu_rmtree(mdir);
  free(mdir);
  sl_prov_train_report_dispose(&r);
  sl_prov_model_free(m);
  sl_prov_model_free(m2);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  tp_done(B);
}

static void generator_is_deterministic(void **state) {
  char *exports[2];
  for (int k = 0; k < 2; k++) {
    FRESH(p, "gendet");
    sl_prov_gen_opts o = SL_PROV_GEN_OPTS_INIT;
    o.pipelines = 2;
    o.days = 10;
    o.seed = 11;
    assert_int_equal(sl_prov_gen(NULL, p, &o), 0);
    assert_int_equal(sl_prov_export_json(&exports[k], p), 0);
    sl_prov_close(p);
    tp_done(B);
  }
  assert_true(strlen(exports[0]) > 1000);
  assert_string_equal(exports[0], exports[1]);
  sl_free(exports[0]);
  sl_free(exports[1]);
}

/* SQLite page size of a store's file, through the store's own connection layer. */
static int64_t lite_page_size(const char *path) {
  sl__pdb *db;
  sl__pstmt *st;
  assert_int_equal(sl__pdb_open(&db, path, false), 0);
  assert_int_equal(sl__pdb_prepare(db, &st, "PRAGMA page_size"), 0);
  assert_int_equal(sl__pstmt_step(st), 1);
  int64_t v = sl__pstmt_i64(st, 0);
  sl__pstmt_free(st);
  sl__pdb_close(db);
  return v;
}

/* A new SQLite store gets 16 KiB pages (db.c); one whose file was laid out with SQLite's default 4 KiB keeps them.
 * The same corpus in both reads back identically: the export, every graphlet's features, the waste. */
static void page_size_leaves_results_unchanged(void **state) {
  (void)state;
  char *dir = tu_tmpdir("pagesize"), path[2][1024];
  snprintf(path[0], sizeof path[0], "%s/fresh.sqlite", dir);
  snprintf(path[1], sizeof path[1], "%s/small-pages.sqlite", dir);
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(path[1], &raw), SQLITE_OK);
  assert_int_equal(sqlite3_exec(raw, "PRAGMA page_size=4096; CREATE TABLE x(a); DROP TABLE x", NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(raw);
  char *js[2];
  sl_prov_graphlets *g[2];
  sl_prov_waste *w[2];
  for (int k = 0; k < 2; k++) {
    sl_prov *p;
    assert_int_equal(sl_prov_open(&p, path[k], SL_PROV_CREATE), 0);
    sl_prov_gen_opts o = SL_PROV_GEN_OPTS_INIT;
    o.pipelines = 3;
    o.days = 30;
    o.seed = 5;
    assert_int_equal(sl_prov_gen(NULL, p, &o), 0);
    assert_int_equal(sl_prov_export_json(&js[k], p), 0);
    assert_int_equal(sl_prov_graphlets_load(&g[k], p, NULL), 0);
    assert_int_equal(sl_prov_waste_compute(&w[k], g[k]), 0);
    sl_prov_close(p);
  }
  assert_int_equal(lite_page_size(path[0]), 16384);
  assert_int_equal(lite_page_size(path[1]), 4096);
  assert_true(strlen(js[0]) > 1000);
  assert_string_equal(js[0], js[1]);
  size_t n = sl_prov_graphlets_count(g[0]), nf = sl_prov_feature_count();
  assert_true(n > 10);
  assert_int_equal(sl_prov_graphlets_count(g[1]), n);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(sl_prov_graphlets_at(g[0], i)->trainer_id, sl_prov_graphlets_at(g[1], i)->trainer_id);
    assert_int_equal(sl_prov_graphlets_at(g[0], i)->pushed, sl_prov_graphlets_at(g[1], i)->pushed);
    assert_memory_equal(sl_prov_graphlets_features(g[0], i), sl_prov_graphlets_features(g[1], i),
                        nf * sizeof(double));
  }
  assert_true(w[0]->total > 0);
  assert_true(w[0]->total == w[1]->total && w[0]->wasted == w[1]->wasted);
  for (int k = 0; k < 2; k++) {
    sl_free(js[k]);
    sl_prov_waste_free(w[k]);
    sl_prov_graphlets_free(g[k]);
  }
  tu_rmtree(dir);
  free(dir);
}

#define BOTH(f) {#f "/sqlite", f, NULL, NULL, &LITE}, {#f "/postgresql", f, NULL, NULL, &PG}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH(shared_upstream_waste_outcomes_and_states),
      BOTH(tfx_cached_run_and_transform_side_outputs),
      BOTH(other_tool_base_types_without_runs),
      BOTH(simulation_arithmetic_by_hand),
      BOTH(features_never_see_the_future),
      BOTH(predictor_trains_saves_loads_and_decides),
      BOTH(generator_is_deterministic),
      cmocka_unit_test(page_size_leaves_results_unchanged),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
