/* prov/analytics/characterize.c: the paper-style characterization of a store (`sluice prov stats`, the
 * provenance report): pipelines, lifespans, graphlets per pipeline and per day, push rate, compute by component
 * type and the pipeline topologies, computed from a loaded graphlet set (graphlets.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prov/analytics/analytics_int.h"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double quant(const double *v, size_t n, double q) {
  if (!n) return NAN;
  double pos = q * (double)(n - 1);
  size_t i = (size_t)pos;
  double f = pos - (double)i;
  return i + 1 < n ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

typedef struct topo_tmp {
  uint64_t hash;
  size_t count;
  size_t example; /* graphlet index */
} topo_tmp;
static int by_hash(const void *a, const void *b) {
  uint64_t x = ((const topo_tmp *)a)->hash, y = ((const topo_tmp *)b)->hash;
  return x < y ? -1 : x > y;
}
static int by_count(const void *a, const void *b) {
  size_t x = ((const topo_tmp *)a)->count, y = ((const topo_tmp *)b)->count;
  return x > y ? -1 : x < y;
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The component set of graphlet i (all its executions, downstream included) as sorted, comma-joined names. */
static char *components_of(const sl_prov_graphlets *g, size_t i, const int32_t *exix) {
  const sl_prov_graphlet *o = &g->g[i];
  size_t n = 1 + o->nupstream + o->ndownstream, k = 0, len = 0;
  const char **names = sl__mallocarray(n, sizeof *names);
  if (!names) return NULL;
  names[k++] = g->types[g->ex[g->gi[i].trainer].type].short_name;
  for (size_t j = 0; j < o->nupstream + o->ndownstream; j++) {
    int64_t id = j < o->nupstream ? o->upstream[j] : o->downstream[j - o->nupstream];
    int32_t x = exix[id];
    names[k++] = g->ex[x].type >= 0 ? g->types[g->ex[x].type].short_name : "?";
  }
  qsort(names, k, sizeof *names, cmp_str);
  for (size_t j = 0; j < k; j++)
    if (j == 0 || strcmp(names[j], names[j - 1])) len += strlen(names[j]) + 1;
  char *s = sl__malloc(len + 1), *w = s;
  if (s) {
    for (size_t j = 0; j < k; j++)
      if (j == 0 || strcmp(names[j], names[j - 1])) {
        if (w != s) *w++ = ',';
        size_t l = strlen(names[j]);
        memcpy(w, names[j], l);
        w += l;
      }
    *w = 0;
  }
  sl__free(names);
  return s;
}

/* Per pipeline: lifespan (first to last execution) and graphlet count; their quantiles, runs per day, outcomes. */
static int stats_pipelines(sl_prov_stats *s, const sl_prov_graphlets *g) {
  size_t np = g->npipes;
  int64_t *first = sl__mallocarray(np + 1, sizeof *first), *last = sl__mallocarray(np + 1, sizeof *last);
  double *life = sl__mallocarray(np + 1, sizeof *life), *cnt = sl__calloc(np + 1, sizeof *cnt);
  int rc = 0;
  if (!first || !last || !life || !cnt) {
    rc = sl__oom("stats");
    goto done;
  }
  for (size_t i = 0; i <= np; i++) first[i] = INT64_MAX, last[i] = INT64_MIN;
  for (size_t i = 0; i < g->nex; i++) {
    int32_t pp = g->ex[i].pipe;
    if (pp < 0) continue;
    if (g->ex[i].create < first[pp]) first[pp] = g->ex[i].create;
    if (g->ex[i].update > last[pp]) last[pp] = g->ex[i].update;
  }
  size_t pushed = 0, failed = 0;
  for (size_t i = 0; i < g->ng; i++) {
    if (g->gi[i].pipe >= 0) cnt[g->gi[i].pipe] += 1;
    pushed += g->g[i].pushed;
    failed += g->g[i].trainer_state == SL_PROV_E_FAILED;
  }
  s->push_rate = g->ng ? (double)pushed / (double)g->ng : 0;
  s->failed_trainers = g->ng ? (double)failed / (double)g->ng : 0;
  double rate_sum = 0;
  size_t nlive = 0;
  for (size_t i = 0; i < np; i++) {
    life[i] = first[i] <= last[i] ? (double)(last[i] - first[i]) / 86400000.0 : 0;
    if (life[i] > 0) {
      /* Runs per day over the pipeline's life, at least one day so a one-day pipeline is not inflated. */
      rate_sum += cnt[i] / (life[i] < 1 ? 1 : life[i]);
      nlive++;
    }
  }
  s->runs_per_day = nlive ? rate_sum / (double)nlive : 0;
  s->graphlets_per_day = s->days > 0 ? (double)g->ng / s->days : 0;
  if (s->days < 1) s->runs_per_day = s->graphlets_per_day = NAN; /* no daily rate below a day (prov.h) */
  qsort(life, np, sizeof *life, cmp_d);
  double qs[5] = {0, 0.25, 0.5, 0.75, 1};
  for (int j = 0; j < 5; j++) s->lifespan_days[j] = quant(life, np, qs[j]);
  double mean = 0;
  for (size_t i = 0; i < np; i++) mean += cnt[i];
  mean = np ? mean / (double)np : 0;
  qsort(cnt, np, sizeof *cnt, cmp_d);
  double qg[6] = {0, 0.25, 0.5, 0.75, 0.9, 1};
  for (int j = 0; j < 6; j++) s->graphlets_per_pipeline[j] = quant(cnt, np, qg[j]);
  s->graphlets_per_pipeline[6] = mean;
done:
  sl__free(first);
  sl__free(last);
  sl__free(life);
  sl__free(cnt);
  return rc;
}

/* Compute by component type, largest first. */
static int stats_compute(sl_prov_stats *s, const sl_prov_graphlets *g) {
  sl__an_acc ac = {0};
  ac.slot = sl__mallocarray(g->ntypes + 1, sizeof *ac.slot);
  if (!ac.slot) return sl__oom("stats");
  memset(ac.slot, 0xff, (g->ntypes + 1) * sizeof *ac.slot);
  int rc = 0;
  for (size_t i = 0; !rc && i < g->nex; i++) {
    const sl__an_exec *e = &g->ex[i];
    s->total_compute += e->cost;
    int32_t tk = e->type >= 0 ? e->type : (int32_t)g->ntypes;
    rc = sl__an_acc_add(&ac, tk, e->type >= 0 ? g->types[e->type].short_name : "(unknown)", e->cost, 0);
  }
  if (!rc) {
    qsort(ac.rows, ac.n, sizeof *ac.rows, sl__an_by_total);
    s->compute = ac.rows;
    s->ncompute = ac.n;
    ac.rows = NULL;
  }
  sl__free(ac.slot);
  sl__free(ac.rows);
  return rc;
}

/* Order-independent hash of the set of distinct component types of graphlet i. */
static uint64_t topology_hash(const sl_prov_graphlets *g, size_t i, const int32_t *exix) {
  const sl_prov_graphlet *o = &g->g[i];
  uint64_t h = 0;
  int32_t seen[64];
  int ns = 0;
  for (size_t j = 0; j <= o->nupstream + o->ndownstream; j++) {
    int32_t x = j == 0 ? g->gi[i].trainer
                       : exix[j <= o->nupstream ? o->upstream[j - 1] : o->downstream[j - 1 - o->nupstream]];
    int32_t ty = g->ex[x].type;
    bool dup = false;
    for (int q = 0; q < ns; q++) dup |= seen[q] == ty;
    if (dup || ns >= 64) continue;
    seen[ns++] = ty;
    h ^= sl__mix64((uint64_t)ty + 77);
  }
  return h;
}

/* Topologies: the set of component types of each graphlet. Hash sets, count, then name the common ones. */
static int stats_topologies(sl_prov_stats *s, const sl_prov_graphlets *g) {
  int64_t maxid = 0;
  for (size_t i = 0; i < g->nex; i++)
    if (g->ex[i].id > maxid) maxid = g->ex[i].id;
  int32_t *exix = sl__mallocarray((size_t)maxid + 1, sizeof *exix);
  topo_tmp *tt = sl__mallocarray(g->ng ? g->ng : 1, sizeof *tt);
  int rc = 0;
  if (!exix || !tt) {
    rc = sl__oom("stats");
    goto done;
  }
  for (size_t i = 0; i < g->nex; i++) exix[g->ex[i].id] = (int32_t)i;
  for (size_t i = 0; i < g->ng; i++) {
    tt[i].hash = topology_hash(g, i, exix);
    tt[i].count = 1;
    tt[i].example = i;
  }
  qsort(tt, g->ng, sizeof *tt, by_hash);
  size_t nt = 0;
  for (size_t i = 0; i < g->ng; i++) {
    if (nt && tt[nt - 1].hash == tt[i].hash)
      tt[nt - 1].count++;
    else
      tt[nt++] = tt[i];
  }
  qsort(tt, nt, sizeof *tt, by_count);
  size_t ntop = nt < 20 ? nt : 20;
  s->topologies = sl__calloc(ntop ? ntop : 1, sizeof *s->topologies);
  if (!s->topologies) {
    rc = sl__oom("stats");
    goto done;
  }
  s->ntopologies = ntop;
  for (size_t i = 0; i < s->ntopologies; i++) {
    s->topologies[i].count = tt[i].count;
    s->topologies[i].components = components_of(g, tt[i].example, exix);
    if (!s->topologies[i].components) {
      rc = sl__oom("stats");
      goto done;
    }
  }
done:
  sl__free(exix);
  sl__free(tt);
  return rc;
}

int sl_prov_stats_compute(sl_prov_stats **out, const sl_prov_graphlets *g) {
  *out = NULL;
  sl_prov_stats *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("stats");
  s->graphlets = g->ng;
  s->executions = g->nex;
  s->artifacts = g->nart;
  s->pipelines = g->npipes;
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  for (size_t i = 0; i < g->nex; i++) {
    if (g->ex[i].create < t0) t0 = g->ex[i].create;
    if (g->ex[i].update > t1) t1 = g->ex[i].update;
  }
  s->days = g->nex ? (double)(t1 - t0) / 86400000.0 : 0;
  int rc = stats_pipelines(s, g);
  if (!rc) rc = stats_compute(s, g);
  if (!rc) rc = stats_topologies(s, g);
  if (rc) {
    sl_prov_stats_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

void sl_prov_stats_free(sl_prov_stats *s) {
  if (!s) return;
  sl__free(s->compute);
  for (size_t i = 0; i < s->ntopologies; i++) sl__free(s->topologies[i].components);
  sl__free(s->topologies);
  sl__free(s);
}
