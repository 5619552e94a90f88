/* prov/analytics/fleet.c: the runs sluice recorded (`sluice run --record`, prov/store/run.c) seen as a fleet, Plumber's
 * first question at the user's own scale: per pipeline spec and overall, how many runs were input-bound (the busiest
 * op at its limit), the headroom over what ran (the best throughput a recorded sluice.Optimize of the spec reached),
 * the CPU spent, and which ops were the bottleneck how often. Two set-based queries; stores are small. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prov/analytics/analytics_int.h"
#include "sluice/prov_rq.h"

/* The busiest op at or above this share of the cores it may use counts as at its limit: CPU time is what the op got,
 * so on a machine shared with other work the share reads low and the count is a lower bound. */
#define AT_LIMIT 0.8

typedef struct rec {
  int64_t id;
  char *pipeline, *bottleneck;
  bool optimize;
  int state;
  double throughput, cpu, elapsed, load;
} rec;

static int by_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int by_count(const void *a, const void *b) {
  const sl_prov_fleet_op *x = a, *y = b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  return strcmp(x->op, y->op);
}

static int by_runs(const void *a, const void *b) {
  const sl_prov_fleet_row *x = a, *y = b;
  if (x->runs != y->runs) return x->runs > y->runs ? -1 : 1;
  return strcmp(x->pipeline, y->pipeline);
}

static void row_dispose(sl_prov_fleet_row *r) {
  sl__free(r->pipeline);
  for (size_t i = 0; i < r->nops; i++) sl__free(r->ops[i].op);
  sl__free(r->ops);
}

/* Fills row r from the records whose pipeline is `name` (NULL: all). */
static int fill_row(sl_prov_fleet_row *r, const rec *v, size_t n, const char *name) {
  r->pipeline = sl__strdup(name ? name : "(all)");
  double *tp = sl__mallocarray(n ? n : 1, sizeof *tp);
  size_t ntp = 0, cap = 0;
  int rc = 0;
  if (!r->pipeline || !tp) {
    sl__free(tp);
    return sl__oom("fleet");
  }
  for (size_t i = 0; i < n && !rc; i++) {
    const rec *x = &v[i];
    if (name && strcmp(x->pipeline, name)) continue;
    if (x->optimize) {
      /* What the planner's spec achieved (measured, or predicted when not measured): the reachable rate. */
      if (x->state == SL_PROV_E_COMPLETE && x->throughput > r->bound) r->bound = x->throughput;
      continue;
    }
    if (x->state == SL_PROV_E_FAILED) {
      r->failed++;
      continue;
    }
    if (x->state != SL_PROV_E_COMPLETE) continue;
    r->runs++;
    r->cpu_seconds += x->cpu;
    r->elapsed += x->elapsed;
    if (x->throughput > 0) tp[ntp++] = x->throughput;
    if (x->load > 0) {
      r->known++;
      r->input_bound += x->load >= AT_LIMIT;
    }
    if (x->bottleneck && *x->bottleneck) {
      size_t k = 0;
      while (k < r->nops && strcmp(r->ops[k].op, x->bottleneck)) k++;
      if (k == r->nops) {
        if ((rc = sl__an_grow((void **)&r->ops, &cap, r->nops + 1, sizeof *r->ops))) break;
        r->ops[k].op = sl__strdup(x->bottleneck);
        r->ops[k].count = 0;
        if (!r->ops[k].op) {
          rc = sl__oom("fleet");
          break;
        }
        r->nops++;
      }
      r->ops[k].count++;
    }
  }
  if (!rc && ntp) {
    qsort(tp, ntp, sizeof *tp, by_double);
    r->throughput = ntp % 2 ? tp[ntp / 2] : (tp[ntp / 2 - 1] + tp[ntp / 2]) / 2;
  }
  if (!rc && r->bound > 0 && r->throughput > 0) r->headroom = r->bound / r->throughput;
  if (!rc && r->nops) qsort(r->ops, r->nops, sizeof *r->ops, by_count);
  sl__free(tp);
  return rc;
}

static const char *const RUNS_SQL =
    "SELECT e.id, t.name, e.last_known_state, (SELECT c.name FROM Association a JOIN Context c ON c.id = a.context_id "
    "JOIN Type ct ON ct.id = c.type_id WHERE a.execution_id = e.id AND ct.name = 'pipeline' ORDER BY c.id LIMIT 1) "
    "FROM Execution e JOIN Type t ON t.id = e.type_id WHERE t.name IN ('sluice.Run', 'sluice.Optimize') ORDER BY e.id";
static const char *const PROPS_SQL =
    "SELECT p.execution_id, p.name, p.int_value, p.double_value, p.string_value FROM ExecutionProperty p JOIN "
    "Execution e ON e.id = p.execution_id JOIN Type t ON t.id = e.type_id WHERE t.name IN ('sluice.Run', "
    "'sluice.Optimize') AND p.name IN ('throughput', 'cpu_seconds', 'elapsed', 'bottleneck', 'busiest_load') ORDER BY "
    "p.execution_id";

int sl_prov_fleet_compute(sl_prov_fleet **out, sl_prov *p) {
  *out = NULL;
  rec *v = NULL;
  size_t n = 0, cap = 0;
  sl__pstmt *st = NULL;
  sl_prov_fleet *f = sl__calloc(1, sizeof *f);
  if (!f) return sl__oom("fleet");
  /* A store without sluice's execution types (a TFX store, a generated corpus) has no runs: no scan at all. */
  int rc = sl__pdb_prepare(p->db, &st, "SELECT count(*) FROM Type WHERE name IN ('sluice.Run', 'sluice.Optimize')");
  if (!rc && (rc = sl__pstmt_step(st)) == 1) rc = sl__pstmt_i64(st, 0) ? 0 : 2;
  sl__pstmt_free(st);
  st = NULL;
  if (rc == 2) {
    rc = fill_row(&f->all, v, 0, NULL);
    goto done;
  }
  if (!rc) rc = sl__pdb_prepare(p->db, &st, RUNS_SQL);
  while (!rc && (rc = sl__pstmt_step(st)) == 1) {
    rc = 0;
    if ((rc = sl__an_grow((void **)&v, &cap, n + 1, sizeof *v))) break;
    rec *x = &v[n++];
    memset(x, 0, sizeof *x);
    x->id = sl__pstmt_i64(st, 0);
    x->optimize = !strcmp(sl__pstmt_text(st, 1), "sluice.Optimize");
    x->state = (int)sl__pstmt_i64(st, 2);
    const char *pn = sl__pstmt_text(st, 3);
    x->pipeline = sl__strdup(pn ? pn : "(no pipeline)");
    if (!x->pipeline) rc = sl__oom("fleet");
  }
  sl__pstmt_free(st);
  st = NULL;
  if (rc < 0) goto done;
  rc = n ? sl__pdb_prepare(p->db, &st, PROPS_SQL) : 0;
  /* Both queries are in id order: merge. */
  for (size_t i = 0; n && !rc && (rc = sl__pstmt_step(st)) == 1;) {
    rc = 0;
    int64_t id = sl__pstmt_i64(st, 0);
    while (i < n && v[i].id < id) i++;
    if (i == n || v[i].id != id) continue;
    const char *nm = sl__pstmt_text(st, 1);
    double d = !sl__pstmt_null(st, 3) ? sl__pstmt_f64(st, 3) : (double)sl__pstmt_i64(st, 2);
    if (!strcmp(nm, "throughput")) v[i].throughput = d;
    else if (!strcmp(nm, "cpu_seconds")) v[i].cpu = d;
    else if (!strcmp(nm, "elapsed")) v[i].elapsed = d;
    else if (!strcmp(nm, "busiest_load")) v[i].load = d;
    else if (!strcmp(nm, "bottleneck") && !v[i].bottleneck) {
      const char *s = sl__pstmt_text(st, 4);
      v[i].bottleneck = sl__strdup(s ? s : "");
      if (!v[i].bottleneck) rc = sl__oom("fleet");
    }
  }
  sl__pstmt_free(st);
  if (rc < 0) goto done;
  rc = fill_row(&f->all, v, n, NULL);
  /* One row per distinct pipeline, in first-seen order, then sorted by runs. */
  size_t pcap = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    bool seen = false;
    for (size_t k = 0; k < f->npipelines && !seen; k++) seen = !strcmp(f->pipelines[k].pipeline, v[i].pipeline);
    if (seen) continue;
    if ((rc = sl__an_grow((void **)&f->pipelines, &pcap, f->npipelines + 1, sizeof *f->pipelines))) break;
    memset(&f->pipelines[f->npipelines], 0, sizeof *f->pipelines);
    rc = fill_row(&f->pipelines[f->npipelines++], v, n, v[i].pipeline);
  }
  if (!rc && f->npipelines) qsort(f->pipelines, f->npipelines, sizeof *f->pipelines, by_runs);
  /* Overall headroom: the pipelines' own, weighted by their runs (one spec's optimum says nothing of another's). */
  if (!rc) {
    double w = 0, h = 0;
    for (size_t k = 0; k < f->npipelines; k++)
      if (f->pipelines[k].headroom > 0) w += (double)f->pipelines[k].runs, h += (double)f->pipelines[k].runs * f->pipelines[k].headroom;
    f->all.bound = 0;
    f->all.headroom = w > 0 ? h / w : 0;
  }
done:
  for (size_t i = 0; i < n; i++) {
    sl__free(v[i].pipeline);
    sl__free(v[i].bottleneck);
  }
  sl__free(v);
  if (rc < 0) {
    sl_prov_fleet_free(f);
    return rc;
  }
  *out = f;
  return 0;
}

void sl_prov_fleet_free(sl_prov_fleet *f) {
  if (!f) return;
  row_dispose(&f->all);
  for (size_t i = 0; i < f->npipelines; i++) row_dispose(&f->pipelines[i]);
  sl__free(f->pipelines);
  sl__free(f);
}
