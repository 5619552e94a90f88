/* plan/plan_model.c: the Plumber model and the solver. From a trace: visit ratios, CPU cost per output element, the
 * threads each op's work runs on ("units": a sequential thread, or a worker pool of some parallelism), an LP bound
 * (GLPK) under cores, sequential units, disk bandwidth and memory, cache candidates tried one by one, integer
 * parallelism chosen by evaluating the neighbours of the LP point on the model, and buffer depths from latency,
 * rate and per-call spread. docs/planner.md explains the choices. */
#include <glpk.h>
#include <math.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_int.h"

#define X_MAX 1e12   /* an op with no measurable cost does not make the LP unbounded */
#define CACHE_READ_S 2e-7 /* seconds to hand out one element from an in-memory cache (a reference count) */
#define MAX_COMBOS 20000
#define SEQ_HEADROOM 0.75 /* of a core: what a sequential thread is planned to use when threads exceed cores */

static int kind_of(const char *op) {
  static const struct { const char *n; int k; } t[] = {
      {"map", PK_MAP}, {"filter", PK_FILTER}, {"interleave", PK_INTERLEAVE}, {"prefetch", PK_PREFETCH},
      {"cache", PK_CACHE}, {"batch", PK_BATCH}, {"padded_batch", PK_BATCH}, {"shuffle", PK_SHUFFLE},
      {"repeat", PK_REPEAT}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (!strcmp(op, t[i].n)) return t[i].k;
  return PK_SEQ;
}

static bool knob_auto(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_string(v) && !strcmp(json_string_value(v), "autotune");
}

static int64_t knob_int(json_t *o, const char *key, int64_t def) {
  json_t *v = json_object_get(o, key);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

/* ---- the cost of handing an element between two threads ---- */
/* Buffer depth that lets cheap elements cross a thread boundary in full chunks (the engine's chunks are 16). */
#define CHEAP_BUFFER 32
/* A parallel map's smallest planned ring: its waiting consumer is woken for runs of a quarter of it. */
#define RUN_BUFFER 16

static double g_h_exp = -1, g_h_cheap = -1;
static pthread_once_t g_handoff_once = PTHREAD_ONCE_INIT;

static double proc_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Process CPU seconds per element of `n` elements of `spec` (-1 on failure). */
static double cpu_per_element(const char *spec, int n) {
  sl_pipeline *p = NULL;
  sl_iter *it = NULL;
  if (sl_pipeline_from_json(&p, spec, strlen(spec), "<hand-off probe>") || sl_pipeline_iter(&it, p)) {
    sl_pipeline_free(p);
    return -1;
  }
  sl_elem e;
  sl_elem_init(&e);
  double c0 = proc_cpu_s(), r = -1;
  int k = 0;
  for (; k < n && sl_iter_next(it, &e) == 0; k++) sl_elem_clear(&e);
  if (k == n) r = (proc_cpu_s() - c0) / n;
  sl_iter_free(it);
  sl_pipeline_free(p);
  return r;
}

/* Per-boundary hand-off cost of elements whose function spins `us` microseconds: the same work run sync, then
 * through a parallel map and a prefetch (two thread boundaries); the difference in process CPU per element,
 * halved. */
static double probe_handoff(int us, int n, int buffer) {
  char sync[160], async[256];
  snprintf(sync, sizeof sync, "{\"ops\": [{\"op\": \"range\"}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": "
           "{\"us\": %d}}]}", us);
  snprintf(async, sizeof async, "{\"ops\": [{\"op\": \"range\"}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": "
           "{\"us\": %d}, \"parallelism\": 2, \"buffer\": %d}, {\"op\": \"prefetch\", \"buffer\": %d}]}", us, buffer,
           buffer);
  double a = cpu_per_element(sync, n), b = cpu_per_element(async, n);
  return a >= 0 && b >= 0 && b > a ? (b - a) / 2 : 0;
}

/* The engine's own hand-off costs on this machine, now, for expensive elements (handed over one at a time) and
 * cheap ones (handed over in chunks). About 0.1 s, once per process. Measured rather than assumed because they
 * move with the machine and its load (wake-ups and context switches cost several times more on a busy VM). */
static void measure_handoff(void) {
  g_h_exp = probe_handoff(30, 1000, RUN_BUFFER); /* the ring the planner gives a parallel map */
  g_h_cheap = probe_handoff(1, 10000, CHEAP_BUFFER); /* the buffers the planner gives cheap elements */
  sl_error_clear();
}

/* Elements that take less than this per element are handed between threads in chunks (op_map's threshold). */
#define CHEAP_ELEMENT_S 10e-6

/* The hand-off cost per element for elements that cost `d` CPU seconds each to make. */
static double handoff_for(const sl_plan *P, double d) {
  return P->hscale * (d < CHEAP_ELEMENT_S ? P->handoff_cheap : P->handoff);
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
  pm_op *o = &P->ops[i];
  o->V = v;
  bool pass = o->kind == PK_SHUFFLE || o->kind == PK_PREFETCH;
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
  const pm_op *o = &P->ops[i];
  grp[i] = g;
  bool own_input = o->kind == PK_PREFETCH || (o->kind == PK_MAP && o->async0);
  if (o->input >= 0) thread_groups(P, o->input, own_input ? (*next)++ : g, next, grp);
  if (o->source >= 0) thread_groups(P, o->source, o->kind == PK_INTERLEAVE && o->async0 ? (*next)++ : g, next, grp);
}

/* Per-op own times are differences of sampled inclusive times, so an op's own wall and CPU can each be off by a
 * few per cent of its thread's time: a cheap op can show wall well above its CPU while a neighbour shows the
 * reverse. When the thread as a whole spent no more wall than CPU (stretched by the runqueue delay), none of its
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
  P->root = -1;
  for (int i = 0; i < t->nops; i++) {
    const sl_op_stats *s = &t->ops[i].s;
    pm_op *o = &P->ops[i];
    P->strs[3 * i] = sl__strdup(s->path);
    P->strs[3 * i + 1] = sl__strdup(s->label);
    P->strs[3 * i + 2] = sl__strdup(s->op);
    if (!P->strs[3 * i] || !P->strs[3 * i + 1] || !P->strs[3 * i + 2]) return sl__oom("a plan");
    o->path = P->strs[3 * i];
    o->label = P->strs[3 * i + 1];
    o->op = P->strs[3 * i + 2];
    o->kind = kind_of(s->op);
    o->parent = s->parent;
    o->input = o->source = -1;
    o->nested = s->nested;
    o->random = s->random;
    o->par0 = s->parallelism;
    o->async0 = s->async;
    o->buf0 = s->buffer;
    o->card = s->cardinality;
    json_t *js = sl__spec_op_at(P->spec, s->path);
    if (!js) return sl__err(SL_EINVAL, "trace: %s is not an op of the traced spec", s->path);
    o->par_tunable = (o->kind == PK_MAP || o->kind == PK_INTERLEAVE) && (!opts->only_autotune || t->ops[i].par_autotune);
    o->buf_tunable = (o->kind == PK_MAP || o->kind == PK_INTERLEAVE || o->kind == PK_PREFETCH) &&
                     (!opts->only_autotune || t->ops[i].buf_autotune);
    o->cyc_tunable = o->kind == PK_INTERLEAVE && knob_auto(js, "cycle_length");
    o->cyc0 = knob_int(js, "cycle_length", o->par0);
    o->batch_size = o->kind == PK_BATCH ? knob_int(js, "size", 1) : 0;
    o->shuffle_buf = o->kind == PK_SHUFFLE ? knob_int(js, "buffer", 1) : 0;
    o->n = (double)s->elements_out;
    o->d = o->n > 0 ? s->cpu_seconds / o->n : 0;
    o->bytes = o->n > 0 ? (double)s->bytes_out / o->n : 0;
    o->cv = s->call_mean > 0 ? s->call_sd / s->call_mean : 0;
    if (s->parent == -1) P->root = i;
  }
  if (P->root < 0) return sl__err(SL_EINVAL, "trace: no root op");
  /* Children: an op whose path extends its parent's with ".source" is the parent's nested source. */
  for (int i = 0; i < P->nops; i++) {
    int p = P->ops[i].parent;
    if (p < 0) continue;
    size_t lp = strlen(P->ops[p].path);
    if (!strncmp(P->ops[i].path, P->ops[p].path, lp) && !strncmp(P->ops[i].path + lp, ".source", 7))
      P->ops[p].source = i;
    else
      P->ops[p].input = i;
  }
  P->N = (double)t->ops[P->root].s.elements_out;
  P->T = t->seconds;
  P->traced_rate = t->seconds > 0 ? P->N / t->seconds : 0;
  if (P->N <= 0)
    return sl__err(SL_EINVAL, "the trace has no output elements (the pipeline produced nothing in %.2f s): trace "
                              "it for longer or check that it produces elements", t->seconds);
  visit_ratios(P, P->root, 1);
  for (int i = 0; i < P->nops; i++) {
    pm_op *o = &P->ops[i];
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
    double stretch = 1 + (isfinite(t->run_delay) ? fmin(t->run_delay, 1e3) : 0);
    o->tt = busy_wall > 2 * stretch * o->d * o->V + 20e-6 * o->V ? busy_wall : o->d * o->V;
    o->busy_wall = busy_wall > 0 && isfinite(busy_wall) ? busy_wall : 0;
    o->stretch = stretch;
    o->b_disk = (double)s->disk_bytes * f / P->N;
    o->disk = (double)s->disk_bytes;
    o->src_bytes = (double)s->source_bytes;
    if (!isfinite(o->c) || o->c < 0) o->c = 0;
    if (!isfinite(o->tt) || o->tt < o->c) o->tt = o->c;
    /* Cardinality of one epoch: from the spec, or from a trace that saw the whole stream (no repeat upstream). */
    if (o->card == -1 && t->ended) {
      bool rep = false;
      for (int j = 0; j < P->nops; j++)
        if (P->ops[j].kind == PK_REPEAT && sl__plan_upstream(P, j, i)) rep = true;
      if (!rep) o->card = (int64_t)o->n;
    }
  }
  no_phantom_waits(P);
  /* A process that kept (nearly) every usable core busy was not waiting on I/O: its threads' wall time beyond
   * their CPU is queueing for a core, or for inputs that were themselves short of CPU. */
  if (t->seconds > 0 && t->machine.cores > 0 && t->process_cpu >= 0.85 * t->seconds * t->machine.cores)
    for (int i = 0; i < P->nops; i++) P->ops[i].tt = P->ops[i].c;
  /* Budgets. */
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
  if (opts->handoff < 0) {
    pthread_once(&g_handoff_once, measure_handoff);
    P->handoff = g_h_exp;
    P->handoff_cheap = g_h_cheap;
  } else {
    P->handoff = P->handoff_cheap = opts->handoff;
  }
  if (!(P->hscale >= 0) || !isfinite(P->hscale)) P->hscale = 1;
  /* CPU the process spent beyond the ops' own: the consumer's loop and freeing what it consumed. It stays on the
   * consumer's thread, so a root prefetch overlaps it with the pipeline. */
  double sum = 0; /* the trace's own totals: the process CPU covers elements still in buffers too */
  for (int i = 0; i < P->nops; i++) sum += t->ops[i].s.cpu_seconds;
  P->resid = (t->process_cpu - sum) / P->N;
  if (!(P->resid > 0) || !isfinite(P->resid)) P->resid = 0;
  /* What one element costs to make where a thread boundary could sit: an op's own per-element CPU, or for an
   * interleave its source chain's CPU per element it yields. */
  for (int i = 0; i < P->nops; i++) {
    pm_op *o = &P->ops[i];
    o->elem_cost = o->d;
    if (o->kind == PK_INTERLEAVE && o->V > 0) {
      double sub = 0;
      for (int j = 0; j < P->nops; j++)
        if (j != i && sl__plan_upstream(P, j, i) && !(o->input >= 0 && sl__plan_upstream(P, j, o->input)))
          sub += P->ops[j].c;
      o->elem_cost = sub / o->V;
    }
  }
  return 0;
}

/* ---- units: the threads the work runs on ---- */
typedef struct {
  int n;
  double *cap;   /* threads (tunable pools: 0 = decided by the LP) */
  double *cost;  /* CPU seconds per output element of the work in it */
  double *tcost; /* thread-seconds per output element (>= cost: waits hold a thread) */
  int *owner;    /* the tunable op whose pool it is, else -1 */
  double b;      /* disk bytes per output element */
  double total;  /* CPU seconds per output element, all ops */
} units;

static int units_new(units *u, int nops) {
  int m = 2 * nops + 4;
  u->n = 0;
  u->cap = sl__calloc((size_t)m, sizeof *u->cap);
  u->cost = sl__calloc((size_t)m, sizeof *u->cost);
  u->tcost = sl__calloc((size_t)m, sizeof *u->tcost);
  u->owner = sl__calloc((size_t)m, sizeof *u->owner);
  u->b = u->total = 0;
  if (u->cap && u->cost && u->tcost && u->owner) return 0;
  sl__free(u->cap);
  sl__free(u->cost);
  sl__free(u->tcost);
  sl__free(u->owner);
  return sl__oom("the planner's model");
}
static void units_free(units *u) {
  sl__free(u->cap);
  sl__free(u->cost);
  sl__free(u->tcost);
  sl__free(u->owner);
}
static int unit_add(units *u, double cap, int owner) {
  u->cap[u->n] = cap;
  u->cost[u->n] = 0;
  u->tcost[u->n] = 0;
  u->owner[u->n] = owner;
  return u->n++;
}

/* par[i] < 0 means "a pool the LP sizes" (tunable). Puts op i's work (and its subtree's) into units; a thread
 * boundary the trace did not have costs its hand-off per element it passes (h = 1; h = 0 leaves hand-offs out). */
static void assign(const sl_plan *P, const int64_t *par, int cache_at, int i, int u, double mult, double h,
                   units *U) {
  const pm_op *o = &P->ops[i];
  double hv = o->async0 || (cache_at >= 0 && sl__plan_upstream(P, i, cache_at)) ? 0
                                                                                 : h * handoff_for(P, o->elem_cost) * o->V;
  bool cached = cache_at >= 0 && sl__plan_upstream(P, i, cache_at);
  double c = cached ? 0 : o->c, tt = cached ? 0 : o->tt;
  if (!cached) U->b += o->b_disk;
  U->total += c;
  if (i == cache_at) {
    double cc = CACHE_READ_S * o->V;
    U->cost[u] += cc;
    U->tcost[u] += cc;
    U->total += cc;
  }
  int64_t p = par[i];
  if (o->kind == PK_MAP && (p < 0 || p > 1)) {
    int pool = unit_add(U, p < 0 ? 0 : (double)p * mult, p < 0 ? i : -1);
    U->cost[pool] += c + hv;
    U->tcost[pool] += tt + hv;
    U->total += hv;
    if (o->input >= 0) assign(P, par, cache_at, o->input, unit_add(U, mult, -1), mult, h, U);
    return;
  }
  U->cost[u] += c;
  U->tcost[u] += tt;
  if (o->kind == PK_PREFETCH) {
    if (o->input >= 0) assign(P, par, cache_at, o->input, unit_add(U, mult, -1), mult, h, U);
    return;
  }
  if (o->input >= 0) assign(P, par, cache_at, o->input, u, mult, h, U);
  if (o->source >= 0) {
    if (o->kind == PK_INTERLEAVE && (p < 0 || p > 1)) {
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

static void build_units(const sl_plan *P, const int64_t *par, int cache_at, double h, units *U) {
  U->n = 0;
  U->b = U->total = 0;
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
}

double sl_plan_predict_on(const sl_plan *P, double cores) {
  if (!(cores > 0)) return 0;
  double x = sl__plan_eval(P, P->par, P->cache_at, cores);
  return x > 0 ? x : 0;
}

double sl_plan_cpu_per_element(const sl_plan *P) {
  units U;
  if (units_new(&U, P->nops)) return 0;
  build_units(P, P->par, P->cache_at, 1, &U);
  double t = U.total;
  units_free(&U);
  return t;
}

double sl__plan_handoff_cpu(const sl_plan *P) {
  units U;
  if (units_new(&U, P->nops)) return 0;
  build_units(P, P->par, P->cache_at, 1, &U);
  double with = U.total;
  build_units(P, P->par, P->cache_at, 0, &U);
  double without = U.total;
  units_free(&U);
  return with - without;
}

double sl__plan_eval(const sl_plan *P, const int64_t *par, int cache_at, double cores) {
  units U;
  if (units_new(&U, P->nops)) return -1;
  build_units(P, par, cache_at, 1, &U);
  double X = U.total > 0 ? cores / U.total : X_MAX;
  /* Time-sharing: when more threads are busy than there are cores, a sequential thread is preempted by the
   * others, so it cannot be planned near a full core: it gets SEQ_HEADROOM of one. (The fluid model alone let one
   * thread need 0.78 of a core beside two decode workers on 2 cores; measured, it got about 2/3.) Busy: at the
   * CPU-bound rate, a thread that would need a tenth of a core or more. */
  double busy = 0;
  for (int k = 0; k < U.n; k++)
    if (U.cap[k] > 0 && U.cost[k] > 0 && X * U.cost[k] / U.cap[k] >= 0.1) busy += U.cap[k];
  for (int k = 0; k < U.n; k++) {
    if (!(U.tcost[k] > 0)) continue;
    /* A unit that waits (I/O) holds its threads without competing for cores while it waits. */
    bool seq = U.owner[k] < 0 && U.cap[k] <= 1 && U.tcost[k] <= U.cost[k] * 1.001;
    double cap = seq && busy > cores ? U.cap[k] * SEQ_HEADROOM : U.cap[k];
    if (cap / U.tcost[k] < X) X = cap / U.tcost[k];
  }
  if (P->B > 0 && U.b > 0 && P->B / U.b < X) X = P->B / U.b;
  units_free(&U);
  return X;
}

/* The LP: maximise X subject to X*cost_u <= theta_u (each unit), theta_u <= cap_u (sequential threads and fixed
 * pools; tunable pools only by the total), sum theta_u <= C, X*b <= B. */
int sl__plan_lp(const sl_plan *P, int cache_at, double cores, double *Xout, const char **limit) {
  int64_t *par = sl__calloc((size_t)P->nops, sizeof *par);
  units U;
  if (!par || units_new(&U, P->nops)) {
    sl__free(par);
    return sl__oom("the LP");
  }
  for (int i = 0; i < P->nops; i++) {
    const pm_op *o = &P->ops[i];
    par[i] = o->par_tunable ? -1 : o->par0;
  }
  build_units(P, par, cache_at, 0, &U); /* the bound: Plumber's LP, without hand-off costs */
  /* Costs below a picosecond per element are noise; dropping them keeps the matrix well scaled. */
  for (int k = 0; k < U.n; k++) {
    if (!(U.cost[k] >= 1e-12)) U.cost[k] = 0;
    if (!(U.tcost[k] >= 1e-12)) U.tcost[k] = 0;
  }
  if (!(U.b >= 1e-9)) U.b = 0;
  glp_term_out(GLP_OFF);
  glp_prob *lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MAX);
  /* Units of fixed threads whose ops wait (I/O) get a row of their own: X * thread-time <= threads. */
  int nw = 0;
  for (int k = 0; k < U.n; k++)
    if (U.owner[k] < 0 && U.cap[k] > 0 && U.tcost[k] > U.cost[k] * 1.001) nw++;
  int nc = 1 + U.n, nr = U.n + 2 + nw;
  glp_add_cols(lp, nc);
  glp_add_rows(lp, nr);
  glp_set_col_bnds(lp, 1, GLP_DB, 0, X_MAX);
  glp_set_obj_coef(lp, 1, 1);
  for (int k = 0; k < U.n; k++) {
    double cap = U.owner[k] >= 0 ? cores : U.cap[k];
    if (cap > 0) glp_set_col_bnds(lp, 2 + k, GLP_DB, 0, cap);
    else glp_set_col_bnds(lp, 2 + k, GLP_FX, 0, 0);
  }
  int cap_ne = 3 * U.n + 4 + nw;
  int *ia = sl__calloc((size_t)cap_ne + 1, sizeof *ia), *ja = sl__calloc((size_t)cap_ne + 1, sizeof *ja);
  double *ar = sl__calloc((size_t)cap_ne + 1, sizeof *ar);
  if (!ia || !ja || !ar) {
    glp_delete_prob(lp);
    units_free(&U);
    sl__free(par);
    sl__free(ia);
    sl__free(ja);
    sl__free(ar);
    return sl__oom("the LP");
  }
  int ne = 0;
  for (int k = 0; k < U.n; k++) { /* row k+1: X*cost_k - theta_k <= 0 */
    glp_set_row_bnds(lp, k + 1, GLP_UP, 0, 0);
    ne++, ia[ne] = k + 1, ja[ne] = 1, ar[ne] = U.cost[k];
    ne++, ia[ne] = k + 1, ja[ne] = 2 + k, ar[ne] = -1;
  }
  glp_set_row_bnds(lp, U.n + 1, GLP_UP, 0, cores); /* sum theta <= C */
  for (int k = 0; k < U.n; k++) ne++, ia[ne] = U.n + 1, ja[ne] = 2 + k, ar[ne] = 1;
  bool disk = P->B > 0 && U.b > 0;
  if (disk) {
    glp_set_row_bnds(lp, U.n + 2, GLP_UP, 0, P->B);
    ne++, ia[ne] = U.n + 2, ja[ne] = 1, ar[ne] = U.b;
  } else {
    glp_set_row_bnds(lp, U.n + 2, GLP_FR, 0, 0);
  }
  int row = U.n + 2;
  for (int k = 0; k < U.n; k++)
    if (U.owner[k] < 0 && U.cap[k] > 0 && U.tcost[k] > U.cost[k] * 1.001) {
      row++;
      glp_set_row_bnds(lp, row, GLP_UP, 0, U.cap[k]);
      ne++, ia[ne] = row, ja[ne] = 1, ar[ne] = U.tcost[k];
    }
  glp_load_matrix(lp, ne, ia, ja, ar);
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  /* Bounded effort: this LP has a handful of rows; traces with extreme numbers must not make it spin. */
  parm.it_lim = 20000;
  parm.tm_lim = 2000;
  glp_scale_prob(lp, GLP_SF_AUTO);
  int rc = 0;
  int sr = glp_simplex(lp, &parm);
  if (sr != 0 || glp_get_status(lp) != GLP_OPT) {
    rc = sl__err(SL_ERROR, "the LP solver failed (glp_simplex %d, status %d)", sr, glp_get_status(lp));
  } else {
    double X = glp_get_col_prim(lp, 1);
    *Xout = X;
    const char *lim = "none";
    if (X < X_MAX * 0.999) {
      double used = 0;
      for (int k = 0; k < U.n; k++) used += glp_get_col_prim(lp, 2 + k);
      bool waits = false;
      for (int k = 0; k < U.n; k++)
        if (U.owner[k] < 0 && U.cap[k] > 0 && U.tcost[k] > U.cost[k] * 1.001 && X * U.tcost[k] >= U.cap[k] * 0.999)
          waits = true;
      if (disk && X * U.b >= P->B * 0.999) lim = "disk";
      else if (waits) lim = "wait";
      else if (used >= cores * 0.999) lim = "cpu";
      else lim = "sequential";
    }
    if (limit) *limit = lim;
  }
  glp_delete_prob(lp);
  sl__free(ia);
  sl__free(ja);
  sl__free(ar);
  units_free(&U);
  sl__free(par);
  return rc;
}

/* ---- memory ---- */
/* Bytes an element costs beyond its payload (element slots, buffer headers, allocator overhead). */
#define ELEM_OVERHEAD 128.0

static double in_bytes(const sl_plan *P, int i) {
  int in = P->ops[i].input;
  return (in >= 0 ? P->ops[in].bytes : P->ops[i].bytes) + ELEM_OVERHEAD;
}

/* Bytes the configuration may hold at most. */
static double plan_memory(const sl_plan *P, const int64_t *par, const int64_t *buf, const int64_t *cyc,
                          int cache_at, double cache_bytes, int64_t prefetch_buf) {
  double m = 0;
  for (int i = 0; i < P->nops; i++) {
    const pm_op *o = &P->ops[i];
    double ob = o->bytes + ELEM_OVERHEAD;
    double b = ob > in_bytes(P, i) ? ob : in_bytes(P, i);
    switch (o->kind) {
    case PK_MAP:
      m += par[i] > 1 ? (double)(buf[i] > par[i] ? buf[i] : par[i]) * b : b;
      break;
    case PK_PREFETCH:
      m += (double)(buf[i] + 1) * ob;
      break;
    case PK_INTERLEAVE:
      m += par[i] > 1 ? (double)cyc[i] * (double)buf[i] * ob + ob : ob;
      break;
    case PK_BATCH:
      m += (double)o->batch_size * in_bytes(P, i) + ob;
      break;
    case PK_SHUFFLE:
      m += (double)o->shuffle_buf * in_bytes(P, i);
      break;
    default:
      m += ob;
    }
  }
  if (cache_at >= 0) m += cache_bytes;
  if (prefetch_buf > 0) m += (double)(prefetch_buf + 1) * (P->ops[P->root].bytes + ELEM_OVERHEAD);
  return m;
}

static void fmt_bytes(char *b, size_t n, double v) {
  if (v >= 1e9) snprintf(b, n, "%.2f GB", v / 1e9);
  else if (v >= 1e6) snprintf(b, n, "%.1f MB", v / 1e6);
  else if (v >= 1e3) snprintf(b, n, "%.1f kB", v / 1e3);
  else snprintf(b, n, "%.0f B", v);
}

/* Smallest buffers a configuration can run with. */
static void min_buffers(const sl_plan *P, const int64_t *par, int64_t *buf) {
  for (int i = 0; i < P->nops; i++) {
    const pm_op *o = &P->ops[i];
    if (o->kind == PK_MAP) buf[i] = o->buf_tunable ? (par[i] > 1 ? par[i] : 0) : o->buf0;
    else if (o->kind == PK_PREFETCH) buf[i] = o->buf_tunable ? 1 : o->buf0;
    else if (o->kind == PK_INTERLEAVE) buf[i] = o->buf_tunable ? 1 : o->buf0;
    else buf[i] = o->buf0;
  }
}

/* ---- solve ---- */
static int search_parallelism(sl_plan *P, int cache_at) {
  /* Candidates per tunable op: 1, and the integers around the LP's cores for its pool. */
  int nt = 0;
  int *tun = sl__calloc((size_t)P->nops, sizeof *tun);
  int64_t (*cand)[4] = sl__calloc((size_t)P->nops, sizeof *cand);
  int *nc = sl__calloc((size_t)P->nops, sizeof *nc), *pos = sl__calloc((size_t)P->nops, sizeof *pos);
  int64_t *cur = sl__calloc((size_t)P->nops, sizeof *cur);
  if (!tun || !cand || !nc || !pos || !cur) {
    sl__free(tun), sl__free(cand), sl__free(nc), sl__free(pos), sl__free(cur);
    return sl__oom("the planner");
  }
  double X;
  int rc = sl__plan_lp(P, cache_at, P->C, &X, NULL);
  int64_t pmax = (int64_t)fmin(ceil(P->C), 1e6) * 2 + 2;
  for (int i = 0; i < P->nops; i++)
    if (P->ops[i].tt > P->ops[i].c * 1.001 && ceil(X * P->ops[i].tt) + 1 > (double)pmax)
      pmax = (int64_t)fmin(ceil(X * P->ops[i].tt) + 1, 256);
  for (int i = 0; i < P->nops && !rc; i++) {
    const pm_op *o = &P->ops[i];
    cur[i] = o->par0;
    if (!o->par_tunable) continue;
    bool cached = cache_at >= 0 && sl__plan_upstream(P, i, cache_at);
    double th = 0;
    if (!cached) {
      /* The pool's threads: the op's own work for a map, its source chain's too for an interleave; an op that
       * waits needs a thread for its whole wall time. */
      th = X * o->tt;
      if (o->kind == PK_INTERLEAVE)
        for (int j = 0; j < P->nops; j++)
          if (j != i && sl__plan_upstream(P, j, i) && !sl__plan_upstream(P, j, o->input >= 0 ? o->input : -2) &&
              !(cache_at >= 0 && sl__plan_upstream(P, j, cache_at)))
            th += X * P->ops[j].tt;
    }
    if (!(th >= 0)) th = 0;
    if (th > 1e6) th = 1e6; /* far beyond pmax: keeps the casts defined */
    int64_t c4[4] = {1, (int64_t)floor(th), (int64_t)ceil(th), (int64_t)ceil(th) + 1};
    for (int k = 0; k < 4; k++) {
      int64_t v = c4[k] < 1 ? 1 : c4[k] > pmax ? pmax : c4[k];
      if (cached) v = 1;
      bool dup = false;
      for (int q = 0; q < nc[i]; q++) dup |= cand[i][q] == v;
      if (!dup) cand[i][nc[i]++] = v;
    }
    tun[nt++] = i;
  }
  if (!rc) {
    /* Too many combinations: the later ops keep only their rounded-up LP value. */
    double combos = 1;
    for (int k = 0; k < nt; k++) {
      int i = tun[k];
      if (combos * nc[i] > MAX_COMBOS) {
        cand[i][0] = cand[i][nc[i] > 2 ? 2 : nc[i] - 1];
        nc[i] = 1;
      }
      combos *= nc[i];
    }
    /* Two passes: the best throughput, then the fewest threads within 0.5% of it (fewer threads time-share less
     * and hold fewer buffers). */
    double best = -1, chosen = -1;
    int64_t best_threads = 0;
    for (int pass = 0; pass < 2; pass++) {
      memset(pos, 0, (size_t)P->nops * sizeof *pos);
      for (;;) {
        int64_t threads = 0;
        for (int k = 0; k < nt; k++) cur[tun[k]] = cand[tun[k]][pos[tun[k]]];
        for (int i = 0; i < P->nops; i++) threads += cur[i];
        double x = sl__plan_eval(P, cur, cache_at, P->C);
        if (x < 0) {
          rc = SL_ENOMEM;
          break;
        }
        if (pass == 0 && x > best) best = x;
        if (pass == 1 && x >= best * 0.995 &&
            (chosen < 0 || threads < best_threads || (threads == best_threads && x > chosen))) {
          chosen = x;
          best_threads = threads;
          memcpy(P->par, cur, (size_t)P->nops * sizeof *cur);
        }
        int k = 0;
        while (k < nt && ++pos[tun[k]] >= nc[tun[k]]) pos[tun[k++]] = 0;
        if (k >= nt) break;
      }
      if (rc) break;
    }
    if (nt == 0) memcpy(P->par, cur, (size_t)P->nops * sizeof *cur);
    if (!rc) P->predicted = sl__plan_eval(P, P->par, cache_at, P->C);
    if (!rc && P->predicted < 0) rc = SL_ENOMEM;
  }
  sl__free(tun), sl__free(cand), sl__free(nc), sl__free(pos), sl__free(cur);
  return rc;
}

/* Buffer depths: async outputs absorb the spread of per-call times; the root prefetch covers the latency of one
 * element beyond what the busy cores already overlap (Plumber's ceil(N* - N)). */
static void size_buffers(sl_plan *P) {
  double X = P->predicted, L = 0, busy = 0;
  for (int i = 0; i < P->nops; i++) {
    const pm_op *o = &P->ops[i];
    bool cached = P->cache_at >= 0 && sl__plan_upstream(P, i, P->cache_at);
    if (!cached) {
      /* Latency: CPU, or wall where a sync op waits on something other than CPU (I/O); an async op's wall is
       * mostly waiting for its own workers, which the CPU terms already count. */
      bool async = o->async0 || o->kind == PK_PREFETCH;
      L += !async && o->w > o->c ? o->w : o->c;
      busy += X * o->c;
    }
    P->cyc[i] = o->cyc0;
    if (o->kind == PK_MAP) {
      if (!o->buf_tunable) P->buf[i] = o->buf0;
      else if (P->par[i] > 1) {
        /* Room for the spread of call times, between p + 1 and 4p slots. */
        double b = ceil((double)P->par[i] * (1.0 + fmax(0.5, 2.0 * o->cv)));
        P->buf[i] = (int64_t)fmin(fmax(b, (double)P->par[i] + 1), 4.0 * (double)P->par[i]);
        /* A consumer faster than the workers is woken for runs of a quarter of the ring: room for runs of 4, so
         * that it is not woken (a context switch) for every element. Cheap elements cross in chunks of up to
         * half the buffer: room for chunks of 16. fit_memory shrinks these when memory is short. */
        if (P->buf[i] < RUN_BUFFER) P->buf[i] = RUN_BUFFER;
        if (o->elem_cost < CHEAP_ELEMENT_S && P->buf[i] < CHEAP_BUFFER) P->buf[i] = CHEAP_BUFFER;
      }
      else P->buf[i] = 0;
    } else if (o->kind == PK_INTERLEAVE) {
      if (P->par[i] > P->cyc[i]) {
        if (o->cyc_tunable) P->cyc[i] = P->par[i];
        else P->par[i] = P->cyc[i];
      }
      P->buf[i] = o->buf_tunable ? (int64_t)fmin(ceil(1.0 + fmax(1.0, 2.0 * o->cv)), 8) : o->buf0;
      if (o->buf_tunable && o->elem_cost < CHEAP_ELEMENT_S) P->buf[i] = CHEAP_BUFFER / 2;
    } else if (o->kind == PK_PREFETCH) {
      int in = o->input;
      double cv = in >= 0 ? P->ops[in].cv : 0;
      P->buf[i] = o->buf_tunable ? (int64_t)fmin(ceil(fmax(1.0, 1.0 + 2.0 * cv)), 16) : o->buf0;
    } else {
      P->buf[i] = o->buf0;
    }
  }
  if (P->add_prefetch) {
    double depth = ceil(X * L - busy);
    double cv = P->ops[P->root].cv;
    if (!(depth >= 1)) depth = 1;
    depth += fmin(ceil(2.0 * cv), 8);
    if (depth > 64) depth = 64;
    /* Cheap output elements cross in chunks too. */
    if (L < CHEAP_ELEMENT_S && depth < CHEAP_BUFFER) depth = CHEAP_BUFFER;
    P->prefetch_buf = (int64_t)depth;
  }
  /* The root prefetch that was already there gets the same depth. */
  if (P->ops[P->root].kind == PK_PREFETCH && P->ops[P->root].buf_tunable) {
    double depth = ceil(X * L - busy);
    if (!(depth >= 1)) depth = 1;
    depth += fmin(ceil(2.0 * P->ops[P->root].cv), 8);
    if (depth < P->buf[P->root]) depth = (double)P->buf[P->root];
    P->buf[P->root] = (int64_t)(depth > 64 ? 64 : depth);
  }
}

/* Shrinks tunable buffers (largest holder first) until the plan fits its memory budget; when the buffers are at
 * their smallest, takes workers from the tunable map that holds the most (each worker holds an element). */
static int fit_memory(sl_plan *P) {
  int64_t *minb = sl__calloc((size_t)P->nops, sizeof *minb);
  if (!minb) return sl__oom("the planner");
  min_buffers(P, P->par, minb);
  bool cut_workers = false;
  for (;;) {
    P->mem = plan_memory(P, P->par, P->buf, P->cyc, P->cache_at, P->cache_bytes, P->prefetch_buf);
    if (P->mem <= P->M) break;
    int worst = -2;
    double wb = 0;
    for (int i = 0; i < P->nops; i++)
      if (P->buf[i] > minb[i] && P->ops[i].bytes > wb) wb = P->ops[i].bytes, worst = i;
    if (P->prefetch_buf > 1 && P->ops[P->root].bytes >= wb) worst = -1;
    if (worst == -1) {
      P->prefetch_buf--;
      continue;
    }
    if (worst >= 0) {
      P->buf[worst]--;
      continue;
    }
    int w = -1;
    double held = 0;
    for (int i = 0; i < P->nops; i++) {
      const pm_op *o = &P->ops[i];
      double h = (double)P->par[i] * (o->bytes + in_bytes(P, i));
      if (o->kind == PK_MAP && o->par_tunable && P->par[i] > 1 && h > held) held = h, w = i;
    }
    if (w < 0) break;
    P->par[w]--;
    if (P->ops[w].buf_tunable) P->buf[w] = P->par[w] > 1 ? P->par[w] : 0;
    min_buffers(P, P->par, minb);
    cut_workers = true;
  }
  if (cut_workers) {
    P->predicted = sl__plan_eval(P, P->par, P->cache_at, P->C);
    if (P->predicted < 0) {
      sl__free(minb);
      return SL_ENOMEM;
    }
  }
  sl__free(minb);
  if (P->mem > P->M) {
    char need[32], have[32];
    fmt_bytes(need, sizeof need, P->mem);
    fmt_bytes(have, sizeof have, P->M);
    int big = 0;
    for (int i = 0; i < P->nops; i++)
      if (P->ops[i].bytes > P->ops[big].bytes) big = i;
    char el[32];
    fmt_bytes(el, sizeof el, P->ops[big].bytes);
    return sl__err(SL_EINVAL, "infeasible budget: memory %s is below the %s the pipeline holds at its smallest "
                              "buffers (largest element: %s at %s %s)", have, need, el, P->ops[big].path,
                   P->ops[big].label);
  }
  return 0;
}

/* Elements per epoch at op k when the spec does not say: the elements k made in the trace, scaled by the dataset's
 * bytes (its `files` ops' sizes) over the bytes its readers read. -1 when there is nothing to scale by. */
static double estimate_card(const sl_plan *P, int k) {
  double src = 0, read = 0;
  for (int j = 0; j < P->nops; j++) {
    if (!sl__plan_upstream(P, j, k)) continue;
    src += P->ops[j].src_bytes;
    read += P->ops[j].disk;
  }
  if (!(src > 0) || !(read > 0) || !(P->ops[k].n > 0)) return -1;
  return ceil(P->ops[k].n * src / read);
}

static int cache_candidates(const sl_plan *P, double budget, double base_bound, pm_cache *cands, int *ncands,
                            int *best_at, double *best_bound) {
  *best_at = -1;
  *best_bound = base_bound;
  *ncands = 0;
  int existing = -1;
  for (int i = 0; i < P->nops; i++)
    if (P->ops[i].kind == PK_CACHE) existing = i;
  for (int k = 0; k < P->nops; k++) {
    const pm_op *o = &P->ops[k];
    if (o->nested || o->kind == PK_PREFETCH || o->kind == PK_CACHE) continue;
    if (existing >= 0) continue;
    pm_cache *c = &cands[(*ncands)++];
    memset(c, 0, sizeof *c);
    c->at = k;
    int rnd = -1;
    for (int j = 0; j < P->nops; j++)
      if (P->ops[j].random && sl__plan_upstream(P, j, k)) rnd = j;
    if (rnd >= 0) {
      snprintf(c->why, sizeof c->why, "random op %s (%s) upstream", P->ops[rnd].path, P->ops[rnd].label);
      continue;
    }
    if (o->card == -2) {
      snprintf(c->why, sizeof c->why, "infinite cardinality (a repeat upstream)");
      continue;
    }
    bool reread = false;
    for (int r = 0; r < P->nops; r++)
      if (P->ops[r].kind == PK_REPEAT && r != k && sl__plan_upstream(P, k, r)) reread = true;
    if (!reread) {
      snprintf(c->why, sizeof c->why, "no repeat downstream (one pass reads each element once)");
      continue;
    }
    double card = (double)o->card;
    if (o->card < 0) {
      card = estimate_card(P, k);
      c->estimated = card > 0;
    }
    if (!(card >= 0)) {
      snprintf(c->why, sizeof c->why, "size unknown (cardinality unknown, the trace did not reach the end and the "
                                      "dataset's size is unknown)");
      continue;
    }
    /* An estimate gets a margin: the cache must not outgrow the budget when the guess is low. */
    c->bytes = card * (o->bytes + ELEM_OVERHEAD) * (c->estimated ? 1.1 : 1.0);
    if (c->bytes > budget) {
      char a[32], b[32];
      fmt_bytes(a, sizeof a, c->bytes);
      fmt_bytes(b, sizeof b, budget);
      snprintf(c->why, sizeof c->why, "size %s exceeds the %s left in the memory budget", a, b);
      continue;
    }
    double X;
    int rc = sl__plan_lp(P, k, P->C, &X, NULL);
    if (rc) return rc;
    c->legal = true;
    c->bound = X;
    /* Keep a cache only for a clear gain: it costs memory and a slow first epoch. */
    if (X > *best_bound * 1.02 && (*best_at < 0 || X > *best_bound)) {
      *best_at = k;
      *best_bound = X;
    }
  }
  return 0;
}

static int pick_bottleneck(const sl_plan *P) {
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

static int solve_config(sl_plan *P) {
  int rc = sl__plan_lp(P, P->cache_at, P->C, &P->bound, &P->limit);
  if (!rc) rc = search_parallelism(P, P->cache_at);
  if (!rc) {
    size_buffers(P);
    rc = fit_memory(P);
  }
  return rc;
}

int sl__plan_force_parallelism(sl_plan *P, int64_t par) {
  bool changed = false;
  for (int i = 0; i < P->nops; i++) {
    const pm_op *o = &P->ops[i];
    if (!o->par_tunable || (P->cache_at >= 0 && sl__plan_upstream(P, i, P->cache_at)) || P->par[i] == par) continue;
    P->par[i] = par;
    changed = true;
  }
  if (!changed) return 1;
  P->predicted = sl__plan_eval(P, P->par, P->cache_at, P->C);
  if (P->predicted < 0) return SL_ENOMEM;
  size_buffers(P);
  int rc = fit_memory(P);
  return rc < 0 ? rc : 0;
}

int sl__plan_as_traced(sl_plan *P) {
  for (int i = 0; i < P->nops; i++) {
    P->par[i] = P->ops[i].par0;
    P->buf[i] = P->ops[i].buf0;
    P->cyc[i] = P->ops[i].cyc0;
  }
  P->cache_at = -1;
  P->cache_bytes = 0;
  P->add_prefetch = false;
  P->prefetch_buf = 0;
  P->predicted = sl__plan_eval(P, P->par, -1, P->C);
  if (P->predicted < 0) return SL_ENOMEM;
  P->mem = plan_memory(P, P->par, P->buf, P->cyc, -1, 0, 0);
  return 0;
}

static int solve_fitting(sl_plan *P) {
  int rc = solve_config(P);
  if (rc == SL_EINVAL && P->cache_at >= 0) {
    /* The cache left too little room for the buffers the parallelism needs: plan without it. */
    sl_error_clear();
    P->cache_at = -1;
    P->cache_bytes = 0;
    rc = solve_config(P);
  }
  return rc;
}

/* The root prefetch costs a hand-off per element: the plan keeps it unless the plan without it is clearly faster
 * on the model (its buffer also absorbs the spread of per-element times, which the model does not price). */
static int maybe_drop_prefetch(sl_plan *P) {
  size_t nb = (size_t)P->nops * sizeof(int64_t);
  int64_t *sv = sl__malloc(3 * nb);
  if (!sv) return sl__oom("a plan");
  memcpy(sv, P->par, nb);
  memcpy(sv + P->nops, P->buf, nb);
  memcpy(sv + 2 * P->nops, P->cyc, nb);
  double pred = P->predicted, mem = P->mem, bound = P->bound, cb = P->cache_bytes;
  const char *limit = P->limit;
  int64_t pb = P->prefetch_buf;
  int cache = P->cache_at;
  P->add_prefetch = false;
  P->prefetch_buf = 0;
  int rc = solve_fitting(P);
  if (rc == SL_ENOMEM) {
    sl__free(sv);
    return rc;
  }
  if (rc || !(P->predicted > pred * 1.02)) {
    sl_error_clear();
    rc = 0;
    P->add_prefetch = true;
    P->prefetch_buf = pb;
    memcpy(P->par, sv, nb);
    memcpy(P->buf, sv + P->nops, nb);
    memcpy(P->cyc, sv + 2 * P->nops, nb);
    P->predicted = pred, P->mem = mem, P->bound = bound, P->limit = limit;
    P->cache_at = cache, P->cache_bytes = cb;
  }
  sl__free(sv);
  return rc;
}

int sl_plan_solve(sl_plan **out, const sl_trace *t, const sl_plan_opts *opts) {
  return sl__plan_solve(out, t, opts, 1);
}

int sl__plan_solve(sl_plan **out, const sl_trace *t, const sl_plan_opts *opts, double hscale) {
  *out = NULL;
  sl_plan_opts def = SL_PLAN_OPTS_INIT;
  if (!opts) opts = &def;
  if (opts->version != SL_PLAN_OPTS_VERSION)
    return sl__err(SL_EINVAL, "sl_plan_opts version %d, expected %d", opts->version, SL_PLAN_OPTS_VERSION);
  sl_plan *P = sl__calloc(1, sizeof *P);
  if (!P) return sl__oom("a plan");
  P->hscale = hscale;
  pm_cache *tmp = NULL;
  int64_t *p1 = NULL, *b1 = NULL;
  int rc = sl__plan_model(P, t, opts);
  if (rc) goto fail;
  P->cache_at = -1;
  P->more_mem_cache_at = -1;
  P->add_prefetch = opts->insert_prefetch && P->ops[P->root].kind != PK_PREFETCH;
  /* The least the pipeline can hold: tunable ops at parallelism 1, smallest buffers. */
  p1 = sl__calloc((size_t)P->nops, sizeof *p1);
  b1 = sl__calloc((size_t)P->nops, sizeof *b1);
  tmp = sl__calloc((size_t)P->nops, sizeof *tmp);
  if (!p1 || !b1 || !tmp) {
    rc = sl__oom("a plan");
    goto fail;
  }
  for (int i = 0; i < P->nops; i++) p1[i] = P->ops[i].par_tunable ? 1 : P->ops[i].par0;
  min_buffers(P, p1, b1);
  for (int i = 0; i < P->nops; i++) P->cyc[i] = P->ops[i].cyc0;
  double m0 = plan_memory(P, p1, b1, P->cyc, -1, 0, P->add_prefetch ? 1 : 0);
  if (m0 > P->M) {
    memcpy(P->par, p1, (size_t)P->nops * sizeof *p1);
    memcpy(P->buf, b1, (size_t)P->nops * sizeof *b1);
    P->prefetch_buf = P->add_prefetch ? 1 : 0;
    rc = fit_memory(P);
    if (!rc) rc = sl__err(SL_EINVAL, "infeasible memory budget");
    goto fail;
  }
  if ((rc = sl__plan_lp(P, -1, P->C, &P->bound_nocache, &P->limit))) goto fail;
  if (opts->insert_cache) {
    int at, ntmp;
    double bb;
    if ((rc = cache_candidates(P, 1e18, P->bound_nocache, tmp, &ntmp, &at, &bb))) goto fail;
    P->more_mem_cache_at = at;
    P->bound_more_mem = bb;
    if ((rc = cache_candidates(P, P->M - m0, P->bound_nocache, P->cands, &P->ncands, &at, &bb))) goto fail;
    P->cache_at = at;
    for (int k = 0; k < P->ncands; k++)
      if (P->cands[k].at == at) P->cache_bytes = P->cands[k].bytes;
  }
  rc = solve_fitting(P);
  if (!rc && P->add_prefetch) rc = maybe_drop_prefetch(P);
  if (rc) goto fail;
  if ((rc = sl__plan_lp(P, P->cache_at, P->C + 1, &P->bound_plus_core, NULL))) goto fail;
  P->bottleneck = pick_bottleneck(P);
  P->theta_total = 0;
  for (int i = 0; i < P->nops; i++)
    if (!(P->cache_at >= 0 && sl__plan_upstream(P, i, P->cache_at))) P->theta_total += P->predicted * P->ops[i].c;
  sl__free(tmp);
  sl__free(p1);
  sl__free(b1);
  *out = P;
  return 0;
fail:
  sl__free(tmp);
  sl__free(p1);
  sl__free(b1);
  sl_plan_free(P);
  return rc;
}

void sl_plan_free(sl_plan *P) {
  if (!P) return;
  if (P->strs)
    for (int i = 0; i < 3 * P->nops; i++) sl__free(P->strs[i]);
  sl__free(P->strs);
  sl__free(P->ops);
  sl__free(P->par);
  sl__free(P->buf);
  sl__free(P->cyc);
  sl__free(P->cands);
  json_decref(P->spec);
  sl__free(P);
}

double sl_plan_bound(const sl_plan *P) { return P->bound; }
double sl_plan_predicted(const sl_plan *P) { return P->predicted; }
int sl_plan_bottleneck(const sl_plan *P) { return P->bottleneck; }
int sl_plan_cache_point(const sl_plan *P) { return P->cache_at; }
const char *sl_plan_limit(const sl_plan *P) { return P->limit ? P->limit : "none"; }
int64_t sl_plan_parallelism(const sl_plan *P, int i) {
  if (i < 0 || i >= P->nops) return 0;
  int k = P->ops[i].kind;
  return k == PK_MAP || k == PK_INTERLEAVE ? P->par[i] : 0;
}
int64_t sl_plan_buffer(const sl_plan *P, int i) {
  if (i < 0 || i >= P->nops) return 0;
  int k = P->ops[i].kind;
  return k == PK_MAP || k == PK_INTERLEAVE || k == PK_PREFETCH ? P->buf[i] : 0;
}
int64_t sl_plan_memory(const sl_plan *P) { return (int64_t)fmin(P->mem, 9e18); }
