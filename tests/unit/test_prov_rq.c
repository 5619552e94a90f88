/* test_prov_rq.c: overlap (re-processed input), the feature-group ablation and the fleet of recorded runs, on small
 * stores built here with answers worked out by hand, on SQLite and on the PostgreSQL test server.
 * SL_TEST_TIMEOUT(300) */
#include <math.h>

#include "test_prov_common.h"

#define assert_near(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) <= (eps))
#define H (3600 * 1000LL)
#define BASE (1000LL * H)

typedef struct rb {
  sl_prov *p;
  int64_t transform, trainer, pusher, validator;
  int64_t examples, model, pushedmodel, anomalies, tpipe, trun;
} rb;

static void rb_init(rb *b, sl_prov *p) {
  b->p = p;
  assert_int_equal(sl_prov_put_type(&b->transform, p, SL_PROV_EXECUTION, "tfx.components.transform.component.Transform",
                                    NULL, 0, NULL),
                   0);
  assert_int_equal(sl_prov_put_type(&b->trainer, p, SL_PROV_EXECUTION, "tfx.components.trainer.component.Trainer",
                                    NULL, 0, NULL),
                   0);
  assert_int_equal(sl_prov_put_type(&b->pusher, p, SL_PROV_EXECUTION, "tfx.components.pusher.component.Pusher", NULL,
                                    0, NULL),
                   0);
  assert_int_equal(sl_prov_put_type(&b->validator, p, SL_PROV_EXECUTION,
                                    "tfx.components.example_validator.component.ExampleValidator", NULL, 0, NULL),
                   0);
  sl_prov_type_prop ex[] = {{"span", SL_PROV_T_INT}};
  assert_int_equal(sl_prov_put_type(&b->examples, p, SL_PROV_ARTIFACT, "Examples", ex, 1, NULL), 0);
  assert_int_equal(sl_prov_put_type(&b->model, p, SL_PROV_ARTIFACT, "Model", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&b->pushedmodel, p, SL_PROV_ARTIFACT, "PushedModel", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&b->anomalies, p, SL_PROV_ARTIFACT, "ExampleAnomalies", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&b->tpipe, p, SL_PROV_CONTEXT, "pipeline", NULL, 0, NULL), 0);
  assert_int_equal(sl_prov_put_type(&b->trun, p, SL_PROV_CONTEXT, "pipeline_run", NULL, 0, NULL), 0);
}

static int64_t rb_ctx(rb *b, int64_t type, const char *name) {
  int64_t c;
  assert_int_equal(sl_prov_put_context(&c, b->p, type, name, BASE), 0);
  return c;
}

static int64_t rb_ex(rb *b, int64_t type, int state, double t, double cpu, int64_t pipe) {
  int64_t id;
  assert_int_equal(sl_prov_put_execution(&id, b->p, type, NULL, state, BASE + (int64_t)(t * H),
                                         BASE + (int64_t)((t + 1) * H)),
                   0);
  sl_prov_value v = sl_prov_double(cpu);
  assert_int_equal(sl_prov_set_property(b->p, SL_PROV_EXECUTION, id, "cpu_seconds", true, &v), 0);
  if (pipe) assert_int_equal(sl_prov_associate(b->p, pipe, id), 0);
  return id;
}

static int64_t rb_art(rb *b, int64_t type, double t, int64_t span) {
  int64_t id;
  assert_int_equal(sl_prov_put_artifact(&id, b->p, type, "uri", NULL, SL_PROV_A_LIVE, BASE + (int64_t)(t * H)), 0);
  if (span >= 0) {
    sl_prov_value v = sl_prov_int(span);
    assert_int_equal(sl_prov_set_property(b->p, SL_PROV_ARTIFACT, id, "span", false, &v), 0);
  }
  return id;
}

static void rb_ln(rb *b, int64_t a, int64_t e, int type, double t) {
  sl_prov_step path[2] = {{"examples", 0}, {NULL, 0}};
  assert_int_equal(sl_prov_put_event(NULL, b->p, a, e, type, BASE + (int64_t)(t * H), path, 2), 0);
}

/* A Transform at hour t in `pipe` reading the n spans in `in`, writing transformed Examples (which a Trainer reads
 * when `train`). */
static int64_t transform(rb *b, int state, double t, int64_t pipe, const int64_t *in, int n) {
  int64_t x = rb_ex(b, b->transform, state, t, 30, pipe);
  for (int i = 0; i < n; i++) rb_ln(b, in[i], x, SL_PROV_EV_INPUT, t);
  if (state == SL_PROV_E_COMPLETE) {
    int64_t out = rb_art(b, b->examples, t + 1, -1);
    rb_ln(b, out, x, SL_PROV_EV_OUTPUT, t + 1);
  }
  return x;
}

static const sl_prov_overlap_row *row(const sl_prov_overlap_row *r, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(r[i].name, name)) return &r[i];
  fail_msg("no overlap row %s", name);
  return NULL;
}

static tp_backend LITE = {"sqlite", "", NULL}, PG = {"postgresql", "", NULL};

#define FRESH(p, tag)                                                                                                 \
  tp_backend *B = *(tp_backend **)state;                                                                              \
  if (!tp_fresh(B, tag)) skip();                                                                                      \
  sl_prov *p = tp_open(B)

/* The known answers of docs/provenance.md's definition. Pipeline P's Transform reads a rolling window of 3 spans:
 * run 1 reads S1 (0), run 2 S1 S2 (1/2), runs 3-5 the last three (2/3 each). A CACHED and a FAILED Transform follow
 * (neither counted, nor an earlier reader for others); run 7 reads S4 S5 S6 (2/3: S6 was read only by the FAILED
 * one); run 8 reads S6, a regenerated span 5 (a new artifact: not re-processed) and S7 (1/3). Pipeline Q's Transform
 * reads S1, shared with P: not overlap across pipelines. Pipeline W's Trainer reads the same two spans twice
 * (overlap 1 the second time) and writes no Examples: nothing reuse could keep. */
static void overlap_known_answers(void **state) {
  FRESH(p, "overlap");
  rb b;
  rb_init(&b, p);
  int64_t P = rb_ctx(&b, b.tpipe, "P"), Q = rb_ctx(&b, b.tpipe, "Q"), W = rb_ctx(&b, b.tpipe, "W");
  int64_t S[8];
  for (int i = 1; i <= 7; i++) S[i] = rb_art(&b, b.examples, i, i);
  int64_t S5b = rb_art(&b, b.examples, 7.5, 5);
  double t = 10;
  int64_t w1[] = {S[1]}, w2[] = {S[1], S[2]}, w3[] = {S[1], S[2], S[3]}, w4[] = {S[2], S[3], S[4]},
          w5[] = {S[3], S[4], S[5]}, w6[] = {S[4], S[5], S[6]}, w8[] = {S[6], S5b, S[7]};
  transform(&b, SL_PROV_E_COMPLETE, t += 10, P, w1, 1);
  transform(&b, SL_PROV_E_COMPLETE, t += 10, P, w2, 2);
  transform(&b, SL_PROV_E_COMPLETE, t += 10, P, w3, 3);
  transform(&b, SL_PROV_E_COMPLETE, t += 10, P, w4, 3);
  int64_t last = transform(&b, SL_PROV_E_COMPLETE, t += 10, P, w5, 3);
  transform(&b, SL_PROV_E_CACHED, t += 10, P, w5, 3);
  transform(&b, SL_PROV_E_FAILED, t += 10, P, w6, 3);
  transform(&b, SL_PROV_E_COMPLETE, t += 10, P, w6, 3);
  transform(&b, SL_PROV_E_COMPLETE, t += 10, P, w8, 3);
  transform(&b, SL_PROV_E_COMPLETE, t += 10, Q, w1, 1);
  /* A trainer in P reading the last Transform's output (a graphlet, so the set loads), and W's two trainers. */
  (void)last;
  int64_t tr = rb_ex(&b, b.trainer, SL_PROV_E_COMPLETE, t += 10, 10, P);
  rb_ln(&b, S[7], tr, SL_PROV_EV_INPUT, t);
  for (int k = 0; k < 2; k++) {
    int64_t x = rb_ex(&b, b.trainer, SL_PROV_E_COMPLETE, t += 10, 10, W);
    rb_ln(&b, S[1], x, SL_PROV_EV_INPUT, t);
    rb_ln(&b, S[2], x, SL_PROV_EV_INPUT, t);
  }
  sl_prov_graphlets *g;
  assert_int_equal(sl_prov_graphlets_load(&g, p, NULL), 0);
  sl_prov_overlap *o;
  assert_int_equal(sl_prov_overlap_compute(&o, g), 0);
  const sl_prov_overlap_row *tf = row(o->types, o->ntypes, "Transform");
  assert_int_equal(tf->executions, 8); /* P: runs 1-5, 7, 8; Q: 1 */
  assert_int_equal(tf->with_overlap, 6);
  double sum = 0.5 + 4 * (2.0 / 3) + 1.0 / 3;
  assert_near(tf->mean_overlap, sum / 8, 1e-9);
  assert_near(tf->cost, 8 * 30, 1e-9);
  assert_near(tf->recomputed_cost, 30 * sum, 1e-9);
  assert_near(tf->reusable_cost, 30 * sum, 1e-9); /* every earlier reader wrote Examples */
  const sl_prov_overlap_row *trn = row(o->types, o->ntypes, "Trainer");
  assert_int_equal(trn->executions, 3);
  assert_int_equal(trn->with_overlap, 1);
  assert_near(trn->recomputed_cost, 10, 1e-9);
  assert_near(trn->reusable_cost, 0, 1e-9);
  const sl_prov_overlap_row *q = row(o->pipelines, o->npipelines, "Q");
  assert_int_equal(q->executions, 1);
  assert_int_equal(q->with_overlap, 0);
  assert_near(q->recomputed_cost, 0, 1e-9);
  assert_near(row(o->pipelines, o->npipelines, "P")->recomputed_cost, 30 * sum, 1e-9);
  assert_string_equal(o->pipelines[0].name, "P"); /* by recomputed cost */
  assert_int_equal(o->total.executions, 11);
  assert_near(o->total.recomputed_cost, 30 * sum + 10, 1e-9);
  assert_near(o->all_compute, 10 * 30 + 3 * 10, 1e-9); /* the CACHED and FAILED Transforms cost too */
  sl_prov_overlap_free(o);
  sl_prov_graphlets_free(g);
  /* One pipeline alone gives that pipeline's figures. */
  assert_int_equal(sl_prov_graphlets_load(&g, p, "P"), 0);
  assert_int_equal(sl_prov_overlap_compute(&o, g), 0);
  assert_int_equal(o->npipelines, 1);
  assert_near(o->total.recomputed_cost, 30 * sum, 1e-9);
  assert_int_equal(row(o->types, o->ntypes, "Transform")->executions, 7);
  sl_prov_overlap_free(o);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  tp_done(B);
}


/* A corpus whose outcome depends only on the input: each run of each pipeline has a new span or not (half the time)
 * and an ExampleValidator finding 0-3 anomalies; the model pushes when there is a new span with at most one anomaly (3%
 * of outcomes flipped). History carries nothing (runs are independent) and the code features are constant. */
static void input_only_corpus(rb *b, int pipelines, int runs) {
  uint64_t s = 12345;
#define RND() ((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33)
  assert_int_equal(sl_prov_begin(b->p), 0);
  for (int pi = 0; pi < pipelines; pi++) {
    char nm[64];
    snprintf(nm, sizeof nm, "in%d", pi);
    int64_t P = rb_ctx(b, b->tpipe, nm);
    int64_t spans[2] = {0, 0};
    int nspan = 0;
    for (int r = 0; r < runs; r++) {
      double t = 6.0 * r + pi * 0.1; /* four runs a day: a pruned run seldom leaves a day without a push */
      snprintf(nm, sizeof nm, "in%d.r%d", pi, r);
      int64_t R = rb_ctx(b, b->trun, nm);
      bool fresh = RND() % 2 || nspan == 0;
      if (fresh) {
        spans[0] = spans[1];
        spans[1] = rb_art(b, b->examples, t, nspan++);
      }
      int anomalies = (int)(RND() % 4);
      int64_t v = rb_ex(b, b->validator, SL_PROV_E_COMPLETE, t, 1, 0);
      assert_int_equal(sl_prov_associate(b->p, P, v), 0);
      assert_int_equal(sl_prov_associate(b->p, R, v), 0);
      rb_ln(b, spans[1], v, SL_PROV_EV_INPUT, t);
      int64_t an = rb_art(b, b->anomalies, t + 0.5, -1);
      rb_ln(b, an, v, SL_PROV_EV_OUTPUT, t + 0.5);
      sl_prov_value nv = sl_prov_int(anomalies);
      assert_int_equal(sl_prov_set_property(b->p, SL_PROV_ARTIFACT, an, "num_anomalies", true, &nv), 0);
      int64_t tr = rb_ex(b, b->trainer, SL_PROV_E_COMPLETE, t + 1, 10, 0);
      assert_int_equal(sl_prov_associate(b->p, P, tr), 0);
      assert_int_equal(sl_prov_associate(b->p, R, tr), 0);
      for (int k = 0; k < 2; k++)
        if (spans[k]) rb_ln(b, spans[k], tr, SL_PROV_EV_INPUT, t + 1);
      int64_t m = rb_art(b, b->model, t + 2, -1);
      rb_ln(b, m, tr, SL_PROV_EV_OUTPUT, t + 2);
      int64_t pu = rb_ex(b, b->pusher, SL_PROV_E_COMPLETE, t + 2, 1, 0);
      assert_int_equal(sl_prov_associate(b->p, P, pu), 0);
      assert_int_equal(sl_prov_associate(b->p, R, pu), 0);
      rb_ln(b, m, pu, SL_PROV_EV_INPUT, t + 2);
      int64_t pm = rb_art(b, b->pushedmodel, t + 3, -1);
      rb_ln(b, pm, pu, SL_PROV_EV_OUTPUT, t + 3);
      int pushed = fresh && anomalies <= 1;
      if (RND() % 33 == 0) pushed = !pushed;
      sl_prov_value pv = sl_prov_int(pushed);
      assert_int_equal(sl_prov_set_property(b->p, SL_PROV_ARTIFACT, pm, "pushed", true, &pv), 0);
    }
  }
  assert_int_equal(sl_prov_commit(b->p), 0);
#undef RND
}

static const sl_prov_ablation_group *group(const sl_prov_ablation *a, const char *name) {
  for (size_t i = 0; i < a->ngroups; i++)
    if (!strcmp(a->groups[i].name, name)) return &a->groups[i];
  fail_msg("no group %s", name);
  return NULL;
}

static void ablation_input_only_corpus(void **state) {
  FRESH(p, "ablation");
  rb b;
  rb_init(&b, p);
  input_only_corpus(&b, 4, 100);
  sl_prov_graphlets *g;
  assert_int_equal(sl_prov_graphlets_load(&g, p, NULL), 0);
  assert_int_equal(sl_prov_graphlets_count(g), 400);
  sl_prov_ablation_opts o = SL_PROV_ABLATION_OPTS_INIT;
  o.seeds = 3;
  o.train.trees = 30;
  sl_prov_ablation *a;
  assert_int_equal(sl_prov_ablation_run(&a, g, &o), 0);
  assert_int_equal(a->ngroups, 5);
  assert_int_equal(a->seeds, 3);
  const sl_prov_ablation_group *in = group(a, "input"), *all = group(a, "all"), *code = group(a, "code"),
                               *hist = group(a, "history");
  for (size_t i = 0; i < a->ngroups; i++)
    fprintf(stderr, "  %-14s roc %.3f +- %.3f  pr %.3f  saved %.3f\n", a->groups[i].name, a->groups[i].roc_auc,
            a->groups[i].roc_auc_sd, a->groups[i].pr_auc, a->groups[i].saved_share);
  assert_int_equal(in->nfeatures + hist->nfeatures + code->nfeatures, sl_prov_feature_count());
  assert_int_equal(all->nfeatures, sl_prov_feature_count());
  /* The mechanism: new span and at most one anomaly push, 3% flipped: the input group separates them well. */
  assert_true(in->roc_auc > 0.8);
  /* Everything else adds only noise: all is within noise of input. */
  assert_true(fabs(in->roc_auc - all->roc_auc) < 0.05);
  /* The code features are constant here: every graphlet scores alike, ROC-AUC one half. */
  assert_near(code->roc_auc, 0.5, 1e-9);
  assert_true(hist->roc_auc < in->roc_auc - 0.15);
  assert_true(in->saved_share > 0);
  sl_prov_ablation_free(a);
  /* A bad option is named. */
  o.seeds = -1;
  assert_int_equal(sl_prov_ablation_run(&a, g, &o), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "seeds"));
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  tp_done(B);
}

/* Recorded runs with known figures: pipeline A's busiest op used 95%, 50% and 85% of its cores (two at the limit),
 * the spin map busiest twice; a recorded optimize of A reached 500/s over A's median 200/s (headroom 2.5); a failed
 * run is counted apart. Pipeline B recorded no load (older sluice): known 0. */
static void rec_run(const char *uri, const char *pipe, const char *kind, double tp, double load, const char *op,
                    bool failed) {
  sl_prov_run r = SL_PROV_RUN_INIT;
  r.kind = kind;
  r.pipeline = pipe;
  r.throughput = tp;
  r.cpu_seconds = 2;
  r.elapsed = 1;
  r.busiest_load = load;
  r.bottleneck = op;
  r.failed = failed;
  r.error = failed ? "boom" : NULL;
  assert_int_equal(sl_prov_record_run(NULL, uri, &r), 0);
}

static void fleet_known_runs(void **state) {
  FRESH(p, "fleet");
  sl_prov_fleet *f;
  assert_int_equal(sl_prov_fleet_compute(&f, p), 0); /* an empty store: an empty report */
  assert_int_equal(f->all.runs, 0);
  assert_int_equal(f->npipelines, 0);
  sl_prov_fleet_free(f);
  const char *spin = "ops[2] (map spin)", *lines = "ops[1] (lines)";
  rec_run(B->uri, "A", NULL, 100, 0.95, spin, false);
  rec_run(B->uri, "A", NULL, 300, 0.5, lines, false);
  rec_run(B->uri, "A", NULL, 200, 0.85, spin, false);
  rec_run(B->uri, "A", NULL, 0, 0, NULL, true);
  rec_run(B->uri, "A", "sluice.Optimize", 500, 0.9, spin, false);
  rec_run(B->uri, "B", NULL, 50, 0, lines, false);
  assert_int_equal(sl_prov_fleet_compute(&f, p), 0);
  assert_int_equal(f->npipelines, 2);
  const sl_prov_fleet_row *a = &f->pipelines[0];
  assert_string_equal(a->pipeline, "A");
  assert_int_equal(a->runs, 3);
  assert_int_equal(a->failed, 1);
  assert_int_equal(a->known, 3);
  assert_int_equal(a->input_bound, 2);
  assert_near(a->cpu_seconds, 6, 1e-9);
  assert_near(a->throughput, 200, 1e-9);
  assert_near(a->bound, 500, 1e-9);
  assert_near(a->headroom, 2.5, 1e-9);
  assert_int_equal(a->nops, 2);
  assert_string_equal(a->ops[0].op, spin);
  assert_int_equal(a->ops[0].count, 2);
  const sl_prov_fleet_row *b = &f->pipelines[1];
  assert_int_equal(b->runs, 1);
  assert_int_equal(b->known, 0);
  assert_near(b->headroom, 0, 0);
  assert_int_equal(f->all.runs, 4);
  assert_int_equal(f->all.failed, 1);
  assert_int_equal(f->all.input_bound, 2);
  assert_near(f->all.headroom, 2.5, 1e-9); /* B has none: A's alone */
  /* Over all runs each op was the busiest twice: equal counts are ordered by name. */
  assert_int_equal(f->all.nops, 2);
  assert_string_equal(f->all.ops[0].op, lines);
  assert_int_equal(f->all.ops[0].count, 2);
  assert_int_equal(f->all.ops[1].count, 2);
  sl_prov_fleet_free(f);
  sl_prov_close(p);
  tp_done(B);
}

/* The bulk write path (on PostgreSQL: ids from the sequences, rows through COPY) keeps what plain writes keep: text
 * with tabs, newlines and backslashes, NULL names, a state set after the insert, events and their paths, and reads
 * in the middle of a load see the rows written before them. */
static void bulk_load_round_trip(void **state) {
  FRESH(p, "bulkcopy");
  rb b;
  rb_init(&b, p);
  assert_int_equal(sl_prov_bulk_begin(p), 0);
  assert_int_equal(sl_prov_begin(p), 0);
  const char *odd = "a\tb\nc\\d\re \\N";
  int64_t a1, a2, x;
  assert_int_equal(sl_prov_put_artifact(&a1, p, b.examples, odd, NULL, SL_PROV_A_LIVE, BASE), 0);
  assert_int_equal(sl_prov_put_artifact(&a2, p, b.examples, NULL, "named", SL_PROV_A_PENDING, BASE + 1), 0);
  assert_int_equal(sl_prov_put_execution(&x, p, b.trainer, odd, SL_PROV_E_RUNNING, BASE, BASE), 0);
  assert_int_equal(sl_prov_set_execution_state(p, x, SL_PROV_E_COMPLETE, BASE + 5), 0);
  sl_prov_step path[2] = {{"examples", 0}, {NULL, 3}};
  assert_int_equal(sl_prov_put_event(NULL, p, a1, x, SL_PROV_EV_INPUT, BASE + 2, path, 2), 0);
  int64_t ev;
  assert_int_equal(sl_prov_put_event(&ev, p, a2, x, SL_PROV_EV_OUTPUT, BASE + 3, path, 1), 0);
  assert_true(ev > 0);
  sl_prov_value v = sl_prov_string("first");
  assert_int_equal(sl_prov_set_property(p, SL_PROV_ARTIFACT, a1, "note", true, &v), 0);
  v = sl_prov_string(odd); /* the same key again: the last value wins */
  assert_int_equal(sl_prov_set_property(p, SL_PROV_ARTIFACT, a1, "note", true, &v), 0);
  v = sl_prov_double(0.1);
  assert_int_equal(sl_prov_set_property(p, SL_PROV_EXECUTION, x, "cpu_seconds", true, &v), 0);
  int64_t P = rb_ctx(&b, b.tpipe, "bulkP");
  assert_int_equal(sl_prov_associate(p, P, x), 0);
  assert_int_equal(sl_prov_associate(p, P, x), 0); /* kept once */
  assert_int_equal(sl_prov_attribute(p, P, a1), 0);
  /* A read in the middle of the load. */
  sl_prov_list *l;
  sl_prov_query q = {0};
  q.id = a1;
  assert_int_equal(sl_prov_find(&l, p, SL_PROV_ARTIFACT, &q), 0);
  assert_int_equal(l->n, 1);
  assert_string_equal(l->nodes[0].uri, odd);
  assert_null(l->nodes[0].name);
  sl_prov_list_free(l);
  q.id = 0;
  q.context_id = P;
  assert_int_equal(sl_prov_find(&l, p, SL_PROV_EXECUTION, &q), 0);
  assert_int_equal(l->n, 1);
  assert_int_equal(l->nodes[0].id, x);
  bool cpu = false;
  for (size_t i = 0; i < l->nodes[0].nprops; i++)
    if (!strcmp(l->nodes[0].props[i].name, "cpu_seconds")) cpu = l->nodes[0].props[i].d == 0.1;
  assert_true(cpu);
  sl_prov_list_free(l);
  assert_int_equal(sl_prov_find(&l, p, SL_PROV_ARTIFACT, &q), 0);
  assert_int_equal(l->n, 1);
  bool note = false;
  for (size_t i = 0; i < l->nodes[0].nprops; i++)
    if (!strcmp(l->nodes[0].props[i].name, "note")) note = !strcmp(l->nodes[0].props[i].s, odd);
  assert_true(note);
  sl_prov_list_free(l);
  q.context_id = 0;
  assert_int_equal(sl_prov_commit(p), 0);
  assert_int_equal(sl_prov_bulk_end(p), 0);
  q.id = x;
  assert_int_equal(sl_prov_find(&l, p, SL_PROV_EXECUTION, &q), 0);
  assert_int_equal(l->n, 1);
  assert_string_equal(l->nodes[0].name, odd);
  assert_int_equal(l->nodes[0].state, SL_PROV_E_COMPLETE);
  assert_int_equal(l->nodes[0].update_ms, BASE + 5);
  sl_prov_list_free(l);
  q.id = a2;
  assert_int_equal(sl_prov_find(&l, p, SL_PROV_ARTIFACT, &q), 0);
  assert_null(l->nodes[0].uri);
  assert_string_equal(l->nodes[0].name, "named");
  assert_int_equal(l->nodes[0].state, SL_PROV_A_PENDING);
  sl_prov_list_free(l);
  assert_int_equal(sl_prov_neighbours(&l, p, SL_PROV_EXECUTION, x), 0);
  assert_int_equal(l->nevents, 2);
  bool seen_path = false;
  for (size_t i = 0; i < l->nevents; i++)
    if (l->events[i].artifact_id == a1) seen_path = !strcmp(l->events[i].path, "examples:3");
  assert_true(seen_path);
  sl_prov_list_free(l);
  /* A second load into the same store continues after the first one's ids. */
  assert_int_equal(sl_prov_bulk_begin(p), 0);
  int64_t a3;
  assert_int_equal(sl_prov_put_artifact(&a3, p, b.examples, "u", NULL, SL_PROV_A_LIVE, BASE), 0);
  assert_int_equal(sl_prov_bulk_end(p), 0);
  assert_true(a3 > a2);
  q.id = a3;
  assert_int_equal(sl_prov_find(&l, p, SL_PROV_ARTIFACT, &q), 0);
  assert_int_equal(l->n, 1);
  sl_prov_list_free(l);
  sl_prov_close(p);
  tp_done(B);
}

#define BOTH(f) {#f "/sqlite", f, NULL, NULL, &LITE}, {#f "/postgresql", f, NULL, NULL, &PG}

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH(overlap_known_answers),
      BOTH(ablation_input_only_corpus),
      BOTH(fleet_known_runs),
      BOTH(bulk_load_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
