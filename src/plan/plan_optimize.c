/* plan/plan_optimize.c: the optimizer loop (trace, solve, rewrite, run the result, compare predicted with measured,
 * re-trace and re-solve while measured falls more than 10% short) and sl_pipeline_optimize, which rebuilds a
 * pipeline in place from its planned spec. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ops/pipeline_int.h"
#include "plan/plan_fuse_int.h"
#include "plan/plan_int.h"

/* Traces p after a warm-up (the steady state: buffers, caches and the allocator settled), for `seconds` or until
 * `take` output elements (0: no limit). With `repeat`, p's spec
 * runs under a root `repeat` and the trace is then stripped of it: a finite input traced for as long as needed. */
static int trace_of(sl_trace **out, sl_pipeline *p, double seconds, double warmup, const sl_machine *m, bool repeat,
                    int64_t take) {
  sl_trace_opts to = SL_TRACE_OPTS_INIT;
  to.take = take;
  to.warmup_fills_caches = true; /* a cache's first pass is not its steady state */
  to.seconds = seconds;
  to.warmup = warmup;
  to.machine = m;
  to.no_disk_probe = m != NULL;
  to.repeat = repeat;
  return sl_trace_run(out, p, &to);
}

/* A measured run: p for `seconds` after `warmup`, under a root repeat when *rep. An input that ended before the run
 * did (its steady state is shorter than a run: after imagenet-cacheable's cache filled in the warm-up, its last 96
 * batches of 120, at about 370 a second, last about a quarter of a 2 s run) is run again repeated, and so is every
 * later run (*rep set). */
static int run_of(sl_trace **out, sl_pipeline *p, double seconds, double warmup, const sl_machine *m, bool *rep) {
  int rc = trace_of(out, p, seconds, warmup, m, *rep, 0);
  if (rc || *rep || !(*out)->ended) return rc;
  sl_trace_free(*out);
  *out = NULL;
  *rep = true;
  return trace_of(out, p, seconds, warmup, m, true, 0);
}

/* One line of progress to the caller's callback (sl_optimize_opts.progress), if any. */
static void say(const sl_optimize_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const sl_optimize_opts *o, const char *fmt, ...) {
  if (!o || !o->progress) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  o->progress(line, o->progress_ctx);
}

/* Ops of a trace in pre-order without prefetch and cache ops: the pipeline's identity (see sl__spec_identity). */
static int core_ops(const sl_trace *t, int *idx) {
  int n = 0;
  for (int i = 0; i < t->nops; i++)
    if (!sl__op_outside_identity(t->ops[i].s.op)) idx[n++] = i;
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
  if (!rc) { /* not in the JSON: a copy of refreshed costs keeps the run's consumer CPU */
    (*out)->has_resid = t->has_resid;
    (*out)->resid = t->resid;
  }
  return rc;
}

static int refresh_costs(sl_trace **out, const sl_trace *first, const sl_trace *tuned) {
  int rc = copy_trace(out, first);
  if (rc) return rc;
  int *a = sl__calloc((size_t)first->nops, sizeof *a), *b = sl__calloc((size_t)tuned->nops, sizeof *b);
  if (!a || !b) {
    sl__free(a);
    sl__free(b);
    sl_trace_free(*out); /* the caller takes *out only on success */
    *out = NULL;
    return sl__oom("a trace");
  }
  int na = core_ops(first, a), nb = core_ops(tuned, b);
  /* The run's sampled op costs are held to its process CPU as the model holds a trace's (sl__plan_model): the
   * copy keeps the first trace's process CPU, which would not cap them. */
  double sum = 0, k_run = 1;
  for (int i = 0; i < tuned->nops; i++) sum += tuned->ops[i].s.cpu_seconds;
  if (tuned->process_cpu > 0 && sum > tuned->process_cpu) k_run = tuned->process_cpu / sum;
  /* The process CPU beyond the ops' own, per output element, is the run's too. Left to the copy's first-trace
   * process CPU, it would absorb what the refreshed ops no longer cost: imagenet-cacheable's ops after its cache,
   * refreshed from 6.1 to 5.6 ms a batch, were still priced at 5.9 with the difference moved to the consumer. */
  int root = -1;
  for (int i = 0; i < tuned->nops; i++)
    if (tuned->ops[i].s.parent == -1) root = i;
  if (root >= 0 && tuned->ops[root].s.elements_out > 0 && tuned->process_cpu > 0) {
    (*out)->has_resid = true;
    (*out)->resid = fmax(0, tuned->process_cpu - k_run * sum) / (double)tuned->ops[root].s.elements_out;
  }
  if (na == nb)
    for (int k = 0; k < na; k++) {
      sl_op_stats *s = &(*out)->ops[a[k]].s;
      const sl_op_stats *u = &tuned->ops[b[k]].s;
      if (u->elements_out >= 16 && s->elements_out > 0) {
        s->cpu_seconds = k_run * u->cpu_seconds / (double)u->elements_out * (double)s->elements_out;
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
    if (!sl__op_tunable(o->s.op, "parallelism") || !tunable || o->s.parallelism <= 1) continue;
    json_t *js = sl__spec_op_at(spec, o->s.path);
    if (!js) continue;
    json_object_set_new(js, "parallelism", json_integer(1));
    json_object_del(js, "buffer");
    changed = true;
  }
  if (root >= 0 && !po->no_prefetch && sl__op_model(t0->ops[root].s.op) == SL__MK_PREFETCH &&
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
                        const sl_machine *m, bool *rep) {
  char *spec = NULL;
  sl_pipeline *q = NULL;
  int rc = sl_plan_spec_json(&spec, plan);
  if (!rc) rc = sl_pipeline_from_json(&q, spec, strlen(spec), sl__pipeline_origin(p));
  sl__free(spec);
  if (!rc) rc = run_of(tm, q, opts->measure_seconds, opts->measure_seconds * 0.25, m, rep);
  sl_pipeline_free(q);
  return rc;
}

/* The cores `other` processes left plan P (-1: unknown; under a quarter core: ignored, all of P's). */
static double free_cores(const sl_plan *P, double other) {
  return other >= 0.25 ? fmax(P->C - other, 0.05) : P->C;
}

/* What plan P should reach on the cores `other` processes left it (NaN: out of memory, sl_error_last says). */
static double expect_on(const sl_plan *P, double other) {
  return other >= 0.25 ? sl_plan_predict_on(P, free_cores(P, other)) : sl_plan_predicted(P);
}

/* The share of its free cores a measured run of plan P says a CPU-bound prediction should count on: 1 unless P
 * is CPU-bound and the run fell short of P's prediction on the cores other processes left it while spending within
 * 10% of the model's CPU per element. Then the costs were right and cores sat idle: its
 * threads blocked and woke while another waited its turn for a core (on this 2-vCPU VM a woken thread is queued
 * on a busy CPU while the other idles: in a run of imagenet-cacheable's plan 9% of both CPUs were idle, 80% of that
 * time with one of its threads runnable on the other CPU). The model cannot see that from the ops' costs; the
 * share is a property of the plan's threads (runs of two plans of one pipeline kept 1.60 and 1.75 of 2 cores busy),
 * so it is applied to the plan it was measured on. */
double sl__plan_run_share(const sl_plan *P, double measured, double cpu, double busy, double other) {
  if (strcmp(sl_plan_limit(P), "cpu")) return 1;
  double mcpu = sl_plan_cpu_per_element(P), expect = expect_on(P, other), free = free_cores(P, other);
  /* Any shortfall, not only one past 10%: the bench's runs of ssd's plan kept 1.93 of 2 cores busy, optimize's
   * prediction counted on 2 and was 6-11% over in two benches, each time within the loop's 10%. */
  if (!(measured < expect) || !(cpu >= 0.9 * mcpu && cpu <= 1.1 * mcpu)) return 1;
  /* Only for a plan the model expects to keep every free core busy: one held below that by a thread's own work
   * (tabular's plan, all on one thread of 2 cores) keeps a core idle by design, which says nothing about threads
   * blocking and waking (learning 0.5 there made optimize explain its prediction by idle cores). */
  if (!(mcpu > 0) || expect < 0.95 * free / mcpu) return 1;
  /* Of the cores other processes left it, however little they took: in a bench's spin4 they took 0.18 of 2 (under
   * the quarter core the prediction ignores), the plan kept 1.76 busy, and a share of 0.88 of both made its
   * prediction 0.895x the bench's quieter runs. */
  return sl__plan_learn_share(busy, other > 0 ? fmax(P->C - other, 0.05) : P->C);
}

static double run_share(const sl_plan *P, const sl_trace *tm) {
  if (!tm->elements || !(tm->seconds > 0)) return 1;
  return sl__plan_run_share(P, sl_trace_throughput(tm), sl__plan_trace_cpu(tm),
                            tm->process_cpu / tm->seconds, tm->machine.other_load);
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

double sl__plan_trace_cpu(const sl_trace *t) {
  return t->elements ? t->process_cpu / (double)t->elements : 0;
}

double sl__plan_median(double *v, int n) {
  for (int i = 1; i < n; i++) /* insertion sort: a handful of runs */
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double x = v[j];
      v[j] = v[j - 1];
      v[j - 1] = x;
    }
  return n <= 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bool sl__plan_prefer(double ma, double ca, double mb, double cb) {
  if (ca > 0 && cb > 0 && cb <= SL__PLAN_CHEAPER * ca) return mb >= (1 - SL__PLAN_TIE) * ma;
  if (ca > 0 && cb > 0 && ca <= SL__PLAN_CHEAPER * cb) return mb > (1 + SL__PLAN_TIE) * ma;
  return mb > ma;
}

/* Warm-up before a trace counts: buffers filled, the allocator's free lists and the caches settled. */
static double trace_warmup(double seconds) { return fmin(0.25 * seconds, 2.0); }

/* A trace of `*t0` that saw fewer than SL_PLAN_MIN_ELEMENTS output elements is too short to plan from (visit
 * ratios and per-element costs of a few elements are noise, or warm-up). It is traced again, longer (until 1.5x
 * the elements needed, at most SL__PLAN_MAX_TRACE seconds), and an input that may end (finite or of
 * unknown length: 200 images in batches of 64 are 3 elements, and a slow first trace may not have reached the end
 * the longer one would) under a root repeat (*rep set: measurements repeat it too). Still short, or a given
 * trace: SL_EINVAL saying how many it saw and needs.
 * A trace long enough by its heavy ops' elements may still be of an input that ends: one that ended is traced
 * again, repeated, and an input of a known finite length is repeated by every later trace and measurement. The
 * runs (a warm-up, then several seconds) read more than one epoch: a folder of 1,000 images in batches of 32 (31
 * elements) ended inside the warm-up of every 2 s run of the plan, which then measured 0 elem/s, and the input,
 * at 0.56x the plan, was kept. */
#define SL__PLAN_MAX_TRACE 60.0
static int long_enough(sl_trace **t0, bool *rep, sl_pipeline *p, const sl_optimize_opts *opts) {
  uint64_t seen = (*t0)->elements;
  int root = -1;
  for (int i = 0; i < (*t0)->nops; i++)
    if ((*t0)->ops[i].s.parent == -1) root = i;
  int64_t card = root >= 0 ? (*t0)->ops[root].s.cardinality : -1;
  bool ended = (*t0)->ended;
  if (sl__trace_counts(*t0, NULL) != SL__COUNT_SHORT) { /* by the output, or by the ops carrying the CPU */
    *rep = ended || card >= 0;
    if (!ended || opts->trace) return 0;
  } else if (opts->trace) {
    return sl__err(SL_EINVAL,
                   "the trace saw %llu output elements in %.2f s; planning needs at least %d (or %d with every op "
                   "that does %.0f%% of the CPU making %d): trace longer (sluice trace --seconds) or let optimize trace",
                   (unsigned long long)seen, (*t0)->seconds, SL_PLAN_MIN_ELEMENTS, SL__COUNT_MIN_ROOT,
                   100 * SL__COUNT_HEAVY_SHARE, SL_PLAN_MIN_ELEMENTS);
  }
  bool finite = ended || card != -2;
  /* As long as asked (repeated when it may end); if still short, until 1.5x the elements needed, at most
   * SL__PLAN_MAX_TRACE seconds. */
  sl_trace *t = NULL;
  double w = trace_warmup(opts->trace_seconds);
  int rc = trace_of(&t, p, opts->trace_seconds, w, &(*t0)->machine, finite, 0);
  if (!rc && sl__trace_counts(t, NULL) == SL__COUNT_SHORT) {
    sl_trace_free(t);
    t = NULL;
    rc = trace_of(&t, p, SL__PLAN_MAX_TRACE, w, &(*t0)->machine, finite, (int64_t)(1.5 * SL_PLAN_MIN_ELEMENTS));
  }
  if (rc) return rc;
  if (sl__trace_counts(t, NULL) == SL__COUNT_SHORT) {
    rc = sl__err(SL_EINVAL,
                 "the trace saw %llu output elements in %.2f s%s; planning needs at least %d: the pipeline is too "
                 "slow to plan from a trace of at most %.0f s",
                 (unsigned long long)t->elements, t->seconds, finite ? " (a finite input repeated)" : "",
                 SL_PLAN_MIN_ELEMENTS, SL__PLAN_MAX_TRACE);
    sl_trace_free(t);
    return rc;
  }
  sl_trace_free(*t0);
  *t0 = t;
  *rep = finite;
  return 0;
}

/* Runs each of the n pipelines q[] `rounds` times, alternating (a shared machine's load drifts: alternation spreads
 * it over all of them; each round starts with the next one), each for `secs` after a warm-up, and then two rounds
 * more at a time, up to `max_rounds`, while some side's runs spread more than SL__PLAN_CHECK_SPREAD; the medians of
 * their throughputs into med[], and (each may be NULL) the least and the median process CPU per element the runs
 * of each spent, the lowest and highest throughput of each (range) and the rounds run (*ran). `names` (may be
 * NULL) name them in the progress lines of opts. */
#define SL__PLAN_MAX_SIDES 3
typedef struct alt_out {
  double least_cpu[SL__PLAN_MAX_SIDES], median_cpu[SL__PLAN_MAX_SIDES];
  double lo[SL__PLAN_MAX_SIDES], hi[SL__PLAN_MAX_SIDES];
  int rounds; /* run */
} alt_out;

bool sl__plan_check_spread(const double (*r)[SL__PLAN_CHECK_MAX_ROUNDS], int n, int k) {
  for (int s = 0; s < n; s++) {
    double lo = 0, hi = 0;
    for (int j = 0; j < k; j++) {
      if (j == 0 || r[s][j] < lo) lo = r[s][j];
      if (j == 0 || r[s][j] > hi) hi = r[s][j];
    }
    if (k > 1 && (lo <= 0 ? hi > 0 : hi > (1 + SL__PLAN_CHECK_SPREAD) * lo)) return true;
  }
  return false;
}

static int alternate_n(double *med, sl_pipeline **q, int n, int rounds, int max_rounds, double secs,
                       const sl_machine *m, bool *rep, alt_out *o, const sl_optimize_opts *opts,
                       const char *const *names) {
  double r[SL__PLAN_MAX_SIDES][SL__PLAN_CHECK_MAX_ROUNDS], c[SL__PLAN_MAX_SIDES][SL__PLAN_CHECK_MAX_ROUNDS];
  if (max_rounds > SL__PLAN_CHECK_MAX_ROUNDS) max_rounds = SL__PLAN_CHECK_MAX_ROUNDS;
  if (rounds > max_rounds) rounds = max_rounds;
  if (n > SL__PLAN_MAX_SIDES) n = SL__PLAN_MAX_SIDES;
  alt_out local;
  if (!o) o = &local;
  memset(o, 0, sizeof *o);
  int k = 0;
  for (int want = rounds; k < want; k++) {
    for (int w = 0; w < n; w++) {
      int side = (k + w) % n;
      sl_trace *t = NULL;
      int rc = run_of(&t, q[side], secs, secs * 0.25, m, rep);
      if (rc) return rc;
      r[side][k] = sl_trace_throughput(t);
      double cpu = sl__plan_trace_cpu(t);
      c[side][k] = cpu;
      if (cpu > 0 && (o->least_cpu[side] == 0 || cpu < o->least_cpu[side])) o->least_cpu[side] = cpu;
      say(opts, "  round %d/%d: %s %.1f elem/s", k + 1, want, names ? names[side] : "run", r[side][k]);
      sl_trace_free(t);
    }
    if (k + 1 == want && want + 2 <= max_rounds && sl__plan_check_spread((const double (*)[SL__PLAN_CHECK_MAX_ROUNDS])r, n,
                                                                         want)) {
      say(opts, "  the runs of one side spread more than %.0f%%: two rounds more", 100 * SL__PLAN_CHECK_SPREAD);
      want += 2;
    }
  }
  o->rounds = k;
  for (int s = 0; s < n; s++) {
    med[s] = sl__plan_median(r[s], k); /* sorts r[s] */
    o->lo[s] = r[s][0];
    o->hi[s] = r[s][k - 1];
    o->median_cpu[s] = sl__plan_median(c[s], k);
  }
  return 0;
}

static int alternate(double *ma, double *mb, sl_pipeline *a, sl_pipeline *b, int rounds, double secs,
                     const sl_machine *m, bool *rep, double least_cpu[2], double median_cpu[2],
                     const sl_optimize_opts *opts, const char *const names[2]) {
  sl_pipeline *q[2] = {a, b};
  double med[2] = {0, 0};
  alt_out o;
  int rc = alternate_n(med, q, 2, rounds, rounds, secs, m, rep, &o, opts, names);
  *ma = med[0];
  *mb = med[1];
  for (int s = 0; s < 2; s++) {
    if (least_cpu) least_cpu[s] = o.least_cpu[s];
    if (median_cpu) median_cpu[s] = o.median_cpu[s];
  }
  return rc;
}

/* The pipeline of plan's spec. */
static int plan_pipeline(sl_pipeline **q, const sl_plan *plan, const sl_pipeline *p) {
  char *js = NULL;
  int rc = sl_plan_spec_json(&js, plan);
  if (!rc) rc = sl_pipeline_from_json(q, js, strlen(js), sl__pipeline_origin(p));
  sl__free(js);
  return rc;
}

/* Plan a against challenger b, run alternately (SL__PLAN_CHECK_ROUNDS short runs each, medians): *b_won when b's
 * median is higher, or within SL__PLAN_TIE of a's at clearly less CPU per element (sl__plan_prefer). One run each,
 * as the candidates were first measured, cannot tell 5% apart on a shared machine, and three do not tell 3%:
 * transformer's plan with tokenize at 2 workers and its all-sequential challenger ran 6,596 and 6,599 elem/s, the
 * first at 265 us of CPU per element, the second at 153; in the bench's longer runs the first then ran 0.89x the
 * sequential configuration. */
static int runoff(bool *b_won, const sl_plan *a, const sl_plan *b, const sl_pipeline *p, const sl_optimize_opts *opts,
                  const sl_machine *m, bool *rep) {
  *b_won = false;
  sl_pipeline *qa = NULL, *qb = NULL;
  double ma = 0, mb = 0, cpu[2] = {0, 0};
  int rc = plan_pipeline(&qa, a, p);
  if (!rc) rc = plan_pipeline(&qb, b, p);
  if (!rc)
  {
    static const char *const names[2] = {"plan", "challenger"};
    say(opts, "runoff: the plan against the best challenger, alternating, %d runs of %.1f s each", SL__PLAN_CHECK_ROUNDS,
        opts->measure_seconds / SL__PLAN_CHECK_ROUNDS);
    rc = alternate(&ma, &mb, qa, qb, SL__PLAN_CHECK_ROUNDS, opts->measure_seconds / SL__PLAN_CHECK_ROUNDS, m, rep,
                   NULL, cpu, opts, names);
  }
  sl_pipeline_free(qa);
  sl_pipeline_free(qb);
  if (!rc) *b_won = sl__plan_prefer(ma, cpu[0], mb, cpu[1]);
  return rc;
}

/* One optimize run's state, handed from step to step. */
typedef struct opt_run {
  const sl_optimize_opts *opts;
  sl_pipeline *p;                /* the pipeline planned: the fused one when fusion is kept */
  sl_pipeline *written;          /* the caller's pipeline, as written (unfused) */
  double written_rate;           /* throughput of the written pipeline's trace when fusion was kept (0: not traced) */
  sl_pipeline *fused;            /* owned, or NULL */
  sl_optimize_result res;
  sl_trace *t0, *ts, *tc;        /* the input's trace, its sequential variant's, costs refreshed from runs */
  const sl_trace *tb;            /* the trace the model is built on (ts, else t0) */
  sl_plan *plan, *best;
  double best_measured, best_share, hscale;
  double least_cpu[2];           /* the least process CPU per element of the final check's runs: input, plan */
  bool rep;                      /* the input may end within a run: traces and measurements run it under a repeat */
  bool cache_priced;             /* the ops after a cache the plan added were priced from a run of a plan with it */
} opt_run;

/* The input's trace (the caller's, or one taken now), long enough, and the fusion kept only where it pays. */
static int opt_trace_input(opt_run *r, sl_pipeline *unfused) {
  const sl_optimize_opts *opts = r->opts;
  int rc;
  if (opts->trace) {
    /* Start from the caller's trace: a copy, checked against the pipeline. */
    char *js = NULL;
    if ((rc = sl_trace_check_spec(opts->trace, r->p)) || (rc = sl_trace_to_json(&js, opts->trace))) return rc;
    rc = sl_trace_from_json(&r->t0, js, strlen(js), opts->trace->origin);
    sl__free(js);
  } else {
    say(opts, "tracing the input%s for %.1f s (after %.1f s of warm-up)", r->fused ? " fused" : "",
        opts->trace_seconds, trace_warmup(opts->trace_seconds));
    rc = trace_of(&r->t0, r->p, opts->trace_seconds, trace_warmup(opts->trace_seconds), opts->machine, false, 0);
    if (!rc)
      say(opts, "  %llu elements, %.1f elem/s", (unsigned long long)r->t0->elements, sl_trace_throughput(r->t0));
  }
  if (!rc && sl__trace_counts(r->t0, NULL) == SL__COUNT_SHORT && !opts->trace)
    say(opts, "too few elements to plan from (%d needed): tracing again, longer%s", SL_PLAN_MIN_ELEMENTS,
        r->t0->ended ? " and repeated" : "");
  else if (!rc && r->t0->ended && !opts->trace)
    say(opts, "the input ended after %llu elements: tracing it again, repeated (and measuring it repeated)",
        (unsigned long long)r->t0->elements);
  if (rc || (rc = long_enough(&r->t0, &r->rep, r->p, opts))) return rc;
  /* Fusion must pay on this data: the unfused input is traced as long, and the fused one kept only when it spent
   * no more process CPU per element (a fused op that cannot decode at a smaller DCT scale decodes and resizes as
   * the two ops did, and may cost more: docs/planner.md). */
  if (!r->fused) return 0;
  sl_trace *tu = NULL;
  say(opts, "tracing the input as written (unfused) for %.1f s: does fusion pay?", r->t0->seconds);
  if ((rc = trace_of(&tu, unfused, r->t0->seconds, trace_warmup(opts->trace_seconds), &r->t0->machine, r->rep, 0)))
    return rc;
  r->res.fused_cpu = sl__plan_trace_cpu(r->t0);
  r->res.unfused_cpu = sl__plan_trace_cpu(tu);
  r->written_rate = sl_trace_throughput(tu);
  say(opts, "  fused %.1f us of CPU per element, unfused %.1f us", r->res.fused_cpu * 1e6, r->res.unfused_cpu * 1e6);
  if (sl__trace_counts(tu, NULL) != SL__COUNT_SHORT && r->res.unfused_cpu > 0 && r->res.unfused_cpu < r->res.fused_cpu) {
    sl_trace_free(r->t0);
    r->t0 = tu;
    r->p = unfused;
    sl_pipeline_free(r->fused);
    r->fused = NULL;
    r->written_rate = 0;
  } else {
    sl_trace_free(tu);
    r->res.fused = true;
  }
  return 0;
}

/* The model's costs come from the sequential variant when the input has thread boundaries to remove. */
static int opt_seq_costs(opt_run *r) {
  sl_pipeline *q = NULL;
  int rc = seq_variant(&q, r->t0, r->p, &r->opts->plan);
  if (rc || !q) return rc;
  const sl_trace *t0 = r->t0;
  say(r->opts, "tracing its sequential variant for %.1f s (the ops' own costs, without hand-offs)", t0->seconds);
  rc = trace_of(&r->ts, q, t0->seconds, trace_warmup(t0->seconds), &t0->machine, r->rep, 0);
  if (!rc && sl__trace_counts(r->ts, NULL) == SL__COUNT_SHORT) { /* the sequential variant is slower: trace longer */
    sl_trace_free(r->ts);
    r->ts = NULL;
    rc = trace_of(&r->ts, q, SL__PLAN_MAX_TRACE, trace_warmup(t0->seconds), &t0->machine, r->rep,
                  (int64_t)(1.5 * SL_PLAN_MIN_ELEMENTS));
  }
  sl_pipeline_free(q);
  if (!rc) keep_autotune_marks(r->ts, t0);
  return rc;
}

/* Keeps the measured plan as the best so far, unless an earlier one measured clearly faster (a later plan is solved
 * on better-calibrated costs; runs on a shared machine differ by several per cent). Takes r->plan either way. */
static void opt_keep_best(opt_run *r, double measured, double share, double cpu, double load) {
  if (!r->best || measured > 0.9 * r->best_measured) {
    sl_plan_free(r->best);
    r->best = r->plan;
    r->best_measured = measured;
    r->best_share = share;
    r->res.measured_cpu = cpu;
    r->res.measure_other_load = load;
  } else {
    sl_plan_free(r->plan);
  }
  r->plan = NULL;
}

/* Measures the model's plan and solves again on what the run taught while it is off, at most max_retraces times;
 * leaves the best in r->best. */
static int opt_measure_rounds(opt_run *r) {
  const sl_optimize_opts *opts = r->opts;
  int rc;
  for (;;) {
    sl_trace *tm = NULL;
    say(opts, "measuring the plan of solve %d for %.1f s (predicted %.1f elem/s)", r->res.rounds, opts->measure_seconds,
        sl_plan_predicted(r->plan));
    if ((rc = measure_plan(&tm, r->plan, r->p, opts, &r->t0->machine, &r->rep))) return rc;
    double measured = sl_trace_throughput(tm);
    say(opts, "  measured %.1f elem/s, %.1f us of CPU per element (model %.1f)", measured,
        sl__plan_trace_cpu(tm) * 1e6, sl_plan_cpu_per_element(r->plan) * 1e6);
    if (tm->machine.other_load > r->res.other_load) r->res.other_load = tm->machine.other_load;
    double hcpu = sl__plan_handoff_cpu(r->plan), mcpu = sl_plan_cpu_per_element(r->plan);
    double cpu = sl__plan_trace_cpu(tm);
    /* What this plan should have reached on the cores other processes left it: a shortfall that their load
     * explains is no reason to doubt the model. */
    double expect = expect_on(r->plan, tm->machine.other_load);
    if (isnan(expect)) {
      sl_trace_free(tm);
      return SL_ENOMEM;
    }
    /* The hand-offs cost more CPU than the model charged: its choice between thread boundaries and none may be
     * wrong even when the throughput looked right (a noisy run can flatter a plan; CPU per element is steadier). */
    bool cpu_off = hcpu > 0 && (cpu > 1.1 * mcpu || cpu < 0.9 * mcpu) && opts->plan.handoff == 0;
    double share = run_share(r->plan, tm);
    bool reprice = r->plan->cache_at >= 0 && !r->cache_priced;
    opt_keep_best(r, measured, share, cpu, tm->machine.other_load);
    /* Off either way: a model that undersells its plan is as untrue as one that oversells it, and its next solve
     * may pick other knobs on the corrected costs.
     * A cache the plan added changes what the ops after it cost: priced from the trace of the uncached input, where
     * they are a few per cent of its CPU (imagenet-cacheable: 5 ms a batch against 95 for the decode before the
     * cache), their sampled costs were 2-12% over what the cached plan's runs spent in all six runs of the advice
     * bench, and its predictions 0.76-0.99 of measured. The first run of a cached plan prices them: refresh and
     * solve again, once. */
    if ((measured >= 0.9 * expect * share && measured <= 1.1 * expect && !cpu_off && !reprice) ||
        r->res.rounds > opts->max_retraces) {
      sl_trace_free(tm);
      return 0;
    }
    /* Measured fell short (or beat the model): its costs were off under the new configuration. When the plan has
     * thread boundaries, the process CPU the run spent beyond the ops' own costs is what its hand-offs cost here
     * (locks, wake-ups, cache misses, contention): learn that and solve again. When the run spent less than the
     * model's ops alone, or there are no boundaries, the ops' costs were off: refresh them from the run. */
    r->cache_priced = r->cache_priced || reprice;
    if (!reprice && hcpu > 0 && cpu > 0 && opts->plan.handoff == 0 && cpu >= mcpu - hcpu) {
      double excess = cpu - (mcpu - hcpu);
      r->hscale *= fmin(fmax(excess / hcpu, 0.05), 100.0);
    } else {
      sl_trace *tn = NULL;
      rc = refresh_costs(&tn, r->tc ? r->tc : r->tb, tm);
      if (rc) {
        sl_trace_free(tm);
        return rc;
      }
      sl_trace_free(r->tc);
      r->tc = tn;
    }
    sl_trace_free(tm);
    if ((rc = sl__plan_solve(&r->plan, r->tc ? r->tc : r->tb, &opts->plan, r->hscale))) return rc;
    r->plan->seq_trace = r->ts != NULL;
    r->res.rounds++;
    if (reprice)
      say(opts, "the ops after the cache were priced from the uncached input: solved again on this run's costs "
                "(solve %d)", r->res.rounds);
    else
      say(opts, "off by more than 10%%: solved again on what the run taught (solve %d)", r->res.rounds);
  }
}

/* Whether plans a and b, solved on traces of one pipeline, have the same threads, interleave cycles, cache and
 * root prefetch: at most their buffers' depths differ (the log says which). */
static bool same_shape(const sl_plan *a, const sl_plan *b) {
  if (a->nops != b->nops || a->cache_at != b->cache_at || a->add_prefetch != b->add_prefetch) return false;
  for (int i = 0; i < a->nops; i++)
    if (a->par[i] != b->par[i] || a->cyc[i] != b->cyc[i]) return false;
  return true;
}

/* The all-sequential challenger, kept, when it has a cache it added: priced on the base trace, the ops after its
 * cache cost what they did on the uncached input, a few per cent of its CPU there and noisy (beside a CPU hog,
 * imagenet-cacheable's sequential plan was predicted at 0.65 and 0.68 of what it measured, its model's CPU per
 * element 1.27-1.30 of the runs'). Its own run prices it (everything on one thread: no hand-offs in the costs); the
 * plan solved on those costs replaces it when it is the same configuration, which was the one measured. */
static int reprice_sequential(opt_run *r, const sl_trace *run) {
  sl_trace *tn = NULL;
  sl_plan *q = NULL;
  char *a = NULL, *b = NULL;
  int rc = refresh_costs(&tn, r->tb, run);
  if (!rc) rc = sequential_plan(&q, tn, &r->opts->plan, r->hscale);
  if (!rc) rc = sl_plan_spec_json(&a, r->best);
  if (!rc) rc = sl_plan_spec_json(&b, q);
  if (!rc && !strcmp(a, b)) {
    q->seq_trace = r->best->seq_trace;
    say(r->opts, "the all-sequential plan priced from its own run (its cache's ops were priced uncached): predicted "
                 "%.1f elem/s, was %.1f", sl_plan_predicted(q), sl_plan_predicted(r->best));
    sl_plan_free(r->best);
    r->best = q;
    q = NULL;
  } else if (!rc) {
    /* What differs, for the log: imagenet-cacheable's sequential plan beside a hog kept the base trace's price
     * this way, 7.9 ms a batch against 5.6 spent (predicted / measured 0.72), and which knob moved was not said. */
    char what[96] = "its threads or interleave cycles";
    if (same_shape(r->best, q))
      snprintf(what, sizeof what, "only its buffers' depths");
    else if (r->best->cache_at != q->cache_at)
      snprintf(what, sizeof what, "its cache (after ops[%d], now ops[%d])", r->best->cache_at, q->cache_at);
    else if (r->best->add_prefetch != q->add_prefetch)
      snprintf(what, sizeof what, "its root prefetch (%s)", q->add_prefetch ? "added" : "dropped");
    say(r->opts, "the all-sequential plan, priced from its own run, would change %s: kept as measured", what);
  }
  sl__free(a);
  sl__free(b);
  sl_plan_free(q);
  sl_trace_free(tn);
  return rc;
}

/* Challengers of the model's plan, each measured once: the model prices time-sharing and hand-offs only
 * approximately, and a few per cent separate these on a busy machine.
 *  - every tunable op at a worker per core (Plumber's heuristic, what tf.data users write by hand);
 *  - every tunable parallelism at 1 (worker threads must earn their hand-offs on this machine);
 *  - the plan without the root prefetch it added, when no consumer is planned for (the measured runs have
 *    none: a prefetch then only hands each element across threads).
 * The best of them and the model's plan are then run alternately and the higher median wins (see runoff()). */
static int opt_challengers(opt_run *r) {
  const sl_optimize_opts *opts = r->opts;
  sl_plan *ch[3] = {NULL, NULL, NULL};
  const sl_trace *tt = r->tc ? r->tc : r->tb;
  int rc = sl__plan_solve(&ch[0], tt, &opts->plan, r->hscale);
  if (!rc) {
    int fr = sl__plan_force_parallelism(ch[0], (int64_t)ceil(ch[0]->C));
    if (fr < 0) rc = fr;
    if (fr != 0) sl_plan_free(ch[0]), ch[0] = NULL; /* fr > 0: already at a worker per core */
  }
  /* Priced on the model's base trace (the sequential variant's, when traced): that configuration measured as it
   * is. Costs refreshed from a run of the parallel plan carry its contention: beside a CPU hog, tabular's ran 7.9 ms
   * of CPU a batch at 2 workers against 4.0 sequential, and its all-sequential plan, kept, was predicted at 0.68 of
   * what it measured. */
  if (!rc && has_workers(r->best)) rc = sequential_plan(&ch[1], r->tb, &opts->plan, r->hscale);
  if (!rc && r->best->add_prefetch && opts->plan.consumer_cores == 0) {
    sl_plan_opts np = opts->plan;
    np.no_prefetch = true;
    rc = sl__plan_solve(&ch[2], tt, &np, r->hscale);
  }
  sl_plan *top = NULL;
  sl_trace *seq_run = NULL; /* the all-sequential challenger's run, while it is the top one */
  double top_measured = -1, top_cpu = 0, top_load = 0, top_share = 1;
  static const char *const what[3] = {"a worker per core", "all sequential", "no root prefetch"};
  for (int k = 0; k < 3 && !rc; k++) {
    if (!ch[k]) continue;
    ch[k]->seq_trace = r->ts != NULL;
    sl_trace *tm = NULL;
    say(opts, "measuring a challenger (%s) for %.1f s", what[k], opts->measure_seconds);
    if ((rc = measure_plan(&tm, ch[k], r->p, opts, &r->t0->machine, &r->rep))) break;
    double measured = sl_trace_throughput(tm), cpu = sl__plan_trace_cpu(tm);
    say(opts, "  measured %.1f elem/s (the plan: %.1f)", measured, r->best_measured);
    if (tm->machine.other_load > r->res.other_load) r->res.other_load = tm->machine.other_load;
    if (!top || sl__plan_prefer(top_measured, top_cpu, measured, cpu)) {
      sl_plan_free(top);
      top = ch[k];
      ch[k] = NULL;
      top_measured = measured;
      top_cpu = cpu;
      top_load = tm->machine.other_load;
      top_share = run_share(top, tm);
      sl_trace_free(seq_run);
      seq_run = NULL;
      if (k == 1) seq_run = tm, tm = NULL;
    }
    sl_trace_free(tm);
    r->res.rounds++;
  }
  for (int k = 0; k < 3; k++) sl_plan_free(ch[k]);
  bool won = false;
  /* A challenger far behind in its one run is out; one close to or ahead of the plan runs off against it. */
  if (!rc && top && top_measured >= 0.9 * r->best_measured)
    rc = runoff(&won, r->best, top, r->p, opts, &r->t0->machine, &r->rep);
  if (!rc && won) {
    sl_plan_free(r->best);
    r->best = top;
    top = NULL;
    r->best_measured = top_measured;
    r->best_share = top_share;
    r->res.measured_cpu = top_cpu;
    r->res.measure_other_load = top_load;
    if (seq_run && r->best->cache_at >= 0) rc = reprice_sequential(r, seq_run);
  }
  sl_plan_free(top);
  sl_trace_free(seq_run);
  return rc;
}

/* Never slower than what the caller gave. One run each decides little on a shared machine: the plan (r->plan) and
 * the input are run alternately, SL__PLAN_CHECK_ROUNDS short runs each, and compared by their medians. When the
 * plan's median is below SL_PLAN_KEEP_RATIO of the input's, the result is the input's own configuration
 * ("autotune" knobs at the values they resolved to), unless the input holds more than the memory budget. The
 * caller's --cores/--consumer-cores do not exempt a plan: the runs here have no consumer either.
 * When fusion was kept, the input as written (unfused) runs in the same alternation: the speed-up is over the spec
 * as written, and fusion's part (the fused input against it) and the knobs' (the plan against the fused input) are
 * each measured. (Before, the baseline was the fused input: `make demo` said 1.02x where its own runs of the spec
 * as written and of the plan measured 1.49x apart.) */
static int opt_final_check(opt_run *r) {
  const sl_optimize_opts *opts = r->opts;
  sl_optimize_result *res = &r->res;
  sl_pipeline *q = NULL;
  char *js = NULL;
  double secs = opts->measure_seconds / SL__PLAN_CHECK_ROUNDS;
  double med[SL__PLAN_MAX_SIDES] = {0};
  alt_out o;
  memset(&o, 0, sizeof o);
  int rc = sl_plan_spec_json(&js, r->plan);
  if (rc) return rc;
  rc = sl_pipeline_from_json(&q, js, strlen(js), sl__pipeline_origin(r->p));
  sl__free(js);
  /* Sides: [the input as written,] the input (fused when fusion was kept), the plan. */
  bool three = res->fused && r->written && r->written != r->p;
  sl_pipeline *sides[SL__PLAN_MAX_SIDES] = {r->written, r->p, q};
  static const char *const names[SL__PLAN_MAX_SIDES] = {"input as written", "input fused", "plan"};
  static const char *const names2[2] = {"input", "plan"};
  int off = three ? 0 : 1, n = three ? 3 : 2;
  if (!rc) {
    say(opts, "final check: %s and the plan, alternating, %d runs of %.1f s each",
        three ? "the input as written, the input fused" : "the input", SL__PLAN_CHECK_ROUNDS, secs);
    rc = alternate_n(med, sides + off, n, SL__PLAN_CHECK_ROUNDS, SL__PLAN_CHECK_MAX_ROUNDS, secs, &r->t0->machine,
                     &r->rep, &o, opts, three ? names : names2);
  }
  sl_pipeline_free(q);
  if (rc) return rc;
  /* Indices into the results: the input planned from (fused or not) and the plan. */
  int ii = three ? 1 : 0, ip = three ? 2 : 1;
  double mi = med[ii], mp = med[ip];
  res->baseline = three ? med[0] : mi;
  res->fused_baseline = three ? mi : 0;
  res->measured = mp;
  res->checked = true;
  res->check_rounds = o.rounds;
  res->measured_lo = o.lo[ip];
  res->measured_hi = o.hi[ip];
  r->least_cpu[0] = o.least_cpu[ii];
  r->least_cpu[1] = o.least_cpu[ip];
  /* The CPU per element of the runs the measured throughput comes from. And the input's, against its own trace's:
   * the same work, so a change there is the machine's speed, not the plan's, and the prediction, made at the
   * trace's speed, is told apart from it. */
  if (o.median_cpu[ip] > 0) res->measured_cpu = o.median_cpu[ip];
  res->input_cpu_traced = sl__plan_trace_cpu(r->t0);
  res->input_cpu_checked = o.median_cpu[ii];
  say(opts, "  medians: %s%.1f elem/s, the plan %.1f", three ? "as written " : "input ", res->baseline, mp);
  if (mp >= SL_PLAN_KEEP_RATIO * mi) return 0;
  sl_plan *in = NULL;
  if ((rc = sl__plan_solve(&in, r->t0, &opts->plan, r->hscale)) || (rc = sl__plan_as_traced(in))) {
    sl_plan_free(in);
    return rc;
  }
  if (in->mem > in->M) {
    sl_plan_free(in);
    return 0;
  }
  sl_plan_free(r->plan);
  r->plan = in;
  res->measured = mi;
  res->measured_lo = o.lo[ii];
  res->measured_hi = o.hi[ii];
  res->measured_cpu = o.median_cpu[ii] > 0 ? o.median_cpu[ii] : res->input_cpu_traced;
  res->measure_other_load = r->t0->machine.other_load;
  res->kept_input = true;
  r->least_cpu[1] = r->least_cpu[0]; /* the runs of the input are the runs of this plan */
  return 0;
}

/* The final plan's figures. The bound holds for runs that spend at least its CPU per element (throughput <= cores /
 * CPU per element). A measured run of the final plan that spent less (decode costs that vary with the data, caches
 * warmer than in the trace, a run past its warm-up) could exceed it: the bound is then taken at the least CPU per
 * element any run of the final plan spent, and the result says so. */
static int opt_result(opt_run *r) {
  sl_optimize_result *res = &r->res;
  sl_plan *plan = r->plan;
  res->predicted = res->predicted_all = sl_plan_predicted(plan);
  res->predicted_cores = sl__plan_load_cores(plan->C, plan->machine.other_load,
                                             res->measured > 0 ? res->measure_other_load : -1, &res->cores_from_run);
  bool unused;
  res->trace_cores = sl__plan_load_cores(plan->C, plan->machine.other_load, -1, &unused);
  if (res->predicted_cores != plan->C) { /* traced beside other load: count on what it leaves */
    res->predicted = sl_plan_predict_on(plan, res->predicted_cores);
    if (isnan(res->predicted)) return SL_ENOMEM;
  }
  res->bound = sl_plan_bound(plan);
  res->core_share = plan->core_share;
  double least = res->measured_cpu;
  if (r->least_cpu[1] > 0 && (least <= 0 || r->least_cpu[1] < least)) least = r->least_cpu[1];
  res->model_cpu = sl_plan_cpu_per_element(plan);
  double at_run = sl__plan_bound_at_run(sl_plan_limit(plan), plan->C, res->bound, res->model_cpu, least);
  if (at_run > res->bound) {
    res->bound = at_run;
    res->bound_from_run = true;
  }
  if (res->measured > 0 && res->measure_other_load >= 0)
    res->predicted_free = sl_plan_predict_on(plan, fmax(plan->C - res->measure_other_load, 0.05));
  return isnan(res->predicted_free) ? SL_ENOMEM : 0;
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
  opt_run r = {.opts = &o, .p = p, .written = p, .best_measured = -1, .best_share = 1, .hscale = 1};
  /* Fusion first (plan_fuse.c): everything below traces and plans the fused pipeline. A given trace is of the
   * unfused one, so then nothing is fused. */
  if (!o.trace && (rc = sl__plan_fuse(&r.fused, p))) return rc;
  if (r.fused) r.p = r.fused;
  if ((rc = opt_trace_input(&r, p))) goto done;
  /* Measured runs need as many elements as a trace: a slow pipeline is measured for longer. */
  if (o.measure_seconds > 0 && sl_trace_throughput(r.t0) > 0)
    o.measure_seconds = fmax(o.measure_seconds, fmin(1.5 * SL_PLAN_MIN_ELEMENTS / sl_trace_throughput(r.t0),
                                                     SL__PLAN_MAX_TRACE));
  r.res.trace_elements = r.t0->elements;
  /* Over the spec as written: with fusion kept, its unfused trace (the final check measures all three). */
  r.res.baseline = sl_trace_throughput(r.t0);
  if (r.res.fused && r.written_rate > 0) {
    r.res.fused_baseline = r.res.baseline;
    r.res.baseline = r.written_rate;
  }
  r.res.other_load = r.t0->machine.other_load;
  if ((rc = opt_seq_costs(&r))) goto done;
  r.tb = r.ts ? r.ts : r.t0;
  say(&o, "solving the model (LP bound, cache, integer parallelism, buffers)");
  if ((rc = sl__plan_solve(&r.plan, r.tb, &o.plan, r.hscale))) goto done;
  r.plan->seq_trace = r.ts != NULL;
  r.res.rounds = 1;
  say(&o, "  bound %.1f elem/s (limited by %s), predicted %.1f", sl_plan_bound(r.plan), sl_plan_limit(r.plan),
      sl_plan_predicted(r.plan));
  if (o.measure_seconds > 0) {
    if ((rc = opt_measure_rounds(&r)) || (rc = opt_challengers(&r))) goto done;
    r.plan = r.best;
    r.best = NULL;
    r.res.measured = r.best_measured;
    if ((rc = sl__plan_set_core_share(r.plan, r.best_share)) || (rc = opt_final_check(&r))) goto done;
  }
  if ((rc = opt_result(&r))) goto done;
  *out = r.plan;
  r.plan = NULL;
done:
  r.res.repeated_input = r.rep; /* a run may have found the end the traces did not reach */
  if (o.result) *o.result = r.res;
  sl_plan_free(r.plan);
  sl_plan_free(r.best);
  sl_trace_free(r.t0);
  sl_trace_free(r.ts);
  sl_trace_free(r.tc);
  sl_pipeline_free(r.fused);
  return rc;
}

double sl__plan_bound_at_run(const char *limit, double C, double bound, double model_cpu, double run_cpu) {
  if (!(run_cpu > 0) || !limit) return bound;
  if (!strcmp(limit, "cpu")) return C / run_cpu > bound ? C / run_cpu : bound;
  /* A bound set by the work of one thread scales with the CPU per element as well (tabular's plan, all on one
   * thread, measured 1.53x a bound its trace had set at 6.7 ms per element; its runs spent 4.5: the same program,
   * on this VM 25% slower or faster from one 3 s window to the next). */
  if ((!strcmp(limit, "sequential") || !strcmp(limit, "serial")) && run_cpu < model_cpu) return bound * model_cpu / run_cpu;
  return bound;
}

/* The trace shows what other processes take beside the input, which may leave them cores it never wanted; a plan
 * for every core contends for those, and Linux's fair scheduler makes the others yield some. Beside a one-thread
 * `yes`, spin4's input left it 1.0 of 2 cores while the plan, run beside it, got 1.15-1.18: counting on the trace's
 * 1.0 predicted 12-18% under the measured rate in three runs. A model of the scheduler's split between a hog and
 * threads that block and wake at every hand-off (per-thread fairness would give the plan 1.44) did not fit; the
 * plan's own run beside the load measures it. */
double sl__plan_load_cores(double C, double trace_other, double run_other, bool *from_run) {
  *from_run = false;
  if (!(trace_other >= SL_PLAN_LOAD_CORES)) return C;
  double other = trace_other;
  if (run_other >= 0) {
    other = run_other;
    *from_run = true;
  }
  return other >= SL_PLAN_LOAD_CORES ? fmax(C - other, 0.05) : C;
}

double sl__plan_learn_share(double used, double avail) {
  if (!(used > 0) || !(avail > 0)) return 1;
  /* 99% busy is every core busy (the process's own start-up and clock reads): no share to learn, nor to print as
   * "100% of the cores". */
  if (used >= 0.99 * avail) return 1;
  return fmax(used / avail, 0.5);
}

int sl_pipeline_optimize(sl_pipeline *p, const sl_optimize_opts *opts) {
  if (opts && opts->report) *opts->report = NULL;
  sl_plan *plan = NULL;
  int rc = sl_optimize(&plan, p, opts);
  if (rc) return rc;
  char *spec = NULL;
  sl_pipeline *q = NULL;
  rc = sl_plan_spec_json(&spec, plan);
  if (!rc && opts && opts->report) rc = sl_plan_report(opts->report, plan, true);
  sl_plan_free(plan);
  if (!rc) rc = sl_pipeline_from_json(&q, spec, strlen(spec), sl__pipeline_origin(p));
  sl__free(spec);
  if (rc) {
    if (opts && opts->report) {
      sl__free(*opts->report);
      *opts->report = NULL;
    }
    return rc;
  }
  /* The caller's handle now holds the planned pipeline. */
  sl__pipeline_replace(p, q);
  return 0;
}
