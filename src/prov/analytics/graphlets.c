/* prov/analytics/graphlets.c: builds the model graphlets from a store loaded by graphlets_load.c: for each trainer,
 * its upstream producers and same-run downstream consumers, its outcome (pushed or not), cost and prunable cost,
 * and the pre-decision facts the features (features.c) are computed from, as docs/provenance.md defines them. */
#define _GNU_SOURCE /* qsort_r */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prov/analytics/analytics_int.h"

/* ---- graphlets ---- */

static inline bool ev_in(const sl__an_event *e) {
  return e->type == SL_PROV_EV_INPUT || e->type == SL_PROV_EV_DECLARED_INPUT || e->type == SL_PROV_EV_INTERNAL_INPUT;
}
static inline bool ev_out(const sl__an_event *e) {
  return e->type == SL_PROV_EV_OUTPUT || e->type == SL_PROV_EV_DECLARED_OUTPUT ||
         e->type == SL_PROV_EV_INTERNAL_OUTPUT;
}
static inline unsigned tflags(const sl_prov_graphlets *g, int32_t t) { return t >= 0 ? g->types[t].flags : 0; }

typedef struct build {
  sl_prov_graphlets *g;
  int32_t *trainers; /* exec indices in (pipe, create, id) order */
  size_t ntr;
  /* executions by run (CSR, create order), or by pipeline when the store has no runs */
  size_t *grp_off;
  int32_t *grp;
  bool by_run;
  int32_t *xstamp, *astamp;
  int32_t *stack;
  size_t stack_cap, pool_cap;
} build;

static int cmp_exec_time(const void *a, const void *b, void *ctx) {
  const sl_prov_graphlets *g = ctx;
  const sl__an_exec *x = &g->ex[*(const int32_t *)a], *y = &g->ex[*(const int32_t *)b];
  if (x->pipe != y->pipe) return x->pipe < y->pipe ? -1 : 1;
  if (x->create != y->create) return x->create < y->create ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

static int pool_push(build *b, int64_t v) {
  sl_prov_graphlets *g = b->g;
  int rc = sl__an_grow((void **)&g->pool, &b->pool_cap, g->npool + 1, sizeof *g->pool);
  if (!rc) g->pool[g->npool++] = v;
  return rc;
}

static int push_stack(build *b, size_t *n, int32_t v) {
  int rc = sl__an_grow((void **)&b->stack, &b->stack_cap, *n + 1, sizeof *b->stack);
  if (!rc) b->stack[(*n)++] = v;
  return rc;
}

static uint64_t mixh(uint64_t x) { return sl__mix64(x + 0x51ed27ull); }

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Builds graphlet number k around trainer exec index t. */
/* One graphlet under construction: the decision (trainer t, graphlet k), its stamp, and what the passes gather. */
typedef struct one {
  build *b;
  sl_prov_graphlet *o;
  sl__an_graphlet *gi;
  const sl__an_exec *tr;
  int32_t t, stamp;
  double cost;
  /* Component types seen before the decision (stamped per graphlet through a small list). */
  int32_t seen_types[64];
  int nseen;
  int64_t spans[512];
  size_t nsp;
  size_t lo, hi;   /* the run's executions: b->grp[lo..hi) */
  int64_t next_tr; /* without runs: the creation time of the pipeline's next trainer */
} one;

static void add_type(one *c, int32_t ty) {
  for (int q = 0; q < c->nseen; q++)
    if (c->seen_types[q] == ty) return;
  if (c->nseen >= 64) return;
  c->seen_types[c->nseen++] = ty;
  c->gi->comp_hash ^= mixh((uint64_t)ty);
  c->gi->ncomp++;
}

/* Upstream: producers of the inputs, transitively; stop at model artifacts. */
static int build_upstream(one *c) {
  build *b = c->b;
  sl_prov_graphlets *g = b->g;
  int32_t t = c->t, stamp = c->stamp;
  size_t sp = 0;
  int rc;
  for (size_t j = g->ex_ev_off[t]; j < g->ex_ev_off[t + 1]; j++) {
    const sl__an_event *ev = &g->ev[g->ex_ev[j]];
    if (ev_in(ev) && (rc = push_stack(b, &sp, ev->art))) return rc;
  }
  while (sp) {
    int32_t a = b->stack[--sp];
    if (b->astamp[a] == stamp) continue;
    b->astamp[a] = stamp;
    const sl__an_art *ar = &g->art[a];
    unsigned f = tflags(g, ar->type);
    if (f & SL__AN_MODEL) continue;
    if ((f & SL__AN_EXAMPLES) && ar->span != INT64_MIN && c->nsp < 512) c->spans[c->nsp++] = ar->span;
    if ((f & SL__AN_SCHEMA) && !ar->side && ar->id > c->gi->schema) c->gi->schema = ar->id;
    int32_t pr = ar->producer;
    if (pr < 0 || b->xstamp[pr] == stamp) continue;
    b->xstamp[pr] = stamp;
    if ((rc = pool_push(b, g->ex[pr].id))) return rc;
    c->cost += g->ex[pr].cost;
    add_type(c, g->ex[pr].type);
    for (size_t j = g->ex_ev_off[pr]; j < g->ex_ev_off[pr + 1]; j++) {
      const sl__an_event *ev = &g->ev[g->ex_ev[j]];
      if (ev_in(ev) && !ev->baseline && (rc = push_stack(b, &sp, ev->art))) return rc;
    }
  }
  return 0;
}

/* The run: executions of the trainer's pipeline run (or, without runs, of its pipeline up to the next trainer);
 * its steps that started before the trainer (Resolvers, cached steps, validators); the anomalies recorded before
 * the decision in the run (or upstream). */
static int build_run(one *c) {
  build *b = c->b;
  sl_prov_graphlets *g = b->g;
  const sl__an_exec *tr = c->tr;
  int32_t t = c->t, stamp = c->stamp;
  int32_t grp = b->by_run ? tr->run : tr->pipe;
  if (grp >= 0) {
    c->lo = b->grp_off[grp];
    c->hi = b->grp_off[grp + 1];
  }
  c->next_tr = INT64_MAX;
  for (size_t j = c->lo; !b->by_run && j < c->hi; j++) {
    const sl__an_exec *x = &g->ex[b->grp[j]];
    if ((tflags(g, x->type) & SL__AN_TRAINER) && b->grp[j] != t &&
        (x->create > tr->create || (x->create == tr->create && x->id > tr->id)) && x->create < c->next_tr)
      c->next_tr = x->create;
  }
  for (size_t j = c->lo; b->by_run && j < c->hi; j++) {
    int32_t x = b->grp[j];
    const sl__an_exec *e = &g->ex[x];
    if (x == t || b->xstamp[x] == stamp) continue;
    if (e->create > tr->create || (e->create == tr->create && e->id > tr->id)) continue;
    b->xstamp[x] = stamp;
    int rc = pool_push(b, e->id);
    if (rc) return rc;
    c->cost += e->cost;
    add_type(c, e->type);
  }
  sl__an_graphlet *gi = c->gi;
  for (size_t j = c->lo; j < c->hi; j++) {
    int32_t x = b->grp[j];
    if (b->xstamp[x] != stamp || x == t) continue;
    for (size_t q = g->ex_ev_off[x]; q < g->ex_ev_off[x + 1]; q++) {
      const sl__an_event *ev = &g->ev[g->ex_ev[q]];
      const sl__an_art *ar = &g->art[ev->art];
      if (ev_out(ev) && (tflags(g, ar->type) & SL__AN_ANOMALIES) && !ar->side && ar->anomalies >= 0 &&
          ar->create <= tr->create)
        gi->anomalies = (isnan(gi->anomalies) ? 0 : gi->anomalies) + ar->anomalies;
    }
  }
  return 0;
}

/* Whether execution x consumes an artifact stamped downstream of the decision (-stamp). */
static bool consumes(const build *b, int32_t x, int32_t stamp) {
  const sl_prov_graphlets *g = b->g;
  for (size_t q = g->ex_ev_off[x]; q < g->ex_ev_off[x + 1]; q++) {
    const sl__an_event *ev = &g->ev[g->ex_ev[q]];
    if (ev_in(ev) && !ev->baseline && b->astamp[ev->art] == -stamp) return true;
  }
  return false;
}

/* Downstream: same-run executions consuming the model, then their outputs, in creation order; the outcome. */
static int build_downstream(one *c) {
  build *b = c->b;
  sl_prov_graphlets *g = b->g;
  const sl__an_exec *tr = c->tr;
  int32_t t = c->t, stamp = c->stamp;
  for (size_t j = g->ex_ev_off[t]; j < g->ex_ev_off[t + 1]; j++) {
    const sl__an_event *ev = &g->ev[g->ex_ev[j]];
    if (ev_out(ev)) b->astamp[ev->art] = -stamp;
  }
  double prunable = tr->cost;
  int64_t outcome = tr->update;
  bool pushed = false, has_pusher = false;
  for (size_t j = c->lo; j < c->hi; j++) {
    int32_t x = b->grp[j];
    const sl__an_exec *e = &g->ex[x];
    if (x == t || b->xstamp[x] == stamp) continue;
    if (e->create < tr->create || e->create >= c->next_tr) continue;
    if (!consumes(b, x, stamp)) continue;
    b->xstamp[x] = stamp;
    int rc = pool_push(b, e->id);
    if (rc) return rc;
    c->cost += e->cost;
    prunable += e->cost;
    if (e->update > outcome) outcome = e->update;
    bool deploy = tflags(g, e->type) & SL__AN_PUSHER;
    if (deploy) has_pusher = true;
    for (size_t q = g->ex_ev_off[x]; q < g->ex_ev_off[x + 1]; q++) {
      const sl__an_event *ev = &g->ev[g->ex_ev[q]];
      if (!ev_out(ev)) continue;
      b->astamp[ev->art] = -stamp;
      const sl__an_art *ar = &g->art[ev->art];
      bool pm = tflags(g, ar->type) & SL__AN_PUSHED;
      if (!pm && !deploy) continue;
      has_pusher = true;
      /* A push is a PushedModel this execution produced: a CACHED Pusher (TFX, a run on the same data) re-emits
       * an earlier run's PushedModel, pushed = 1 and all, but pushed nothing itself. */
      if (ar->producer != x) continue;
      if (ar->pushed >= 0)
        pushed |= ar->pushed == 1;
      else if (deploy && e->state == SL_PROV_E_COMPLETE)
        pushed = true;
    }
  }
  /* A CACHED trainer trained nothing (TFX found this run's inputs already trained on): no new push, and nothing
   * a pruning decision could save. */
  if (tr->state == SL_PROV_E_CACHED) pushed = false, prunable = 0;
  c->o->pushed = pushed;
  c->o->has_pusher = has_pusher;
  c->o->prunable = prunable;
  c->o->outcome_ms = outcome;
  return 0;
}

static int build_one(build *b, size_t k, int32_t t) {
  sl_prov_graphlets *g = b->g;
  one c = {.b = b, .o = &g->g[k], .gi = &g->gi[k], .tr = &g->ex[t], .t = t, .stamp = (int32_t)k + 1};
  const sl__an_exec *tr = c.tr;
  sl_prov_graphlet *o = c.o;
  sl__an_graphlet *gi = c.gi;
  memset(o, 0, sizeof *o);
  memset(gi, 0, sizeof *gi);
  gi->trainer = t;
  gi->pipe = tr->pipe;
  gi->anomalies = NAN;
  o->trainer_id = tr->id;
  o->pipeline_ctx = tr->pipe >= 0 ? g->pipe_ids[tr->pipe] : 0;
  o->pipeline = tr->pipe >= 0 ? g->pipes[tr->pipe] : "";
  o->start_ms = tr->create;
  o->trainer_state = tr->state;
  o->true_p = tr->true_p;
  b->xstamp[t] = c.stamp;
  c.cost = tr->cost;
  gi->comp_hash = mixh((uint64_t)tr->type);
  gi->ncomp = 1;
  c.seen_types[0] = tr->type;
  c.nseen = 1;
  gi->up_off = g->npool;
  gi->span_off = 0;
  int rc = build_upstream(&c);
  if (!rc) rc = build_run(&c);
  if (rc) return rc;
  gi->nup = g->npool - gi->up_off;
  gi->down_off = g->npool;
  if ((rc = build_downstream(&c))) return rc;
  gi->ndown = g->npool - gi->down_off;
  /* Spans, sorted and unique, into the pool. */
  qsort(c.spans, c.nsp, sizeof *c.spans, cmp_i64);
  gi->span_off = g->npool;
  for (size_t j = 0; j < c.nsp; j++)
    if ((j == 0 || c.spans[j] != c.spans[j - 1]) && (rc = pool_push(b, c.spans[j]))) return rc;
  gi->nspan = g->npool - gi->span_off;
  o->cost = c.cost;
  return 0;
}

/* ---- the set ---- */


/* Executions grouped by run (or by pipeline when there are no run contexts), each group in creation order. */
static int group_executions(build *b) {
  sl_prov_graphlets *g = b->g;
  /* Runs bound graphlets only where executions are associated with them. */
  b->by_run = false;
  for (size_t i = 0; i < g->nex && !b->by_run; i++) b->by_run = g->ex[i].run >= 0;
  size_t ngrp = b->by_run ? g->nruns : g->npipes;
  b->grp_off = sl__calloc(ngrp + 2, sizeof *b->grp_off);
  b->grp = sl__mallocarray(g->nex ? g->nex : 1, sizeof *b->grp);
  if (!b->grp_off || !b->grp) return sl__oom("run index");
  for (size_t i = 0; i < g->nex; i++) {
    int32_t r = b->by_run ? g->ex[i].run : g->ex[i].pipe;
    if (r >= 0) b->grp_off[r + 1]++;
  }
  for (size_t i = 0; i < ngrp; i++) b->grp_off[i + 1] += b->grp_off[i];
  size_t *fill = sl__mallocarray(ngrp + 1, sizeof *fill);
  if (!fill) return sl__oom("run index");
  memcpy(fill, b->grp_off, (ngrp + 1) * sizeof *fill);
  for (size_t i = 0; i < g->nex; i++) {
    int32_t r = b->by_run ? g->ex[i].run : g->ex[i].pipe;
    if (r >= 0) b->grp[fill[r]++] = (int32_t)i;
  }
  sl__free(fill);
  for (size_t r = 0; r < ngrp; r++)
    qsort_r(b->grp + b->grp_off[r], b->grp_off[r + 1] - b->grp_off[r], sizeof *b->grp, cmp_exec_time, g);
  return 0;
}

/* Marks each execution that belongs to a graphlet, and useful (not wasted) when one of its graphlets pushed. A
 * graphlet with a CACHED trainer trained nothing, so the steps of its own run (CACHED too, mostly) were not spent on
 * a model that was not pushed: they are not waste either. Its upstream from earlier runs keeps the outcome of the
 * graphlet that ran it. */
static void mark(sl__an_exec *e, const sl__an_exec *tr, bool pushed) {
  e->in_graphlet = true;
  if (pushed || (tr->state == SL_PROV_E_CACHED &&
                 (e->state == SL_PROV_E_CACHED || (tr->run >= 0 && e->run == tr->run))))
    e->useful = true;
}

static int mark_membership(sl_prov_graphlets *g) {
  sl__an_idmap emap = {0};
  int rc = sl__an_idmap_build(&emap, &g->ex[0].id, g->nex, sizeof *g->ex);
  if (rc) return rc;
  for (size_t i = 0; i < g->ng; i++) {
    const sl_prov_graphlet *o = &g->g[i];
    sl__an_exec *tr = &g->ex[g->gi[i].trainer];
    mark(tr, tr, o->pushed);
    for (size_t j = 0; j < o->nupstream; j++) mark(&g->ex[sl__an_idmap_get(&emap, o->upstream[j])], tr, o->pushed);
    for (size_t j = 0; j < o->ndownstream; j++)
      mark(&g->ex[sl__an_idmap_get(&emap, o->downstream[j])], tr, o->pushed);
  }
  sl__free(emap.ix);
  return 0;
}

/* Features: per pipeline, graphlets in start order (the trainers were sorted that way, graphlet i = trainers[i]). */
static int compute_features(sl_prov_graphlets *g) {
  size_t *prior = sl__mallocarray(g->ng, sizeof *prior);
  if (!prior) return sl__oom("features");
  size_t s = 0;
  while (s < g->ng) {
    size_t e = s;
    while (e < g->ng && g->gi[e].pipe == g->gi[s].pipe) e++;
    for (size_t i = s; i < e; i++) prior[i - s] = i;
    for (size_t i = s; i < e; i++) {
      const sl__an_graphlet *gi = &g->gi[i];
      sl__an_facts f = {g->g[i].start_ms, g->pool + gi->span_off, gi->nspan, gi->schema, gi->anomalies,
                        gi->comp_hash, gi->ncomp, g->ex[gi->trainer].code_fp};
      /* Prior graphlets are those before i in start order; equal starts are not "before". */
      sl__an_features(g, prior, i - s, &f, g->feat + i * SL__AN_NFEAT);
    }
    s = e;
  }
  sl__free(prior);
  return 0;
}

int sl__an_pipeline_ctx(int64_t *ctx, sl_prov *p, const char *pipeline) {
  *ctx = 0;
  int64_t tid;
  if (sl_prov_type_id(&tid, p, SL_PROV_CONTEXT, "pipeline"))
    return sl__err(SL_ENOTFOUND, "no pipeline contexts in the store (needed for --pipeline)");
  sl_prov_query q = {0};
  q.type_name = "pipeline";
  q.name = pipeline;
  sl_prov_list *l;
  int rc = sl_prov_find(&l, p, SL_PROV_CONTEXT, &q);
  if (rc) return rc;
  *ctx = l->n ? l->nodes[0].id : 0;
  sl_prov_list_free(l);
  return *ctx ? 0 : sl__err(SL_ENOTFOUND, "no pipeline named '%s'", pipeline);
}

int sl__an_load(sl_prov_graphlets **out, sl_prov *p, const char *pipeline) {
  *out = NULL;
  int64_t ctx = 0;
  int rc;
  if (pipeline && (rc = sl__an_pipeline_ctx(&ctx, p, pipeline))) return rc;
  sl_prov_graphlets *g = sl__calloc(1, sizeof *g);
  if (!g) return sl__oom("graphlets");
  build b = {0};
  b.g = g;
  if ((rc = sl__an_load_store(g, p, ctx))) goto done;
  /* Trainers, ordered by (pipeline, start). */
  for (size_t i = 0; i < g->nex; i++)
    if (tflags(g, g->ex[i].type) & SL__AN_TRAINER) b.ntr++;
  if (!b.ntr) {
    rc = pipeline ? sl__err(SL_ENOTFOUND, "pipeline '%s' has no trainer executions (no execution type is named "
                                          "*Trainer or based on mlmd.Train), so no model graphlets", pipeline)
                  : sl__err(SL_ENOTFOUND, "no trainer executions in the store: no execution type is named *Trainer or "
                                          "based on mlmd.Train, so there are no model graphlets");
    goto done;
  }
  b.trainers = sl__mallocarray(b.ntr, sizeof *b.trainers);
  g->g = sl__calloc(b.ntr, sizeof *g->g);
  g->gi = sl__calloc(b.ntr, sizeof *g->gi);
  g->feat = sl__mallocarray(b.ntr, SL__AN_NFEAT * sizeof *g->feat);
  b.xstamp = sl__calloc(g->nex, sizeof *b.xstamp);
  b.astamp = sl__calloc(g->nart ? g->nart : 1, sizeof *b.astamp);
  if (!b.trainers || !g->g || !g->gi || !g->feat || !b.xstamp || !b.astamp) {
    rc = sl__oom("graphlets");
    goto done;
  }
  size_t k = 0;
  for (size_t i = 0; i < g->nex; i++)
    if (tflags(g, g->ex[i].type) & SL__AN_TRAINER) b.trainers[k++] = (int32_t)i;
  qsort_r(b.trainers, b.ntr, sizeof *b.trainers, cmp_exec_time, g);
  if ((rc = group_executions(&b))) goto done;
  g->ng = b.ntr;
  for (size_t i = 0; i < b.ntr; i++)
    if ((rc = build_one(&b, i, b.trainers[i]))) goto done;
  /* Pool pointers, membership flags, cost basis. */
  for (size_t i = 0; i < g->ng; i++) {
    sl_prov_graphlet *o = &g->g[i];
    sl__an_graphlet *gi = &g->gi[i];
    o->upstream = g->pool + gi->up_off;
    o->nupstream = gi->nup;
    o->downstream = g->pool + gi->down_off;
    o->ndownstream = gi->ndown;
    o->spans = g->pool + gi->span_off;
    o->nspans = gi->nspan;
  }
  if ((rc = mark_membership(g))) goto done;
  for (size_t i = 0; i < g->nex; i++) g->cost_basis |= g->ex[i].cpu_known ? 1 : 2;
  if ((rc = compute_features(g))) goto done;
  *out = g;
  g = NULL;
done: /* on success g is NULL here, kept in *out */
  sl__free(b.trainers);
  sl__free(b.grp_off);
  sl__free(b.grp);
  sl__free(b.xstamp);
  sl__free(b.astamp);
  sl__free(b.stack);
  sl_prov_graphlets_free(g);
  return rc;
}

int sl_prov_graphlets_load(sl_prov_graphlets **out, sl_prov *p, const char *pipeline) {
  return sl__an_load(out, p, pipeline);
}

void sl_prov_graphlets_free(sl_prov_graphlets *g) {
  if (!g) return;
  for (size_t i = 0; i < g->ntypes; i++) sl__free(g->types[i].name);
  sl__free(g->types);
  sl__free(g->ex);
  sl__free(g->art);
  sl__free(g->ev);
  sl__free(g->ex_ev_off);
  sl__free(g->ex_ev);
  for (size_t i = 0; i < g->npipes; i++) sl__free(g->pipes[i]);
  sl__free(g->pipes);
  sl__free(g->pipe_ids);
  sl__free(g->g);
  sl__free(g->gi);
  sl__free(g->pool);
  sl__free(g->feat);
  sl__free(g);
}

size_t sl_prov_graphlets_count(const sl_prov_graphlets *g) { return g->ng; }
const sl_prov_graphlet *sl_prov_graphlets_at(const sl_prov_graphlets *g, size_t i) {
  return i < g->ng ? &g->g[i] : NULL;
}
const char *sl_prov_graphlets_cost_basis(const sl_prov_graphlets *g) {
  return g->cost_basis == 1 ? "cpu_seconds" : g->cost_basis == 2 ? "wall" : "mixed";
}
