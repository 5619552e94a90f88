/* prov/analytics/ablation.c: which feature groups carry the deployment prediction: the predictor of predict.c trained
 * and tested (the same time-ordered split) on the input, history and code features alone, input+history, and all,
 * each K times with different seeds, with ROC-AUC, PR-AUC and the wasted compute its simulation saves at the largest
 * freshness-keeping threshold, as mean and standard deviation. The groups are column masks over one feature matrix. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prov/analytics/analytics_int.h"
#include "sluice/prov_rq.h"

/* The group of each feature, by name (features.c's list): what the decision's input data looked like, what the
 * pipeline's past outcomes were, and what changed in its code or structure. */
static const struct {
  const char *name;
  unsigned group;
} GROUP_OF[] = {
    {"n_spans", SL_PROV_FG_INPUT},          {"new_spans", SL_PROV_FG_INPUT},
    {"span_overlap", SL_PROV_FG_INPUT},     {"anomalies", SL_PROV_FG_INPUT},
    {"schema_changed", SL_PROV_FG_INPUT},   {"hours_since_prev", SL_PROV_FG_HISTORY},
    {"hours_since_push", SL_PROV_FG_HISTORY}, {"last_outcome_1", SL_PROV_FG_HISTORY},
    {"last_outcome_2", SL_PROV_FG_HISTORY}, {"last_outcome_3", SL_PROV_FG_HISTORY},
    {"push_rate", SL_PROV_FG_HISTORY},      {"n_prev_graphlets", SL_PROV_FG_HISTORY},
    {"pending_outcomes", SL_PROV_FG_HISTORY}, {"structure_changed", SL_PROV_FG_CODE},
    {"n_components", SL_PROV_FG_CODE},      {"code_changed", SL_PROV_FG_CODE},
};

unsigned sl_prov_feature_group(size_t j) {
  const char *n = sl_prov_feature_name(j);
  if (!n) return 0;
  for (size_t i = 0; i < sizeof GROUP_OF / sizeof *GROUP_OF; i++)
    if (!strcmp(GROUP_OF[i].name, n)) return GROUP_OF[i].group;
  return 0;
}

static const struct {
  const char *name;
  unsigned mask;
} GROUPS[] = {
    {"input", SL_PROV_FG_INPUT},
    {"history", SL_PROV_FG_HISTORY},
    {"code", SL_PROV_FG_CODE},
    {"input+history", SL_PROV_FG_INPUT | SL_PROV_FG_HISTORY},
    {"all", SL_PROV_FG_INPUT | SL_PROV_FG_HISTORY | SL_PROV_FG_CODE},
};
#define NGROUPS (sizeof GROUPS / sizeof *GROUPS)

/* Mean and sample standard deviation of v[0..n) (sd 0 for one value); NaN in, NaN out. */
static void mean_sd(const double *v, size_t n, double *mean, double *sd) {
  double s = 0, q = 0;
  for (size_t i = 0; i < n; i++) s += v[i];
  *mean = n ? s / (double)n : NAN;
  for (size_t i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
  *sd = n > 1 ? sqrt(q / (double)(n - 1)) : 0;
}

int sl_prov_ablation_run(sl_prov_ablation **out, const sl_prov_graphlets *g, const sl_prov_ablation_opts *o) {
  *out = NULL;
  sl_prov_ablation_opts def = SL_PROV_ABLATION_OPTS_INIT;
  if (o && o->version != SL_PROV_ABLATION_OPTS_VERSION)
    return sl__err(SL_EVERSION, "sl_prov_ablation_opts version %d, expected %d", o->version,
                   SL_PROV_ABLATION_OPTS_VERSION);
  if (o) def = *o;
  if (!def.seeds) def.seeds = 5;
  if (def.seeds < 1 || def.seeds > 1000) return sl__err(SL_EINVAL, "ablation seeds must be in 1..1000, not %d", def.seeds);
  if (!def.train.version) def.train.version = SL_PROV_TRAIN_OPTS_VERSION;
  size_t K = (size_t)def.seeds;
  sl_prov_ablation *a = sl__calloc(1, sizeof *a);
  double *roc = sl__mallocarray(K, sizeof *roc), *pr = sl__mallocarray(K, sizeof *pr),
         *saved = sl__mallocarray(K, sizeof *saved);
  int rc = 0;
  if (!a || !roc || !pr || !saved || !(a->groups = sl__calloc(NGROUPS, sizeof *a->groups))) {
    rc = sl__oom("ablation");
    goto done;
  }
  a->seeds = def.seeds;
  for (size_t gi = 0; gi < NGROUPS && !rc; gi++) {
    sl_prov_ablation_group *r = &a->groups[gi];
    r->name = GROUPS[gi].name;
    r->mask = GROUPS[gi].mask;
    uint32_t keep = 0;
    for (size_t j = 0; j < sl_prov_feature_count(); j++)
      if (sl_prov_feature_group(j) & r->mask) keep |= 1u << j, r->nfeatures++;
    for (size_t k = 0; k < K && !rc; k++) {
      sl_prov_train_opts to = def.train;
      to.seed = k + 1;
      sl_prov_model *m = NULL;
      sl_prov_train_report rep;
      sl_prov_sim *sim = NULL;
      rc = sl__prov_train_masked(&m, &rep, g, &to, keep);
      if (rc) break;
      a->ntrain = rep.ntrain;
      a->ntest = rep.ntest;
      roc[k] = rep.roc_auc;
      pr[k] = rep.pr_auc;
      sl_prov_train_report_dispose(&rep);
      rc = sl_prov_simulate(&sim, g, m);
      if (!rc) saved[k] = sim->best >= 0 ? sim->rows[sim->best].saved_share : 0;
      sl_prov_sim_free(sim);
      sl_prov_model_free(m);
    }
    if (rc) break;
    mean_sd(roc, K, &r->roc_auc, &r->roc_auc_sd);
    mean_sd(pr, K, &r->pr_auc, &r->pr_auc_sd);
    mean_sd(saved, K, &r->saved_share, &r->saved_share_sd);
    a->ngroups++;
  }
done:
  sl__free(roc);
  sl__free(pr);
  sl__free(saved);
  if (rc) {
    sl_prov_ablation_free(a);
    return rc;
  }
  *out = a;
  return 0;
}

void sl_prov_ablation_free(sl_prov_ablation *a) {
  if (!a) return;
  sl__free(a->groups);
  sl__free(a);
}
