/* plan/plan_optimize.c: the optimizer loop (trace, solve, rewrite, run the result, compare predicted with measured,
 * re-trace and re-solve while measured falls more than 10% short) and sl_pipeline_optimize, which rebuilds a
 * pipeline in place from its planned spec. */
#include <math.h>
#include <string.h>

#include "ops/engine.h"
#include "plan/plan_int.h"

static int trace_of(sl_trace **out, sl_pipeline *p, double seconds, double warmup, const sl_machine *m) {
  sl_trace_opts to = SL_TRACE_OPTS_INIT;
  to.seconds = seconds;
  to.warmup = warmup;
  to.machine = m;
  to.probe_disk = m == NULL;
  return sl_trace_run(out, p, &to);
}

/* Ops of a trace in pre-order without prefetch and cache ops: the pipeline's identity (see sl__spec_identity). */
static int core_ops(const sl_trace *t, int *idx) {
  int n = 0;
  for (int i = 0; i < t->nops; i++)
    if (strcmp(t->ops[i].s.op, "prefetch") && strcmp(t->ops[i].s.op, "cache")) idx[n++] = i;
  return n;
}

/* A copy of the first trace whose per-element CPU costs are refreshed from the tuned run's trace wherever the
 * tuned run produced elements at that op (ops behind a cache keep their first-trace costs). An inserted root
 * prefetch has no counterpart; its measured cost replaces the model's hand-off estimate for it through
 * opts->handoff in the caller. */
static int refresh_costs(sl_trace **out, const sl_trace *first, const sl_trace *tuned) {
  char *js = NULL;
  int rc = sl_trace_to_json(first, &js);
  if (rc) return rc;
  rc = sl_trace_from_json(out, js, strlen(js), "<trace>");
  sl__free(js);
  if (rc) return rc;
  int *a = sl__calloc((size_t)first->nops, sizeof *a), *b = sl__calloc((size_t)tuned->nops, sizeof *b);
  if (!a || !b) {
    sl__free(a);
    sl__free(b);
    return sl__oom("a trace");
  }
  int na = core_ops(first, a), nb = core_ops(tuned, b);
  if (na == nb)
    for (int k = 0; k < na; k++) {
      sl_op_stats *s = &(*out)->ops[a[k]].s;
      const sl_op_stats *u = &tuned->ops[b[k]].s;
      if (u->elements_out >= 16 && s->elements_out > 0) {
        s->cpu_seconds = u->cpu_seconds / (double)u->elements_out * (double)s->elements_out;
        /* Its measured cost now includes its hand-offs: the model must not add them again. */
        s->async = s->async || u->async;
      }
    }
  sl__free(a);
  sl__free(b);
  return 0;
}

int sl_optimize(sl_plan **out, sl_pipeline *p, const sl_optimize_opts *opts) {
  *out = NULL;
  sl_optimize_opts def = SL_OPTIMIZE_OPTS_INIT;
  if (!opts) opts = &def;
  if (opts->version != SL_OPTIMIZE_OPTS_VERSION)
    return sl__err(SL_EINVAL, "sl_optimize_opts version %d, expected %d", opts->version, SL_OPTIMIZE_OPTS_VERSION);
  sl_optimize_result res = {0};
  sl_trace *t0 = NULL, *tc = NULL;
  sl_plan *plan = NULL, *best = NULL;
  double best_measured = -1;
  sl_plan_opts popts = opts->plan;
  int rc;
  if (opts->trace) {
    /* Start from the caller's trace: a copy, checked against the pipeline. */
    char *js = NULL;
    if ((rc = sl_trace_check_spec(opts->trace, p)) || (rc = sl_trace_to_json(opts->trace, &js))) goto done;
    rc = sl_trace_from_json(&t0, js, strlen(js), opts->trace->origin);
    sl__free(js);
  } else {
    rc = trace_of(&t0, p, opts->trace_seconds > 0 ? opts->trace_seconds : 2.0, 0, opts->machine);
  }
  if (rc) goto done;
  res.baseline = sl_trace_throughput(t0);
  res.other_load = t0->machine.other_load;
  if ((rc = sl_plan_solve(&plan, t0, &opts->plan))) goto done;
  res.rounds = 1;
  if (opts->measure_seconds > 0) {
    for (;;) {
      char *spec = NULL;
      sl_pipeline *q = NULL;
      sl_trace *tm = NULL;
      rc = sl_plan_spec_json(plan, &spec);
      if (!rc) rc = sl_pipeline_from_json(&q, spec, strlen(spec), p->origin);
      sl__free(spec);
      if (!rc) rc = trace_of(&tm, q, opts->measure_seconds, opts->measure_seconds * 0.25, &t0->machine);
      sl_pipeline_free(q);
      if (rc) goto done;
      double measured = sl_trace_throughput(tm);
      if (tm->machine.other_load > res.other_load) res.other_load = tm->machine.other_load;
      if (measured > best_measured) {
        sl_plan_free(best);
        best = plan;
        best_measured = measured;
        res.measured_cpu = tm->elements ? tm->process_cpu / (double)tm->elements : 0;
        res.measure_other_load = tm->machine.other_load;
      } else {
        sl_plan_free(plan);
      }
      plan = NULL;
      if (measured >= 0.9 * sl_plan_predicted(best) || res.rounds > opts->max_retraces) {
        sl_trace_free(tm);
        break;
      }
      /* Measured fell short: the model's costs were off under the new configuration (contention, time-sharing).
       * Refresh them from the tuned run and solve again. */
      sl_trace *tn = NULL;
      /* The inserted root prefetch's measured own cost is this machine's hand-off cost under this load. */
      int r = -1, r0 = -1;
      for (int i = 0; i < tm->nops; i++)
        if (tm->ops[i].s.parent == -1) r = i;
      for (int i = 0; i < t0->nops; i++)
        if (t0->ops[i].s.parent == -1) r0 = i;
      if (r >= 0 && r0 >= 0 && !strcmp(tm->ops[r].s.op, "prefetch") && tm->ops[r].s.elements_out >= 16 &&
          strcmp(t0->ops[r0].s.op, "prefetch"))
        popts.handoff = tm->ops[r].s.cpu_seconds / (double)tm->ops[r].s.elements_out;
      rc = refresh_costs(&tn, tc ? tc : t0, tm);
      sl_trace_free(tm);
      if (rc) goto done;
      sl_trace_free(tc);
      tc = tn;
      if ((rc = sl_plan_solve(&plan, tc, &popts))) goto done;
      res.rounds++;
    }
    plan = best;
    best = NULL;
    res.measured = best_measured;
  }
  res.predicted = sl_plan_predicted(plan);
  res.bound = sl_plan_bound(plan);
  res.model_cpu = sl_plan_cpu_per_element(plan);
  if (res.measured > 0 && res.measure_other_load >= 0)
    res.predicted_free = sl_plan_predict_on(plan, fmax(plan->C - res.measure_other_load, 0.05));
  *out = plan;
  plan = NULL;
done:
  if (opts->result) *opts->result = res;
  sl_plan_free(plan);
  sl_plan_free(best);
  sl_trace_free(t0);
  sl_trace_free(tc);
  return rc;
}

int sl_pipeline_optimize(sl_pipeline *p, const sl_optimize_opts *opts) {
  sl_plan *plan = NULL;
  int rc = sl_optimize(&plan, p, opts);
  if (rc) return rc;
  char *spec = NULL;
  sl_pipeline *q = NULL;
  rc = sl_plan_spec_json(plan, &spec);
  sl_plan_free(plan);
  if (!rc) rc = sl_pipeline_from_json(&q, spec, strlen(spec), p->origin);
  sl__free(spec);
  if (rc) return rc;
  /* Swap the insides: the caller's handle now holds the planned pipeline; its ops point back at it. */
  sl_pipeline tmp = *p;
  *p = *q;
  *q = tmp;
  for (int i = 0; i < p->nops; i++) p->ops[i]->pl = p;
  for (int i = 0; i < q->nops; i++) q->ops[i]->pl = q;
  sl_pipeline_free(q);
  return 0;
}
