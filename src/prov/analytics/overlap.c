/* prov/analytics/overlap.c: re-processed input (docs/provenance.md, "Overlap"): for each COMPLETE execution, the share
 * of its Examples inputs that an earlier COMPLETE execution of the same type in the same pipeline already read, its
 * cost scaled by that share, and the part that keeping per-span output would have saved; computed from a loaded set
 * (graphlets_load.c) by one sort of the (pipeline, type, artifact, time) input tuples. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prov/analytics/analytics_int.h"
#include "sluice/prov_rq.h"

/* One Examples INPUT of a COMPLETE execution. */
typedef struct tuple {
  int32_t pipe, type, art, exec;
  int64_t create, id;
} tuple;

static int by_key(const void *x, const void *y) {
  const tuple *a = x, *b = y;
  if (a->pipe != b->pipe) return a->pipe < b->pipe ? -1 : 1;
  if (a->type != b->type) return a->type < b->type ? -1 : 1;
  if (a->art != b->art) return a->art < b->art ? -1 : 1;
  if (a->create != b->create) return a->create < b->create ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

static int by_recomputed(const void *x, const void *y) {
  const sl_prov_overlap_row *a = x, *b = y;
  if (a->recomputed_cost != b->recomputed_cost) return a->recomputed_cost > b->recomputed_cost ? -1 : 1;
  if (a->cost != b->cost) return a->cost > b->cost ? -1 : 1;
  return strcmp(a->name, b->name);
}

static bool is_examples(const sl_prov_graphlets *g, int32_t art) {
  int32_t t = g->art[art].type;
  return t >= 0 && (g->types[t].flags & SL__AN_EXAMPLES);
}

/* Adds one execution's figures to a row. */
static void add(sl_prov_overlap_row *r, double cost, double share, double reusable) {
  r->executions++;
  r->with_overlap += share > 0;
  r->mean_overlap += share; /* a sum until finish() */
  r->cost += cost;
  r->recomputed_cost += cost * share;
  r->reusable_cost += cost * reusable;
}

static void finish(sl_prov_overlap_row *r, size_t n) {
  for (size_t i = 0; i < n; i++) r[i].mean_overlap = r[i].executions ? r[i].mean_overlap / (double)r[i].executions : 0;
}

int sl_prov_overlap_compute(sl_prov_overlap **out, const sl_prov_graphlets *g) {
  *out = NULL;
  /* Per execution: Examples inputs, re-processed ones, re-processed ones an earlier reader had materialized. */
  int32_t *nin = sl__calloc(g->nex + 1, sizeof *nin), *nre = sl__calloc(g->nex + 1, sizeof *nre),
          *nreuse = sl__calloc(g->nex + 1, sizeof *nreuse);
  bool *mat = sl__calloc(g->nex + 1, sizeof *mat);
  tuple *t = NULL;
  size_t nt = 0, cap = 0;
  sl_prov_overlap *o = sl__calloc(1, sizeof *o);
  int32_t *tslot = sl__mallocarray(g->ntypes + 1, sizeof *tslot), *pslot = sl__mallocarray(g->npipes + 1, sizeof *pslot);
  int rc = 0;
  if (!nin || !nre || !nreuse || !mat || !o || !tslot || !pslot) {
    rc = sl__oom("overlap");
    goto done;
  }
  for (size_t i = 0; i < g->nev && !rc; i++) {
    const sl__an_event *ev = &g->ev[i];
    const sl__an_exec *e = &g->ex[ev->exec];
    if (e->state != SL_PROV_E_COMPLETE || !is_examples(g, ev->art)) continue;
    /* An execution that writes Examples materializes its input's transformation: kept per span, a later reader
     * of the same span could have read it instead of recomputing. */
    if (ev->type == SL_PROV_EV_OUTPUT) mat[ev->exec] = true;
    if (ev->type != SL_PROV_EV_INPUT) continue;
    nin[ev->exec]++;
    if (e->pipe < 0) continue; /* outside any pipeline context: nothing earlier shares its context */
    if ((rc = sl__an_grow((void **)&t, &cap, nt + 1, sizeof *t))) goto done;
    t[nt++] = (tuple){e->pipe, e->type, ev->art, ev->exec, e->create, e->id};
  }
  qsort(t, nt, sizeof *t, by_key);
  for (size_t i = 0; i < nt;) {
    size_t j = i;
    bool kept = mat[t[i].exec];
    /* The first reader of (pipeline, type, artifact) processes it; every later one re-processes it. */
    for (j = i + 1; j < nt && t[j].pipe == t[i].pipe && t[j].type == t[i].type && t[j].art == t[i].art; j++) {
      nre[t[j].exec]++;
      if (kept) nreuse[t[j].exec]++;
      kept |= mat[t[j].exec];
    }
    i = j;
  }
  memset(tslot, 0xff, (g->ntypes + 1) * sizeof *tslot);
  memset(pslot, 0xff, (g->npipes + 1) * sizeof *pslot);
  size_t tcap = 0, pcap = 0;
  o->total.name = "(all)";
  for (size_t x = 0; x < g->nex; x++) {
    const sl__an_exec *e = &g->ex[x];
    o->all_compute += e->cost;
    if (!nin[x]) continue;
    double share = (double)nre[x] / (double)nin[x], reuse = (double)nreuse[x] / (double)nin[x];
    add(&o->total, e->cost, share, reuse);
    int32_t tk = e->type >= 0 ? e->type : (int32_t)g->ntypes, pk = e->pipe >= 0 ? e->pipe : (int32_t)g->npipes;
    if (tslot[tk] < 0) {
      if ((rc = sl__an_grow((void **)&o->types, &tcap, o->ntypes + 1, sizeof *o->types))) goto done;
      memset(&o->types[o->ntypes], 0, sizeof *o->types);
      o->types[o->ntypes].name = e->type >= 0 ? g->types[e->type].short_name : "(unknown)";
      tslot[tk] = (int32_t)o->ntypes++;
    }
    if (pslot[pk] < 0) {
      if ((rc = sl__an_grow((void **)&o->pipelines, &pcap, o->npipelines + 1, sizeof *o->pipelines))) goto done;
      memset(&o->pipelines[o->npipelines], 0, sizeof *o->pipelines);
      o->pipelines[o->npipelines].name = e->pipe >= 0 ? g->pipes[e->pipe] : "(no pipeline)";
      pslot[pk] = (int32_t)o->npipelines++;
    }
    add(&o->types[tslot[tk]], e->cost, share, reuse);
    add(&o->pipelines[pslot[pk]], e->cost, share, reuse);
  }
  finish(&o->total, 1);
  finish(o->types, o->ntypes);
  finish(o->pipelines, o->npipelines);
  if (o->ntypes) qsort(o->types, o->ntypes, sizeof *o->types, by_recomputed);
  if (o->npipelines) qsort(o->pipelines, o->npipelines, sizeof *o->pipelines, by_recomputed);
done:
  sl__free(nin);
  sl__free(nre);
  sl__free(nreuse);
  sl__free(mat);
  sl__free(t);
  sl__free(tslot);
  sl__free(pslot);
  if (rc) {
    sl_prov_overlap_free(o);
    return rc;
  }
  *out = o;
  return 0;
}

void sl_prov_overlap_free(sl_prov_overlap *o) {
  if (!o) return;
  sl__free(o->types);
  sl__free(o->pipelines);
  sl__free(o);
}
