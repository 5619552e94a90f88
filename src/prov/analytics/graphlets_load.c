/* prov/analytics/graphlets_load.c: loads a store into the flat arrays of sl_prov_graphlets with one set-based query
 * per table (never one per row): types, executions and their properties, artifacts and their properties, events,
 * pipeline and run membership; then indexes events by execution and finds each artifact's producer. Ids map to
 * dense positions through direct tables (sl__an_idmap). graphlets.c builds the graphlets from what this loads. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prov/analytics/analytics_int.h"

int sl__an_grow(void **v, size_t *cap, size_t need, size_t elem) {
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

int sl__an_idmap_build(sl__an_idmap *m, const int64_t *ids, size_t n, size_t stride) {
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

static bool ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

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
  const sl__an_idmap *emap;
  size_t pcap, pidcap, rows;
  int64_t last_run;
} memb;

/* Reads (execution_id, context id, context name, context type name) rows, ordered by context id. */
static int read_membership(sl_prov_graphlets *g, sl__pstmt *st, memb *m) {
  int rc;
  while ((rc = sl__pstmt_step(st)) == 1) {
    m->rows++;
    int32_t x = sl__an_idmap_get(m->emap, sl__pstmt_i64(st, 0));
    int64_t cid = sl__pstmt_i64(st, 1);
    const char *tn = sl__pstmt_text(st, 3);
    if (tn && !strcmp(tn, "pipeline")) {
      if (!g->npipes || g->pipe_ids[g->npipes - 1] != cid) {
        if ((rc = sl__an_grow((void **)&g->pipes, &m->pcap, g->npipes + 1, sizeof *g->pipes)) ||
            (rc = sl__an_grow((void **)&g->pipe_ids, &m->pidcap, g->npipes + 1, sizeof *g->pipe_ids)))
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
static int load_contexts_then_associations(sl_prov *p, sl_prov_graphlets *g, const sl__an_idmap *emap) {
  sl__pstmt *st = NULL;
  int64_t *cids = NULL;
  int32_t *slot = NULL; /* >= 0: pipeline index; < 0: -(run index) - 1 */
  size_t n = 0, cap = 0, scap = 0, pcap = 0, pidcap = 0;
  int rc = prep(p, &st,
                "SELECT c.id, c.name, t.name FROM Context c JOIN Type t ON t.id = c.type_id WHERE t.name IN "
                "('pipeline', 'pipeline_run') ORDER BY c.id",
                0);
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    if ((rc = sl__an_grow((void **)&cids, &cap, n + 1, sizeof *cids)) ||
        (rc = sl__an_grow((void **)&slot, &scap, n + 1, sizeof *slot)))
      break;
    cids[n] = sl__pstmt_i64(st, 0);
    const char *tn = sl__pstmt_text(st, 2);
    if (tn && !strcmp(tn, "pipeline")) {
      if ((rc = sl__an_grow((void **)&g->pipes, &pcap, g->npipes + 1, sizeof *g->pipes)) ||
          (rc = sl__an_grow((void **)&g->pipe_ids, &pidcap, g->npipes + 1, sizeof *g->pipe_ids)))
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
  sl__an_idmap cmap = {0};
  if (rc >= 0 && n) {
    rc = sl__an_idmap_build(&cmap, cids, n, sizeof *cids);
    if (!rc) rc = prep(p, &st, "SELECT context_id, execution_id FROM Association", 0);
    while (!rc && (rc = sl__pstmt_step(st)) == 1) {
      rc = 0;
      int32_t c = sl__an_idmap_get(&cmap, sl__pstmt_i64(st, 0)), x = sl__an_idmap_get(emap, sl__pstmt_i64(st, 1));
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


/* Types, with the base type's name when there is one, and the flags the analytics read from them. */
static int load_types(sl_prov *p, sl_prov_graphlets *g, sl__an_idmap *tmap) {
  sl__pstmt *st = NULL;
  int rc = prep(p, &st,
                "SELECT t.id, t.type_kind, t.name, (SELECT b.name FROM ParentType pt JOIN Type b ON b.id = "
                "pt.parent_type_id WHERE pt.type_id = t.id ORDER BY b.id LIMIT 1) FROM Type t ORDER BY t.id",
                0);
  if (rc) return rc;
  int64_t *tids = NULL;
  size_t tcap = 0, cap = 0;
  while ((rc = sl__pstmt_step(st)) == 1) {
    if ((rc = sl__an_grow((void **)&g->types, &cap, g->ntypes + 1, sizeof *g->types)) ||
        (rc = sl__an_grow((void **)&tids, &tcap, g->ntypes + 1, sizeof *tids)))
      break;
    sl__an_type *t = &g->types[g->ntypes];
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
    /* TFX names types by class path: tfx.components.trainer.component.Trainer, and a component defined in the
     * pipeline's own script __main__.ShouldTrain. */
    t->short_name = d && (!strncmp(t->name, "tfx.", 4) || !strncmp(t->name, "__main__.", 9)) ? d + 1 : t->name;
    const char *n = t->name;
    if (t->kind == 0) {
      if (ends_with(n, "Trainer") || (base && !strcmp(base, "mlmd.Train"))) t->flags |= SL__AN_TRAINER;
      if (ends_with(n, "Pusher") || (base && !strcmp(base, "mlmd.Deploy"))) t->flags |= SL__AN_PUSHER;
      if (ends_with(n, "Resolver") || ends_with(n, "resolver")) t->flags |= SL__AN_RESOLVER;
    } else if (t->kind == 1) {
      if (!strcmp(n, "Model") || (base && !strcmp(base, "mlmd.Model"))) t->flags |= SL__AN_MODEL;
      if (!strcmp(n, "PushedModel")) t->flags |= SL__AN_PUSHED;
      if (!strcmp(n, "Examples") || (base && !strcmp(base, "mlmd.Dataset"))) t->flags |= SL__AN_EXAMPLES;
      if (!strcmp(n, "ExampleAnomalies")) t->flags |= SL__AN_ANOMALIES;
      if (!strcmp(n, "Schema")) t->flags |= SL__AN_SCHEMA;
    }
    rc = 0;
  }
  sl__pstmt_free(st);
  if (rc >= 0) rc = g->ntypes ? sl__an_idmap_build(tmap, tids, g->ntypes, sizeof *tids) : 0;
  sl__free(tids);
  return rc;
}

static int load_executions(sl_prov *p, sl_prov_graphlets *g, const sl__an_idmap *tmap, int64_t ctx) {
  sl__pstmt *st = NULL;
  int rc = prep(p, &st,
                ctx ? "SELECT id, type_id, last_known_state, create_time_since_epoch, last_update_time_since_epoch "
                      "FROM Execution WHERE id" EXEC_IN
                    : "SELECT id, type_id, last_known_state, create_time_since_epoch, last_update_time_since_epoch "
                      "FROM Execution",
                ctx);
  size_t cap = 0;
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    if ((rc = sl__an_grow((void **)&g->ex, &cap, g->nex + 1, sizeof *g->ex))) break;
    sl__an_exec *e = &g->ex[g->nex++];
    memset(e, 0, sizeof *e);
    e->id = sl__pstmt_i64(st, 0);
    e->type = sl__an_idmap_get(tmap, sl__pstmt_i64(st, 1));
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
  return rc < 0 ? rc : 0;
}

/* The execution properties the analytics read: cost, code fingerprint (TFX's `module_path` names the user-code wheel
 * by its content hash: it changes when the module does), a generator's true P(push). */
static int load_execution_properties(sl_prov *p, sl_prov_graphlets *g, const sl__an_idmap *emap,
                                     int64_t ctx) {
  sl__pstmt *st = NULL;
  int rc = prep(p, &st,
                ctx ? "SELECT execution_id, name, int_value, double_value, string_value FROM ExecutionProperty WHERE "
                      "name IN ('cpu_seconds', 'code_fingerprint', 'module_fingerprint', 'module_path', "
                      "'gen_true_p_push') AND "
                      "execution_id" EXEC_IN
                    : "SELECT execution_id, name, int_value, double_value, string_value FROM ExecutionProperty WHERE "
                      "name IN ('cpu_seconds', 'code_fingerprint', 'module_fingerprint', 'module_path', "
                      "'gen_true_p_push')",
                ctx);
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    rc = 0;
    int32_t i = sl__an_idmap_get(emap, sl__pstmt_i64(st, 0));
    if (i < 0) continue;
    sl__an_exec *e = &g->ex[i];
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
  return rc < 0 ? rc : 0;
}

static int load_artifacts(sl_prov *p, sl_prov_graphlets *g, const sl__an_idmap *tmap, int64_t ctx) {
  sl__pstmt *st = NULL;
  int rc = prep(p, &st,
                ctx ? "SELECT id, type_id, create_time_since_epoch FROM Artifact WHERE id" ART_IN
                    : "SELECT id, type_id, create_time_since_epoch FROM Artifact",
                ctx);
  size_t cap = 0;
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    if ((rc = sl__an_grow((void **)&g->art, &cap, g->nart + 1, sizeof *g->art))) break;
    sl__an_art *a = &g->art[g->nart++];
    a->id = sl__pstmt_i64(st, 0);
    a->type = sl__an_idmap_get(tmap, sl__pstmt_i64(st, 1));
    a->create = sl__pstmt_i64(st, 2);
    a->span = INT64_MIN;
    a->producer = -1;
    a->anomalies = -1;
    a->pushed = -1;
    a->side = false;
    rc = 0;
  }
  sl__pstmt_free(st);
  return rc < 0 ? rc : 0;
}

/* TFX's ExampleValidator (1.16) records no num_anomalies: its ExampleAnomalies carry `blessed`, a STRUCT of split
 * -> 1.0 (no anomaly) or 0.0. The number of splits not blessed stands in for the count; -1 when unreadable. */
static int32_t unblessed_splits(const char *s) {
  char *js = NULL;
  if (!s || sl__mlmd_struct_decode(&js, s) != 0) return -1;
  json_t *o = json_loads(js, 0, NULL);
  sl__free(js);
  int32_t n = -1;
  if (json_is_object(o)) {
    const char *k;
    json_t *v;
    n = 0;
    json_object_foreach(o, k, v) n += json_is_number(v) && json_number_value(v) == 0;
  }
  json_decref(o);
  return n;
}

/* The artifact properties the analytics read: span, pushed, num_anomalies (or TFX's per-split `blessed`). */
static int load_artifact_properties(sl_prov *p, sl_prov_graphlets *g, const sl__an_idmap *amap, int64_t ctx) {
  sl__pstmt *st = NULL;
  int rc = prep(p, &st,
                ctx ? "SELECT artifact_id, name, int_value, bool_value, string_value FROM ArtifactProperty WHERE name "
                      "IN ('span', 'pushed', 'num_anomalies', 'blessed') AND artifact_id" ART_IN
                    : "SELECT artifact_id, name, int_value, bool_value, string_value FROM ArtifactProperty WHERE name "
                      "IN ('span', 'pushed', 'num_anomalies', 'blessed')",
                ctx);
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    rc = 0;
    int32_t i = sl__an_idmap_get(amap, sl__pstmt_i64(st, 0));
    if (i < 0) continue;
    sl__an_art *a = &g->art[i];
    const char *nm = sl__pstmt_text(st, 1);
    int64_t v = !sl__pstmt_null(st, 2) ? sl__pstmt_i64(st, 2) : sl__pstmt_i64(st, 3);
    if (!strcmp(nm, "span")) a->span = v;
    else if (!strcmp(nm, "pushed")) a->pushed = v ? 1 : 0;
    else if (!strcmp(nm, "num_anomalies")) a->anomalies = v > INT32_MAX ? INT32_MAX : (int32_t)v;
    else if (a->type >= 0 && (g->types[a->type].flags & SL__AN_ANOMALIES) && a->anomalies < 0)
      a->anomalies = unblessed_splits(sl__pstmt_text(st, 4)); /* num_anomalies, when also present, wins */
  }
  sl__pstmt_free(st);
  return rc < 0 ? rc : 0;
}

/* The output keys of TFX's Transform for what it computes about its own input and output (TFX 1.x): Schema,
 * ExampleStatistics and ExampleAnomalies artifacts beside SchemaGen's and ExampleValidator's, written every run. */
#define SIDE_KEYS "'pre_transform_schema', 'post_transform_schema', 'pre_transform_stats', 'post_transform_stats', " \
                  "'post_transform_anomalies'"

/* Events between loaded artifacts and executions; then the few whose path key is `baseline_model` (an input not
 * followed upstream) or one of Transform's side outputs, in a second query (a scan of EventPath is cheaper than a
 * lookup per event). */
static int load_events(sl_prov *p, sl_prov_graphlets *g, const sl__an_idmap *emap, const sl__an_idmap *amap,
                       int64_t ctx) {
  sl__pstmt *st = NULL;
  int rc = prep(p, &st,
                ctx ? "SELECT e.id, e.artifact_id, e.execution_id, e.type, e.milliseconds_since_epoch FROM Event e "
                      "WHERE e.execution_id" EXEC_IN
                    : "SELECT e.id, e.artifact_id, e.execution_id, e.type, e.milliseconds_since_epoch FROM Event e",
                ctx);
  size_t cap = 0, idcap = 0;
  int64_t *evids = NULL;
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    rc = 0;
    int32_t a = sl__an_idmap_get(amap, sl__pstmt_i64(st, 1)), x = sl__an_idmap_get(emap, sl__pstmt_i64(st, 2));
    if (a < 0 || x < 0) continue;
    if ((rc = sl__an_grow((void **)&g->ev, &cap, g->nev + 1, sizeof *g->ev)) ||
        (rc = sl__an_grow((void **)&evids, &idcap, g->nev + 1, sizeof *evids)))
      break;
    evids[g->nev] = sl__pstmt_i64(st, 0);
    sl__an_event *ev = &g->ev[g->nev++];
    ev->art = a;
    ev->exec = x;
    ev->type = (int8_t)sl__pstmt_i64(st, 3);
    ev->ms = sl__pstmt_i64(st, 4);
    ev->baseline = false;
  }
  sl__pstmt_free(st);
  st = NULL;
  sl__an_idmap vmap = {0};
  if (rc >= 0 && g->nev) {
    rc = sl__an_idmap_build(&vmap, evids, g->nev, sizeof *evids);
    if (!rc)
      rc = prep(p, &st,
                ctx ? "SELECT event_id, step_key FROM EventPath WHERE step_key IN ('baseline_model', " SIDE_KEYS
                      ") AND event_id IN (SELECT id FROM Event WHERE execution_id" EXEC_IN ")"
                    : "SELECT event_id, step_key FROM EventPath WHERE step_key IN ('baseline_model', " SIDE_KEYS ")",
                ctx);
    while (!rc && (rc = sl__pstmt_step(st)) == 1) {
      rc = 0;
      int32_t v = sl__an_idmap_get(&vmap, sl__pstmt_i64(st, 0));
      if (v < 0) continue;
      const char *key = sl__pstmt_text(st, 1);
      if (key && !strcmp(key, "baseline_model")) g->ev[v].baseline = true;
      else if (g->ev[v].type == SL_PROV_EV_OUTPUT) g->art[g->ev[v].art].side = true;
    }
  }
  sl__pstmt_free(st);
  sl__free(vmap.ix);
  sl__free(evids);
  return rc < 0 ? rc : 0;
}

/* Pipeline and run membership. For one pipeline, its runs are found through ParentContext (TFX makes each
 * pipeline_run a child of its pipeline), which the indexes serve directly; only a store without those links
 * needs the general query, which has no index on Association.execution_id to use. */
static int load_membership(sl_prov *p, sl_prov_graphlets *g, const sl__an_idmap *emap, int64_t ctx) {
  /* The whole store: the pipeline and run contexts first, then one scan of Association mapped in memory
   * (joining and sorting millions of association rows in SQL costs more than the scan). */
  if (!ctx) return load_contexts_then_associations(p, g, emap);
  memb m = {0};
  m.emap = emap;
  m.last_run = -1;
  sl__pstmt *st = NULL;
  int rc = prep(p, &st,
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
  sl__pstmt_free(st);
  return rc < 0 ? rc : 0;
}

/* Events by execution (CSR). */
static int index_events(sl_prov_graphlets *g) {
  g->ex_ev_off = sl__calloc(g->nex + 1, sizeof *g->ex_ev_off);
  g->ex_ev = sl__mallocarray(g->nev ? g->nev : 1, sizeof *g->ex_ev);
  size_t *fill = sl__mallocarray(g->nex + 1, sizeof *fill);
  if (!g->ex_ev_off || !g->ex_ev || !fill) {
    sl__free(fill);
    return sl__oom("event index");
  }
  for (size_t i = 0; i < g->nev; i++) g->ex_ev_off[g->ev[i].exec + 1]++;
  for (size_t i = 0; i < g->nex; i++) g->ex_ev_off[i + 1] += g->ex_ev_off[i];
  memcpy(fill, g->ex_ev_off, (g->nex + 1) * sizeof *fill);
  for (size_t i = 0; i < g->nev; i++) g->ex_ev[fill[g->ev[i].exec]++] = (int32_t)i;
  sl__free(fill);
  return 0;
}

/* Producers: the earliest OUTPUT event from an execution that is neither CACHED nor a Resolver. */
static int find_producers(sl_prov_graphlets *g) {
  int64_t *best = sl__mallocarray(g->nart ? g->nart : 1, sizeof *best);
  if (!best) return sl__oom("producers");
  for (size_t i = 0; i < g->nart; i++) best[i] = INT64_MAX;
  for (size_t i = 0; i < g->nev; i++) {
    const sl__an_event *ev = &g->ev[i];
    if (ev->type != SL_PROV_EV_OUTPUT && ev->type != SL_PROV_EV_DECLARED_OUTPUT &&
        ev->type != SL_PROV_EV_INTERNAL_OUTPUT)
      continue;
    const sl__an_exec *e = &g->ex[ev->exec];
    if (e->state == SL_PROV_E_CACHED) continue;
    if (e->type >= 0 && (g->types[e->type].flags & SL__AN_RESOLVER)) continue;
    if (ev->ms < best[ev->art] || (ev->ms == best[ev->art] && g->art[ev->art].producer > ev->exec)) {
      best[ev->art] = ev->ms;
      g->art[ev->art].producer = ev->exec;
    }
  }
  sl__free(best);
  return 0;
}

int sl__an_load_store(sl_prov_graphlets *g, sl_prov *p, int64_t ctx) {
  sl__an_idmap tmap = {0}, emap = {0}, amap = {0};
  int rc = load_types(p, g, &tmap);
  if (!rc) rc = load_executions(p, g, &tmap, ctx);
  if (rc || !g->nex) goto out; /* without executions there is nothing else to load */
  if (!rc) rc = sl__an_idmap_build(&emap, &g->ex[0].id, g->nex, sizeof *g->ex);
  if (!rc) rc = load_execution_properties(p, g, &emap, ctx);
  if (!rc) rc = load_artifacts(p, g, &tmap, ctx);
  if (!rc && g->nart) rc = sl__an_idmap_build(&amap, &g->art[0].id, g->nart, sizeof *g->art);
  if (!rc) rc = load_artifact_properties(p, g, &amap, ctx);
  if (!rc) rc = load_events(p, g, &emap, &amap, ctx);
  if (!rc) rc = load_membership(p, g, &emap, ctx);
  if (!rc) rc = index_events(g);
  if (!rc) rc = find_producers(g);
out:
  sl__free(amap.ix);
  sl__free(emap.ix);
  sl__free(tmap.ix);
  return rc;
}
