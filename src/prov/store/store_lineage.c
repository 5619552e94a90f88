/* prov/store/store_lineage.c: lineage walks (sl_prov_lineage): breadth-first, upstream and downstream from an
 * artifact or an execution, over the events read by store_query.c. */
#include <stdlib.h>
#include <string.h>

#include "prov/store/store_int.h"

typedef struct seen {
  int64_t *ids; /* kind in the low bit: id*2 + (artifact ? 1 : 0) */
  int *depth;
  size_t n, cap;
} seen;

static bool seen_has(const seen *s, int64_t key) {
  for (size_t i = 0; i < s->n; i++)
    if (s->ids[i] == key) return true;
  return false;
}

static int seen_add(seen *s, int64_t key, int depth) {
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 32;
    int64_t *ni = sl__realloc(s->ids, nc * sizeof *ni);
    if (!ni) return sl__oom("lineage");
    s->ids = ni;
    int *nd = sl__realloc(s->depth, nc * sizeof *nd);
    if (!nd) return sl__oom("lineage");
    s->depth = nd;
    s->cap = nc;
  }
  s->ids[s->n] = key;
  s->depth[s->n++] = depth;
  return 0;
}

static bool is_in(int t) { return t == SL_PROV_EV_INPUT || t == SL_PROV_EV_DECLARED_INPUT || t == SL_PROV_EV_INTERNAL_INPUT; }
static bool is_out(int t) {
  return t == SL_PROV_EV_OUTPUT || t == SL_PROV_EV_DECLARED_OUTPUT || t == SL_PROV_EV_INTERNAL_OUTPUT;
}

/* Breadth-first walk, one query per node on the frontier (lineage is interactive: a few hundred nodes). */
static int walk(sl_prov *p, seen *s, sl_prov_list *l, size_t *ecap, int dir, int max_depth, int64_t start_key) {
  size_t head = 0;
  int rc = seen_add(s, start_key, 0);
  while (!rc && head < s->n) {
    int64_t key = s->ids[head];
    int d = s->depth[head++];
    if (max_depth && d >= max_depth) continue;
    bool art = key & 1;
    int64_t id = key >> 1;
    sl_prov_list tmp = {0};
    size_t tcap = 0;
    rc = sl__prov_load_events(p, &tmp, &tcap, art ? SL_PROV_ARTIFACT : SL_PROV_EXECUTION, id);
    /* Upstream of an artifact is its producer: the earliest output from an execution that does not merely
     * re-emit it (CACHED executions, Resolvers), as for graphlets; all outputs when only re-emitters exist. */
    int64_t producer = -1, pms = INT64_MAX;
    if (dir == SL_PROV_UP && art)
      for (size_t i = 0; i < tmp.nevents; i++)
        if (is_out(tmp.events[i].type) && !tmp.events[i].reemit && tmp.events[i].ms < pms)
          pms = tmp.events[i].ms, producer = tmp.events[i].execution_id;
    for (size_t i = 0; !rc && i < tmp.nevents; i++) {
      sl_prov_event *e = &tmp.events[i];
      if (producer >= 0 && e->execution_id != producer) continue;
      /* up: artifact <- its producing execution (output event), execution <- its inputs;
       * down: artifact -> consuming executions (input event), execution -> its outputs. */
      bool follow = dir == SL_PROV_UP ? (art ? is_out(e->type) : is_in(e->type))
                                      : (art ? is_in(e->type) : is_out(e->type));
      if (!follow) continue;
      int64_t nk = art ? e->execution_id * 2 : e->artifact_id * 2 + 1;
      if (seen_has(s, nk)) continue;
      if ((rc = seen_add(s, nk, d + 1))) break;
      if ((rc = sl__prov_grow((void **)&l->events, ecap, l->nevents + 1, sizeof *l->events))) break;
      l->events[l->nevents++] = *e;
      e->path = NULL;
    }
    for (size_t i = 0; i < tmp.nevents; i++) sl__free(tmp.events[i].path);
    sl__free(tmp.events);
  }
  return rc;
}

int sl_prov_lineage(sl_prov_list **out, sl_prov *p, sl_prov_kind kind, int64_t id, int direction, int max_depth) {
  *out = NULL;
  if (kind != SL_PROV_ARTIFACT && kind != SL_PROV_EXECUTION)
    return sl__err(SL_EINVAL, "lineage starts at an artifact or an execution");
  if (direction < SL_PROV_UP || direction > SL_PROV_BOTH)
    return sl__err(SL_EINVAL, "lineage: direction %d is not SL_PROV_UP, SL_PROV_DOWN or SL_PROV_BOTH", direction);
  if (max_depth < 0) return sl__err(SL_EINVAL, "lineage: max_depth %d: must be >= 0 (0: unlimited)", max_depth);
  if (id < 1) return sl__err(SL_EINVAL, "lineage: id %lld: ids are >= 1", (long long)id);
  sl_prov_query q0 = {0};
  q0.id = id;
  sl_prov_list *start;
  int rc = sl_prov_find(&start, p, kind, &q0);
  if (rc) return rc;
  if (!start->n) {
    sl_prov_list_free(start);
    return sl__err(SL_ENOTFOUND, "no %s with id %lld", kind == SL_PROV_ARTIFACT ? "artifact" : "execution",
                   (long long)id);
  }
  sl_prov_list_free(start);
  sl_prov_list *l = sl__calloc(1, sizeof *l);
  if (!l) return sl__oom("lineage");
  size_t ecap = 0, ncap = 0;
  seen all = {0};
  int64_t key = id * 2 + (kind == SL_PROV_ARTIFACT ? 1 : 0);
  for (int dir = SL_PROV_UP; !rc && dir <= SL_PROV_DOWN; dir++) {
    if (!(direction & dir)) continue;
    seen s = {0};
    rc = walk(p, &s, l, &ecap, dir, max_depth, key);
    for (size_t i = 0; !rc && i < s.n; i++)
      if (!seen_has(&all, s.ids[i])) rc = seen_add(&all, s.ids[i], dir == SL_PROV_UP ? -s.depth[i] : s.depth[i]);
    sl__free(s.ids);
    sl__free(s.depth);
  }
  for (size_t i = 0; !rc && i < all.n; i++) {
    sl_prov_query q = {0};
    q.id = all.ids[i] >> 1;
    sl_prov_list *one;
    rc = sl_prov_find(&one, p, (all.ids[i] & 1) ? SL_PROV_ARTIFACT : SL_PROV_EXECUTION, &q);
    if (rc) break;
    if (one->n && !(rc = sl__prov_grow((void **)&l->nodes, &ncap, l->n + 1, sizeof *l->nodes))) {
      l->nodes[l->n] = one->nodes[0];
      l->nodes[l->n++].depth = all.depth[i];
      one->n = 0;
    }
    sl_prov_list_free(one);
  }
  sl__free(all.ids);
  sl__free(all.depth);
  if (rc) {
    sl_prov_list_free(l);
    return rc;
  }
  *out = l;
  return 0;
}
