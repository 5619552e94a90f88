/* prov/analytics/graphlets.c: loads a store into memory with a handful of set-based queries (one per table, never one per
 * row) and builds the model graphlets, their outcomes, costs and features, as docs/provenance.md defines them.
 * Memory is a few flat arrays indexed by dense position; ids map to positions through direct tables. */
#define _GNU_SOURCE /* qsort_r */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prov/analytics/analytics_int.h"

static const char *const FEAT[SL_NFEAT] = {
    "n_spans",        "new_spans",       "span_overlap", "anomalies",     "schema_changed", "hours_since_prev",
    "hours_since_push", "last_outcome_1", "last_outcome_2", "last_outcome_3", "push_rate",     "n_prev_graphlets",
    "structure_changed", "n_components",  "code_changed", "pending_outcomes"};

size_t sl_prov_feature_count(void) { return SL_NFEAT; }
const char *sl_prov_feature_name(size_t j) { return j < SL_NFEAT ? FEAT[j] : NULL; }

static bool ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

/* ---- growable arrays ---- */
static int grow(void **v, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t nc = *cap ? *cap : 256, bytes;
  while (nc < need) {
    if (!sl__mul_ok(nc, 2, &nc)) return sl__oom("analysis arrays");
  }
  if (!sl__mul_ok(nc, elem, &bytes)) return sl__oom("analysis arrays");
  void *nv = sl__realloc(*v, bytes);
  if (!nv) return sl__oom("analysis arrays");
  *v = nv;
  *cap = nc;
  return 0;
}

/* id -> index tables. Ids are MLMD autoincrement keys: dense enough for a direct table. */
typedef struct idmap {
  int32_t *ix;
  int64_t max;
} idmap;

static int idmap_build(idmap *m, const int64_t *ids, size_t n, size_t stride) {
  m->max = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t id = *(const int64_t *)((const char *)ids + i * stride);
    if (id > m->max) m->max = id;
  }
  if (m->max > (int64_t)1 << 31) return sl__err(SL_ERROR, "ids beyond 2^31 are not supported by the analytics");
  m->ix = sl__mallocarray((size_t)m->max + 1, sizeof *m->ix);
  if (!m->ix) return sl__oom("id table");
  memset(m->ix, 0xff, ((size_t)m->max + 1) * sizeof *m->ix);
  for (size_t i = 0; i < n; i++) m->ix[*(const int64_t *)((const char *)ids + i * stride)] = (int32_t)i;
  return 0;
}
static inline int32_t idmap_get(const idmap *m, int64_t id) { return id >= 0 && id <= m->max ? m->ix[id] : -1; }

/* ---- loading ---- */

/* The filter restricting a load to one pipeline context (bound as parameter 1), or nothing. */
#define EXEC_IN " IN (SELECT execution_id FROM Association WHERE context_id = ?)"
#define ART_IN " IN (SELECT artifact_id FROM Event WHERE execution_id" EXEC_IN ")"

static int prep(sl_prov *p, sl__pstmt **st, const char *sql, int64_t ctx) {
  int rc = sl__pdb_prepare(p->db, st, sql);
  if (!rc && ctx && strchr(sql, '?')) rc = sl__pstmt_bind_i64(*st, 1, ctx);
  if (rc) {
    sl__pstmt_free(*st);
    *st = NULL;
  }
  return rc;
}

static uint64_t fnv(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h ? h : 1;
}

typedef struct memb {
  const idmap *emap;
  size_t pcap, pidcap, rows;
  int64_t last_run;
} memb;

/* Reads (execution_id, context id, context name, context type name) rows, ordered by context id. */
static int read_membership(sl_prov_graphlets *g, sl__pstmt *st, memb *m) {
  int rc;
  while ((rc = sl__pstmt_step(st)) == 1) {
    m->rows++;
    int32_t x = idmap_get(m->emap, sl__pstmt_i64(st, 0));
    int64_t cid = sl__pstmt_i64(st, 1);
    const char *tn = sl__pstmt_text(st, 3);
    if (tn && !strcmp(tn, "pipeline")) {
      if (!g->npipes || g->pipe_ids[g->npipes - 1] != cid) {
        if ((rc = grow((void **)&g->pipes, &m->pcap, g->npipes + 1, sizeof *g->pipes)) ||
            (rc = grow((void **)&g->pipe_ids, &m->pidcap, g->npipes + 1, sizeof *g->pipe_ids)))
          return rc;
        const char *nm = sl__pstmt_text(st, 2);
        g->pipes[g->npipes] = sl__strdup(nm ? nm : "");
        if (!g->pipes[g->npipes]) return sl__oom("pipeline name");
        g->pipe_ids[g->npipes++] = cid;
      }
      if (x >= 0) g->ex[x].pipe = (int32_t)(g->npipes - 1);
    } else if (tn && !strcmp(tn, "pipeline_run")) {
      if (cid != m->last_run) {
        m->last_run = cid;
        g->nruns++;
      }
      if (x >= 0) g->ex[x].run = (int32_t)(g->nruns - 1);
    }
  }
  return rc < 0 ? rc : 0;
}

/* Full loads: contexts of type pipeline / pipeline_run, then every association, mapped through an id table. */
static int load_contexts_then_associations(sl_prov *p, sl_prov_graphlets *g, const idmap *emap) {
  sl__pstmt *st = NULL;
  int64_t *cids = NULL;
  int32_t *slot = NULL; /* >= 0: pipeline index; < 0: -(run index) - 1 */
  size_t n = 0, cap = 0, scap = 0, pcap = 0, pidcap = 0;
  int rc = prep(p, &st,
                "SELECT c.id, c.name, t.name FROM Context c JOIN Type t ON t.id = c.type_id WHERE t.name IN "
                "('pipeline', 'pipeline_run') ORDER BY c.id",
                0);
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    if ((rc = grow((void **)&cids, &cap, n + 1, sizeof *cids)) || (rc = grow((void **)&slot, &scap, n + 1, sizeof *slot)))
      break;
    cids[n] = sl__pstmt_i64(st, 0);
    const char *tn = sl__pstmt_text(st, 2);
    if (tn && !strcmp(tn, "pipeline")) {
      if ((rc = grow((void **)&g->pipes, &pcap, g->npipes + 1, sizeof *g->pipes)) ||
          (rc = grow((void **)&g->pipe_ids, &pidcap, g->npipes + 1, sizeof *g->pipe_ids)))
        break;
      const char *nm = sl__pstmt_text(st, 1);
      g->pipes[g->npipes] = sl__strdup(nm ? nm : "");
      if (!g->pipes[g->npipes]) {
        rc = sl__oom("pipeline name");
        break;
      }
      g->pipe_ids[g->npipes] = cids[n];
      slot[n] = (int32_t)g->npipes++;
    } else {
      slot[n] = -(int32_t)g->nruns++ - 1;
    }
    n++;
    rc = 0;
  }
  sl__pstmt_free(st);
  st = NULL;
  idmap cmap = {0};
  if (rc >= 0 && n) {
    rc = idmap_build(&cmap, cids, n, sizeof *cids);
    if (!rc) rc = prep(p, &st, "SELECT context_id, execution_id FROM Association", 0);
    while (!rc && (rc = sl__pstmt_step(st)) == 1) {
      rc = 0;
      int32_t c = idmap_get(&cmap, sl__pstmt_i64(st, 0)), x = idmap_get(emap, sl__pstmt_i64(st, 1));
      if (c < 0 || x < 0) continue;
      if (slot[c] >= 0)
        g->ex[x].pipe = slot[c];
      else
        g->ex[x].run = -slot[c] - 1;
    }
  }
  sl__pstmt_free(st);
  sl__free(cmap.ix);
  sl__free(cids);
  sl__free(slot);
  return rc < 0 ? rc : 0;
}

static int load(sl_prov *p, sl_prov_graphlets *g, int64_t ctx) {
  sl__pstmt *st = NULL;
  int rc;
  size_t cap;
  /* Types, with the base type's name when there is one. */
  rc = prep(p, &st,
            "SELECT t.id, t.type_kind, t.name, (SELECT b.name FROM ParentType pt JOIN Type b ON b.id = "
            "pt.parent_type_id WHERE pt.type_id = t.id ORDER BY b.id LIMIT 1) FROM Type t ORDER BY t.id",
            0);
  if (rc) return rc;
  int64_t *tids = NULL;
  size_t tcap = 0;
  cap = 0;
  while ((rc = sl__pstmt_step(st)) == 1) {
    if ((rc = grow((void **)&g->types, &cap, g->ntypes + 1, sizeof *g->types)) ||
        (rc = grow((void **)&tids, &tcap, g->ntypes + 1, sizeof *tids)))
      break;
    an_type *t = &g->types[g->ntypes];
    memset(t, 0, sizeof *t);
    tids[g->ntypes] = sl__pstmt_i64(st, 0);
    t->kind = (int)sl__pstmt_i64(st, 1);
    const char *nm = sl__pstmt_text(st, 2);
    t->name = sl__strdup(nm ? nm : "");
    if (!t->name) {
      rc = sl__oom("type name");
      break;
    }
    g->ntypes++;
    const char *base = sl__pstmt_text(st, 3);
    const char *d = strrchr(t->name, '.');
    t->short_name = d && !strncmp(t->name, "tfx.", 4) ? d + 1 : t->name;
    const char *n = t->name;
    if (t->kind == 0) {
      if (ends_with(n, "Trainer") || (base && !strcmp(base, "mlmd.Train"))) t->flags |= TF_TRAINER;
      if (ends_with(n, "Pusher") || (base && !strcmp(base, "mlmd.Deploy"))) t->flags |= TF_PUSHER;
      if (ends_with(n, "Resolver") || ends_with(n, "resolver")) t->flags |= TF_RESOLVER;
    } else if (t->kind == 1) {
      if (!strcmp(n, "Model") || (base && !strcmp(base, "mlmd.Model"))) t->flags |= TF_MODEL;
      if (!strcmp(n, "PushedModel")) t->flags |= TF_PUSHED;
      if (!strcmp(n, "Examples") || (base && !strcmp(base, "mlmd.Dataset"))) t->flags |= TF_EXAMPLES;
      if (!strcmp(n, "ExampleAnomalies")) t->flags |= TF_ANOMALIES;
      if (!strcmp(n, "Schema")) t->flags |= TF_SCHEMA;
    }
    rc = 0;
  }
  sl__pstmt_free(st);
  st = NULL;
  if (rc < 0) {
    sl__free(tids);
    return rc;
  }
  idmap tmap = {0};
  rc = g->ntypes ? idmap_build(&tmap, tids, g->ntypes, sizeof *tids) : 0;
  sl__free(tids);
  if (rc) return rc;

  /* Executions. */
  rc = prep(p, &st,
            ctx ? "SELECT id, type_id, last_known_state, create_time_since_epoch, last_update_time_since_epoch FROM "
                  "Execution WHERE id" EXEC_IN
                : "SELECT id, type_id, last_known_state, create_time_since_epoch, last_update_time_since_epoch FROM "
                  "Execution",
            ctx);
  cap = 0;
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    if ((rc = grow((void **)&g->ex, &cap, g->nex + 1, sizeof *g->ex))) break;
    an_exec *e = &g->ex[g->nex++];
    memset(e, 0, sizeof *e);
    e->id = sl__pstmt_i64(st, 0);
    e->type = idmap_get(&tmap, sl__pstmt_i64(st, 1));
    e->state = (int8_t)sl__pstmt_i64(st, 2);
    e->create = sl__pstmt_i64(st, 3);
    e->update = sl__pstmt_i64(st, 4);
    e->pipe = e->run = -1;
    e->true_p = NAN;
    e->cost = (double)(e->update - e->create) / 1000.0;
    if (e->cost < 0) e->cost = 0;
    rc = 0;
  }
  sl__pstmt_free(st);
  st = NULL;
  if (rc < 0) goto out;
  rc = 0;
  idmap emap = {0};
  if (!g->nex) goto out; /* nothing else to load */
  if ((rc = idmap_build(&emap, &g->ex[0].id, g->nex, sizeof *g->ex))) goto out;
  /* The execution properties the analytics read. */
  rc = prep(p, &st,
            ctx ? "SELECT execution_id, name, int_value, double_value, string_value FROM ExecutionProperty WHERE name "
                  "IN ('cpu_seconds', 'code_fingerprint', 'module_fingerprint', 'gen_true_p_push') AND execution_id" EXEC_IN
                : "SELECT execution_id, name, int_value, double_value, string_value FROM ExecutionProperty WHERE name "
                  "IN ('cpu_seconds', 'code_fingerprint', 'module_fingerprint', 'gen_true_p_push')",
            ctx);
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    rc = 0;
    int32_t i = idmap_get(&emap, sl__pstmt_i64(st, 0));
    if (i < 0) continue;
    an_exec *e = &g->ex[i];
    const char *nm = sl__pstmt_text(st, 1);
    double v = !sl__pstmt_null(st, 3) ? sl__pstmt_f64(st, 3) : (double)sl__pstmt_i64(st, 2);
    if (!strcmp(nm, "cpu_seconds")) {
      if (!sl__pstmt_null(st, 3) || !sl__pstmt_null(st, 2)) {
        e->cost = v;
        e->cpu_known = true;
      }
    } else if (!strcmp(nm, "gen_true_p_push")) {
      e->true_p = v;
    } else {
      const char *s = sl__pstmt_text(st, 4);
      e->code_fp = s ? fnv(s) : (uint64_t)sl__pstmt_i64(st, 2) | 1;
    }
  }
  sl__pstmt_free(st);
  st = NULL;
  if (rc < 0) goto out2;
  rc = 0;

  /* Artifacts. */
  rc = prep(p, &st,
            ctx ? "SELECT id, type_id, create_time_since_epoch FROM Artifact WHERE id" ART_IN
                : "SELECT id, type_id, create_time_since_epoch FROM Artifact",
            ctx);
  cap = 0;
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    if ((rc = grow((void **)&g->art, &cap, g->nart + 1, sizeof *g->art))) break;
    an_art *a = &g->art[g->nart++];
    a->id = sl__pstmt_i64(st, 0);
    a->type = idmap_get(&tmap, sl__pstmt_i64(st, 1));
    a->create = sl__pstmt_i64(st, 2);
    a->span = INT64_MIN;
    a->producer = -1;
    a->anomalies = -1;
    a->pushed = -1;
    rc = 0;
  }
  sl__pstmt_free(st);
  st = NULL;
  if (rc < 0) goto out2;
  rc = 0;
  idmap amap = {0};
  if (g->nart && (rc = idmap_build(&amap, &g->art[0].id, g->nart, sizeof *g->art))) goto out2;
  rc = prep(p, &st,
            ctx ? "SELECT artifact_id, name, int_value, bool_value FROM ArtifactProperty WHERE name IN ('span', "
                  "'pushed', 'num_anomalies') AND artifact_id" ART_IN
                : "SELECT artifact_id, name, int_value, bool_value FROM ArtifactProperty WHERE name IN ('span', "
                  "'pushed', 'num_anomalies')",
            ctx);
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    rc = 0;
    int32_t i = idmap_get(&amap, sl__pstmt_i64(st, 0));
    if (i < 0) continue;
    const char *nm = sl__pstmt_text(st, 1);
    int64_t v = !sl__pstmt_null(st, 2) ? sl__pstmt_i64(st, 2) : sl__pstmt_i64(st, 3);
    if (!strcmp(nm, "span")) g->art[i].span = v;
    else if (!strcmp(nm, "pushed")) g->art[i].pushed = v ? 1 : 0;
    else g->art[i].anomalies = v > INT32_MAX ? INT32_MAX : (int32_t)v;
  }
  sl__pstmt_free(st);
  st = NULL;
  if (rc < 0) goto out3;
  rc = 0;

  /* Events; then the few whose path key is `baseline_model`, in a second query (a scan of EventPath is cheaper
   * than a lookup per event). */
  rc = prep(p, &st,
            ctx ? "SELECT e.id, e.artifact_id, e.execution_id, e.type, e.milliseconds_since_epoch FROM Event e WHERE "
                  "e.execution_id" EXEC_IN
                : "SELECT e.id, e.artifact_id, e.execution_id, e.type, e.milliseconds_since_epoch FROM Event e",
            ctx);
  cap = 0;
  {
    int64_t *evids = NULL;
    size_t idcap = 0;
    while (!rc && (rc = sl__pstmt_step(st)) == 1) {
      rc = 0;
      int32_t a = idmap_get(&amap, sl__pstmt_i64(st, 1)), x = idmap_get(&emap, sl__pstmt_i64(st, 2));
      if (a < 0 || x < 0) continue;
      if ((rc = grow((void **)&g->ev, &cap, g->nev + 1, sizeof *g->ev)) ||
          (rc = grow((void **)&evids, &idcap, g->nev + 1, sizeof *evids)))
        break;
      evids[g->nev] = sl__pstmt_i64(st, 0);
      an_event *ev = &g->ev[g->nev++];
      ev->art = a;
      ev->exec = x;
      ev->type = (int8_t)sl__pstmt_i64(st, 3);
      ev->ms = sl__pstmt_i64(st, 4);
      ev->baseline = false;
    }
    sl__pstmt_free(st);
    st = NULL;
    idmap vmap = {0};
    if (rc >= 0 && g->nev) {
      rc = idmap_build(&vmap, evids, g->nev, sizeof *evids);
      if (!rc)
        rc = prep(p, &st,
                  ctx ? "SELECT event_id FROM EventPath WHERE step_key = 'baseline_model' AND event_id IN (SELECT id "
                        "FROM Event WHERE execution_id" EXEC_IN ")"
                      : "SELECT event_id FROM EventPath WHERE step_key = 'baseline_model'",
                  ctx);
      while (!rc && (rc = sl__pstmt_step(st)) == 1) {
        rc = 0;
        int32_t v = idmap_get(&vmap, sl__pstmt_i64(st, 0));
        if (v >= 0) g->ev[v].baseline = true;
      }
    }
    sl__free(vmap.ix);
    sl__free(evids);
  }
  sl__pstmt_free(st);
  st = NULL;
  if (rc < 0) goto out3;
  rc = 0;

  /* Pipeline and run membership. For one pipeline, its runs are found through ParentContext (TFX makes each
   * pipeline_run a child of its pipeline), which the indexes serve directly; only a store without those links
   * needs the general query, which has no index on Association.execution_id to use. */
  {
    memb m = {0};
    m.emap = &emap;
    m.last_run = -1;
    if (!ctx) {
      /* The whole store: the pipeline and run contexts first, then one scan of Association mapped in memory
       * (joining and sorting millions of association rows in SQL costs more than the scan). */
      rc = load_contexts_then_associations(p, g, &emap);
    } else {
      rc = prep(p, &st,
                "SELECT a.execution_id, c.id, c.name, t.name FROM Association a JOIN Context c ON c.id = "
                "a.context_id JOIN Type t ON t.id = c.type_id WHERE a.context_id = ?",
                ctx);
      if (!rc) rc = read_membership(g, st, &m);
      sl__pstmt_free(st);
      st = NULL;
      if (!rc)
        rc = prep(p, &st,
                  "SELECT a.execution_id, c.id, c.name, t.name FROM ParentContext pc JOIN Context c ON c.id = "
                  "pc.context_id JOIN Type t ON t.id = c.type_id JOIN Association a ON a.context_id = c.id WHERE "
                  "pc.parent_context_id = ? AND t.name = 'pipeline_run' ORDER BY c.id",
                  ctx);
      size_t before = m.rows;
      if (!rc) rc = read_membership(g, st, &m);
      if (!rc && m.rows == before) {
        sl__pstmt_free(st);
        st = NULL;
        rc = prep(p, &st,
                  "SELECT a.execution_id, c.id, c.name, t.name FROM Association a JOIN Context c ON c.id = "
                  "a.context_id JOIN Type t ON t.id = c.type_id WHERE t.name = 'pipeline_run' AND "
                  "a.execution_id" EXEC_IN " ORDER BY c.id",
                  ctx);
        if (!rc) rc = read_membership(g, st, &m);
      }
    }
  }
  sl__pstmt_free(st);
  st = NULL;
  if (rc < 0) goto out3;
  rc = 0;

  /* Events by execution (CSR). */
  g->ex_ev_off = sl__calloc(g->nex + 1, sizeof *g->ex_ev_off);
  g->ex_ev = sl__mallocarray(g->nev ? g->nev : 1, sizeof *g->ex_ev);
  if (!g->ex_ev_off || !g->ex_ev) {
    rc = sl__oom("event index");
    goto out3;
  }
  for (size_t i = 0; i < g->nev; i++) g->ex_ev_off[g->ev[i].exec + 1]++;
  for (size_t i = 0; i < g->nex; i++) g->ex_ev_off[i + 1] += g->ex_ev_off[i];
  {
    size_t *fill = sl__mallocarray(g->nex + 1, sizeof *fill);
    if (!fill) {
      rc = sl__oom("event index");
      goto out3;
    }
    memcpy(fill, g->ex_ev_off, (g->nex + 1) * sizeof *fill);
    for (size_t i = 0; i < g->nev; i++) g->ex_ev[fill[g->ev[i].exec]++] = (int32_t)i;
    sl__free(fill);
  }
  /* Producers: the earliest OUTPUT event from an execution that is neither CACHED nor a Resolver. */
  {
    int64_t *best = sl__mallocarray(g->nart ? g->nart : 1, sizeof *best);
    if (!best) {
      rc = sl__oom("producers");
      goto out3;
    }
    for (size_t i = 0; i < g->nart; i++) best[i] = INT64_MAX;
    for (size_t i = 0; i < g->nev; i++) {
      const an_event *ev = &g->ev[i];
      if (ev->type != SL_PROV_EV_OUTPUT && ev->type != SL_PROV_EV_DECLARED_OUTPUT &&
          ev->type != SL_PROV_EV_INTERNAL_OUTPUT)
        continue;
      const an_exec *e = &g->ex[ev->exec];
      if (e->state == SL_PROV_E_CACHED) continue;
      if (e->type >= 0 && (g->types[e->type].flags & TF_RESOLVER)) continue;
      if (ev->ms < best[ev->art] || (ev->ms == best[ev->art] && g->art[ev->art].producer > ev->exec)) {
        best[ev->art] = ev->ms;
        g->art[ev->art].producer = ev->exec;
      }
    }
    sl__free(best);
  }
out3:
  sl__free(amap.ix);
out2:
  sl__free(emap.ix);
out:
  sl__free(tmap.ix);
  return rc;
}

/* ---- graphlets ---- */

static inline bool ev_in(const an_event *e) {
  return e->type == SL_PROV_EV_INPUT || e->type == SL_PROV_EV_DECLARED_INPUT || e->type == SL_PROV_EV_INTERNAL_INPUT;
}
static inline bool ev_out(const an_event *e) {
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
  const an_exec *x = &g->ex[*(const int32_t *)a], *y = &g->ex[*(const int32_t *)b];
  if (x->pipe != y->pipe) return x->pipe < y->pipe ? -1 : 1;
  if (x->create != y->create) return x->create < y->create ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

static int pool_push(build *b, int64_t v) {
  sl_prov_graphlets *g = b->g;
  int rc = grow((void **)&g->pool, &b->pool_cap, g->npool + 1, sizeof *g->pool);
  if (!rc) g->pool[g->npool++] = v;
  return rc;
}

static int push_stack(build *b, size_t *n, int32_t v) {
  int rc = grow((void **)&b->stack, &b->stack_cap, *n + 1, sizeof *b->stack);
  if (!rc) b->stack[(*n)++] = v;
  return rc;
}

static uint64_t mixh(uint64_t x) { return sl__mix64(x + 0x51ed27ull); }

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Builds graphlet number k around trainer exec index t. */
static int build_one(build *b, size_t k, int32_t t) {
  sl_prov_graphlets *g = b->g;
  an_exec *tr = &g->ex[t];
  sl_prov_graphlet *o = &g->g[k];
  an_g *gi = &g->gi[k];
  int32_t stamp = (int32_t)k + 1;
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
  b->xstamp[t] = stamp;
  double cost = tr->cost;
  int rc = 0;
  gi->comp_hash = mixh((uint64_t)tr->type);
  gi->ncomp = 1;
  /* Component types seen before the decision (stamped per graphlet through a small list). */
  int32_t seen_types[64];
  int nseen = 1;
  seen_types[0] = tr->type;
#define ADD_TYPE(ty)                                                                                                  \
  do {                                                                                                                \
    bool dup_ = false;                                                                                                \
    for (int q_ = 0; q_ < nseen; q_++) dup_ |= seen_types[q_] == (ty);                                                \
    if (!dup_ && nseen < 64) {                                                                                        \
      seen_types[nseen++] = (ty);                                                                                     \
      gi->comp_hash ^= mixh((uint64_t)(ty));                                                                          \
      gi->ncomp++;                                                                                                    \
    }                                                                                                                 \
  } while (0)

  /* Upstream: producers of the inputs, transitively; stop at model artifacts. */
  gi->up_off = g->npool;
  gi->span_off = 0;
  size_t sp = 0;
  for (size_t j = g->ex_ev_off[t]; j < g->ex_ev_off[t + 1]; j++) {
    const an_event *ev = &g->ev[g->ex_ev[j]];
    if (ev_in(ev) && (rc = push_stack(b, &sp, ev->art))) return rc;
  }
  int64_t spans_local[512];
  size_t nsp = 0;
  while (sp) {
    int32_t a = b->stack[--sp];
    if (b->astamp[a] == stamp) continue;
    b->astamp[a] = stamp;
    const an_art *ar = &g->art[a];
    unsigned f = tflags(g, ar->type);
    if (f & TF_MODEL) continue;
    if ((f & TF_EXAMPLES) && ar->span != INT64_MIN && nsp < 512) spans_local[nsp++] = ar->span;
    if ((f & TF_SCHEMA) && ar->id > gi->schema) gi->schema = ar->id;
    int32_t pr = ar->producer;
    if (pr < 0 || b->xstamp[pr] == stamp) continue;
    b->xstamp[pr] = stamp;
    if ((rc = pool_push(b, g->ex[pr].id))) return rc;
    cost += g->ex[pr].cost;
    ADD_TYPE(g->ex[pr].type);
    for (size_t j = g->ex_ev_off[pr]; j < g->ex_ev_off[pr + 1]; j++) {
      const an_event *ev = &g->ev[g->ex_ev[j]];
      if (ev_in(ev) && !ev->baseline && (rc = push_stack(b, &sp, ev->art))) return rc;
    }
  }
  /* The run: executions of the trainer's pipeline run (or, without runs, of its pipeline up to the next trainer). */
  size_t lo = 0, hi = 0;
  int32_t grp = b->by_run ? tr->run : tr->pipe;
  if (grp >= 0) {
    lo = b->grp_off[grp];
    hi = b->grp_off[grp + 1];
  }
  int64_t next_tr = INT64_MAX;
  if (!b->by_run) {
    for (size_t j = lo; j < hi; j++) {
      const an_exec *x = &g->ex[b->grp[j]];
      if ((tflags(g, x->type) & TF_TRAINER) && b->grp[j] != t &&
          (x->create > tr->create || (x->create == tr->create && x->id > tr->id)) && x->create < next_tr)
        next_tr = x->create;
    }
  }
  /* Run steps that started before the trainer (its Resolvers, cached steps, validators). */
  for (size_t j = lo; b->by_run && j < hi; j++) {
    int32_t x = b->grp[j];
    const an_exec *e = &g->ex[x];
    if (x == t || b->xstamp[x] == stamp) continue;
    if (e->create > tr->create || (e->create == tr->create && e->id > tr->id)) continue;
    b->xstamp[x] = stamp;
    if ((rc = pool_push(b, e->id))) return rc;
    cost += e->cost;
    ADD_TYPE(e->type);
  }
  /* Anomalies recorded before the decision in the trainer's run (or upstream). */
  for (size_t j = lo; j < hi; j++) {
    int32_t x = b->grp[j];
    if (b->xstamp[x] != stamp || x == t) continue;
    for (size_t q = g->ex_ev_off[x]; q < g->ex_ev_off[x + 1]; q++) {
      const an_event *ev = &g->ev[g->ex_ev[q]];
      const an_art *ar = &g->art[ev->art];
      if (ev_out(ev) && (tflags(g, ar->type) & TF_ANOMALIES) && ar->anomalies >= 0 && ar->create <= tr->create)
        gi->anomalies = (isnan(gi->anomalies) ? 0 : gi->anomalies) + ar->anomalies;
    }
  }
  gi->nup = g->npool - gi->up_off;
  /* Downstream: same-run executions consuming the model, then their outputs, in creation order. */
  gi->down_off = g->npool;
  for (size_t j = g->ex_ev_off[t]; j < g->ex_ev_off[t + 1]; j++) {
    const an_event *ev = &g->ev[g->ex_ev[j]];
    if (ev_out(ev)) b->astamp[ev->art] = -stamp;
  }
  double prunable = tr->cost;
  int64_t outcome = tr->update;
  bool pushed = false, has_pusher = false;
  for (size_t j = lo; j < hi; j++) {
    int32_t x = b->grp[j];
    const an_exec *e = &g->ex[x];
    if (x == t || b->xstamp[x] == stamp) continue;
    if (e->create < tr->create || e->create >= next_tr) continue;
    bool consumes = false;
    for (size_t q = g->ex_ev_off[x]; q < g->ex_ev_off[x + 1] && !consumes; q++) {
      const an_event *ev = &g->ev[g->ex_ev[q]];
      consumes = ev_in(ev) && !ev->baseline && b->astamp[ev->art] == -stamp;
    }
    if (!consumes) continue;
    b->xstamp[x] = stamp;
    if ((rc = pool_push(b, e->id))) return rc;
    cost += e->cost;
    prunable += e->cost;
    if (e->update > outcome) outcome = e->update;
    bool deploy = tflags(g, e->type) & TF_PUSHER;
    if (deploy) has_pusher = true;
    for (size_t q = g->ex_ev_off[x]; q < g->ex_ev_off[x + 1]; q++) {
      const an_event *ev = &g->ev[g->ex_ev[q]];
      if (!ev_out(ev)) continue;
      b->astamp[ev->art] = -stamp;
      const an_art *ar = &g->art[ev->art];
      bool pm = tflags(g, ar->type) & TF_PUSHED;
      if (!pm && !deploy) continue;
      has_pusher = true;
      if (ar->pushed >= 0)
        pushed |= ar->pushed == 1;
      else if (deploy && e->state == SL_PROV_E_COMPLETE)
        pushed = true;
    }
  }
  gi->ndown = g->npool - gi->down_off;
  /* Spans, sorted and unique, into the pool. */
  qsort(spans_local, nsp, sizeof *spans_local, cmp_i64);
  gi->span_off = g->npool;
  for (size_t j = 0; j < nsp; j++)
    if ((j == 0 || spans_local[j] != spans_local[j - 1]) && (rc = pool_push(b, spans_local[j]))) return rc;
  gi->nspan = g->npool - gi->span_off;
  o->pushed = pushed;
  o->has_pusher = has_pusher;
  o->cost = cost;
  o->prunable = prunable;
  o->outcome_ms = outcome;
  return 0;
#undef ADD_TYPE
}

/* ---- features ---- */

void sl__an_features(const sl_prov_graphlets *g, const size_t *prior, size_t nprior, const an_facts *f, double *out) {
  for (int j = 0; j < SL_NFEAT; j++) out[j] = NAN;
  out[0] = (double)f->nspans;
  /* The previous graphlet: the latest one that started before t. */
  const sl_prov_graphlet *pg = NULL;
  const an_g *pgi = NULL;
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

/* ---- the set ---- */


int sl__an_load(sl_prov *p, sl_prov_graphlets **out, const char *pipeline) {
  *out = NULL;
  int64_t ctx = 0;
  int rc;
  if (pipeline) {
    int64_t tid;
    if ((rc = sl_prov_type_id(p, &tid, SL_PROV_CONTEXT, "pipeline")))
      return sl__err(SL_ENOTFOUND, "no pipeline contexts in the store (needed for --pipeline)");
    sl_prov_query q = {0};
    q.type_name = "pipeline";
    q.name = pipeline;
    sl_prov_list *l;
    if ((rc = sl_prov_find(p, &l, SL_PROV_CONTEXT, &q))) return rc;
    ctx = l->n ? l->nodes[0].id : 0;
    sl_prov_list_free(l);
    if (!ctx) return sl__err(SL_ENOTFOUND, "no pipeline named '%s'", pipeline);
  }
  sl_prov_graphlets *g = sl__calloc(1, sizeof *g);
  if (!g) return sl__oom("graphlets");
  build b = {0};
  b.g = g;
  if ((rc = load(p, g, ctx))) goto fail;
  /* Trainers, ordered by (pipeline, start). */
  for (size_t i = 0; i < g->nex; i++)
    if (tflags(g, g->ex[i].type) & TF_TRAINER) b.ntr++;
  if (!b.ntr) {
    rc = sl__err(SL_ENOTFOUND, "no trainer executions in the store: no execution type is named *Trainer or based on "
                               "mlmd.Train, so there are no model graphlets");
    goto fail;
  }
  b.trainers = sl__mallocarray(b.ntr, sizeof *b.trainers);
  g->g = sl__calloc(b.ntr, sizeof *g->g);
  g->gi = sl__calloc(b.ntr, sizeof *g->gi);
  g->feat = sl__mallocarray(b.ntr, SL_NFEAT * sizeof *g->feat);
  b.xstamp = sl__calloc(g->nex, sizeof *b.xstamp);
  b.astamp = sl__calloc(g->nart ? g->nart : 1, sizeof *b.astamp);
  if (!b.trainers || !g->g || !g->gi || !g->feat || !b.xstamp || !b.astamp) {
    rc = sl__oom("graphlets");
    goto fail;
  }
  size_t k = 0;
  for (size_t i = 0; i < g->nex; i++)
    if (tflags(g, g->ex[i].type) & TF_TRAINER) b.trainers[k++] = (int32_t)i;
  qsort_r(b.trainers, b.ntr, sizeof *b.trainers, cmp_exec_time, g);
  /* Executions grouped by run (or by pipeline when no run contexts), each group in creation order. */
  /* Runs bound graphlets only where executions are associated with them. */
  b.by_run = false;
  for (size_t i = 0; i < g->nex && !b.by_run; i++) b.by_run = g->ex[i].run >= 0;
  size_t ngrp = b.by_run ? g->nruns : g->npipes;
  b.grp_off = sl__calloc(ngrp + 2, sizeof *b.grp_off);
  b.grp = sl__mallocarray(g->nex ? g->nex : 1, sizeof *b.grp);
  if (!b.grp_off || !b.grp) {
    rc = sl__oom("run index");
    goto fail;
  }
  for (size_t i = 0; i < g->nex; i++) {
    int32_t r = b.by_run ? g->ex[i].run : g->ex[i].pipe;
    if (r >= 0) b.grp_off[r + 1]++;
  }
  for (size_t i = 0; i < ngrp; i++) b.grp_off[i + 1] += b.grp_off[i];
  {
    size_t *fill = sl__mallocarray(ngrp + 1, sizeof *fill);
    if (!fill) {
      rc = sl__oom("run index");
      goto fail;
    }
    memcpy(fill, b.grp_off, (ngrp + 1) * sizeof *fill);
    for (size_t i = 0; i < g->nex; i++) {
      int32_t r = b.by_run ? g->ex[i].run : g->ex[i].pipe;
      if (r >= 0) b.grp[fill[r]++] = (int32_t)i;
    }
    sl__free(fill);
    for (size_t r = 0; r < ngrp; r++)
      qsort_r(b.grp + b.grp_off[r], b.grp_off[r + 1] - b.grp_off[r], sizeof *b.grp, cmp_exec_time, g);
  }
  g->ng = b.ntr;
  for (size_t i = 0; i < b.ntr; i++)
    if ((rc = build_one(&b, i, b.trainers[i]))) goto fail;
  /* Pool pointers, membership flags, cost basis. */
  for (size_t i = 0; i < g->ng; i++) {
    sl_prov_graphlet *o = &g->g[i];
    an_g *gi = &g->gi[i];
    o->upstream = g->pool + gi->up_off;
    o->nupstream = gi->nup;
    o->downstream = g->pool + gi->down_off;
    o->ndownstream = gi->ndown;
    o->spans = g->pool + gi->span_off;
    o->nspans = gi->nspan;
  }
  {
    idmap emap = {0};
    if ((rc = idmap_build(&emap, &g->ex[0].id, g->nex, sizeof *g->ex))) goto fail;
    for (size_t i = 0; i < g->ng; i++) {
      const sl_prov_graphlet *o = &g->g[i];
      an_exec *tr = &g->ex[g->gi[i].trainer];
      tr->in_graphlet = true;
      tr->useful |= o->pushed;
      for (size_t j = 0; j < o->nupstream; j++) {
        an_exec *e = &g->ex[idmap_get(&emap, o->upstream[j])];
        e->in_graphlet = true;
        e->useful |= o->pushed;
      }
      for (size_t j = 0; j < o->ndownstream; j++) {
        an_exec *e = &g->ex[idmap_get(&emap, o->downstream[j])];
        e->in_graphlet = true;
        e->useful |= o->pushed;
      }
    }
    sl__free(emap.ix);
  }
  for (size_t i = 0; i < g->nex; i++) g->cost_basis |= g->ex[i].cpu_known ? 1 : 2;
  /* Features: per pipeline, graphlets in start order (b.trainers is sorted that way, graphlet i = trainers[i]). */
  {
    size_t *prior = sl__mallocarray(g->ng, sizeof *prior);
    if (!prior) {
      rc = sl__oom("features");
      goto fail;
    }
    size_t s = 0;
    while (s < g->ng) {
      size_t e = s;
      while (e < g->ng && g->gi[e].pipe == g->gi[s].pipe) e++;
      for (size_t i = s; i < e; i++) prior[i - s] = i;
      for (size_t i = s; i < e; i++) {
        const an_g *gi = &g->gi[i];
        an_facts f = {g->g[i].start_ms, g->pool + gi->span_off, gi->nspan, gi->schema, gi->anomalies,
                      gi->comp_hash, gi->ncomp, g->ex[gi->trainer].code_fp};
        /* Prior graphlets are those before i in start order; equal starts are not "before". */
        sl__an_features(g, prior, i - s, &f, g->feat + i * SL_NFEAT);
      }
      s = e;
    }
    sl__free(prior);
  }
  sl__free(b.trainers);
  sl__free(b.grp_off);
  sl__free(b.grp);
  sl__free(b.xstamp);
  sl__free(b.astamp);
  sl__free(b.stack);
  *out = g;
  return 0;
fail:
  sl__free(b.trainers);
  sl__free(b.grp_off);
  sl__free(b.grp);
  sl__free(b.xstamp);
  sl__free(b.astamp);
  sl__free(b.stack);
  sl_prov_graphlets_free(g);
  return rc;
}

int sl_prov_graphlets_load(sl_prov *p, sl_prov_graphlets **out, const char *pipeline) {
  return sl__an_load(p, out, pipeline);
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
const double *sl_prov_graphlets_features(const sl_prov_graphlets *g, size_t i) {
  return i < g->ng ? g->feat + i * SL_NFEAT : NULL;
}
