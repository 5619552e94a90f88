/* prov/analytics/predict.c: the deployment predictor (XGBoost's C API in random-forest mode: booster gbtree, many parallel
 * trees, row and column subsampling, eta 1, exactly one boosting round) trained on a time-ordered split, its
 * model file, the pruning simulation over the test window, and the should-train decision for one pipeline. */
#define _GNU_SOURCE /* qsort_r */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xgboost/c_api.h>

#include "core/outfile_int.h"
#include "prov/analytics/analytics_int.h"

#define MODEL_FORMAT "sluice.prov.model/1"

struct sl_prov_model {
  BoosterHandle booster;
  int64_t train_from, train_to, test_from, test_to;
  double threshold;
  double roc_auc, pr_auc;
  double importance[SL__AN_NFEAT];
  size_t ntrain, ntest;
  uint32_t keep; /* the features the booster was trained on (bit j: feature j), in index order */
};

#define ALL_FEATURES ((uint32_t)((1ull << SL__AN_NFEAT) - 1))

static int ncols(uint32_t keep) {
  int k = 0;
  for (int j = 0; j < SL__AN_NFEAT; j++) k += (keep >> j) & 1;
  return k;
}

static int xgb_err(const char *what) { return sl__err(SL_ERROR, "XGBoost: %s: %s", what, XGBGetLastError()); }

/* ---- metrics ---- */
typedef struct scored {
  double s;
  int y;
} scored;
static int by_score_desc(const void *a, const void *b) {
  double x = ((const scored *)a)->s, y = ((const scored *)b)->s;
  return x > y ? -1 : x < y;
}

/* ROC-AUC with ties counted half (Mann-Whitney), and average precision (PR-AUC). */
static void metrics(scored *v, size_t n, double *roc, double *pr) {
  qsort(v, n, sizeof *v, by_score_desc);
  size_t P = 0, N = 0;
  for (size_t i = 0; i < n; i++) P += v[i].y, N += !v[i].y;
  *roc = *pr = NAN;
  if (!P || !N) return;
  double auc = 0, ap = 0;
  size_t tp = 0, fp = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i, dtp = 0, dfp = 0;
    while (j < n && v[j].s == v[i].s) dtp += v[j].y, dfp += !v[j].y, j++;
    /* negatives in this tie group rank below all earlier positives and half of the group's */
    auc += (double)dfp * ((double)tp + 0.5 * (double)dtp);
    tp += dtp;
    fp += dfp;
    if (dtp) ap += (double)dtp / (double)P * ((double)tp / (double)(tp + fp));
    i = j;
  }
  *roc = auc / ((double)P * (double)N);
  *pr = ap;
}

/* ---- training ---- */

static int set_params(BoosterHandle b, const sl_prov_train_opts *o) {
  char buf[64];
  struct {
    const char *k, *v;
  } fixed[] = {{"booster", "gbtree"}, {"objective", "binary:logistic"}, {"eta", "1"}, {"tree_method", "hist"},
               {"verbosity", "0"},    {"eval_metric", "auc"}};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
    if (XGBoosterSetParam(b, fixed[i].k, fixed[i].v)) return xgb_err("set parameter");
  snprintf(buf, sizeof buf, "%d", o->trees);
  if (XGBoosterSetParam(b, "num_parallel_tree", buf)) return xgb_err("num_parallel_tree");
  snprintf(buf, sizeof buf, "%d", o->max_depth);
  if (XGBoosterSetParam(b, "max_depth", buf)) return xgb_err("max_depth");
  snprintf(buf, sizeof buf, "%g", o->subsample);
  if (XGBoosterSetParam(b, "subsample", buf)) return xgb_err("subsample");
  snprintf(buf, sizeof buf, "%g", o->colsample);
  if (XGBoosterSetParam(b, "colsample_bynode", buf)) return xgb_err("colsample_bynode");
  snprintf(buf, sizeof buf, "%d", o->threads > 0 ? o->threads : 2);
  if (XGBoosterSetParam(b, "nthread", buf)) return xgb_err("nthread");
  snprintf(buf, sizeof buf, "%llu", (unsigned long long)(o->seed & 0x7fffffff));
  if (XGBoosterSetParam(b, "seed", buf)) return xgb_err("seed");
  return 0;
}

/* The rows idx[0..n) with the kept features only (the ablation's feature groups are column masks). */
static int to_matrix(const sl_prov_graphlets *g, const size_t *idx, size_t n, uint32_t keep, float **out) {
  size_t w = (size_t)ncols(keep);
  float *m = sl__mallocarray(n ? n : 1, w * sizeof *m);
  if (!m) return sl__oom("feature matrix");
  for (size_t i = 0; i < n; i++)
    for (int j = 0, k = 0; j < SL__AN_NFEAT; j++)
      if ((keep >> j) & 1) m[i * w + (size_t)k++] = (float)g->feat[idx[i] * SL__AN_NFEAT + j];
  *out = m;
  return 0;
}

static int predict_rows(BoosterHandle b, const float *m, size_t n, uint32_t keep, double *p) {
  DMatrixHandle d;
  if (XGDMatrixCreateFromMat(m, n, (bst_ulong)ncols(keep), NAN, &d)) return xgb_err("test matrix");
  bst_ulong len;
  const float *res;
  int rc = 0;
  if (XGBoosterPredict(b, d, 0, 0, 0, &len, &res))
    rc = xgb_err("predict");
  else if (len != n)
    rc = sl__err(SL_ERROR, "XGBoost returned %llu predictions for %zu rows", (unsigned long long)len, n);
  else
    for (size_t i = 0; i < n; i++) p[i] = res[i];
  XGDMatrixFree(d);
  return rc;
}

static int cmp_start(const void *a, const void *b, void *ctx) {
  const sl_prov_graphlets *g = ctx;
  int64_t x = g->g[*(const size_t *)a].start_ms, y = g->g[*(const size_t *)b].start_ms;
  if (x != y) return x < y ? -1 : 1;
  return *(const size_t *)a < *(const size_t *)b ? -1 : *(const size_t *)a > *(const size_t *)b;
}

int sl_prov_train(sl_prov_model **model, sl_prov_train_report *rep, const sl_prov_graphlets *g,
                  const sl_prov_train_opts *o) {
  return sl__prov_train_masked(model, rep, g, o, ALL_FEATURES);
}

int sl__prov_train_masked(sl_prov_model **model, sl_prov_train_report *rep, const sl_prov_graphlets *g,
                          const sl_prov_train_opts *o, uint32_t keep) {
  *model = NULL;
  keep &= ALL_FEATURES;
  if (!keep) return sl__err(SL_EINVAL, "no features to train on");
  memset(rep, 0, sizeof *rep);
  sl_prov_train_opts def = SL_PROV_TRAIN_OPTS_INIT;
  if (o && o->version != SL_PROV_TRAIN_OPTS_VERSION)
    return sl__err(SL_EVERSION, "sl_prov_train_opts version %d, expected %d", o->version, SL_PROV_TRAIN_OPTS_VERSION);
  if (o) def = *o;
  /* Fields left 0 take their defaults (prov.h). */
  if (!def.train_share) def.train_share = 0.7;
  if (!def.trees) def.trees = 100;
  if (!def.max_depth) def.max_depth = 8;
  if (!def.subsample) def.subsample = 0.63;
  if (!def.colsample) def.colsample = 0.6;
  if (!def.threads) def.threads = 2;
  if (!def.seed) def.seed = 42;
  o = &def;
  if (o->train_share <= 0 || o->train_share >= 1) return sl__err(SL_EINVAL, "train share must be in (0, 1)");
  if (o->trees < 1 || o->max_depth < 1 || o->subsample <= 0 || o->subsample > 1 || o->colsample <= 0 ||
      o->colsample > 1)
    return sl__err(SL_EINVAL, "bad forest options (trees, depth, subsample, colsample)");
  if (g->ng < 10) return sl__err(SL_EINVAL, "only %zu graphlets: too few to train a predictor", g->ng);
  /* Time-ordered split: the earliest share of decision points train, the rest test. The split is at a time, so
   * graphlets starting at the same instant land on the same side. */
  size_t *ord = sl__mallocarray(g->ng, sizeof *ord);
  if (!ord) return sl__oom("split");
  for (size_t i = 0; i < g->ng; i++) ord[i] = i;
  qsort_r(ord, g->ng, sizeof *ord, cmp_start, (void *)g);
  size_t cut = (size_t)((double)g->ng * o->train_share);
  while (cut < g->ng && cut > 0 && g->g[ord[cut]].start_ms == g->g[ord[cut - 1]].start_ms) cut++;
  if (cut == 0 || cut >= g->ng) {
    sl__free(ord);
    return sl__err(SL_EINVAL, "the time split leaves no test graphlets");
  }
  size_t ntr = cut, nte = g->ng - cut;
  float *mtr = NULL, *mte = NULL, *lab = NULL;
  double *pte = NULL;
  scored *sc = NULL;
  DMatrixHandle dtr = NULL;
  sl_prov_model *m = NULL;
  int rc = to_matrix(g, ord, ntr, keep, &mtr);
  if (!rc) rc = to_matrix(g, ord + cut, nte, keep, &mte);
  lab = sl__mallocarray(ntr, sizeof *lab);
  pte = sl__mallocarray(nte, sizeof *pte);
  sc = sl__mallocarray(nte, sizeof *sc);
  m = sl__calloc(1, sizeof *m);
  rep->importance = sl__calloc(SL__AN_NFEAT, sizeof *rep->importance);
  if (!rc && (!lab || !pte || !sc || !m || !rep->importance)) rc = sl__oom("training");
  if (rc) goto done;
  size_t pos = 0;
  for (size_t i = 0; i < ntr; i++) lab[i] = g->g[ord[i]].pushed ? 1.0f : 0.0f, pos += g->g[ord[i]].pushed;
  rep->ntrain = ntr;
  rep->ntest = nte;
  rep->train_from_ms = g->g[ord[0]].start_ms;
  rep->train_to_ms = g->g[ord[cut - 1]].start_ms;
  rep->test_from_ms = g->g[ord[cut]].start_ms;
  rep->test_to_ms = g->g[ord[g->ng - 1]].start_ms;
  rep->train_push_rate = (double)pos / (double)ntr;
  if (XGDMatrixCreateFromMat(mtr, ntr, (bst_ulong)ncols(keep), NAN, &dtr)) {
    rc = xgb_err("training matrix");
    goto done;
  }
  if (XGDMatrixSetFloatInfo(dtr, "label", lab, ntr)) {
    rc = xgb_err("labels");
    goto done;
  }
  if (XGBoosterCreate(&dtr, 1, &m->booster)) {
    rc = xgb_err("create booster");
    goto done;
  }
  if ((rc = set_params(m->booster, o))) goto done;
  /* Random-forest mode: exactly one round of num_parallel_tree trees. */
  if (XGBoosterUpdateOneIter(m->booster, 0, dtr)) {
    rc = xgb_err("train");
    goto done;
  }
  m->keep = keep;
  if ((rc = predict_rows(m->booster, mte, nte, keep, pte))) goto done;
  size_t tpos = 0;
  for (size_t i = 0; i < nte; i++) {
    sc[i].s = pte[i];
    sc[i].y = g->g[ord[cut + i]].pushed;
    tpos += sc[i].y;
  }
  rep->test_push_rate = (double)tpos / (double)nte;
  metrics(sc, nte, &rep->roc_auc, &rep->pr_auc);
  /* Importances: total gain per feature, normalised. */
  {
    bst_ulong nf = 0, dim = 0;
    const char **names = NULL;
    const bst_ulong *shape = NULL;
    const float *scores = NULL;
    if (XGBoosterFeatureScore(m->booster, "{\"importance_type\": \"total_gain\", \"feature_map\": \"\"}", &nf, &names,
                              &dim, &shape, &scores)) {
      rc = xgb_err("feature importance");
      goto done;
    }
    double sum = 0;
    int col[SL__AN_NFEAT]; /* booster column -> feature index */
    for (int j = 0, k = 0; j < SL__AN_NFEAT; j++)
      if ((keep >> j) & 1) col[k++] = j;
    for (bst_ulong i = 0; i < nf; i++) {
      int c = names[i][0] == 'f' ? atoi(names[i] + 1) : -1;
      int j = c >= 0 && c < ncols(keep) ? col[c] : -1;
      if (j >= 0) rep->importance[j] = scores[i], sum += scores[i];
    }
    for (int j = 0; j < SL__AN_NFEAT; j++) rep->importance[j] = sum > 0 ? rep->importance[j] / sum : 0;
  }
  m->train_from = rep->train_from_ms;
  m->train_to = rep->train_to_ms;
  m->test_from = rep->test_from_ms;
  m->test_to = rep->test_to_ms;
  m->roc_auc = rep->roc_auc;
  m->pr_auc = rep->pr_auc;
  m->ntrain = ntr;
  m->ntest = nte;
  m->threshold = 0.05;
  memcpy(m->importance, rep->importance, sizeof m->importance);
done:
  if (dtr) XGDMatrixFree(dtr);
  sl__free(ord);
  sl__free(mtr);
  sl__free(mte);
  sl__free(lab);
  sl__free(pte);
  sl__free(sc);
  if (rc) {
    sl_prov_model_free(m);
    sl_prov_train_report_dispose(rep);
    return rc;
  }
  *model = m;
  return 0;
}

void sl_prov_train_report_dispose(sl_prov_train_report *r) {
  if (!r) return;
  sl__free(r->importance);
  r->importance = NULL;
}

void sl_prov_model_free(sl_prov_model *m) {
  if (!m) return;
  if (m->booster) XGBoosterFree(m->booster);
  sl__free(m);
}

int64_t sl_prov_model_test_from(const sl_prov_model *m) { return m->test_from; }
double sl_prov_model_threshold(const sl_prov_model *m) { return m->threshold; }
void sl_prov_model_set_threshold(sl_prov_model *m, double t) { m->threshold = t; }

int sl_prov_model_predict(double *p, sl_prov_model *m, const double *features) {
  float row[SL__AN_NFEAT];
  for (int j = 0, k = 0; j < SL__AN_NFEAT; j++)
    if ((m->keep >> j) & 1) row[k++] = (float)features[j];
  return predict_rows(m->booster, row, 1, m->keep, p);
}

int sl_prov_model_save(const sl_prov_model *m, const char *path) {
  if (m->keep != ALL_FEATURES)
    return sl__err(SL_EINVAL, "%s: a model trained on a feature group (the ablation's) is not saved", path);
  bst_ulong len;
  const char *buf;
  if (XGBoosterSaveModelToBuffer(m->booster, "{\"format\": \"json\"}", &len, &buf)) return xgb_err("save model");
  json_error_t err;
  json_t *booster = json_loadb(buf, len, 0, &err);
  if (!booster) return sl__err(SL_ERROR, "XGBoost wrote a model that is not JSON: %s", err.text);
  json_t *root = json_object(), *feats = json_array(), *imp = json_object();
  for (int j = 0; j < SL__AN_NFEAT; j++) {
    json_array_append_new(feats, json_string(sl_prov_feature_name((size_t)j)));
    json_object_set_new(imp, sl_prov_feature_name((size_t)j), json_real(m->importance[j]));
  }
  json_object_set_new(root, "format", json_string(MODEL_FORMAT));
  json_object_set_new(root, "predictor", json_string("xgboost random forest (gbtree, num_parallel_tree, one round)"));
  json_object_set_new(root, "features", feats);
  json_t *win = json_object();
  json_object_set_new(win, "train_from_ms", json_integer(m->train_from));
  json_object_set_new(win, "train_to_ms", json_integer(m->train_to));
  json_object_set_new(win, "test_from_ms", json_integer(m->test_from));
  json_object_set_new(win, "test_to_ms", json_integer(m->test_to));
  json_object_set_new(win, "train_graphlets", json_integer((json_int_t)m->ntrain));
  json_object_set_new(win, "test_graphlets", json_integer((json_int_t)m->ntest));
  json_object_set_new(root, "window", win);
  json_object_set_new(root, "roc_auc", isfinite(m->roc_auc) ? json_real(m->roc_auc) : json_null());
  json_object_set_new(root, "pr_auc", isfinite(m->pr_auc) ? json_real(m->pr_auc) : json_null());
  json_object_set_new(root, "threshold", json_real(m->threshold));
  json_object_set_new(root, "importance", imp);
  json_object_set_new(root, "booster", booster);
  char *text = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  if (!text) return sl__oom("the model document");
  int rc = sl__outfile_write(path, text, strlen(text)); /* beside, then renamed: a full disk keeps the old model */
  sl__free(text); /* jansson allocates through sluice's allocator (core/error.c) */
  return rc ? sl__err_wrap(rc, "cannot write the model") : 0;
}

int sl_prov_model_load(sl_prov_model **out, const char *path) {
  *out = NULL;
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root) return sl__err(SL_EIO, "%s: %s (line %d)", path, err.text, err.line);
  int rc = 0;
  sl_prov_model *m = NULL;
  const char *fmt = json_string_value(json_object_get(root, "format"));
  json_t *feats = json_object_get(root, "features"), *booster = json_object_get(root, "booster");
  json_t *win = json_object_get(root, "window");
  if (!fmt || strcmp(fmt, MODEL_FORMAT)) {
    rc = sl__err(SL_EVERSION, "%s: not a sluice predictor (format %s, expected %s)", path, fmt ? fmt : "missing",
                 MODEL_FORMAT);
    goto done;
  }
  if (!json_is_array(feats) || json_array_size(feats) != SL__AN_NFEAT) {
    rc = sl__err(SL_EVERSION, "%s: the model has %zu features, this sluice computes %d", path,
                 json_array_size(feats), SL__AN_NFEAT);
    goto done;
  }
  for (size_t j = 0; j < SL__AN_NFEAT; j++) {
    const char *f = json_string_value(json_array_get(feats, j));
    if (!f || strcmp(f, sl_prov_feature_name(j))) {
      rc = sl__err(SL_EVERSION, "%s: features[%zu] is '%s', this sluice computes '%s'", path, j, f ? f : "?",
                   sl_prov_feature_name(j));
      goto done;
    }
  }
  if (!json_is_object(booster) || !json_is_object(win)) {
    rc = sl__err(SL_ECORRUPT, "%s: missing booster or window", path);
    goto done;
  }
  m = sl__calloc(1, sizeof *m);
  if (!m) {
    rc = sl__oom("model");
    goto done;
  }
  m->keep = ALL_FEATURES;
  m->train_from = json_integer_value(json_object_get(win, "train_from_ms"));
  m->train_to = json_integer_value(json_object_get(win, "train_to_ms"));
  m->test_from = json_integer_value(json_object_get(win, "test_from_ms"));
  m->test_to = json_integer_value(json_object_get(win, "test_to_ms"));
  m->threshold = json_number_value(json_object_get(root, "threshold"));
  m->roc_auc = json_is_number(json_object_get(root, "roc_auc")) ? json_number_value(json_object_get(root, "roc_auc")) : NAN;
  m->pr_auc = json_is_number(json_object_get(root, "pr_auc")) ? json_number_value(json_object_get(root, "pr_auc")) : NAN;
  char *bj = json_dumps(booster, JSON_COMPACT);
  if (!bj) {
    rc = sl__oom("model");
    goto done;
  }
  if (XGBoosterCreate(NULL, 0, &m->booster) || XGBoosterLoadModelFromBuffer(m->booster, bj, strlen(bj)))
    rc = xgb_err("load model");
  sl__free(bj);
done:
  json_decref(root);
  if (rc) {
    sl_prov_model_free(m);
    return rc;
  }
  *out = m;
  return 0;
}

/* ---- the pruning simulation ---- */

typedef struct simctx {
  const sl_prov_graphlets *g;
  size_t *win; /* test-window graphlet indices, in (pipeline, start) order */
  size_t n;
  double window_waste;
  int64_t T0, T1;
  /* baseline push periods: (pipe, day) pairs with a push, sorted */
  int64_t *periods;
  size_t nperiods;
  double base_stale;
} simctx;

static int64_t day_of(int64_t ms) { return ms / 86400000; }

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Time-averaged age of the newest pushed model over [T0, T1], summed over pipelines that ever pushed (weighted by
 * window length), with the pruned set's pushes removed. Pushes before the window (not prunable) carry in. */
static double staleness(const simctx *c, const bool *pruned) {
  const sl_prov_graphlets *g = c->g;
  double total = 0, weight = 0;
  size_t s = 0;
  while (s < g->ng) {
    size_t e = s;
    while (e < g->ng && g->gi[e].pipe == g->gi[s].pipe) e++;
    /* Pipeline's graphlets s..e-1 are in start order. */
    int64_t first_start = g->g[s].start_ms;
    bool any_push = false;
    for (size_t i = s; i < e; i++) any_push |= g->g[i].pushed;
    if (any_push) {
      int64_t last = first_start; /* without any model yet, its age runs from the pipeline's first graphlet */
      double area = 0;
      int64_t cur = c->T0;
      /* Pushes in time order of outcome; graphlets are in start order, outcomes nearly so: collect and sort. */
      int64_t pushes[4096];
      size_t np = 0;
      for (size_t i = s; i < e; i++) {
        const sl_prov_graphlet *x = &g->g[i];
        if (!x->pushed) continue;
        if (x->outcome_ms < c->T0) {
          if (x->outcome_ms > last) last = x->outcome_ms;
          continue;
        }
        if (x->start_ms >= c->T0 && pruned && pruned[i]) continue;
        if (x->outcome_ms <= c->T1 && np < 4096) pushes[np++] = x->outcome_ms;
      }
      qsort(pushes, np, sizeof *pushes, cmp_i64);
      for (size_t k = 0; k <= np; k++) {
        int64_t nxt = k < np ? pushes[k] : c->T1;
        if (nxt > cur) {
          /* integral of (t - last) over [cur, nxt] */
          double a = (double)(cur - last) / 3.6e6, b = (double)(nxt - last) / 3.6e6;
          area += (b * b - a * a) / 2.0;
          cur = nxt;
        }
        if (k < np) last = pushes[k];
      }
      total += area;
      weight += (double)(c->T1 - c->T0) / 3.6e6;
    }
    s = e;
  }
  return weight > 0 ? total / weight : 0; /* hours */
}

static void sim_row(const simctx *c, const double *p, double th, bool *pruned, sl_prov_sim_row *r) {
  const sl_prov_graphlets *g = c->g;
  memset(r, 0, sizeof *r);
  r->threshold = th;
  memset(pruned, 0, g->ng * sizeof *pruned);
  size_t pushes = 0, lost = 0;
  int64_t *kept = sl__mallocarray(c->n ? c->n : 1, sizeof *kept);
  size_t nkept = 0;
  for (size_t k = 0; k < c->n; k++) {
    size_t i = c->win[k];
    const sl_prov_graphlet *x = &g->g[i];
    bool pr = p[k] < th;
    pruned[i] = pr;
    pushes += x->pushed;
    if (pr) {
      r->pruned++;
      if (x->pushed) {
        lost++;
        r->lost_compute += x->prunable;
      } else {
        r->saved_waste += x->prunable;
      }
    } else if (x->pushed && kept) {
      kept[nkept++] = (int64_t)g->gi[i].pipe * 1000000 + day_of(x->outcome_ms);
    }
  }
  r->saved_share = c->window_waste > 0 ? r->saved_waste / c->window_waste : 0;
  r->push_recall = pushes ? (double)(pushes - lost) / (double)pushes : 1;
  if (kept) {
    qsort(kept, nkept, sizeof *kept, cmp_i64);
    size_t have = 0, a = 0;
    for (size_t b = 0; b < c->nperiods; b++) {
      while (a < nkept && kept[a] < c->periods[b]) a++;
      if (a < nkept && kept[a] == c->periods[b]) have++;
    }
    r->cadence = c->nperiods ? (double)have / (double)c->nperiods : 1;
    sl__free(kept);
  }
  double st = staleness(c, pruned);
  r->staleness_ratio = c->base_stale > 0 ? st / c->base_stale : 1;
  r->fresh = r->cadence >= 0.99 && r->staleness_ratio <= 1.05;
}

static int sweep(const simctx *c, const double *p, sl_prov_sim_row **rows, size_t *nrows, int *best, int *best99) {
  size_t n = 100;
  sl_prov_sim_row *r = sl__calloc(n, sizeof *r);
  bool *pruned = sl__calloc(c->g->ng ? c->g->ng : 1, sizeof *pruned);
  if (!r || !pruned) {
    sl__free(r);
    sl__free(pruned);
    return sl__oom("simulation");
  }
  *best = *best99 = -1;
  for (size_t i = 0; i < n; i++) {
    sim_row(c, p, (double)i / 100.0, pruned, &r[i]);
    if (r[i].fresh && (*best < 0 || r[i].saved_waste > r[*best].saved_waste)) *best = (int)i;
    if (r[i].fresh && r[i].push_recall >= 0.99 && (*best99 < 0 || r[i].saved_waste > r[*best99].saved_waste))
      *best99 = (int)i;
  }
  sl__free(pruned);
  *rows = r;
  *nrows = n;
  return 0;
}

int sl_prov_simulate(sl_prov_sim **out, const sl_prov_graphlets *g, sl_prov_model *m) {
  *out = NULL;
  int64_t from = sl_prov_model_test_from(m);
  size_t n = 0;
  for (size_t i = 0; i < g->ng; i++) n += g->g[i].start_ms >= from;
  if (!n) return sl__err(SL_EINVAL, "no graphlets in the model's test window (from %lld ms)", (long long)from);
  size_t *win = sl__mallocarray(n, sizeof *win);
  double *p = sl__mallocarray(n, sizeof *p);
  float *mat = NULL;
  int rc = 0;
  if (!win || !p) rc = sl__oom("simulation");
  for (size_t i = 0, k = 0; !rc && i < g->ng; i++)
    if (g->g[i].start_ms >= from) win[k++] = i;
  if (!rc && !(rc = to_matrix(g, win, n, m->keep, &mat))) rc = predict_rows(m->booster, mat, n, m->keep, p);
  if (!rc) rc = sl__prov_simulate_p(out, g, from, p);
  /* The model's default threshold: the largest saving that keeps freshness and 99% of pushes. */
  if (!rc && (*out)->best_recall99 >= 0) sl_prov_model_set_threshold(m, (*out)->rows[(*out)->best_recall99].threshold);
  sl__free(win);
  sl__free(p);
  sl__free(mat);
  return rc;
}

int sl__prov_simulate_p(sl_prov_sim **out, const sl_prov_graphlets *g, int64_t from, const double *pred) {
  *out = NULL;
  simctx c = {0};
  c.g = g;
  c.win = sl__mallocarray(g->ng ? g->ng : 1, sizeof *c.win);
  if (!c.win) return sl__oom("simulation");
  c.T0 = from;
  c.T1 = from;
  for (size_t i = 0; i < g->ng; i++)
    if (g->g[i].start_ms >= from) {
      c.win[c.n++] = i;
      if (g->g[i].outcome_ms > c.T1) c.T1 = g->g[i].outcome_ms;
      if (g->g[i].start_ms > c.T1) c.T1 = g->g[i].start_ms;
    }
  if (!c.n) {
    sl__free(c.win);
    return sl__err(SL_EINVAL, "no graphlets in the model's test window (from %lld ms)", (long long)from);
  }
  sl_prov_sim *s = sl__calloc(1, sizeof *s);
  const double *p = pred;
  double *tp = sl__mallocarray(c.n, sizeof *tp);
  uint8_t *mark = sl__calloc(g->nex ? g->nex : 1, 1);
  int32_t *exix = NULL;
  int rc = 0;
  if (!s || !tp || !mark) {
    rc = sl__oom("simulation");
    goto done;
  }
  s->ngraphlets = c.n;
  /* The window's wasted compute: each wasted execution of a window graphlet, once. */
  {
    int64_t maxid = 0;
    for (size_t i = 0; i < g->nex; i++)
      if (g->ex[i].id > maxid) maxid = g->ex[i].id;
    exix = sl__mallocarray((size_t)maxid + 1, sizeof *exix);
    if (!exix) {
      rc = sl__oom("simulation");
      goto done;
    }
    for (size_t i = 0; i < g->nex; i++) exix[g->ex[i].id] = (int32_t)i;
    s->has_truth = true;
    for (size_t k = 0; k < c.n; k++) {
      size_t i = c.win[k];
      const sl_prov_graphlet *x = &g->g[i];
      s->npushes += x->pushed;
      if (!x->pushed) s->prunable_waste += x->prunable;
      tp[k] = x->true_p;
      if (isnan(x->true_p)) s->has_truth = false;
      for (size_t j = 0; j <= x->nupstream + x->ndownstream; j++) {
        int32_t e = j == 0 ? g->gi[i].trainer
                           : exix[j <= x->nupstream ? x->upstream[j - 1] : x->downstream[j - 1 - x->nupstream]];
        if (mark[e]) continue;
        mark[e] = 1;
        if (!g->ex[e].useful) c.window_waste += g->ex[e].cost;
      }
    }
    s->window_waste = c.window_waste;
  }
  /* Baseline (pipeline, day) periods with a push. */
  c.periods = sl__mallocarray(c.n, sizeof *c.periods);
  if (!c.periods) {
    rc = sl__oom("simulation");
    goto done;
  }
  for (size_t k = 0; k < c.n; k++) {
    const sl_prov_graphlet *x = &g->g[c.win[k]];
    if (x->pushed) c.periods[c.nperiods++] = (int64_t)g->gi[c.win[k]].pipe * 1000000 + day_of(x->outcome_ms);
  }
  qsort(c.periods, c.nperiods, sizeof *c.periods, cmp_i64);
  {
    size_t u = 0;
    for (size_t k = 0; k < c.nperiods; k++)
      if (!u || c.periods[u - 1] != c.periods[k]) c.periods[u++] = c.periods[k];
    c.nperiods = u;
  }
  c.base_stale = staleness(&c, NULL);
  if ((rc = sweep(&c, p, &s->rows, &s->nrows, &s->best, &s->best_recall99))) goto done;
  if (s->has_truth && (rc = sweep(&c, tp, &s->truth_rows, &s->ntruth, &s->truth_best, &s->truth_best_recall99)))
    goto done;
  if (!s->has_truth) s->truth_best = s->truth_best_recall99 = -1;
done:
  sl__free(c.win);
  sl__free(c.periods);
  sl__free(tp);
  sl__free(mark);
  sl__free(exix);
  if (rc) {
    sl_prov_sim_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

void sl_prov_sim_free(sl_prov_sim *s) {
  if (!s) return;
  sl__free(s->rows);
  sl__free(s->truth_rows);
  sl__free(s);
}

/* ---- should-train ---- */

int sl_prov_should_train(sl_prov_decision *out, sl_prov *p, const char *pipeline, sl_prov_model *m, double threshold,
                         int64_t now_ms) {
  memset(out, 0, sizeof *out);
  if (!pipeline) return sl__err(SL_EINVAL, "should-train: a pipeline name is required");
  sl_prov_graphlets *g;
  int rc = sl__an_load(&g, p, pipeline);
  int64_t ctx;
  if (rc == SL_ENOTFOUND && !sl__an_pipeline_ctx(&ctx, p, pipeline)) {
    /* A pipeline that has run but never trained (its first run, at the gate): no history to predict from. */
    out->features = sl__mallocarray(SL__AN_NFEAT, sizeof *out->features);
    if (!out->features) return sl__oom("decision");
    for (size_t j = 0; j < SL__AN_NFEAT; j++) out->features[j] = NAN;
    out->p_push = NAN;
    out->threshold = m ? (threshold >= 0 ? threshold : sl_prov_model_threshold(m)) : threshold >= 0 ? threshold : 0.1;
    out->train = true;
    sl_error_clear();
    return 0;
  }
  if (rc) return rc;
  double *f = sl__mallocarray(SL__AN_NFEAT, sizeof *f);
  size_t *prior = sl__mallocarray(g->ng, sizeof *prior);
  int64_t *spans = NULL;
  if (!f || !prior) {
    rc = sl__oom("decision");
    goto done;
  }
  for (size_t i = 0; i < g->ng; i++) prior[i] = i;
  const sl_prov_graphlet *last = &g->g[g->ng - 1];
  const sl__an_graphlet *lgi = &g->gi[g->ng - 1];
  int64_t t = now_ms;
  if (!t) {
    /* Just after the last record of the pipeline. */
    for (size_t i = 0; i < g->nex; i++)
      if (g->ex[i].update > t) t = g->ex[i].update;
    t += 1;
  }
  /* The next run's inputs: the newest spans, as many as the last graphlet read (its rolling window). */
  size_t w = lgi->nspan ? lgi->nspan : 1, ns = 0;
  spans = sl__mallocarray(g->nart + 1, sizeof *spans);
  if (!spans) {
    rc = sl__oom("decision");
    goto done;
  }
  int64_t schema = lgi->schema, schema_t = INT64_MIN;
  double anomalies = NAN;
  for (size_t i = 0; i < g->nart; i++) {
    const sl__an_art *a = &g->art[i];
    unsigned fl = a->type >= 0 ? g->types[a->type].flags : 0;
    if (a->create >= t) continue;
    if ((fl & SL__AN_EXAMPLES) && a->span != INT64_MIN) spans[ns++] = a->span;
    if (a->side) continue; /* Transform's own schema, statistics and anomalies: not the pipeline's */
    if ((fl & SL__AN_SCHEMA) && a->create > schema_t) schema_t = a->create, schema = a->id;
    if ((fl & SL__AN_ANOMALIES) && a->anomalies >= 0 && a->create > last->start_ms)
      anomalies = (isnan(anomalies) ? 0 : anomalies) + a->anomalies;
  }
  qsort(spans, ns, sizeof *spans, cmp_i64);
  size_t u = 0;
  for (size_t i = 0; i < ns; i++)
    if (!u || spans[u - 1] != spans[i]) spans[u++] = spans[i];
  ns = u;
  const int64_t *win = ns > w ? spans + (ns - w) : spans;
  size_t nw = ns > w ? w : ns;
  sl__an_facts facts = {t, win, nw, schema, anomalies, lgi->comp_hash, lgi->ncomp, 0};
  sl__an_features(g, prior, g->ng, &facts, f);
  if (m) {
    if ((rc = sl_prov_model_predict(&out->p_push, m, f))) goto done;
    out->threshold = threshold >= 0 ? threshold : sl_prov_model_threshold(m);
  } else {
    /* No model: the pipeline's Laplace-smoothed push rate among earlier graphlets alike in whether they had new
     * data. */
    bool fresh = f[1] > 0;
    double k = 0, n = 0;
    for (size_t i = 0; i < g->ng; i++) {
      const double *gf = g->feat + i * SL__AN_NFEAT;
      if ((gf[1] > 0) != fresh || g->g[i].outcome_ms >= t) continue;
      n += 1;
      k += g->g[i].pushed;
    }
    out->p_push = (k + 1) / (n + 2);
    out->threshold = threshold >= 0 ? threshold : 0.1;
  }
  out->train = out->p_push >= out->threshold;
  out->features = f;
  f = NULL;
done:
  sl__free(f);
  sl__free(prior);
  sl__free(spans);
  sl_prov_graphlets_free(g);
  return rc;
}
