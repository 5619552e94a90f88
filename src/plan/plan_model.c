/* plan/plan_model.c: the Plumber model of a traced pipeline. From a trace: visit ratios, CPU cost per output
 * element, the threads each op's work runs on ("units": a sequential thread, or a worker pool of some
 * parallelism), the throughput of a configuration, the memory it holds, and the bottleneck. The LP is in
 * plan_lp.c, the integer knobs in plan_search.c, the solver in plan_solve.c; docs/planner.md explains the choices. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_int.h"

/* A sequential thread is planned to use this much of a core when threads exceed cores. */
#define SEQ_HEADROOM 0.75
/* Seconds to hand out one element from an in-memory cache (a reference count). */
#define CACHE_READ_S 2e-7

static bool knob_auto(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_string(v) && !strcmp(json_string_value(v), "autotune");
}

static int64_t knob_int(json_t *o, const char *key, int64_t def) {
  json_t *v = json_object_get(o, key);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

/* The hand-off cost per element for elements that cost `d` CPU seconds each to make. */
static double handoff_for(const sl_plan *P, double d) {
  return P->hscale * (d < SL__PLAN_CHEAP_ELEMENT_S ? P->handoff_cheap : P->handoff);
}

int64_t sl__plan_buffer_of(const sl_plan *P, int i) {
  return P->ops[i].kind == SL__MK_MAP && P->par[i] <= 1 ? 0 : P->buf[i];
}

bool sl__plan_upstream(const sl_plan *P, int j, int k) {
  for (int x = j; x >= 0; x = P->ops[x].parent)
    if (x == k) return true;
  return false;
}

/* Visit ratios (elements an op makes per output element), from the root down: an op's input makes as many per
 * element of the op as the trace saw, except that a shuffle or prefetch only buffers, so in steady state it passes
 * on one element per element it takes. A short trace of a filling shuffle buffer would otherwise charge the output
 * with upstream elements that are still in the buffer (a 1024-element buffer filled at 300 elements/s is 3 s). */
static void visit_ratios(sl_plan *P, int i, double v) {
  sl__pm_op *o = &P->ops[i];
  o->V = v;
  bool pass = sl__plan_kind_buffers(o->kind);
  int kids[2] = {o->input, o->source};
  for (int k = 0; k < 2; k++) {
    int c = kids[k];
    if (c < 0) continue;
    double r = P->ops[c].n / (o->n > 0 ? o->n : P->N);
    visit_ratios(P, c, pass ? v : o->n > 0 ? v * r : r);
  }
}

/* The thread an op's work ran on in the trace, as a group number: an op's input shares its thread unless the op
 * pulls it on threads of its own (prefetch, parallel map), and so does a nested source unless a parallel
 * interleave runs it. */
static void thread_groups(const sl_plan *P, int i, int g, int *next, int *grp) {
  const sl__pm_op *o = &P->ops[i];
  grp[i] = g;
  bool own_input = o->kind == SL__MK_PREFETCH || (o->kind == SL__MK_MAP && o->async0);
  if (o->input >= 0) thread_groups(P, o->input, own_input ? (*next)++ : g, next, grp);
  if (o->source >= 0) thread_groups(P, o->source, o->kind == SL__MK_INTERLEAVE && o->async0 ? (*next)++ : g, next, grp);
}

/* Per-op own times are sampled estimates (a light op's from few timed calls, each of which a preemption can
 * stretch), so an op's own wall and CPU can each be off by a few per cent of its thread's time: a cheap op can show
 * wall well above its CPU while a neighbour shows the reverse. When the thread as a whole spent no more wall than CPU (stretched by the runqueue delay), none of its
 * ops waited on I/O: they are all CPU-bound. */
static void no_phantom_waits(sl_plan *P) {
  int *grp = sl__calloc((size_t)P->nops, sizeof *grp);
  if (!grp) return; /* keeps the per-op verdicts */
  int next = 1;
  thread_groups(P, P->root, 0, &next, grp);
  for (int g = 0; g < next; g++) {
    double w = 0, c = 0, v = 0;
    for (int i = 0; i < P->nops; i++)
      if (grp[i] == g) {
        w += P->ops[i].busy_wall;
        c += P->ops[i].stretch * P->ops[i].c;
        if (P->ops[i].V > v) v = P->ops[i].V;
      }
    if (w <= 1.25 * c + 20e-6 * v)
      for (int i = 0; i < P->nops; i++)
        if (grp[i] == g) P->ops[i].tt = P->ops[i].c;
  }
  sl__free(grp);
}

/* The plan's nodes from the trace's ops: what each is (its declared model kind and tunable knobs) and its
 * per-element figures as traced. */
static int model_ops(sl_plan *P, const sl_trace *t, const sl_plan_opts *opts) {
  P->root = -1;
  for (int i = 0; i < t->nops; i++) {
    const sl_op_stats *s = &t->ops[i].s;
    sl__pm_op *o = &P->ops[i];
    P->strs[3 * i] = sl__strdup(s->path);
    P->strs[3 * i + 1] = sl__strdup(s->label);
    P->strs[3 * i + 2] = sl__strdup(s->op);
    if (!P->strs[3 * i] || !P->strs[3 * i + 1] || !P->strs[3 * i + 2]) return sl__oom("a plan");
    o->path = P->strs[3 * i];
    o->label = P->strs[3 * i + 1];
    o->op = P->strs[3 * i + 2];
    o->kind = sl__op_model(s->op);
    o->has_par = sl__op_tunable(s->op, "parallelism");
    o->has_buf = sl__op_tunable(s->op, "buffer");
    o->has_cyc = sl__op_tunable(s->op, "cycle_length");
    o->parent = s->parent;
    o->input = o->source = -1;
    o->nested = s->nested;
    o->random = s->random;
    o->serial = s->serial;
    o->par0 = s->parallelism;
    o->async0 = s->async;
    o->buf0 = s->buffer;
    o->card = s->cardinality;
    json_t *js = sl__spec_op_at(P->spec, s->path);
    if (!js) return sl__err(SL_EINVAL, "trace: %s is not an op of the traced spec", s->path);
    o->par_tunable = o->has_par && (!sl__plan_only_autotune(opts) || t->ops[i].par_autotune);
    o->buf_tunable = o->has_buf &&
                     (!sl__plan_only_autotune(opts) || t->ops[i].buf_autotune);
    o->cyc_tunable = o->has_cyc && knob_auto(js, "cycle_length");
    o->cyc0 = knob_int(js, "cycle_length", o->par0);
    o->batch_size = o->kind == SL__MK_BATCH ? knob_int(js, "size", 1) : 0;
    o->shuffle_buf = o->kind == SL__MK_SHUFFLE ? knob_int(js, "buffer", 1) : 0;
    o->n = (double)s->elements_out;
    o->d = o->n > 0 ? s->cpu_seconds / o->n : 0;
    o->bytes = o->n > 0 ? (double)s->bytes_out / o->n : 0;
    o->cv = s->call_mean > 0 ? s->call_sd / s->call_mean : 0;
    if (s->parent == -1) P->root = i;
  }
  if (P->root < 0) return sl__err(SL_EINVAL, "trace: no root op");
  return 0;
}

/* Children: an op whose path extends its parent's with ".source" is the parent's nested source. */
static void model_links(sl_plan *P) {
  for (int i = 0; i < P->nops; i++) {
    int p = P->ops[i].parent;
    if (p < 0) continue;
    size_t lp = strlen(P->ops[p].path);
    if (!strncmp(P->ops[i].path, P->ops[p].path, lp) && !strncmp(P->ops[i].path + lp, ".source", 7))
      P->ops[p].source = i;
    else
      P->ops[p].input = i;
  }
}

int sl__trace_counts(const sl_trace *t, int *dominant) {
  if (dominant) *dominant = -1;
  double sum = 0, root = (double)t->elements;
  for (int i = 0; i < t->nops; i++) sum += t->ops[i].s.cpu_seconds;
  bool heavy_ok = sum > 0;
  for (int i = 0; i < t->nops; i++) {
    const sl_op_stats *s = &t->ops[i].s;
    double share = sum > 0 ? s->cpu_seconds / sum : 0;
    if (share >= SL__COUNT_HEAVY_SHARE && s->elements_out < SL_PLAN_MIN_ELEMENTS) heavy_ok = false;
    if (dominant && share >= SL__COUNT_DOMINANT && s->elements_out >= SL__COUNT_MIN_ROOT) *dominant = i;
  }
  if (root >= SL_PLAN_MIN_ELEMENTS) return SL__COUNT_OUTPUT;
  return root >= SL__COUNT_MIN_ROOT && heavy_ok ? SL__COUNT_HEAVY : SL__COUNT_SHORT;
}

/* Per-output-element costs and what each op's wall time beyond its CPU was. */
static int model_times(sl_plan *P, const sl_trace *t) {
  P->N = (double)t->ops[P->root].s.elements_out;
  P->T = t->seconds;
  P->traced_rate = t->seconds > 0 ? P->N / t->seconds : 0;
  P->ended = t->ended;
  if (P->N <= 0)
    return sl__err(SL_EINVAL, "the trace has no output elements (the pipeline produced nothing in %.2f s): trace "
                              "it for longer or check that it produces elements", t->seconds);
  visit_ratios(P, P->root, 1);
  P->counts = sl__trace_counts(t, &P->dominant);
  P->heavy_min = -1;
  {
    double sum = 0;
    for (int i = 0; i < t->nops; i++) sum += t->ops[i].s.cpu_seconds;
    for (int i = 0; i < t->nops; i++)
      if (sum > 0 && t->ops[i].s.cpu_seconds >= SL__COUNT_HEAVY_SHARE * sum &&
          (P->heavy_min < 0 || (double)t->ops[i].s.elements_out < P->heavy_min))
        P->heavy_min = (double)t->ops[i].s.elements_out;
  }
  /* Waiting for a core stretches CPU time into wall time by the runqueue delay per CPU second of this process's
   * threads, or, when the whole machine (this process and others, from /proc/stat) was CPU-saturated, by at least
   * the factor below. Threads that ended during the trace are missing from the runqueue delay, so the
   * machine's figure also covers them. */
  double mc = t->machine.cores > 0 ? t->machine.cores : 1;
  P->busy_cores = (t->seconds > 0 ? t->process_cpu / t->seconds : 0) + (t->machine.other_load > 0 ? t->machine.other_load : 0);
  P->saturated = t->seconds > 0 && P->busy_cores >= SL__PLAN_SATURATED * mc;
  /* On a saturated machine a runnable thread shares its core with at least one other: its wall time is at least
   * twice its CPU from that alone (the busy fraction cannot say how many wait; the runqueue delay, when known, can). */
  double load_stretch = P->saturated ? fmax(2.0, P->busy_cores / mc) : 1.0;
  /* Disk is what the block devices delivered, not what the reads returned: a folder in the page cache read at
   * 17 MB/s by the probe's measure was named the limit at 1.2 elem/s while the pipeline ran 3.6 (issue 48). */
  P->read_bytes = 0;
  for (int i = 0; i < P->nops; i++) P->read_bytes += (double)t->ops[i].s.disk_bytes;
  P->dev_share = t->device_bytes >= 0 && P->read_bytes > 0 ? fmin((double)t->device_bytes / P->read_bytes, 1) : -1;
  bool cached = P->dev_share >= 0 && P->dev_share < SL__PLAN_CACHED_READS;
  for (int i = 0; i < P->nops; i++) {
    sl__pm_op *o = &P->ops[i];
    const sl_op_stats *s = &t->ops[i].s;
    /* Per-output-element figures are per-element figures times V (f converts the trace's totals over N). */
    double f = o->n > 0 ? o->V * P->N / o->n : 0;
    o->c = o->d * o->V;
    o->w = o->n > 0 ? s->wall_seconds * f / P->N : 0;
    /* An op whose wall time (its consumer's blocked waits aside) is well above its CPU time waits on something
     * (I/O, sleeps): it holds a thread for its wall time. The runqueue delay measured during the trace and a
     * margin keep CPU-bound ops preempted by other load from looking like waiters. */
    double busy_wall = o->n > 0 ? (s->wall_seconds - s->wait_seconds) * f / P->N : 0;
    /* CPU-bound work waits for a CPU too when the machine is contended: (1 + run_delay) x CPU is what its wall
     * time would be without any I/O. */
    double stretch = fmax(1 + (isfinite(t->run_delay) ? fmin(t->run_delay, 1e3) : 0), load_stretch);
    o->tt = busy_wall > 2 * stretch * o->d * o->V + 20e-6 * o->V ? busy_wall : o->d * o->V;
    o->busy_wall = busy_wall > 0 && isfinite(busy_wall) ? busy_wall : 0;
    o->runq = -1;
    o->blocked = -1;
    if (s->runq_seconds >= 0 && o->n > 0 && isfinite(s->runq_seconds)) {
      /* Measured: the op's own run-queue delay splits its wall time beyond its CPU into waiting for a core
       * (contention: the cores the LP hands out price it) and blocked time (I/O, sleep, locks), which alone makes
       * it hold a thread for longer than its CPU. Inferring it from the whole trace's stretch called a thread
       * queued for a core an I/O waiter on a busy machine. */
      double rq = s->runq_seconds * f / P->N, c = o->d * o->V;
      o->runq = rq;
      o->blocked = fmax(o->busy_wall - c - rq, 0);
      /* On a CPU-saturated machine lock waits grow by the load: a holder preempted while others wait (on imagenet
       * beside two CPU hogs decode_jpeg's workers blocked 1.5x their CPU on the hand-off lock). Blocked time up to
       * the load factor times the CPU is taken as that contention; a sleep or I/O is far above it. */
      o->tt = o->blocked > load_stretch * c + 20e-6 * o->V ? c + o->blocked : c;
      stretch = c > 0 ? fmax((c + rq) / c, 1) : 1;
    }
    /* A reader whose bytes came from the page cache blocked on no device: its wall time beyond its CPU is
     * contention (locks, page faults, a core), not I/O that more threads would overlap. */
    if (cached && s->disk_bytes > 0) o->tt = o->d * o->V;
    o->stretch = stretch;
    o->b_disk = (double)s->disk_bytes * (P->dev_share >= 0 ? P->dev_share : 1) * f / P->N;
    o->disk = (double)s->disk_bytes;
    o->src_bytes = (double)s->source_bytes;
    if (!isfinite(o->c) || o->c < 0) o->c = 0;
    if (!isfinite(o->tt) || o->tt < o->c) o->tt = o->c;
    /* Cardinality of one epoch: from the spec, or from a trace that saw the whole stream (no repeat upstream). */
    if (o->card == -1 && t->ended) {
      bool rep = false;
      for (int j = 0; j < P->nops; j++)
        if (P->ops[j].kind == SL__MK_REPEAT && sl__plan_upstream(P, j, i)) rep = true;
      if (!rep) o->card = (int64_t)o->n;
    }
  }
  no_phantom_waits(P);
  /* A process that kept (nearly) every usable core busy was not waiting on I/O: its threads' wall time beyond
   * their CPU is queueing for a core, or for inputs that were themselves short of CPU. */
  if (t->seconds > 0 && t->machine.cores > 0 && t->process_cpu >= 0.85 * t->seconds * t->machine.cores)
    for (int i = 0; i < P->nops; i++) P->ops[i].tt = P->ops[i].c;
  return 0;
}

/* The budgets: cores (less the consumer's), memory, disk bandwidth, hand-off prices. */
static int model_budgets(sl_plan *P, const sl_trace *t, const sl_plan_opts *opts) {
  double C = opts->cores > 0 ? opts->cores : t->machine.cores;
  if (opts->cores < 0 || !isfinite(opts->cores) || opts->cores > 1e6)
    return sl__err(SL_EINVAL, "infeasible budget: %g cores", opts->cores);
  if (!isfinite(opts->disk_bandwidth) || opts->disk_bandwidth < 0 || !isfinite(opts->consumer_cores))
    return sl__err(SL_EINVAL, "planner options: disk bandwidth and consumer cores must be finite and not negative");
  if (!isfinite(t->machine.cores) || t->machine.cores > 1e6)
    return sl__err(SL_EINVAL, "trace: machine.cores %g is not a core count", t->machine.cores);
  C -= opts->consumer_cores;
  if (!(C > 0))
    return sl__err(SL_EINVAL, "infeasible budget: no cores left for the pipeline (%g cores, %g for the consumer)",
                   opts->cores > 0 ? opts->cores : t->machine.cores, opts->consumer_cores);
  P->C = C;
  if (opts->memory < 0) return sl__err(SL_EINVAL, "infeasible budget: memory %lld bytes", (long long)opts->memory);
  P->M = opts->memory > 0 ? (double)opts->memory : SL_PLAN_MEMORY_FRACTION * (double)t->machine.mem_available;
  if (!(P->M > 0)) P->M = 1e18; /* the trace knows no memory figure: unconstrained */
  P->B = opts->disk_bandwidth > 0 ? opts->disk_bandwidth : t->machine.disk_bandwidth;
  if (opts->handoff == 0) {
    sl__trace_handoff_costs(&P->handoff, &P->handoff_cheap);
  } else {
    P->handoff = P->handoff_cheap = opts->handoff > 0 ? opts->handoff : 0; /* < 0: none */
  }
  if (!(P->hscale >= 0) || !isfinite(P->hscale)) P->hscale = 1;
  return 0;
}

/* The consumer's residual CPU, waits, and the ops' costs held to what the process spent. */
static void model_residual(sl_plan *P, const sl_trace *t) {
  /* CPU the process spent beyond the ops' own: the consumer's loop and freeing what it consumed. It stays on the
   * consumer's thread, so a root prefetch overlaps it with the pipeline. */
  double sum = 0; /* the trace's own totals: the process CPU covers elements still in buffers too */
  for (int i = 0; i < P->nops; i++) sum += t->ops[i].s.cpu_seconds;
  /* What each op's wall time beyond its CPU was: waits on I/O or sleeps (the model's verdict: it holds a thread
   * for its wall time), or, for a CPU-bound op whose wall time still exceeds its CPU by a fifth, waiting for a
   * core (runnable while the cores ran other threads). */
  for (int i = 0; i < P->nops; i++) {
    sl__pm_op *o = &P->ops[i];
    /* Measured run-queue delay: waiting for a core is that delay, not the wall time left unexplained. */
    bool core = o->runq >= 0 ? o->runq > 0.2 * o->c + 2e-6 * o->V : o->busy_wall > 1.2 * o->c + 2e-6 * o->V;
    o->waits = o->tt > 1.0001 * o->c + 1e-12 ? SL__WAIT_IO : core && o->c > 0 ? SL__WAIT_CORE : SL__WAIT_NONE;
  }
  P->resid = t->has_resid ? t->resid : (t->process_cpu - sum) / P->N;
  if (!(P->resid > 0) || !isfinite(P->resid)) P->resid = 0;
  /* The ops' sampled CPU cannot exceed what the whole process spent: when it does (a sampled estimate biased up,
   * e.g. by clock reads around cheap calls), the ops' costs are scaled down to the process's. Otherwise the bound
   * C / sum(c) would sit below what a run of the same work reaches (the "bound" exceeded by measurement). */
  if (t->process_cpu > 0 && sum > t->process_cpu && isfinite(sum)) {
    double k = t->process_cpu / sum;
    for (int i = 0; i < P->nops; i++) {
      sl__pm_op *o = &P->ops[i];
      bool cpu_bound = o->tt == o->c;
      o->d *= k;
      o->c *= k;
      if (cpu_bound) o->tt = o->c;
    }
  }
}

/* What one element costs to make where a thread boundary could sit. */
static void model_elem_costs(sl_plan *P) {
  /* An op's own per-element CPU, or for an interleave its source chain's CPU per element it yields. */
  for (int i = 0; i < P->nops; i++) {
    sl__pm_op *o = &P->ops[i];
    o->elem_cost = o->d;
    if (o->kind == SL__MK_INTERLEAVE && o->V > 0) {
      double sub = 0;
      for (int j = 0; j < P->nops; j++)
        if (j != i && sl__plan_upstream(P, j, i) && !(o->input >= 0 && sl__plan_upstream(P, j, o->input)))
          sub += P->ops[j].c;
      o->elem_cost = sub / o->V;
    }
  }
}

int sl__plan_model(sl_plan *P, const sl_trace *t, const sl_plan_opts *opts) {
  P->opts = *opts;
  P->nops = t->nops;
  P->spec = json_deep_copy(t->spec);
  P->ops = sl__calloc((size_t)t->nops, sizeof *P->ops);
  P->strs = sl__calloc((size_t)t->nops * 3, sizeof *P->strs);
  P->par = sl__calloc((size_t)t->nops, sizeof *P->par);
  P->buf = sl__calloc((size_t)t->nops, sizeof *P->buf);
  P->cyc = sl__calloc((size_t)t->nops, sizeof *P->cyc);
  P->cands = sl__calloc((size_t)t->nops, sizeof *P->cands);
  if (!P->spec || !P->ops || !P->strs || !P->par || !P->buf || !P->cyc || !P->cands) return sl__oom("a plan");
  P->machine = t->machine;
  int rc = model_ops(P, t, opts);
  if (rc) return rc;
  model_links(P);
  if ((rc = model_times(P, t)) || (rc = model_budgets(P, t, opts))) return rc;
  model_residual(P, t);
  model_elem_costs(P);
  return sl__plan_net_model(P, t);
}

/* ---- units: the threads the work runs on ---- */
int sl__plan_units_new(sl__pm_units *u, int nops) {
  int m = 2 * nops + 4;
  u->n = 0;
  u->cap = sl__calloc((size_t)m, sizeof *u->cap);
  u->cost = sl__calloc((size_t)m, sizeof *u->cost);
  u->tcost = sl__calloc((size_t)m, sizeof *u->tcost);
  u->owner = sl__calloc((size_t)m, sizeof *u->owner);
  u->b = u->total = u->serial = 0;
  if (u->cap && u->cost && u->tcost && u->owner) return 0;
  sl__free(u->cap);
  sl__free(u->cost);
  sl__free(u->tcost);
  sl__free(u->owner);
  return sl__oom("the planner's model");
}
void sl__plan_units_free(sl__pm_units *u) {
  sl__free(u->cap);
  sl__free(u->cost);
  sl__free(u->tcost);
  sl__free(u->owner);
}
static int unit_add(sl__pm_units *u, double cap, int owner) {
  u->cap[u->n] = cap;
  u->cost[u->n] = 0;
  u->tcost[u->n] = 0;
  u->owner[u->n] = owner;
  return u->n++;
}

/* par[i] < 0 means "a pool the LP sizes" (tunable). Puts op i's work (and its subtree's) into units; a thread
 * boundary the trace did not have costs its hand-off per element it passes (h = 1; h = 0 leaves hand-offs out). */
static void assign(const sl_plan *P, const int64_t *par, int cache_at, int i, int u, double mult, double h,
                   sl__pm_units *U) {
  const sl__pm_op *o = &P->ops[i];
  double hv = o->async0 || (cache_at >= 0 && sl__plan_upstream(P, i, cache_at)) ? 0
                                                                                 : h * handoff_for(P, o->elem_cost) * o->V;
  bool cached = cache_at >= 0 && sl__plan_upstream(P, i, cache_at);
  double c = cached ? 0 : o->c, tt = cached ? 0 : o->tt;
  if (!cached) U->b += o->b_disk;
  if (o->serial) U->serial += c;
  U->total += c;
  if (i == cache_at) {
    double cc = CACHE_READ_S * o->V;
    U->cost[u] += cc;
    U->tcost[u] += cc;
    U->total += cc;
  }
  int64_t p = par[i];
  if (o->kind == SL__MK_MAP && (p < 0 || p > 1)) {
    int pool = unit_add(U, p < 0 ? 0 : (double)p * mult, p < 0 ? i : -1);
    U->cost[pool] += c + hv;
    U->tcost[pool] += tt + hv;
    U->total += hv;
    if (o->input >= 0) assign(P, par, cache_at, o->input, unit_add(U, mult, -1), mult, h, U);
    return;
  }
  U->cost[u] += c;
  U->tcost[u] += tt;
  if (o->kind == SL__MK_PREFETCH) {
    if (o->input >= 0) assign(P, par, cache_at, o->input, unit_add(U, mult, -1), mult, h, U);
    return;
  }
  if (o->input >= 0) assign(P, par, cache_at, o->input, u, mult, h, U);
  if (o->source >= 0) {
    if (o->kind == SL__MK_INTERLEAVE && (p < 0 || p > 1)) {
      double pm = p < 0 ? mult : (double)p * mult;
      int pool = unit_add(U, p < 0 ? 0 : pm, p < 0 ? i : -1);
      U->cost[pool] += hv;
      U->tcost[pool] += hv;
      U->total += hv;
      assign(P, par, cache_at, o->source, pool, pm, h, U);
    } else {
      assign(P, par, cache_at, o->source, u, mult, h, U);
    }
  }
}

void sl__plan_units_build(const sl_plan *P, const int64_t *par, int cache_at, double h, sl__pm_units *U) {
  U->n = 0;
  U->b = U->total = U->serial = 0;
  int consumer = unit_add(U, 1, -1);
  int top = consumer;
  U->cost[consumer] = U->tcost[consumer] = U->total = P->resid;
  /* An inserted root prefetch moves the whole pipeline off the consumer's thread; the hand-off is paid on both
   * sides. */
  if (P->add_prefetch) {
    double total = 0;
    for (int i = 0; i < P->nops; i++)
      if (!(cache_at >= 0 && sl__plan_upstream(P, i, cache_at))) total += P->ops[i].c;
    double hp = h * handoff_for(P, total);
    top = unit_add(U, 1, -1);
    U->cost[consumer] += hp / 2;
    U->cost[top] += hp / 2;
    U->tcost[consumer] += hp / 2;
    U->tcost[top] += hp / 2;
    U->total += hp;
  }
  assign(P, par, cache_at, P->root, top, 1, h, U);
  for (int k = 0; k < P->nnet; k++) /* the remote readers' I/O threads, on the cores beside the units */
    if (sl__plan_net_active(P, &P->net[k], cache_at)) U->total += P->net[k].cpu;
}

int sl__plan_set_core_share(sl_plan *P, double share) {
  P->core_share = share > 0 && share <= 1 ? share : 1;
  P->predicted = sl__plan_eval(P, P->par, P->cache_at, P->C);
  return P->predicted < 0 ? SL_ENOMEM : 0;
}

double sl_plan_predict_on(const sl_plan *P, double cores) {
  if (!(cores > 0)) return 0;
  double x = sl__plan_eval(P, P->par, P->cache_at, cores);
  return x < 0 ? NAN : x; /* out of memory: sl__plan_eval said so (sl_error_last) */
}

double sl_plan_cpu_per_element(const sl_plan *P) {
  sl__pm_units U;
  if (sl__plan_units_new(&U, P->nops)) return 0;
  sl__plan_units_build(P, P->par, P->cache_at, 1, &U);
  double t = U.total;
  sl__plan_units_free(&U);
  return t;
}

double sl__plan_handoff_cpu_for(const sl_plan *P, const int64_t *par) {
  sl__pm_units U;
  if (sl__plan_units_new(&U, P->nops)) return 0;
  sl__plan_units_build(P, par, P->cache_at, 1, &U);
  double with = U.total;
  sl__plan_units_build(P, par, P->cache_at, 0, &U);
  double without = U.total;
  sl__plan_units_free(&U);
  return with - without;
}

double sl__plan_handoff_cpu(const sl_plan *P) { return sl__plan_handoff_cpu_for(P, P->par); }

double sl__plan_eval(const sl_plan *P, const int64_t *par, int cache_at, double cores) {
  sl__pm_units U;
  if (sl__plan_units_new(&U, P->nops)) {
    sl__oom("the model's units");
    return -1;
  }
  sl__plan_units_build(P, par, cache_at, 1, &U);
  /* All cores busy, less the share a measured run left idle (core_share; the LP bound keeps them all). */
  double X = U.total > 0 ? cores * P->core_share / U.total : SL__PLAN_X_MAX;
  /* Time-sharing: when more threads are busy than there are cores, a sequential thread is preempted by the
   * others, so it cannot be planned near a full core: it gets SEQ_HEADROOM of one. (The fluid model alone let one
   * thread need 0.78 of a core beside two decode workers on 2 cores; measured, it got about 2/3.) Busy: at the
   * CPU-bound rate, a thread that would need a tenth of a core or more. `cores` is what other processes left, and
   * their load, measured in cores, counts a quarter core of noise (SL_PLAN_LOAD_CORES): one thread of ours beside
   * one CPU hog (1.006 cores of other load on 2) has a core of its own. Capped at 0.75 there, the bench's tabular
   * plan (a single thread) was predicted at 0.75 of the 255 elem/s it measured beside the hog, as fast as alone. */
  double busy = 0;
  for (int k = 0; k < U.n; k++)
    if (U.cap[k] > 0 && U.cost[k] > 0 && X * U.cost[k] / U.cap[k] >= 0.1) busy += U.cap[k];
  for (int k = 0; k < U.n; k++) {
    if (!(U.tcost[k] > 0)) continue;
    /* A unit that waits (I/O) holds its threads without competing for cores while it waits. */
    bool seq = U.owner[k] < 0 && U.cap[k] <= 1 && U.tcost[k] <= U.cost[k] * 1.001;
    double cap = seq && busy > cores + SL_PLAN_LOAD_CORES ? U.cap[k] * SEQ_HEADROOM : U.cap[k];
    if (cap / U.tcost[k] < X) X = cap / U.tcost[k];
  }
  if (P->B > 0 && U.b > 0 && P->B / U.b < X) X = P->B / U.b;
  if (U.serial > 0 && 1 / U.serial < X) X = 1 / U.serial; /* serial functions share one core */
  double net = sl__plan_net_bound(P, cache_at); /* the readers at the requests in flight they may use, the link */
  if (net < X) X = net;
  sl__plan_units_free(&U);
  return X;
}

double sl_plan_op_rate(const sl_plan *P, int i) {
  if (i < 0 || i >= P->nops) return 0;
  /* The rate the bottleneck is picked by: min(p, cores) / max(c, tt), p 1 for an op without workers. */
  const sl__pm_op *o = &P->ops[i];
  if (!(o->c > 0) && !(o->tt > 0)) return INFINITY;
  double p = o->has_par && !o->serial ? fmin((double)o->par0, P->C) : 1;
  return p / fmax(o->c, o->tt);
}

int sl__plan_pick_bottleneck(const sl_plan *P) {
  /* The op with the smallest min(p_i, cores) x R_i at the traced configuration (sl_plan_op_rate). */
  int b = -1;
  double worst = 0;
  for (int i = 0; i < P->nops; i++) {
    double r = sl_plan_op_rate(P, i);
    if (!isfinite(r)) continue;
    if (b < 0 || r < worst) b = i, worst = r;
  }
  return b;
}

/* ---- memory ---- */
double sl__plan_in_bytes(const sl_plan *P, int i) {
  int in = P->ops[i].input;
  return (in >= 0 ? P->ops[in].bytes : P->ops[i].bytes) + SL__PLAN_ELEM_OVERHEAD;
}

/* Bytes the configuration may hold at most. */
double sl__plan_memory(const sl_plan *P, const int64_t *par, const int64_t *buf, const int64_t *cyc,
                          int cache_at, double cache_bytes, int64_t prefetch_buf) {
  double m = 0;
  for (int i = 0; i < P->nops; i++) {
    const sl__pm_op *o = &P->ops[i];
    double ob = o->bytes + SL__PLAN_ELEM_OVERHEAD;
    double b = ob > sl__plan_in_bytes(P, i) ? ob : sl__plan_in_bytes(P, i);
    switch (o->kind) {
    case SL__MK_MAP:
      m += par[i] > 1 ? (double)(buf[i] > par[i] ? buf[i] : par[i]) * b : b;
      break;
    case SL__MK_PREFETCH:
      m += (double)(buf[i] + 1) * ob;
      break;
    case SL__MK_INTERLEAVE:
      m += par[i] > 1 ? (double)cyc[i] * (double)buf[i] * ob + ob : ob;
      break;
    case SL__MK_BATCH:
      m += (double)o->batch_size * sl__plan_in_bytes(P, i) + ob;
      break;
    case SL__MK_SHUFFLE:
      m += (double)o->shuffle_buf * sl__plan_in_bytes(P, i);
      break;
    default:
      m += ob;
    }
  }
  if (cache_at >= 0) m += cache_bytes;
  m += sl__plan_net_memory(P, cyc); /* the remote readers' blocks in flight */
  m += sl__plan_net_kept(P);        /* and the objects they keep for later epochs */
  if (prefetch_buf > 0) m += (double)(prefetch_buf + 1) * (P->ops[P->root].bytes + SL__PLAN_ELEM_OVERHEAD);
  return m;
}

void sl__plan_fmt_bytes(char *b, size_t n, double v) {
  if (v >= 1e9) snprintf(b, n, "%.2f GB", v / 1e9);
  else if (v >= 1e6) snprintf(b, n, "%.1f MB", v / 1e6);
  else if (v >= 1e3) snprintf(b, n, "%.1f kB", v / 1e3);
  else snprintf(b, n, "%.0f B", v);
}

/* Op i's buffer depth (and an interleave's cycle length) for the plan's parallelism: what each model kind holds
 * between its threads and its consumer (sl__plan_size_buffers adds the root prefetch's depth). */
void sl__plan_size_buffer(sl_plan *P, int i) {
  const sl__pm_op *o = &P->ops[i];
  P->cyc[i] = o->cyc0;
  if (o->kind == SL__MK_MAP) {
    if (!o->buf_tunable) P->buf[i] = o->buf0;
    else if (P->par[i] > 1) {
      /* Room for the spread of call times, between p + 1 and 4p slots. */
      double b = ceil((double)P->par[i] * (1.0 + fmax(0.5, 2.0 * o->cv)));
      P->buf[i] = (int64_t)fmin(fmax(b, (double)P->par[i] + 1), 4.0 * (double)P->par[i]);
      /* A consumer faster than the workers is woken for runs of a quarter of the ring: room for runs of 4, so
       * that it is not woken (a context switch) for every element. Cheap elements cross in chunks of up to
       * half the buffer: room for chunks of 16. fit_memory shrinks these when memory is short. */
      if (P->buf[i] < SL__HANDOFF_RUN_BUFFER) P->buf[i] = SL__HANDOFF_RUN_BUFFER;
      if (o->elem_cost < SL__PLAN_CHEAP_ELEMENT_S && P->buf[i] < SL__HANDOFF_CHEAP_BUFFER)
        P->buf[i] = SL__HANDOFF_CHEAP_BUFFER;
    } else P->buf[i] = 0;
  } else if (o->kind == SL__MK_INTERLEAVE) {
    if (P->par[i] > P->cyc[i]) {
      if (o->cyc_tunable) P->cyc[i] = P->par[i];
      else P->par[i] = P->cyc[i];
    }
    P->buf[i] = o->buf_tunable ? (int64_t)fmin(ceil(1.0 + fmax(1.0, 2.0 * o->cv)), 8) : o->buf0;
    if (o->buf_tunable && o->elem_cost < SL__PLAN_CHEAP_ELEMENT_S) P->buf[i] = SL__HANDOFF_CHEAP_BUFFER / 2;
  } else if (o->kind == SL__MK_PREFETCH) {
    int in = o->input;
    double cv = in >= 0 ? P->ops[in].cv : 0;
    P->buf[i] = o->buf_tunable ? (int64_t)fmin(ceil(fmax(1.0, 1.0 + 2.0 * cv)), 16) : o->buf0;
  } else {
    P->buf[i] = o->buf0;
  }
}

/* A buffering kind (shuffle, prefetch): in steady state it passes on one element per element it takes. */
bool sl__plan_kind_buffers(sl__model_kind k) { return k == SL__MK_SHUFFLE || k == SL__MK_PREFETCH; }

/* Whether an op's work runs on threads of its own (a prefetch's producer, a parallel map's or interleave's pool). */
bool sl__plan_op_threaded(const sl__pm_op *o) { return o->async0 || o->kind == SL__MK_PREFETCH; }

/* Smallest buffers a configuration can run with. */
void sl__plan_min_buffers(const sl_plan *P, const int64_t *par, int64_t *buf) {
  for (int i = 0; i < P->nops; i++) {
    const sl__pm_op *o = &P->ops[i];
    if (o->kind == SL__MK_MAP) buf[i] = o->buf_tunable ? (par[i] > 1 ? par[i] : 0) : o->buf0;
    else if (o->kind == SL__MK_PREFETCH) buf[i] = o->buf_tunable ? 1 : o->buf0;
    else if (o->kind == SL__MK_INTERLEAVE) buf[i] = o->buf_tunable ? 1 : o->buf0;
    else buf[i] = o->buf0;
  }
}

