/* plan/plan_optimize.c: the optimizer loop (trace, solve, rewrite, run the result, compare predicted with measured,
 * re-trace and re-solve while measured falls more than 10% short) and sl_pipeline_optimize, which rebuilds a
 * pipeline in place from its planned spec. */
#include <math.h>
#include <string.h>

#include "ops/engine_int.h"
#include "plan/plan_fuse_int.h"
#include "plan/plan_int.h"

static int trace_of(sl_trace **out, sl_pipeline *p, double seconds, double warmup, const sl_machine *m) {
  sl_trace_opts to = SL_TRACE_OPTS_INIT;
  to.warmup_fills_caches = true; /* a cache's first pass is not its steady state */
  to.seconds = seconds;
  to.warmup = warmup;
  to.machine = m;
  to.no_disk_probe = m != NULL;
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
 * tuned run produced elements at that op (ops behind a cache keep their first-trace costs). */
static int copy_trace(sl_trace **out, const sl_trace *t) {
  char *js = NULL;
  int rc = sl_trace_to_json(&js, t);
  if (rc) return rc;
  rc = sl_trace_from_json(out, js, strlen(js), "<trace>");
  sl__free(js);
  return rc;
}

static int refresh_costs(sl_trace **out, const sl_trace *first, const sl_trace *tuned) {
  int rc = copy_trace(out, first);
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

/* The input pipeline's sequential variant: every parallelism the planner may set at 1 (its buffer dropped), and a
 * root prefetch it may replace removed. Its trace gives the ops' own costs without hand-offs (an async op's traced
 * CPU includes its locks and wake-ups, which would not go away if the plan made it sequential), so every plan,
 * the all-sequential one included, is priced the same way: own costs plus the hand-offs of its thread boundaries.
 * *out is NULL when the input has nothing to make sequential. */
static int seq_variant(sl_pipeline **out, const sl_trace *t0, const sl_pipeline *p, const sl_plan_opts *po) {
  *out = NULL;
  json_t *spec = json_deep_copy(t0->spec);
  if (!spec) return sl__oom("a spec");
  bool changed = false;
  int root = -1;
  for (int i = 0; i < t0->nops; i++) {
    const sl__trace_op *o = &t0->ops[i];
    if (o->s.parent == -1) root = i;
    bool tunable = !sl__plan_only_autotune(po) || o->par_autotune;
    if ((strcmp(o->s.op, "map") && strcmp(o->s.op, "interleave")) || !tunable || o->s.parallelism <= 1) continue;
    json_t *js = sl__spec_op_at(spec, o->s.path);
    if (!js) continue;
    json_object_set_new(js, "parallelism", json_integer(1));
    json_object_del(js, "buffer");
    changed = true;
  }
  if (root >= 0 && !po->no_prefetch && !strcmp(t0->ops[root].s.op, "prefetch") &&
      (!sl__plan_only_autotune(po) || t0->ops[root].buf_autotune)) {
    json_t *ops = json_object_get(spec, "ops");
    size_t n = json_array_size(ops);
    if (n > 1) {
      json_array_remove(ops, n - 1);
      changed = true;
    }
  }
  int rc = 0;
  if (changed) {
    char *js = json_dumps(spec, JSON_COMPACT);
    rc = js ? sl_pipeline_from_json(out, js, strlen(js), sl__pipeline_origin(p)) : sl__oom("a spec");
    sl__free(js);
  }
  json_decref(spec);
  return rc;
}

/* The sequential trace keeps the input's "autotune" marks (its spec spells those knobs out). */
static void keep_autotune_marks(sl_trace *ts, const sl_trace *t0) {
  int *a = sl__calloc((size_t)t0->nops, sizeof *a), *b = sl__calloc((size_t)ts->nops, sizeof *b);
  if (a && b) {
    int na = core_ops(t0, a), nb = core_ops(ts, b);
    if (na == nb)
      for (int k = 0; k < na; k++) {
        ts->ops[b[k]].par_autotune = t0->ops[a[k]].par_autotune;
        ts->ops[b[k]].buf_autotune = t0->ops[a[k]].buf_autotune;
      }
  }
  sl__free(a);
  sl__free(b);
}

/* Runs plan's spec for opts->measure_seconds (after a warm-up that also fills caches) and traces it. */
static int measure_plan(sl_trace **tm, const sl_plan *plan, const sl_pipeline *p, const sl_optimize_opts *opts,
                        const sl_machine *m) {
  char *spec = NULL;
  sl_pipeline *q = NULL;
  int rc = sl_plan_spec_json(&spec, plan);
  if (!rc) rc = sl_pipeline_from_json(&q, spec, strlen(spec), sl__pipeline_origin(p));
  sl__free(spec);
  if (!rc) rc = trace_of(tm, q, opts->measure_seconds, opts->measure_seconds * 0.25, m);
  sl_pipeline_free(q);
  return rc;
}

/* True when the plan gives an op the planner may set more than one worker. */
static bool has_workers(const sl_plan *P) {
  for (int i = 0; i < P->nops; i++)
    if (P->ops[i].par_tunable && P->par[i] > 1) return true;
  return false;
}

/* The plan with every tunable parallelism at 1 (buffers and the root prefetch still planned), on the costs of `t`. */
static int sequential_plan(sl_plan **out, const sl_trace *t, const sl_plan_opts *po, double hscale) {
  sl_trace *tq = NULL;
  int rc = copy_trace(&tq, t);
  if (rc) return rc;
  for (int i = 0; i < tq->nops; i++) tq->ops[i].par_autotune = false;
  sl_plan_opts so = *po;
  so.knobs = SL_PLAN_KNOBS_AUTOTUNE;
  if (!sl__plan_only_autotune(po))
    for (int i = 0; i < tq->nops; i++) tq->ops[i].buf_autotune = true;
  rc = sl__plan_solve(out, tq, &so, hscale);
  sl_trace_free(tq);
  return rc;
}

int sl_optimize(sl_plan **out, sl_pipeline *p, const sl_optimize_opts *opts) {
  *out = NULL;
  sl_optimize_opts o = SL_OPTIMIZE_OPTS_INIT;
  if (opts) o = *opts;
  if (o.version != SL_OPTIMIZE_OPTS_VERSION)
    return sl__err(SL_EINVAL, "sl_optimize_opts version %d, expected %d", o.version, SL_OPTIMIZE_OPTS_VERSION);
  /* The defaults: only "autotune" knobs, 2 s traces, at most 2 re-traces. */
  int rc = sl__plan_opts_resolve(&o.plan, &o.plan, true, SL_PLAN_KNOBS_AUTOTUNE);
  if (rc) return rc;
  if (!(o.trace_seconds > 0)) o.trace_seconds = 2.0;
  if (o.max_retraces == 0) o.max_retraces = 2;
  else if (o.max_retraces < 0) o.max_retraces = 0;
  opts = &o;
  /* Fusion first (plan_fuse.c): everything below traces and plans the fused pipeline. A given trace is of the
   * unfused one, so then nothing is fused. */
  sl_pipeline *fused = NULL;
  if (!opts->trace && (rc = sl__plan_fuse(&fused, p))) return rc;
  if (fused) p = fused;
  sl_optimize_result res = {0};
  sl_trace *t0 = NULL, *ts = NULL, *tc = NULL;
  sl_plan *plan = NULL, *best = NULL;
  double best_measured = -1, hscale = 1;
  if (opts->trace) {
    /* Start from the caller's trace: a copy, checked against the pipeline. */
    char *js = NULL;
    if ((rc = sl_trace_check_spec(opts->trace, p)) || (rc = sl_trace_to_json(&js, opts->trace))) goto done;
    rc = sl_trace_from_json(&t0, js, strlen(js), opts->trace->origin);
    sl__free(js);
  } else {
    rc = trace_of(&t0, p, opts->trace_seconds, 0, opts->machine);
  }
  if (rc) goto done;
  res.baseline = sl_trace_throughput(t0);
  res.other_load = t0->machine.other_load;
  {
    /* The model's costs come from the sequential variant when the input has thread boundaries to remove. */
    sl_pipeline *q = NULL;
    if ((rc = seq_variant(&q, t0, p, &opts->plan))) goto done;
    if (q) {
      rc = trace_of(&ts, q, opts->trace_seconds, 0, &t0->machine);
      sl_pipeline_free(q);
      if (rc) goto done;
      keep_autotune_marks(ts, t0);
    }
  }
  const sl_trace *tb = ts ? ts : t0; /* the trace the model is built on */
  if ((rc = sl__plan_solve(&plan, tb, &opts->plan, hscale))) goto done;
  plan->seq_trace = ts != NULL;
  res.rounds = 1;
  if (opts->measure_seconds > 0) {
    for (;;) {
      sl_trace *tm = NULL;
      if ((rc = measure_plan(&tm, plan, p, opts, &t0->machine))) goto done;
      double measured = sl_trace_throughput(tm);
      if (tm->machine.other_load > res.other_load) res.other_load = tm->machine.other_load;
      double hcpu = sl__plan_handoff_cpu(plan), mcpu = sl_plan_cpu_per_element(plan);
      double cpu = tm->elements ? tm->process_cpu / (double)tm->elements : 0;
      /* What this plan should have reached on the cores other processes left it: a shortfall that their load
       * explains is no reason to doubt the model. */
      double other = tm->machine.other_load;
      double expect = other >= 0.25 ? sl_plan_predict_on(plan, fmax(plan->C - other, 0.05)) : sl_plan_predicted(plan);
      /* The hand-offs cost more CPU than the model charged: its choice between thread boundaries and none may be
       * wrong even when the throughput looked right (a noisy run can flatter a plan; CPU per element is steadier). */
      bool cpu_off = hcpu > 0 && cpu > 1.1 * mcpu && opts->plan.handoff == 0;
      /* A later plan is solved on better-calibrated costs: it is kept unless an earlier one measured clearly
       * faster (runs on a shared machine differ by several per cent). */
      if (!best || measured > 0.9 * best_measured) {
        sl_plan_free(best);
        best = plan;
        best_measured = measured;
        res.measured_cpu = cpu;
        res.measure_other_load = tm->machine.other_load;
      } else {
        sl_plan_free(plan);
      }
      plan = NULL;
      if ((measured >= 0.9 * expect && !cpu_off) || res.rounds > opts->max_retraces) {
        sl_trace_free(tm);
        break;
      }
      /* Measured fell short: the model's costs were off under the new configuration. When the plan has thread
       * boundaries, the process CPU the run spent beyond the ops' own costs is what its hand-offs cost here
       * (locks, wake-ups, cache misses, contention): learn that and solve again. Without boundaries, refresh the
       * ops' costs from the run. */
      if (hcpu > 0 && cpu > 0 && opts->plan.handoff == 0) {
        double excess = cpu - (mcpu - hcpu);
        hscale *= fmin(fmax(excess / hcpu, 0.05), 100.0);
      } else {
        sl_trace *tn = NULL;
        rc = refresh_costs(&tn, tc ? tc : tb, tm);
        if (rc) {
          sl_trace_free(tm);
          goto done;
        }
        sl_trace_free(tc);
        tc = tn;
      }
      sl_trace_free(tm);
      if ((rc = sl__plan_solve(&plan, tc ? tc : tb, &opts->plan, hscale))) goto done;
      plan->seq_trace = ts != NULL;
      res.rounds++;
    }
    /* The model's time-sharing is approximate: the plan with a worker per core for every tunable op (Plumber's
     * heuristic, what tf.data users write by hand) is measured too, and kept when it was clearly faster. */
    {
      sl_trace *tm = NULL;
      if ((rc = sl__plan_solve(&plan, tc ? tc : tb, &opts->plan, hscale))) goto done;
      plan->seq_trace = ts != NULL;
      int fr = sl__plan_force_parallelism(plan, (int64_t)ceil(plan->C));
      if (fr < 0) {
        rc = fr;
        goto done;
      }
      if (fr == 0) {
        if ((rc = measure_plan(&tm, plan, p, opts, &t0->machine))) goto done;
        double measured = sl_trace_throughput(tm);
        if (measured > 1.10 * best_measured) {
          sl_plan_free(best);
          best = plan;
          plan = NULL;
          best_measured = measured;
          res.measured_cpu = tm->elements ? tm->process_cpu / (double)tm->elements : 0;
          res.measure_other_load = tm->machine.other_load;
        }
        if (tm->machine.other_load > res.other_load) res.other_load = tm->machine.other_load;
        sl_trace_free(tm);
        res.rounds++;
      }
      sl_plan_free(plan);
      plan = NULL;
    }
    /* Worker threads must earn their hand-offs on this machine: the all-sequential plan is measured too and
     * kept unless the plan with workers was clearly faster. */
    if (has_workers(best)) {
      sl_trace *tm = NULL;
      if ((rc = sequential_plan(&plan, tc ? tc : tb, &opts->plan, hscale))) goto done;
      plan->seq_trace = ts != NULL;
      if ((rc = measure_plan(&tm, plan, p, opts, &t0->machine))) goto done;
      double measured = sl_trace_throughput(tm);
      if (measured * 1.10 >= best_measured) {
        sl_plan_free(best);
        best = plan;
        plan = NULL;
        best_measured = measured;
        res.measured_cpu = tm->elements ? tm->process_cpu / (double)tm->elements : 0;
        res.measure_other_load = tm->machine.other_load;
      }
      if (tm->machine.other_load > res.other_load) res.other_load = tm->machine.other_load;
      sl_trace_free(tm);
      sl_plan_free(plan);
      plan = NULL;
      res.rounds++;
    }
    /* Never slower than what the caller gave: when the input, as traced, ran clearly faster than every plan
     * measured, the result is the input's own configuration, if it is within the budgets (the caller's --cores
     * or --consumer-cores below the machine, or --memory below what it holds, rule it out). */
    if (res.baseline > 1.10 * best_measured) {
      if ((rc = sl__plan_solve(&plan, t0, &opts->plan, hscale)) || (rc = sl__plan_as_traced(plan))) goto done;
      if (plan->C < t0->machine.cores - 1e-9 || plan->mem > plan->M) {
        sl_plan_free(plan);
        plan = NULL;
      }
    }
    if (plan) {
      sl_plan_free(best);
      best = plan;
      plan = NULL;
      best_measured = res.baseline;
      res.measured_cpu = t0->elements ? t0->process_cpu / (double)t0->elements : 0;
      res.measure_other_load = t0->machine.other_load;
      res.kept_input = true;
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
  sl_trace_free(ts);
  sl_trace_free(tc);
  sl_pipeline_free(fused);
  return rc;
}

int sl_pipeline_optimize(sl_pipeline *p, const sl_optimize_opts *opts) {
  sl_plan *plan = NULL;
  int rc = sl_optimize(&plan, p, opts);
  if (rc) return rc;
  char *spec = NULL;
  sl_pipeline *q = NULL;
  rc = sl_plan_spec_json(&spec, plan);
  sl_plan_free(plan);
  if (!rc) rc = sl_pipeline_from_json(&q, spec, strlen(spec), sl__pipeline_origin(p));
  sl__free(spec);
  if (rc) return rc;
  /* The caller's handle now holds the planned pipeline. */
  sl__pipeline_replace(p, q);
  return 0;
}
