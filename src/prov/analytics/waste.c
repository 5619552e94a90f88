/* prov/analytics/waste.c: wasted computation (the cost of executions none of whose graphlets pushed), by pipeline and
 * by component type, computed from a loaded graphlet set (graphlets.c) without touching the store again. The
 * name -> (total, wasted) accumulator here also serves the characterization (characterize.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prov/analytics/analytics_int.h"

int sl__an_acc_add(sl__an_acc *a, int32_t key, const char *name, double total, double wasted) {
  if (a->slot[key] < 0) {
    if (a->n == a->cap) {
      size_t nc = a->cap ? a->cap * 2 : 64;
      sl_prov_waste_row *nr = sl__realloc(a->rows, nc * sizeof *nr);
      if (!nr) return sl__oom("report rows");
      a->rows = nr;
      a->cap = nc;
    }
    a->slot[key] = (int32_t)a->n;
    a->rows[a->n].name = name;
    a->rows[a->n].total = a->rows[a->n].wasted = 0;
    a->n++;
  }
  a->rows[a->slot[key]].total += total;
  a->rows[a->slot[key]].wasted += wasted;
  return 0;
}

static int by_wasted(const void *x, const void *y) {
  const sl_prov_waste_row *a = x, *b = y;
  if (a->wasted != b->wasted) return a->wasted > b->wasted ? -1 : 1;
  if (a->total != b->total) return a->total > b->total ? -1 : 1;
  return strcmp(a->name, b->name);
}
int sl__an_by_total(const void *x, const void *y) {
  const sl_prov_waste_row *a = x, *b = y;
  if (a->total != b->total) return a->total > b->total ? -1 : 1;
  return strcmp(a->name, b->name);
}

int sl_prov_waste_compute(sl_prov_waste **out, const sl_prov_graphlets *g) {
  *out = NULL;
  sl_prov_waste *w = sl__calloc(1, sizeof *w);
  sl__an_acc ap = {0}, at = {0};
  ap.slot = sl__mallocarray(g->npipes + 1, sizeof *ap.slot);
  at.slot = sl__mallocarray(g->ntypes + 1, sizeof *at.slot);
  if (!w || !ap.slot || !at.slot) {
    sl__free(w);
    sl__free(ap.slot);
    sl__free(at.slot);
    return sl__oom("waste report");
  }
  memset(ap.slot, 0xff, (g->npipes + 1) * sizeof *ap.slot);
  memset(at.slot, 0xff, (g->ntypes + 1) * sizeof *at.slot);
  int rc = 0;
  for (size_t i = 0; !rc && i < g->nex; i++) {
    const sl__an_exec *e = &g->ex[i];
    double wasted = e->useful ? 0 : e->cost;
    w->total += e->cost;
    w->wasted += wasted;
    if (!e->in_graphlet) w->unattributed += e->cost;
    int32_t pk = e->pipe >= 0 ? e->pipe : (int32_t)g->npipes;
    rc = sl__an_acc_add(&ap, pk, e->pipe >= 0 ? g->pipes[e->pipe] : "(no pipeline)", e->cost, wasted);
    int32_t tk = e->type >= 0 ? e->type : (int32_t)g->ntypes;
    if (!rc) rc = sl__an_acc_add(&at, tk, e->type >= 0 ? g->types[e->type].short_name : "(unknown)", e->cost, wasted);
  }
  sl__free(ap.slot);
  sl__free(at.slot);
  if (rc) {
    sl__free(ap.rows);
    sl__free(at.rows);
    sl__free(w);
    return rc;
  }
  qsort(ap.rows, ap.n, sizeof *ap.rows, by_wasted);
  qsort(at.rows, at.n, sizeof *at.rows, by_wasted);
  w->pipelines = ap.rows;
  w->npipelines = ap.n;
  w->components = at.rows;
  w->ncomponents = at.n;
  *out = w;
  return 0;
}

void sl_prov_waste_free(sl_prov_waste *w) {
  if (!w) return;
  sl__free(w->pipelines);
  sl__free(w->components);
  sl__free(w);
}
