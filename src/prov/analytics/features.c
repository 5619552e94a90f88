/* prov/analytics/features.c: the features of a training decision (docs/provenance.md lists them), computed only
 * from what was recorded before the decision point: the graphlet builder (graphlets.c) fills one row per graphlet
 * and sl_prov_should_train (predict.c) computes one for the next run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prov/analytics/analytics_int.h"

static const char *const FEAT[SL__AN_NFEAT] = {
    "n_spans",        "new_spans",       "span_overlap", "anomalies",     "schema_changed", "hours_since_prev",
    "hours_since_push", "last_outcome_1", "last_outcome_2", "last_outcome_3", "push_rate",     "n_prev_graphlets",
    "structure_changed", "n_components",  "code_changed", "pending_outcomes"};

size_t sl_prov_feature_count(void) { return SL__AN_NFEAT; }
const char *sl_prov_feature_name(size_t j) { return j < SL__AN_NFEAT ? FEAT[j] : NULL; }

void sl__an_features(const sl_prov_graphlets *g, const size_t *prior, size_t nprior, const sl__an_facts *f,
                     double *out) {
  for (int j = 0; j < SL__AN_NFEAT; j++) out[j] = NAN;
  out[0] = (double)f->nspans;
  /* The previous graphlet: the latest one that started before t. */
  const sl_prov_graphlet *pg = NULL;
  const sl__an_graphlet *pgi = NULL;
  size_t nprev = 0;
  for (size_t i = 0; i < nprior; i++) {
    const sl_prov_graphlet *x = &g->g[prior[i]];
    if (x->start_ms >= f->t) break;
    pg = x;
    pgi = &g->gi[prior[i]];
    nprev++;
  }
  out[11] = (double)nprev;
  out[3] = f->anomalies;
  out[13] = (double)f->ncomp;
  if (pg) {
    const int64_t *ps = g->pool + pgi->span_off;
    size_t common = 0, a = 0, b = 0;
    while (a < f->nspans && b < pgi->nspan) {
      if (f->spans[a] == ps[b]) common++, a++, b++;
      else if (f->spans[a] < ps[b]) a++;
      else b++;
    }
    out[1] = (double)(f->nspans - common);
    out[2] = f->nspans ? (double)common / (double)f->nspans : NAN;
    out[4] = f->schema && pgi->schema ? (double)(f->schema != pgi->schema) : NAN;
    out[5] = (double)(f->t - pg->start_ms) / 3.6e6;
    out[12] = (double)(f->comp_hash != pgi->comp_hash);
    uint64_t pfp = g->ex[pgi->trainer].code_fp;
    out[14] = f->code_fp && pfp ? (double)(f->code_fp != pfp) : NAN;
  } else {
    out[1] = (double)f->nspans;
  }
  /* History: outcomes known (recorded) before t, latest first by start. */
  int k = 0, known = 0, pushes = 0, pending = 0;
  int64_t last_push = INT64_MIN;
  for (size_t i = nprev; i-- > 0;) {
    const sl_prov_graphlet *x = &g->g[prior[i]];
    if (x->outcome_ms >= f->t) {
      pending++;
      continue;
    }
    known++;
    pushes += x->pushed;
    if (x->pushed && x->outcome_ms > last_push) last_push = x->outcome_ms;
    if (k < 3) out[7 + k++] = x->pushed ? 1.0 : 0.0;
  }
  out[10] = known ? (double)pushes / known : NAN;
  out[6] = last_push != INT64_MIN ? (double)(f->t - last_push) / 3.6e6 : NAN;
  out[15] = (double)pending;
}

const double *sl_prov_graphlets_features(const sl_prov_graphlets *g, size_t i) {
  return i < g->ng ? g->feat + i * SL__AN_NFEAT : NULL;
}
