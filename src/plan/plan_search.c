/* plan/plan_search.c: the integer knobs. Parallelism by evaluating the neighbours of the LP point on the model
 * (plan_model.c), buffer depths from latency, rate and per-call spread, and shrinking buffers and workers until
 * the plan fits its memory budget. */
#include <math.h>
#include <string.h>

#include "plan/plan_int.h"

/* Parallelism combinations the search evaluates at most. */
#define MAX_COMBOS 20000

int sl__plan_search_parallelism(sl_plan *P, int cache_at) {
  /* Candidates per tunable op: 1, and the integers around the LP's cores for its pool. */
  int nt = 0;
  int *tun = sl__calloc((size_t)P->nops, sizeof *tun);
  int64_t (*cand)[4] = sl__calloc((size_t)P->nops, sizeof *cand);
  int *nc = sl__calloc((size_t)P->nops, sizeof *nc), *pos = sl__calloc((size_t)P->nops, sizeof *pos);
  int64_t *cur = sl__calloc((size_t)P->nops, sizeof *cur);
  if (!tun || !cand || !nc || !pos || !cur) {
    sl__free(tun), sl__free(cand), sl__free(nc), sl__free(pos), sl__free(cur);
    return sl__oom("the planner");
  }
  double X;
  int rc = sl__plan_lp(P, cache_at, cache_at >= 0 && cache_at == P->cache_at ? P->cache_bytes : 0, P->C, &X, NULL);
  int64_t pmax = (int64_t)fmin(ceil(P->C), 1e6) * 2 + 2;
  for (int i = 0; i < P->nops; i++)
    if (P->ops[i].tt > P->ops[i].c * 1.001 && ceil(X * P->ops[i].tt) + 1 > (double)pmax)
      pmax = (int64_t)fmin(ceil(X * P->ops[i].tt) + 1, 256);
  for (int i = 0; i < P->nops && !rc; i++) {
    const sl__pm_op *o = &P->ops[i];
    cur[i] = o->par0;
    if (!o->par_tunable) continue;
    bool cached = cache_at >= 0 && sl__plan_upstream(P, i, cache_at);
    double th = 0;
    if (!cached) {
      /* The pool's threads: the op's own work, and its nested source chain's when it has one (an interleave's
       * threads run it); an op that waits needs a thread for its whole wall time. */
      th = X * o->tt;
      if (o->source >= 0)
        for (int j = 0; j < P->nops; j++)
          if (j != i && sl__plan_upstream(P, j, i) && !sl__plan_upstream(P, j, o->input >= 0 ? o->input : -2) &&
              !(cache_at >= 0 && sl__plan_upstream(P, j, cache_at)))
            th += X * P->ops[j].tt;
    }
    if (!(th >= 0)) th = 0;
    if (th > 1e6) th = 1e6; /* far beyond pmax: keeps the casts defined */
    int64_t c4[4] = {1, (int64_t)floor(th), (int64_t)ceil(th), (int64_t)ceil(th) + 1};
    for (int k = 0; k < 4; k++) {
      int64_t v = c4[k] < 1 ? 1 : c4[k] > pmax ? pmax : c4[k];
      if (cached) v = 1;
      bool dup = false;
      for (int q = 0; q < nc[i]; q++) dup |= cand[i][q] == v;
      if (!dup) cand[i][nc[i]++] = v;
    }
    tun[nt++] = i;
  }
  if (!rc) {
    /* Too many combinations: the later ops keep only their rounded-up LP value. */
    double combos = 1;
    for (int k = 0; k < nt; k++) {
      int i = tun[k];
      if (combos * nc[i] > MAX_COMBOS) {
        cand[i][0] = cand[i][nc[i] > 2 ? 2 : nc[i] - 1];
        nc[i] = 1;
      }
      combos *= nc[i];
    }
    /* Two passes: the best throughput, then the fewest threads within 0.5% of it (fewer threads time-share less
     * and hold fewer buffers). */
    double best = -1, chosen = -1;
    int64_t best_threads = 0;
    for (int pass = 0; pass < 2; pass++) {
      memset(pos, 0, (size_t)P->nops * sizeof *pos);
      for (;;) {
        int64_t threads = 0;
        for (int k = 0; k < nt; k++) cur[tun[k]] = cand[tun[k]][pos[tun[k]]];
        for (int i = 0; i < P->nops; i++) threads += cur[i];
        double x = sl__plan_eval(P, cur, cache_at, P->C);
        if (x < 0) {
          rc = SL_ENOMEM;
          break;
        }
        if (pass == 0 && x > best) best = x;
        if (pass == 1 && x >= best * 0.995 &&
            (chosen < 0 || threads < best_threads || (threads == best_threads && x > chosen))) {
          chosen = x;
          best_threads = threads;
          memcpy(P->par, cur, (size_t)P->nops * sizeof *cur);
        }
        int k = 0;
        while (k < nt && ++pos[tun[k]] >= nc[tun[k]]) pos[tun[k++]] = 0;
        if (k >= nt) break;
      }
      if (rc) break;
    }
    if (nt == 0) memcpy(P->par, cur, (size_t)P->nops * sizeof *cur);
    if (!rc) P->predicted = sl__plan_eval(P, P->par, cache_at, P->C);
    if (!rc && P->predicted < 0) rc = SL_ENOMEM;
  }
  sl__free(tun), sl__free(cand), sl__free(nc), sl__free(pos), sl__free(cur);
  return rc;
}

/* Buffer depths: async outputs absorb the spread of per-call times; the root prefetch covers the latency of one
 * element beyond what the busy cores already overlap (Plumber's ceil(N* - N)). */
void sl__plan_size_buffers(sl_plan *P) {
  double X = P->predicted, L = 0, busy = 0;
  for (int i = 0; i < P->nops; i++) {
    const sl__pm_op *o = &P->ops[i];
    bool cached = P->cache_at >= 0 && sl__plan_upstream(P, i, P->cache_at);
    if (!cached) {
      /* Latency: CPU, or wall where a sync op waits on something other than CPU (I/O); an async op's wall is
       * mostly waiting for its own workers, which the CPU terms already count. */
      bool async = sl__plan_op_threaded(o);
      L += !async && o->w > o->c ? o->w : o->c;
      busy += X * o->c;
    }
    sl__plan_size_buffer(P, i);
  }
  if (P->add_prefetch) {
    double depth = ceil(X * L - busy);
    double cv = P->ops[P->root].cv;
    if (!(depth >= 1)) depth = 1;
    depth += fmin(ceil(2.0 * cv), 8);
    if (depth > 64) depth = 64;
    /* Cheap output elements cross in chunks too. */
    if (L < SL__PLAN_CHEAP_ELEMENT_S && depth < SL__HANDOFF_CHEAP_BUFFER) depth = SL__HANDOFF_CHEAP_BUFFER;
    P->prefetch_buf = (int64_t)depth;
  }
  /* The root prefetch that was already there gets the same depth. */
  if (P->ops[P->root].kind == SL__MK_PREFETCH && P->ops[P->root].buf_tunable) {
    double depth = ceil(X * L - busy);
    if (!(depth >= 1)) depth = 1;
    depth += fmin(ceil(2.0 * P->ops[P->root].cv), 8);
    if (depth < P->buf[P->root]) depth = (double)P->buf[P->root];
    P->buf[P->root] = (int64_t)(depth > 64 ? 64 : depth);
  }
}

/* Shrinks tunable buffers (largest holder first) until the plan fits its memory budget; when the buffers are at
 * their smallest, takes requests in flight from the remote reader that holds the most, then workers from the
 * tunable map that holds the most (each worker holds an element). */
int sl__plan_fit_memory(sl_plan *P) {
  int64_t *minb = sl__calloc((size_t)P->nops, sizeof *minb);
  if (!minb) return sl__oom("the planner");
  sl__plan_min_buffers(P, P->par, minb);
  bool cut_workers = false;
  for (;;) {
    P->mem = sl__plan_memory(P, P->par, P->buf, P->cyc, P->cache_at, P->cache_bytes, P->prefetch_buf);
    if (P->mem <= P->M) break;
    int worst = -2;
    double wb = 0;
    for (int i = 0; i < P->nops; i++)
      if (P->buf[i] > minb[i] && P->ops[i].bytes > wb) wb = P->ops[i].bytes, worst = i;
    if (P->prefetch_buf > 1 && P->ops[P->root].bytes >= wb) worst = -1;
    if (worst == -1) {
      P->prefetch_buf--;
      continue;
    }
    if (worst >= 0) {
      P->buf[worst]--;
      continue;
    }
    /* Then the read-ahead of the reader that holds the most (its rate falls with it: the prediction follows). */
    int r = -1;
    double rb = 0;
    for (int k = 0; k < P->nnet; k++) {
      const sl__pm_net *x = &P->net[k];
      double h = (double)x->in_flight * x->block * (double)x->streams;
      if (x->in_flight > 1 && h > rb) rb = h, r = k;
    }
    if (r >= 0) {
      P->net[r].q_cap = --P->net[r].in_flight;
      cut_workers = true;
      continue;
    }
    int w = -1;
    double held = 0;
    for (int i = 0; i < P->nops; i++) {
      const sl__pm_op *o = &P->ops[i];
      double h = (double)P->par[i] * (o->bytes + sl__plan_in_bytes(P, i));
      if (o->kind == SL__MK_MAP && o->par_tunable && P->par[i] > 1 && h > held) held = h, w = i;
    }
    if (w < 0) break;
    P->par[w]--;
    if (P->ops[w].buf_tunable) P->buf[w] = P->par[w] > 1 ? P->par[w] : 0;
    sl__plan_min_buffers(P, P->par, minb);
    cut_workers = true;
  }
  if (cut_workers) {
    P->predicted = sl__plan_eval(P, P->par, P->cache_at, P->C);
    if (P->predicted < 0) {
      sl__free(minb);
      return SL_ENOMEM;
    }
  }
  sl__free(minb);
  if (P->mem > P->M) {
    char need[32], have[32];
    sl__plan_fmt_bytes(need, sizeof need, P->mem);
    sl__plan_fmt_bytes(have, sizeof have, P->M);
    int big = 0;
    for (int i = 0; i < P->nops; i++)
      if (P->ops[i].bytes > P->ops[big].bytes) big = i;
    char el[32];
    sl__plan_fmt_bytes(el, sizeof el, P->ops[big].bytes);
    return sl__err(SL_EINVAL, "infeasible budget: memory %s is below the %s the pipeline holds at its smallest "
                              "buffers (largest element: %s at %s %s)", have, need, el, P->ops[big].path,
                   P->ops[big].label);
  }
  return 0;
}

