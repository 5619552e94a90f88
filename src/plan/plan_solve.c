/* plan/plan_solve.c: the solver. Builds the model from a trace, bounds it with the LP, tries cache points one by
 * one, sets the integer knobs, fits the memory budget and decides on the root prefetch; sl_plan's accessors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan_int.h"

/* Elements per epoch at op k when the spec does not say: the elements k made in the trace, scaled by the dataset's
 * bytes (its `files` ops' sizes) over the bytes its readers read. -1 when there is nothing to scale by. */
static double estimate_card(const sl_plan *P, int k) {
  double src = 0, read = 0;
  for (int j = 0; j < P->nops; j++) {
    if (!sl__plan_upstream(P, j, k)) continue;
    src += P->ops[j].src_bytes;
    read += P->ops[j].disk;
  }
  if (!(src > 0) || !(read > 0) || !(P->ops[k].n > 0)) return -1;
  return ceil(P->ops[k].n * src / read);
}

static int cache_candidates(const sl_plan *P, double budget, double base_bound, sl__pm_cache *cands, int *ncands,
                            int *best_at, double *best_bound) {
  *best_at = -1;
  *best_bound = base_bound;
  *ncands = 0;
  int existing = -1;
  for (int i = 0; i < P->nops; i++)
    if (P->ops[i].kind == SL__MK_CACHE) existing = i;
  for (int k = 0; k < P->nops; k++) {
    const sl__pm_op *o = &P->ops[k];
    if (o->nested || o->kind == SL__MK_PREFETCH || o->kind == SL__MK_CACHE) continue;
    if (existing >= 0) continue;
    sl__pm_cache *c = &cands[(*ncands)++];
    memset(c, 0, sizeof *c);
    c->at = k;
    int rnd = -1;
    for (int j = 0; j < P->nops; j++)
      if (P->ops[j].random && sl__plan_upstream(P, j, k)) rnd = j;
    if (rnd >= 0) {
      snprintf(c->why, sizeof c->why, "random op %s (%s) upstream", P->ops[rnd].path, P->ops[rnd].label);
      continue;
    }
    if (o->card == -2) {
      snprintf(c->why, sizeof c->why, "infinite cardinality (a repeat upstream)");
      continue;
    }
    bool reread = false;
    for (int r = 0; r < P->nops; r++)
      if (P->ops[r].kind == SL__MK_REPEAT && r != k && sl__plan_upstream(P, k, r)) reread = true;
    if (!reread) {
      snprintf(c->why, sizeof c->why, "no repeat downstream (one pass reads each element once)");
      continue;
    }
    double card = (double)o->card;
    if (o->card < 0) {
      card = estimate_card(P, k);
      c->estimated = card > 0;
    }
    if (!(card >= 0)) {
      snprintf(c->why, sizeof c->why, "size unknown (cardinality unknown, the trace did not reach the end and the "
                                      "dataset's size is unknown)");
      continue;
    }
    /* An estimate gets a margin: the cache must not outgrow the budget when the guess is low. */
    c->bytes = card * (o->bytes + SL__PLAN_ELEM_OVERHEAD) * (c->estimated ? 1.1 : 1.0);
    if (c->bytes > budget) {
      char a[32], b[32];
      sl__plan_fmt_bytes(a, sizeof a, c->bytes);
      sl__plan_fmt_bytes(b, sizeof b, budget);
      snprintf(c->why, sizeof c->why, "size %s exceeds the %s left in the memory budget", a, b);
      continue;
    }
    double X;
    int rc = sl__plan_lp(P, k, c->bytes, P->C, &X, NULL);
    if (rc) return rc;
    c->legal = true;
    c->bound = X;
    /* Keep a cache only for a clear gain: it costs memory and a slow first epoch. */
    if (X > *best_bound * 1.02 && (*best_at < 0 || X > *best_bound)) {
      *best_at = k;
      *best_bound = X;
    }
  }
  return 0;
}

/* The LP, the parallelism around its point, the buffers, the read-ahead for the rate chosen, then the memory. */
static int solve_config(sl_plan *P) {
  double cb = P->cache_at >= 0 ? P->cache_bytes : 0;
  sl__plan_net_caps(P, cb);
  int rc = sl__plan_lp(P, P->cache_at, cb, P->C, &P->bound, &P->limit);
  if (!rc) rc = sl__plan_search_parallelism(P, P->cache_at);
  if (!rc) {
    sl__plan_size_buffers(P);
    sl__plan_net_caps(P, cb); /* the planned cycles: files read at once */
    sl__plan_net_size(P);
    rc = sl__plan_fit_memory(P);
  }
  return rc;
}

int sl__plan_force_parallelism(sl_plan *P, int64_t par) {
  bool changed = false;
  for (int i = 0; i < P->nops; i++) {
    const sl__pm_op *o = &P->ops[i];
    if (!o->par_tunable || (P->cache_at >= 0 && sl__plan_upstream(P, i, P->cache_at)) || P->par[i] == par) continue;
    P->par[i] = par;
    changed = true;
  }
  if (!changed) return 1;
  P->predicted = sl__plan_eval(P, P->par, P->cache_at, P->C);
  if (P->predicted < 0) return SL_ENOMEM;
  sl__plan_size_buffers(P);
  int rc = sl__plan_fit_memory(P);
  return rc < 0 ? rc : 0;
}

int sl__plan_as_traced(sl_plan *P) {
  for (int i = 0; i < P->nops; i++) {
    P->par[i] = P->ops[i].par0;
    P->buf[i] = P->ops[i].buf0;
    P->cyc[i] = P->ops[i].cyc0;
  }
  for (int k = 0; k < P->nnet; k++) {
    sl__pm_net *x = &P->net[k];
    x->in_flight = x->q_cap = x->in_flight0;
    x->keep = x->keep0 > 0 && x->reread && x->epoch_bytes > 0 && x->keep0 >= x->epoch_bytes ? x->keep0 : 0;
  }
  P->cache_at = -1;
  P->cache_bytes = 0;
  P->add_prefetch = false;
  P->prefetch_buf = 0;
  P->predicted = sl__plan_eval(P, P->par, -1, P->C);
  if (P->predicted < 0) return SL_ENOMEM;
  P->mem = sl__plan_memory(P, P->par, P->buf, P->cyc, -1, 0, 0);
  return 0;
}

static int solve_fitting(sl_plan *P) {
  int rc = solve_config(P);
  if (rc == SL_EINVAL && P->cache_at >= 0) {
    /* The cache left too little room for the buffers the parallelism needs: plan without it. */
    sl_error_clear();
    P->cache_at = -1;
    P->cache_bytes = 0;
    rc = solve_config(P);
  }
  return rc;
}

/* The root prefetch costs a hand-off per element: the plan keeps it unless the plan without it is clearly faster
 * on the model (its buffer also absorbs the spread of per-element times, which the model does not price). */
static int maybe_drop_prefetch(sl_plan *P) {
  size_t nb = (size_t)P->nops * sizeof(int64_t), nnb = (size_t)P->nnet * sizeof *P->net;
  int64_t *sv = sl__malloc(3 * nb);
  sl__pm_net *svn = nnb ? sl__malloc(nnb) : NULL;
  if (!sv || (nnb && !svn)) {
    sl__free(sv);
    sl__free(svn);
    return sl__oom("a plan");
  }
  if (nnb) memcpy(svn, P->net, nnb);
  memcpy(sv, P->par, nb);
  memcpy(sv + P->nops, P->buf, nb);
  memcpy(sv + 2 * P->nops, P->cyc, nb);
  double pred = P->predicted, mem = P->mem, bound = P->bound, cb = P->cache_bytes;
  const char *limit = P->limit;
  int64_t pb = P->prefetch_buf;
  int cache = P->cache_at;
  P->add_prefetch = false;
  P->prefetch_buf = 0;
  int rc = solve_fitting(P);
  if (rc == SL_ENOMEM) {
    sl__free(sv);
    sl__free(svn);
    return rc;
  }
  if (rc || !(P->predicted > pred * 1.02)) {
    sl_error_clear();
    rc = 0;
    P->add_prefetch = true;
    P->prefetch_buf = pb;
    memcpy(P->par, sv, nb);
    memcpy(P->buf, sv + P->nops, nb);
    memcpy(P->cyc, sv + 2 * P->nops, nb);
    P->predicted = pred, P->mem = mem, P->bound = bound, P->limit = limit;
    P->cache_at = cache, P->cache_bytes = cb;
    if (nnb) memcpy(P->net, svn, nnb);
  }
  sl__free(sv);
  sl__free(svn);
  return rc;
}

int sl__plan_opts_resolve(sl_plan_opts *out, const sl_plan_opts *in, bool embedded, sl_plan_knobs knobs_default) {
  sl_plan_opts def = SL_PLAN_OPTS_INIT;
  *out = in ? *in : def;
  if (out->version == 0 && embedded) out->version = SL_PLAN_OPTS_VERSION;
  if (out->version != SL_PLAN_OPTS_VERSION)
    return sl__err(SL_EINVAL, "sl_plan_opts version %d, expected %d", out->version, SL_PLAN_OPTS_VERSION);
  if (out->knobs == SL_PLAN_KNOBS_DEFAULT) out->knobs = knobs_default;
  if (out->knobs != SL_PLAN_KNOBS_ALL && out->knobs != SL_PLAN_KNOBS_AUTOTUNE)
    return sl__err(SL_EINVAL, "sl_plan_opts.knobs %d is not an sl_plan_knobs value", (int)out->knobs);
  return 0;
}

int sl_plan_solve(sl_plan **out, const sl_trace *t, const sl_plan_opts *opts) {
  *out = NULL;
  sl_plan_opts o;
  int rc = sl__plan_opts_resolve(&o, opts, false, SL_PLAN_KNOBS_ALL);
  return rc ? rc : sl__plan_solve(out, t, &o, 1);
}

/* opts: resolved (sl__plan_opts_resolve). */
int sl__plan_solve(sl_plan **out, const sl_trace *t, const sl_plan_opts *opts, double hscale) {
  *out = NULL;
  sl_plan *P = sl__calloc(1, sizeof *P);
  if (!P) return sl__oom("a plan");
  P->hscale = hscale;
  P->core_share = 1;
  sl__pm_cache *tmp = NULL;
  int64_t *p1 = NULL, *b1 = NULL;
  int rc = sl__plan_model(P, t, opts);
  if (rc) goto fail;
  P->cache_at = -1;
  P->more_mem_cache_at = -1;
  P->add_prefetch = !opts->no_prefetch && P->ops[P->root].kind != SL__MK_PREFETCH;
  /* The least the pipeline can hold: tunable ops at parallelism 1, smallest buffers. */
  p1 = sl__calloc((size_t)P->nops, sizeof *p1);
  b1 = sl__calloc((size_t)P->nops, sizeof *b1);
  tmp = sl__calloc((size_t)P->nops, sizeof *tmp);
  if (!p1 || !b1 || !tmp) {
    rc = sl__oom("a plan");
    goto fail;
  }
  for (int i = 0; i < P->nops; i++) p1[i] = P->ops[i].par_tunable ? 1 : P->ops[i].par0;
  sl__plan_min_buffers(P, p1, b1);
  for (int i = 0; i < P->nops; i++) P->cyc[i] = P->ops[i].cyc0;
  double m0 = sl__plan_memory(P, p1, b1, P->cyc, -1, 0, P->add_prefetch ? 1 : 0); /* one request per file */
  P->mem_floor = m0 - sl__plan_net_memory(P, P->cyc);
  sl__plan_net_caps(P, 0);
  /* Remote readers that can keep an epoch's objects in memory: decided first, as they take their bytes off the top */
  if (m0 <= P->M && (opts->no_cache ? 0 : sl__plan_net_keep(P, P->M - m0)) > 0) {
    m0 = sl__plan_memory(P, p1, b1, P->cyc, -1, 0, P->add_prefetch ? 1 : 0);
    P->mem_floor = m0 - sl__plan_net_memory(P, P->cyc);
    sl__plan_net_caps(P, 0);
  }
  if (m0 > P->M) {
    memcpy(P->par, p1, (size_t)P->nops * sizeof *p1);
    memcpy(P->buf, b1, (size_t)P->nops * sizeof *b1);
    P->prefetch_buf = P->add_prefetch ? 1 : 0;
    rc = sl__plan_fit_memory(P);
    if (!rc) rc = sl__err(SL_EINVAL, "infeasible memory budget");
    goto fail;
  }
  if ((rc = sl__plan_lp(P, -1, 0, P->C, &P->bound_nocache, &P->limit))) goto fail;
  if (!opts->no_cache) {
    int at, ntmp;
    double bb;
    if ((rc = cache_candidates(P, 1e18, P->bound_nocache, tmp, &ntmp, &at, &bb))) goto fail;
    P->more_mem_cache_at = at;
    P->bound_more_mem = bb;
    if ((rc = cache_candidates(P, P->M - m0, P->bound_nocache, P->cands, &P->ncands, &at, &bb))) goto fail;
    P->cache_at = at;
    for (int k = 0; k < P->ncands; k++)
      if (P->cands[k].at == at) P->cache_bytes = P->cands[k].bytes;
  }
  rc = solve_fitting(P);
  if (!rc && P->add_prefetch) rc = maybe_drop_prefetch(P);
  if (rc) goto fail;
  if ((rc = sl__plan_lp(P, P->cache_at, P->cache_at >= 0 ? P->cache_bytes : 0, P->C + 1, &P->bound_plus_core, NULL)))
    goto fail;
  P->bottleneck = sl__plan_pick_bottleneck(P);
  if ((rc = sl__plan_network(P))) goto fail;
  P->theta_total = 0;
  for (int i = 0; i < P->nops; i++)
    if (!(P->cache_at >= 0 && sl__plan_upstream(P, i, P->cache_at))) P->theta_total += P->predicted * P->ops[i].c;
  sl__free(tmp);
  sl__free(p1);
  sl__free(b1);
  *out = P;
  return 0;
fail:
  sl__free(tmp);
  sl__free(p1);
  sl__free(b1);
  sl_plan_free(P);
  return rc;
}

void sl_plan_free(sl_plan *P) {
  if (!P) return;
  if (P->strs)
    for (int i = 0; i < 3 * P->nops; i++) sl__free(P->strs[i]);
  sl__free(P->strs);
  sl__free(P->ops);
  sl__free(P->par);
  sl__free(P->buf);
  sl__free(P->cyc);
  sl__free(P->cands);
  sl__free(P->net);
  json_decref(P->spec);
  sl__free(P);
}

double sl_plan_bound(const sl_plan *P) { return P->bound; }
double sl_plan_predicted(const sl_plan *P) { return P->predicted; }
int sl_plan_bottleneck(const sl_plan *P) { return P->bottleneck; }
int sl_plan_cache_point(const sl_plan *P) { return P->cache_at; }
const char *sl_plan_limit(const sl_plan *P) { return P->limit ? P->limit : "none"; }
int64_t sl_plan_parallelism(const sl_plan *P, int i) {
  if (i < 0 || i >= P->nops) return 0;
  return P->ops[i].has_par ? P->par[i] : 0;
}
int64_t sl_plan_buffer(const sl_plan *P, int i) {
  if (i < 0 || i >= P->nops) return 0;
  return P->ops[i].has_buf ? P->buf[i] : 0;
}
int64_t sl_plan_memory(const sl_plan *P) { return (int64_t)fmin(P->mem, 9e18); }
