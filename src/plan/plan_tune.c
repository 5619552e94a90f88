/* plan/plan_tune.c: the online tuner (`sluice run --tuner sluice`, sl_pipeline_tune): the planner's model and LP,
 * re-solved from the pipeline's always-on counters while it runs. Every interval (the first window: as soon as its
 * counts carry a solve) it makes a trace of the window's
 * counters (with the machine's load over it), and when the model's costs drifted in two windows in a row (or
 * nothing was solved yet) solves the plan and sets the running pipeline's "autotune" knobs (parallelism, prefetch
 * depth), logging each change with its reason in one line. A remote reader's read-ahead follows its network: when
 * its time to first byte or a stream's bandwidth moved, the plan is solved on the window for the requests in flight
 * its next files open with (net_step). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ops/pipeline_int.h"
#include "plan/plan_int.h"

/* The least predicted gain (over the knobs in force, on the same model) worth changing knobs for. */
#define SL__TUNE_MIN_GAIN 0.05
/* The first solve comes as soon as the window's counts can carry it, not after an interval (short epochs were never
 * tuned): the root made SL__TUNE_FIRST_ROOT elements (a quarter of a modelled window, what a slow pipeline's windows
 * are allowed after two intervals) and every op that did at least SL__TUNE_FIRST_SHARE of the window's own CPU has
 * SL__TUNE_FIRST_SAMPLES timed elements (a cheap op, timed once in thousands of calls, carries no weight). */
#define SL__TUNE_FIRST_ROOT (SL_PLAN_MIN_ELEMENTS / 4)
#define SL__TUNE_FIRST_SAMPLES 16
#define SL__TUNE_FIRST_SHARE 0.05

typedef struct tune_change {
  double t;           /* seconds since the tuner started */
  int op;
  const char *knob;   /* "parallelism", "buffer", "cache" or "readahead" (static strings) */
  int64_t from, to;
  char why[480];
} tune_change;

struct sl_tuner {
  sl_pipeline *p;
  sl_tune_opts opts;
  json_t *spec;        /* copy of the pipeline's spec, taken on the owner's thread */
  char *origin;
  sl_machine m;
  int nops;
  pthread_t thread;
  pthread_mutex_t mu;  /* guards stop and the log */
  pthread_cond_t cv;
  bool stop;
  atomic_int solves;
  tune_change *log;
  int nlog, caplog;
  double *c_solved;    /* each op's CPU per output element at the last solve (-1: none yet) */
  double *c_prev;      /* the same in the window before (-1: none; tuner thread) */
  uint64_t t0;
  bool first_done;     /* a window was solved on (before: windows end on counts, first_ready; tuner thread) */
  bool cached;         /* a cache was inserted live (a repeat keeps and replays its input's epoch) */
  int cache_rep;       /* that repeat op */
  bool cache_seen_settled; /* a window ended with that cache replaying (or given up) */
  /* The sequential trial (trial_step): 0 not yet, 1 running, 3 decided (one window to settle), 2 done. */
  int trial, trial_windows;
  double trial_base;   /* throughput of the window before the trial, with workers */
  double trial_base_cpu; /* that window's process CPU per element */
  int *trial_par;      /* each op's parallelism in force before the trial, then (nops on) its output buffer */
  int last_changes;    /* log length after the previous window: a window that changed knobs is no baseline */
  bool seq_won;        /* the trial kept parallelism 1: later solves (on costs that still do not price hand-offs)
                        * give no op workers back unless the whole cost moved */
  bool seq_plan;       /* the knobs in force were solved on the trial's window (sequential costs): the same rule */
  /* A solve's changes on probation (pend_step): the knobs before them, the throughput of the window solved on. */
  int pend, pend_windows;
  double pend_base, pend_base_cpu; /* that window's throughput and process CPU per element */
  double pend_sum, pend_cpu_sum;   /* the same summed over the probation's windows so far */
  int *pend_par, *pend_buf, *tgt_par, *tgt_buf;
  int *rej;            /* knob vectors reverted (SL__TUNE_REJ of them, 2 x nops each: parallelism, buffer) */
  int nrej;
  /* Each op's time to first byte and one stream's bandwidth when its read-ahead was last set (net_step; -1: not
   * yet); the bandwidth INFINITY when too fast to time. */
  double *net_lat, *net_bw;
  /* The first window's start, taken on the caller's thread before the tuner thread runs (a thread scheduled late
   * would start its window after the counts it needed, and a consumer that then stopped pulling left it unsolved
   * for good): each op's counters and timed elements, the wall time, process CPU, load and I/O. The tuner thread
   * owns them from its start. */
  sl_op_stats *base0;
  uint64_t *timed00;
  uint64_t tw0;
  double cw0;
  sl__load_snap lw0;
  int64_t dw0, chw0;
  bool iow0;
};

#define SL__TUNE_REJ 4
/* A change is reverted when the window after it measured below this fraction of the one before (one window's
 * noise on a shared machine is several per cent: only a clear loss is taken back). */
#define SL__TUNE_KEEP 0.90

/* Whether the knobs (par, buf) were tried and reverted: the same parallelism everywhere and the same buffers on or
 * off (a depth of 3 instead of 9 is the same thread boundary, and was as slow). */
static bool is_rejected(const sl_tuner *a, const int *par, const int *buf) {
  int n = a->nrej < SL__TUNE_REJ ? a->nrej : SL__TUNE_REJ;
  for (int r = 0; r < n; r++) {
    const int *v = a->rej + (size_t)r * 2 * (size_t)a->nops;
    bool same = true;
    for (int i = 0; i < a->nops && same; i++) same = v[i] == par[i] && (v[a->nops + i] > 0) == (buf[i] > 0);
    if (same) return true;
  }
  return false;
}

/* The repeat op whose input is op k (a cache there can be inserted live, sl__op.live_cache), or -1. */
static int repeat_over(const sl_tuner *a, int k) {
  sl__op *in = sl__pipeline_op(a->p, k);
  for (int j = 0; j < a->nops; j++) {
    sl__op *op = sl__pipeline_op(a->p, j);
    if (op->input == in && sl__op_model(op->vt->kind) == SL__MK_REPEAT) return j;
  }
  return -1;
}

static double proc_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void log_change(sl_tuner *a, int op, const char *knob, int64_t from, int64_t to, const char *why) {
  pthread_mutex_lock(&a->mu);
  if (a->nlog == a->caplog) {
    int cap = a->caplog ? 2 * a->caplog : 16;
    tune_change *n = sl__realloc(a->log, (size_t)cap * sizeof *n);
    if (!n) { /* the change was made; only its line is lost */
      pthread_mutex_unlock(&a->mu);
      return;
    }
    a->log = n;
    a->caplog = cap;
  }
  tune_change *c = &a->log[a->nlog++];
  c->t = (double)(sl__now_ns() - a->t0) * 1e-9;
  c->op = op;
  c->knob = knob;
  c->from = from;
  c->to = to;
  snprintf(c->why, sizeof c->why, "%s", why);
  pthread_mutex_unlock(&a->mu);
}

/* The largest change of an op's CPU per output element between the window modelled in P and the reference `ref`,
 * relative to the larger of the two windows' total CPU per element: an op's own figure in one window is blurred by
 * sampling and by where hand-offs and waits fall (on tabular's inline ops they moved 30-60% from window to window
 * while the total held within 3%), and a change that matters moves the total. INFINITY when there is no reference.
 * With `total_only`, the change of the total alone. */
static double drift_of(const sl_plan *P, const double *ref, bool total_only) {
  double total = 0, total0 = 0, d = 0;
  for (int i = 0; i < P->nops; i++) {
    if (ref[i] < 0) return INFINITY;
    total += P->ops[i].c;
    total0 += ref[i];
  }
  double norm = fmax(fmax(total, total0), 1e-12);
  if (total_only) return fabs(total - total0) / norm;
  for (int i = 0; i < P->nops; i++) d = fmax(d, fabs(P->ops[i].c - ref[i]) / norm);
  return d;
}

/* Sets op i's parallelism and output buffer live, logging each that changes with `why`; true when one changed. */
static bool set_op_knobs(sl_tuner *a, int i, int par, int buf, const char *why) {
  sl__op *op = sl__pipeline_op(a->p, i);
  bool changed = false;
  int cur = atomic_load_explicit(&op->active_par, memory_order_relaxed);
  if (par != cur) {
    atomic_store_explicit(&op->active_par, par, memory_order_relaxed);
    log_change(a, i, "parallelism", cur, par, why);
    changed = true;
  }
  cur = atomic_load_explicit(&op->active_buf, memory_order_relaxed);
  if (buf != cur) {
    atomic_store_explicit(&op->active_buf, buf, memory_order_relaxed);
    log_change(a, i, "buffer", cur, buf, why);
    changed = true;
  }
  return changed;
}

/* The bottleneck sentence of a solve ("bottleneck ops[2] (map spin) 77% of CPU, 4969 elem/s per core") into buf;
 * false when the plan names none. Under a CPU limit (the LP's sum over all ops) the op named is the costliest one,
 * which gains most from cores; the per-op rates of a live window are blurred by its waits on locks and hand-offs. */
static bool bottleneck_words(char *buf, size_t n, const sl_plan *P) {
  int b = sl_plan_bottleneck(P);
  double total = 0;
  for (int i = 0; i < P->nops; i++) total += P->ops[i].c;
  if (!strcmp(sl_plan_limit(P), "cpu"))
    for (int i = 0; i < P->nops; i++)
      if (b < 0 || P->ops[i].c > P->ops[b].c) b = i;
  if (b < 0) return false;
  snprintf(buf, n, "bottleneck %s (%s %s) %.0f%% of CPU, %.0f elem/s per core", P->ops[b].path, P->ops[b].op,
           P->ops[b].label, total > 0 ? 100 * P->ops[b].c / total : 0, P->ops[b].c > 0 ? 1 / P->ops[b].c : 0);
  return true;
}

/* The plan options of a window's solve: "autotune" knobs only, no prefetch inserted (a live pipeline takes no new
 * op), a cache only once (right before a repeat, which keeps and replays its input's next epoch). */
static int window_opts(const sl_tuner *a, sl_plan_opts *po) {
  *po = a->opts.plan;
  po->knobs = SL_PLAN_KNOBS_AUTOTUNE;
  po->no_cache = a->cached;
  po->no_prefetch = true;
  return sl__plan_opts_resolve(po, po, true, SL_PLAN_KNOBS_AUTOTUNE);
}

/* Puts the knobs just set on probation against a window that measured `base` elements/s at `base_cpu` process CPU
 * seconds per element (pend_step). */
static void pend_start(sl_tuner *a, double base, double base_cpu) {
  a->pend = 1;
  a->pend_windows = 0;
  a->pend_base = base;
  a->pend_base_cpu = base_cpu;
  a->pend_sum = a->pend_cpu_sum = 0;
}

/* The trial's window ran every tunable op at parallelism 1: its costs are a sequential trace's, hand-offs apart,
 * as `sluice optimize` plans from, and the knobs are solved on that window (every boundary priced by the hand-off
 * probe, no cache), whichever side won. When the workers won, instead of going back to the knobs of the first
 * solve, which was made on costs with the hand-offs inside (on ssd it gave seven maps two workers each, 1.91 ms of
 * CPU per example against the offline plan's 1.74). When parallelism 1 won, because all-or-nothing is not the only
 * choice: tabular's trial kept every op at 1 (workers everywhere had lost), while optimize's plan, solved on the
 * same kind of window, gave parse_csv alone two workers and ran 1.09x the sequential pipeline. The solve is set
 * only when the model predicts it SL__TUNE_MIN_GAIN better than the winner's knobs, on probation against the
 * throughput the winner measured (a loss goes back to the winner's knobs). Returns true when it set them. */
static bool seq_solve(sl_tuner *a, sl_trace *t, double measured) {
  sl_plan_opts po;
  sl_plan *P = NULL;
  int64_t *was = sl__calloc((size_t)a->nops, sizeof *was);
  bool set = false;
  if (!was || window_opts(a, &po)) goto out;
  po.no_cache = true;
  /* An "autotune" op is async in its counters whatever it ran as; in this window the tunable maps and interleaves
   * at 1 ran on their consumer's thread and a prefetch at depth 0 was pulled through: the model is told so, and
   * prices the hand-offs of the boundaries a plan adds (as on optimize's sequential variant). */
  for (int i = 0; i < a->nops && i < t->nops; i++) {
    sl__op *op = sl__pipeline_op(a->p, i);
    sl__model_kind mk = sl__op_model(op->vt->kind);
    sl_op_stats *s = &t->ops[i].s;
    if ((op->par_autotune && s->parallelism <= 1) ||
        (op->buf_autotune && mk == SL__MK_PREFETCH && s->buffer == 0))
      s->async = false;
  }
  if (sl__plan_solve(&P, t, &po, 1.0)) goto out;
  /* The knobs the solve must beat: the winner's (those in force when parallelism 1 won, else those before the trial) */
  for (int i = 0; i < a->nops; i++)
    was[i] = a->seq_won ? atomic_load_explicit(&sl__pipeline_op(a->p, i)->active_par, memory_order_relaxed)
                        : a->trial_par[i];
  /* What the hand-offs of the knobs before the trial really cost here: the process CPU per element the window
   * before the trial spent beyond this one's (element sizes, cache misses, wake-ups; on ssd's 300x300 images the
   * probe's 30 us spin elements undersell them). The model's hand-off costs are scaled to it, as optimize does
   * after a measured run, and the plan is solved again. Not when parallelism 1 won: then the workers' excess was
   * that of every op at full parallelism sharing the cores (tabular: 8 threads on 2 cores, 22-25 us per element
   * against 4.2 sequential, 1.45x the probe's price), which priced a plan adding one op's workers out; the probe's
   * price stands, and probation judges the plan. */
  double cpu_seq = sl__plan_trace_cpu(t);
  double hmodel = sl__plan_handoff_cpu_for(P, was), excess = a->trial_base_cpu - cpu_seq;
  if (!a->seq_won && hmodel > 0 && cpu_seq > 0 && a->trial_base_cpu > 0) {
    double hscale = fmin(fmax(excess / hmodel, 0.05), 100.0);
    sl_plan_free(P);
    P = NULL;
    if (sl__plan_solve(&P, t, &po, hscale)) goto out;
  }
  double before = sl__plan_eval(P, was, -1, P->C);
  if (before < 0 || !(P->predicted > (1 + SL__TUNE_MIN_GAIN) * before)) goto out; /* < 0: out of memory */
  for (int i = 0; i < a->nops; i++) {
    sl__op *op = sl__pipeline_op(a->p, i);
    /* a revert goes back to the winner's knobs */
    a->pend_par[i] = (int)was[i];
    a->pend_buf[i] = a->seq_won ? atomic_load_explicit(&op->active_buf, memory_order_relaxed)
                                : a->trial_par[a->nops + i];
    a->tgt_par[i] = atomic_load_explicit(&op->active_par, memory_order_relaxed);
    a->tgt_buf[i] = atomic_load_explicit(&op->active_buf, memory_order_relaxed);
    if (op->par_autotune && P->par[i] > 0)
      a->tgt_par[i] = (int)(P->par[i] < op->parallelism ? P->par[i] : op->parallelism); /* workers that exist */
    if (op->buf_autotune && sl__op_model(op->vt->kind) == SL__MK_PREFETCH) a->tgt_buf[i] = (int)P->buf[i];
  }
  char why[400], bn[160];
  if (!bottleneck_words(bn, sizeof bn, P)) snprintf(bn, sizeof bn, "no bottleneck named");
  snprintf(why, sizeof why, "trial: %.0f elem/s at parallelism 1 against %.0f with workers; solved on its window "
           "(sequential costs, hand-offs priced): %s; predicted %.0f elem/s against %.0f for the knobs %s", measured,
           a->trial_base, bn, P->predicted, before, a->seq_won ? "of the trial" : "before it");
  for (int i = 0; i < a->nops; i++) {
    set_op_knobs(a, i, a->tgt_par[i], a->tgt_buf[i], why);
    a->c_solved[i] = P->ops[i].c;
    a->c_prev[i] = -1;
  }
  pend_start(a, a->seq_won ? measured : a->trial_base, a->seq_won ? cpu_seq : a->trial_base_cpu);
  a->seq_plan = set = true;
  atomic_fetch_add(&a->solves, 1); /* counted once the knobs are set, as tune_window's solves */
out:
  sl__free(was);
  sl_plan_free(P);
  return set;
}

/* The counters of a running async pipeline include its hand-offs in every op's cost, so the model cannot see
 * what parallelism 1 (no worker thread: an "autotune" map or interleave at 1 runs on its consumer's thread) would
 * save; on cheap elements (tabular's CSV lines) that is most of the cost. As `sluice optimize` measures its
 * all-sequential plan, the tuner tries it once: after the first solve, in a window that changed nothing, every
 * tunable op goes to parallelism 1; the window after the switch is skipped and the next one compared with the
 * last one with workers: the better measured is kept, or within a tie (SL__PLAN_TIE) the one clearly cheaper per
 * element (sl__plan_prefer; reverting is logged with both figures). Returns true while the trial runs (the window
 * is not solved on). */
static bool trial_step(sl_tuner *a, sl_trace *t) {
  double measured = sl_trace_throughput(t);
  if (a->trial == 2) return false;
  if (a->trial == 3) { /* the window after the decision: workers waking, buffers refilling; not solved on */
    a->trial = 2;
    return true;
  }
  if (a->trial == 1) {
    if (++a->trial_windows < 2) return true;
    a->trial = 3;
    /* Within a tie, parallelism 1 wins at clearly less CPU per element, as in optimize's runoff. */
    a->seq_won = sl__plan_prefer(a->trial_base, a->trial_base_cpu, measured,
                                 sl__plan_trace_cpu(t));
    if (seq_solve(a, t, measured)) {
      a->trial = 2; /* the change's probation skips the window in which it takes effect */
      return true;
    }
    if (!a->seq_won) {
      char why[200];
      snprintf(why, sizeof why, "trial reverted: %.0f elem/s at parallelism 1 against %.0f with workers",
               measured, a->trial_base);
      for (int i = 0; i < a->nops; i++) set_op_knobs(a, i, a->trial_par[i], a->trial_par[a->nops + i], why);
    }
    /* Either way the costs changed: the next window is modelled afresh. */
    for (int i = 0; i < a->nops; i++) a->c_solved[i] = a->c_prev[i] = -1;
    return true;
  }
  pthread_mutex_lock(&a->mu);
  int n = a->nlog;
  pthread_mutex_unlock(&a->mu);
  bool quiet = n == a->last_changes;
  a->last_changes = n;
  if (atomic_load(&a->solves) < 1 || !quiet || a->pend) return false; /* not while a change is on probation */
  /* Nor while a cache inserted live is being filled: a window then replaying it runs many times faster, and the
   * trial would compare the two (imagenet-cacheable: a trial started at 5 s was kept, and the replay ran on one
   * thread at 0.62x the offline plan). */
  if (a->cached && !atomic_load_explicit(&sl__pipeline_op(a->p, a->cache_rep)->live_cache_settled, memory_order_relaxed))
    return false;
  /* And the window in which it settled mixed filling and replay: no baseline for the trial either. */
  if (a->cached && !a->cache_seen_settled) {
    a->cache_seen_settled = true;
    return false;
  }
  bool any = false;
  for (int i = 0; i < a->nops; i++) {
    sl__op *op = sl__pipeline_op(a->p, i);
    a->trial_par[i] = atomic_load_explicit(&op->active_par, memory_order_relaxed);
    a->trial_par[a->nops + i] = atomic_load_explicit(&op->active_buf, memory_order_relaxed);
    if (op->par_autotune && a->trial_par[i] > 1) any = true; /* par_autotune: its table says parallelism is tunable */
  }
  if (!any) {
    a->trial = 2;
    return false;
  }
  char why[200];
  snprintf(why, sizeof why, "trial: every tunable op at parallelism 1 and no prefetch ahead (worker threads must earn "
           "their hand-offs); %.0f elem/s measured with workers in the last window", measured);
  for (int i = 0; i < a->nops; i++) {
    sl__op *op = sl__pipeline_op(a->p, i);
    sl__model_kind mk = sl__op_model(op->vt->kind);
    if (op->par_autotune && a->trial_par[i] > 1) {
      atomic_store_explicit(&op->active_par, 1, memory_order_relaxed);
      log_change(a, i, "parallelism", a->trial_par[i], 1, why);
    }
    if (op->buf_autotune && mk == SL__MK_PREFETCH && a->trial_par[a->nops + i] > 0) {
      atomic_store_explicit(&op->active_buf, 0, memory_order_relaxed);
      log_change(a, i, "buffer", a->trial_par[a->nops + i], 0, why);
    }
  }
  a->trial = 1;
  a->trial_windows = 0;
  a->trial_base = measured;
  a->trial_base_cpu = sl__plan_trace_cpu(t);
  pthread_mutex_lock(&a->mu);
  a->last_changes = a->nlog;
  pthread_mutex_unlock(&a->mu);
  return true;
}

/* The model's predictions are made on costs that hand-offs and time-sharing blur, so what a solve changed is on
 * probation: the window of the change is skipped and the next one compared with the window it was solved on; one
 * that does not pass is followed by a second, and the two windows' mean is judged (one ~1 s window on this VM moved
 * 10-20%: two of eight tabular runs took back a change that ran 1.13x in longer runs). A clear loss (below
 * SL__TUNE_KEEP) is taken back (logged with both figures) and that knob vector is not set again. A change that
 * spends clearly more CPU per element than the knobs before it (workers added: 1.25x and more) must win beyond a
 * tie (sl__plan_prefer): transformer's tokenize at two workers spent 1.7x the sequential CPU, passed the 0.9 bar in
 * its window and then ran at 0.83x the offline plan. Returns true when the window is not to be solved on. */
static bool pend_step(sl_tuner *a, const sl_trace *t) {
  if (!a->pend) return false;
  if (++a->pend_windows < 2) return true;
  double measured = sl_trace_throughput(t), cpu = sl__plan_trace_cpu(t);
  a->pend_sum += measured;
  a->pend_cpu_sum += cpu;
  int n = a->pend_windows - 1;
  measured = a->pend_sum / n;
  cpu = a->pend_cpu_sum / n;
  bool costlier = a->pend_base_cpu > 0 && cpu > 0 && a->pend_base_cpu <= SL__PLAN_CHEAPER * cpu;
  bool pass = costlier ? sl__plan_prefer(a->pend_base, a->pend_base_cpu, measured, cpu)
                       : measured >= SL__TUNE_KEEP * a->pend_base;
  if (!pass && n < 2) return true; /* a second window decides */
  a->pend = 0;
  if (pass) {
    /* Kept knobs solved on the window of a trial that parallelism 1 won: the costs they run at (their hand-offs now
     * inside) are the new reference, not a drift from the sequential ones (a solve on them, blind to hand-offs, gave
     * tabular's hash_bucket workers too and ran at 0.43x the plan); the next solve is a first one, which gives no
     * op more workers (keep_seq). */
    if (a->seq_plan && a->seq_won)
      for (int i = 0; i < a->nops; i++) a->c_solved[i] = a->c_prev[i] = -1;
    return false;
  }
  int *v = a->rej + (size_t)(a->nrej++ % SL__TUNE_REJ) * 2 * (size_t)a->nops;
  char why[240];
  snprintf(why, sizeof why, "reverted: %.0f elem/s measured after the change (%s) against %.0f before it%s", measured,
           n > 1 ? "mean of two windows" : "one window", a->pend_base,
           costlier ? ", at clearly more CPU per element: no gain beyond a tie" : "");
  bool fresh = a->seq_plan; /* back to the knobs before the trial: their costs are modelled afresh, as after it */
  a->seq_plan = false;
  for (int i = 0; i < a->nops; i++) {
    sl__op *op = sl__pipeline_op(a->p, i);
    v[i] = atomic_load_explicit(&op->active_par, memory_order_relaxed);
    v[a->nops + i] = atomic_load_explicit(&op->active_buf, memory_order_relaxed);
    set_op_knobs(a, i, a->pend_par[i], a->pend_buf[i], why);
    a->c_prev[i] = -1; /* the costs go back to those solved on: no drift to confirm from this window */
    if (fresh) a->c_solved[i] = -1;
  }
  return true;
}

/* Requests of a remote reader a window needs before its time to first byte and bandwidth are figures. */
#define SL__TUNE_NET_REQUESTS 4

/* Whether op i is a remote reader whose spec leaves its readahead to sluice (absent or 0): the tuner's to set. */
static bool ra_tunable(const sl_tuner *a, int i) {
  json_t *ra = json_object_get(sl__pipeline_op(a->p, i)->json, "readahead");
  return !ra || (json_is_integer(ra) && json_integer_value(ra) == 0);
}

/* Whether x moved from x0 by more than the share thr of x0 (x0 < 0: never set; both INFINITY: no). */
static bool moved(double x, double x0, double thr) {
  if (x0 < 0) return true;
  if (isinf(x) || isinf(x0)) return isinf(x) != isinf(x0);
  return fabs(x - x0) > thr * fmax(x0, 1e-12);
}

/* A remote reader's read-ahead against the network of the window: when a reader's time to first byte or one
 * stream's bandwidth (over at least SL__TUNE_NET_REQUESTS requests) moved by more than the drift threshold from the
 * figures its read-ahead was last set for (or it was never set), the plan is solved on the window and the reader's
 * next files open with the requests in flight the plan gives it (plan_net.c: the least whose rate
 * S k B / (L + B / b) carries the predicted rate, within the caps and the memory budget). Runs in every window
 * (a trial's and a probation's too): the network changes on its own, not with the knobs. */
static void net_step(sl_tuner *a, sl_trace *t) {
  double thr = a->opts.drift > 0 ? a->opts.drift : 0.2;
  bool any = false;
  for (int i = 0; i < a->nops && i < t->nops; i++) {
    const sl_op_stats *s = &t->ops[i].s;
    if (s->net_requests < SL__TUNE_NET_REQUESTS || !ra_tunable(a, i)) continue;
    double lat = s->net_ttfb_seconds / (double)s->net_requests;
    double bw = s->net_xfer_seconds > 0 ? (double)s->net_bytes / s->net_xfer_seconds : INFINITY;
    if (moved(lat, a->net_lat[i], thr) || moved(bw, a->net_bw[i], thr)) any = true;
  }
  if (!any) return;
  sl_plan_opts po;
  sl_plan *P = NULL;
  if (window_opts(a, &po)) return;
  po.no_cache = true; /* the read-ahead only: a cache is tune_window's to insert */
  if (sl__plan_solve(&P, t, &po, 1.0)) {
    sl_error_clear();
    return;
  }
  for (int k = 0; k < P->nnet; k++) {
    const sl__pm_net *x = &P->net[k];
    int i = x->op;
    const sl_op_stats *s = &t->ops[i].s;
    if (s->net_requests < SL__TUNE_NET_REQUESTS || !ra_tunable(a, i)) continue;
    double bw = x->stream_bw;
    if (!moved(x->latency, a->net_lat[i], thr) && !moved(bw, a->net_bw[i], thr)) continue;
    char was[64], why[480];
    if (a->net_lat[i] < 0) snprintf(was, sizeof was, "first setting");
    else snprintf(was, sizeof was, "%.1f ms and %.3g MB/s when last set", a->net_lat[i] * 1e3, a->net_bw[i] / 1e6);
    a->net_lat[i] = x->latency;
    a->net_bw[i] = bw;
    sl__op *op = sl__pipeline_op(a->p, i);
    int cur = atomic_load_explicit(&op->active_ra, memory_order_relaxed);
    if (cur <= 0) cur = (int)s->net_in_flight;
    int want = (int)x->in_flight;
    if (want < 1 || want == cur) continue;
    snprintf(why, sizeof why, "network: %.1f ms to first byte, %.3g MB/s a stream (%s): %d requests of %.0f kB in "
             "flight on each of %lld file%s carry %.3g MB/s for the predicted %.0f elem/s (limit %s); the reader's "
             "next files open with them", x->latency * 1e3, isinf(bw) ? 0 : bw / 1e6, was, want, x->block / 1e3,
             (long long)x->streams, x->streams == 1 ? "" : "s", x->rate / 1e6, P->predicted, sl_plan_limit(P));
    atomic_store_explicit(&op->active_ra, want, memory_order_relaxed);
    log_change(a, i, "readahead", cur, want, why);
  }
  sl_plan_free(P);
}

/* One window: model it, and when the costs drifted, solve and set the knobs. `m` is the machine with the load
 * other processes put on it during the window, run_delay the window's runqueue wait per CPU second: without them
 * a CPU-bound op that waited for a core on a shared machine would look like one waiting on I/O. The window's
 * counters carry each op's own run-queue delay too (runq_seconds, their difference), so the model tells an op's
 * waiting for a core from its blocked time as on a trace. */
static void tune_window(sl_tuner *a, const sl_op_stats *now, const sl_op_stats *base, double secs, double cpu,
                        const sl_machine *m, double run_delay, const int64_t io[2]) {
  sl_trace *t = NULL;
  sl_plan *M = NULL, *P = NULL;
  if (sl__trace_from_counters(&t, a->spec, a->origin, m, now, base, a->nops, secs, cpu, run_delay)) goto out;
  /* What the block devices delivered in the window (-1: unknown): page-cache reads are no disk work here either. */
  t->device_bytes = io[0];
  t->read_chars = io[1];
  net_step(a, t);
  if (trial_step(a, t) || pend_step(a, t)) goto out;
  sl_plan_opts po;
  if (window_opts(a, &po)) goto out;
  /* The model alone (cheap) says whether the costs moved; only then is the plan solved again. */
  M = sl__calloc(1, sizeof *M);
  if (!M) goto out;
  M->opts = po;
  if (sl__plan_model(M, t, &po)) goto out;
  /* A drift is solved on only when this window and the one before both moved from the costs of the last solve and
   * agree with each other: a window in which a cost changed mixes the old cost and the new one (a plan made on it
   * would be made for neither, and its measured throughput is partly the old one), and a single window's sampling
   * noise is no drift. The window that shows a change is followed by one that ran entirely after it; that one is
   * solved on. The same holds for costs that the tuner's own knob changes moved (hand-offs, waits for slots): the
   * plan is made again on what the new knobs cost, and changes nothing unless that predicts a gain. */
  double thr = a->opts.drift > 0 ? a->opts.drift : 0.2;
  double drift = drift_of(M, a->c_solved, false);
  bool first = isinf(drift);
  bool confirmed = first || (drift > thr && drift_of(M, a->c_prev, false) <= thr);
  /* After the trial measured parallelism 1 faster, workers come back only when the pipeline's whole cost moved (new
   * data, a stage that became costly): the model, blind to hand-offs, predicts a gain from them on every solve. */
  bool keep_seq = (a->seq_won || a->seq_plan) && (first || drift_of(M, a->c_solved, true) <= thr);
  for (int i = 0; i < a->nops; i++) a->c_prev[i] = M->ops[i].c;
  if (!confirmed) goto out;
  if (sl__plan_solve(&P, t, &po, 1.0)) goto out;
  int rep = P->cache_at >= 0 ? repeat_over(a, P->cache_at) : -1;
  if (P->cache_at >= 0 && rep < 0) { /* a cache elsewhere: the plan without one */
    sl_plan_free(P);
    P = NULL;
    po.no_cache = true;
    if (sl__plan_solve(&P, t, &po, 1.0)) goto out;
  }
  for (int i = 0; i < a->nops; i++) a->c_solved[i] = M->ops[i].c;
  a->first_done = true;
  /* Change knobs only for a predicted gain of at least SL__TUNE_MIN_GAIN over the knobs in force (on the same
   * model): a marginal gain is within the model's error and not worth the churn. */
  int64_t *cur = sl__calloc((size_t)a->nops, sizeof *cur);
  if (!cur) {
    atomic_fetch_add(&a->solves, 1);
    goto out;
  }
  for (int i = 0; i < a->nops; i++) cur[i] = P->ops[i].par0;
  double now_x = sl__plan_eval(P, cur, -1, P->C);
  sl__free(cur);
  if (now_x < 0) goto out; /* out of memory: no change */
  double measured = sl_trace_throughput(t);
  /* Nor when the plan's prediction does not beat what the window measured: the model's costs from one window of a
   * running pipeline (sampled, under time-sharing) can be low or high, and a change it cannot justify against the
   * measurement is not made. */
  if (!(P->predicted > (1 + SL__TUNE_MIN_GAIN) * fmax(now_x, measured))) {
    atomic_fetch_add(&a->solves, 1);
    goto out;
  }
  double pred = sl_plan_predicted(P);
  char why[480], bn[160];
  char dr[96];
  if (first) snprintf(dr, sizeof dr, "first solve");
  else snprintf(dr, sizeof dr, "drift: a stage's CPU/element moved by %.0f%% of the total (two windows)", 100 * drift);
  if (bottleneck_words(bn, sizeof bn, P))
    snprintf(why, sizeof why, "%s; %s; predicted %.0f elem/s (%+.0f%% over the knobs in force; %.0f measured in the "
             "last %.1f s)", dr, bn, pred, now_x > 0 ? 100 * (pred / now_x - 1) : 0, measured, secs);
  else
    snprintf(why, sizeof why, "%s; predicted %.0f elem/s", dr, pred);
  if (rep >= 0) {
    /* Twice the model's estimate of the epoch's bytes (an estimate), within the room the memory budget leaves. */
    double room = P->M - P->mem + P->cache_bytes;
    int64_t budget = (int64_t)fmin(fmax(fmin(room, 2 * P->cache_bytes), P->cache_bytes), 9e18);
    char cwhy[480];
    bool mb = P->cache_bytes >= 1e6;
    snprintf(cwhy, sizeof cwhy, "cache after %s (%s %s), about %.1f %s, kept from the next epoch and replayed by the "
             "repeat; %.300s", P->ops[P->cache_at].path, P->ops[P->cache_at].op, P->ops[P->cache_at].label,
             P->cache_bytes / (mb ? 1e6 : 1e3), mb ? "MB" : "kB", why);
    atomic_store_explicit(&sl__pipeline_op(a->p, rep)->live_cache, budget, memory_order_relaxed);
    a->cached = true;
    a->cache_rep = rep;
    log_change(a, rep, "cache", 0, budget, cwhy);
  }
  /* The knobs this solve sets (the cache aside), unless that vector was tried and reverted. */
  for (int i = 0; i < a->nops; i++) {
    sl__op *op = sl__pipeline_op(a->p, i);
    a->pend_par[i] = a->tgt_par[i] = atomic_load_explicit(&op->active_par, memory_order_relaxed);
    a->pend_buf[i] = a->tgt_buf[i] = atomic_load_explicit(&op->active_buf, memory_order_relaxed);
    /* The ops a new cache will spare keep their workers for the epoch it is filled from. */
    if (rep >= 0 && sl__plan_upstream(P, i, P->cache_at)) continue;
    if (op->par_autotune && P->par[i] > 0) {
      int64_t want = P->par[i] < op->parallelism ? P->par[i] : op->parallelism; /* workers that exist */
      bool back = keep_seq && want > a->tgt_par[i]; /* measured slower with workers */
      if (want >= 1 && !back) a->tgt_par[i] = (int)want;
    }
    if (op->buf_autotune && sl__op_model(op->vt->kind) == SL__MK_PREFETCH && P->buf[i] > 0 &&
        !(keep_seq && a->tgt_buf[i] == 0)) /* the trial measured it better without */
      a->tgt_buf[i] = (int)P->buf[i];
  }
  bool changed = false;
  if (!is_rejected(a, a->tgt_par, a->tgt_buf))
    for (int i = 0; i < a->nops; i++)
      if (set_op_knobs(a, i, a->tgt_par[i], a->tgt_buf[i], why)) changed = true;
  if (changed) pend_start(a, measured, sl__plan_trace_cpu(t));
  /* Counted once the knobs are set: a caller that saw the count grow reads the knobs of that solve. */
  atomic_fetch_add(&a->solves, 1);
out:
  if (M) sl_plan_free(M);
  sl_plan_free(P);
  sl_trace_free(t);
}

/* Output elements a window needs (tuner thread): SL_PLAN_MIN_ELEMENTS when it is modelled; one when it is only
 * waited out (the window of a trial's or a change's switch, the trial's settling one); half that when only its
 * throughput is compared (the trial's, a probation's): on a slow pipeline (imagenet, 10 batches/s sequential) full
 * windows made the trial last 8 s, past the 12 s the tuner is measured after. */
static uint64_t window_min(const sl_tuner *a) {
  if ((a->trial == 1 && a->trial_windows == 0) || a->trial == 3 || (a->pend && a->pend_windows == 0)) return 1;
  if (a->trial == 1 || a->pend) return SL_PLAN_MIN_ELEMENTS / 2;
  return SL_PLAN_MIN_ELEMENTS;
}

/* Elements of op i whose time was measured: those in timed worker chunks for an op whose work is on its workers (a
 * parallel map, a prefetch), else its timed next() calls. */
static uint64_t op_timed(const sl_tuner *a, int i) {
  sl__op *op = sl__pipeline_op(a->p, i);
  sl__model_kind k = sl__op_model(op->vt->kind);
  bool workers = op->async && (k == SL__MK_MAP || k == SL__MK_PREFETCH);
  return atomic_load_explicit(workers ? &op->st.work_samples : &op->st.samples, memory_order_relaxed);
}

static void timed_snap(const sl_tuner *a, uint64_t *out) {
  for (int i = 0; i < a->nops; i++) out[i] = op_timed(a, i);
}

static uint64_t since(uint64_t now, uint64_t base) { return now > base ? now - base : 0; }

/* Before the first solve: whether the window since `base` (counters, timed elements timed0) can be solved on now (the
 * rule at SL__TUNE_FIRST_SAMPLES). Reads the counters into `now`. */
static bool first_ready(const sl_tuner *a, sl_op_stats *now, const sl_op_stats *base, const uint64_t *timed0,
                        int root) {
  for (int i = 0; i < a->nops; i++) sl_pipeline_op_stats(&now[i], a->p, i);
  if (since(now[root].elements_out, base[root].elements_out) < SL__TUNE_FIRST_ROOT) return false;
  double total = 0;
  for (int i = 0; i < a->nops; i++) total += fmax(0, now[i].cpu_seconds - base[i].cpu_seconds);
  for (int i = 0; i < a->nops; i++) {
    double cpu = fmax(0, now[i].cpu_seconds - base[i].cpu_seconds);
    if (since(now[i].elements_out, base[i].elements_out) && cpu >= SL__TUNE_FIRST_SHARE * total &&
        since(op_timed(a, i), timed0[i]) < SL__TUNE_FIRST_SAMPLES)
      return false;
  }
  return true;
}

static void *tune_main(void *arg) {
  sl_tuner *a = arg;
  size_t n = (size_t)a->nops;
  sl_op_stats *base = a->base0, *now = sl__calloc(n, sizeof *now);
  uint64_t *timed0 = a->timed00; /* each op's timed elements at the window's start */
  a->base0 = NULL, a->timed00 = NULL;
  double interval = a->opts.interval > 0 ? a->opts.interval : 1.0;
  int root = sl__pipeline_root(a->p)->index;
  uint64_t tw = a->tw0;
  double cw = a->cw0;
  sl__load_snap lw = a->lw0, l1;
  int64_t dw = a->dw0, chw = a->chw0, d1 = 0, ch1 = 0;
  bool iow = a->iow0;
  pthread_mutex_lock(&a->mu);
  while (!a->stop && now) {
    uint64_t until = sl__now_ns() + (uint64_t)(interval * 1e9);
    bool early = false; /* the first window's counts sufficed before the interval ended */
    while (!a->stop && sl__now_ns() < until) {
      uint64_t left_ms = (until - sl__now_ns()) / 1000000;
      sl__cond_wait_ms(&a->cv, &a->mu, (int)(left_ms > 50 ? 50 : left_ms + 1));
      if (!a->stop && !a->first_done && first_ready(a, now, base, timed0, root)) {
        early = true;
        break;
      }
    }
    if (a->stop) break;
    pthread_mutex_unlock(&a->mu);
    for (int i = 0; i < a->nops; i++) sl_pipeline_op_stats(&now[i], a->p, i);
    /* A window needs enough output elements to model; a short one grows into the next interval. */
    /* A modelled window of a slow pipeline (imagenet-cacheable before its cache: 4 batches/s) takes a quarter of
     * the minimum after two intervals: its per-image ops have hundreds of samples by then, and the first solve
     * (which inserts the cache) would otherwise wait 8 s. */
    uint64_t got = now[root].elements_out - base[root].elements_out, need = window_min(a);
    if (early || got >= need || (need > 1 && got >= need / 4 && sl__now_ns() - tw >= (uint64_t)(2 * interval * 1e9))) {
      uint64_t t1 = sl__now_ns();
      double c1 = proc_cpu_now(), secs = (double)(t1 - tw) * 1e-9, run_delay;
      sl__load_snap_take(&l1);
      sl_machine m = a->m;
      sl__load_between(&m.other_load, &run_delay, &lw, &l1, secs, c1 - cw, m.cpus_online);
      bool io1 = sl__proc_io(&d1, &ch1);
      int64_t io[2] = {-1, -1};
      if (iow && io1 && d1 >= dw && ch1 >= chw) io[0] = d1 - dw, io[1] = ch1 - chw;
      tune_window(a, now, base, secs, c1 - cw, &m, run_delay, io);
      lw = l1;
      dw = d1, chw = ch1, iow = io1;
      sl_op_stats *x = base;
      base = now;
      now = x;
      tw = t1;
      cw = c1;
      timed_snap(a, timed0);
    }
    pthread_mutex_lock(&a->mu);
  }
  pthread_mutex_unlock(&a->mu);
  sl__free(base);
  sl__free(now);
  sl__free(timed0);
  sl__plan_lp_thread_done();
  return NULL;
}

int sl_pipeline_tune(sl_tuner **out, sl_pipeline *p, const sl_tune_opts *opts) {
  *out = NULL;
  sl_tune_opts def = SL_TUNE_OPTS_INIT;
  if (!opts) opts = &def;
  if (opts->version != SL_TUNE_OPTS_VERSION)
    return sl__err(SL_EINVAL, "sl_tune_opts version %d, expected %d", opts->version, SL_TUNE_OPTS_VERSION);
  if (opts->interval < 0 || opts->drift < 0)
    return sl__err(SL_EINVAL, "sl_tune_opts: interval and drift must not be negative");
  sl_tuner *a = sl__calloc(1, sizeof *a);
  if (!a) return sl__oom("the tuner");
  a->p = p;
  a->opts = *opts;
  a->nops = sl_pipeline_op_count(p);
  a->spec = json_deep_copy(sl__pipeline_spec(p));
  a->origin = sl__strdup(sl__pipeline_origin(p) ? sl__pipeline_origin(p) : "<spec>");
  a->c_solved = sl__calloc((size_t)a->nops, sizeof *a->c_solved);
  a->c_prev = sl__calloc((size_t)a->nops, sizeof *a->c_prev);
  a->trial_par = sl__calloc((size_t)a->nops, 2 * sizeof *a->trial_par); /* parallelism, then prefetch depth */
  a->pend_par = sl__calloc((size_t)a->nops, 4 * sizeof *a->pend_par); /* pend_par, pend_buf, tgt_par, tgt_buf */
  a->rej = sl__calloc((size_t)a->nops, 2 * SL__TUNE_REJ * sizeof *a->rej);
  a->net_lat = sl__calloc((size_t)a->nops, 2 * sizeof *a->net_lat); /* net_lat, then net_bw */
  a->base0 = sl__calloc((size_t)a->nops, sizeof *a->base0);
  a->timed00 = sl__calloc((size_t)a->nops, sizeof *a->timed00);
  int rc = !a->spec || !a->origin || !a->c_solved || !a->c_prev || !a->trial_par || !a->pend_par || !a->rej ||
                   !a->net_lat || !a->base0 || !a->timed00
               ? sl__oom("the tuner")
               : 0;
  if (!rc) {
    a->net_bw = a->net_lat + a->nops;
    for (int i = 0; i < 2 * a->nops; i++) a->net_lat[i] = -1;
  }
  if (!rc) {
    a->pend_buf = a->pend_par + a->nops;
    a->tgt_par = a->pend_par + 2 * a->nops;
    a->tgt_buf = a->pend_par + 3 * a->nops;
  }
  if (!rc) rc = sl_machine_probe(&a->m, NULL, 0);
  if (!rc && a->opts.plan.handoff == 0) {
    /* The hand-off probe (once per process, about 0.1 s) measures process CPU: here, before the caller iterates,
     * not in the first window's solve, where the running pipeline's threads fell into its figures (on ssd a
     * model charged 0.01-0.4 ms per batch for the same boundaries from one run to the next). */
    double h, hc;
    sl__trace_handoff_costs(&h, &hc);
  }
  if (!rc) {
    for (int i = 0; i < a->nops; i++) a->c_solved[i] = a->c_prev[i] = -1;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    atomic_init(&a->solves, 0);
    a->t0 = sl__now_ns();
    for (int i = 0; i < a->nops; i++) sl_pipeline_op_stats(&a->base0[i], p, i);
    timed_snap(a, a->timed00);
    a->tw0 = sl__now_ns();
    a->cw0 = proc_cpu_now();
    sl__load_snap_take(&a->lw0);
    a->iow0 = sl__proc_io(&a->dw0, &a->chw0);
    if (pthread_create(&a->thread, NULL, tune_main, a)) {
      pthread_mutex_destroy(&a->mu);
      pthread_cond_destroy(&a->cv);
      rc = sl__err(SL_ERROR, "cannot start the tuner thread");
    }
  }
  if (rc) {
    json_decref(a->spec);
    sl__free(a->origin);
    sl__free(a->c_solved);
    sl__free(a->c_prev);
    sl__free(a->trial_par);
    sl__free(a->pend_par);
    sl__free(a->rej);
    sl__free(a->net_lat);
    sl__free(a->base0);
    sl__free(a->timed00);
    sl__free(a);
    return rc;
  }
  *out = a;
  return 0;
}

int sl_tuner_solves(const sl_tuner *a) { return atomic_load(&((sl_tuner *)a)->solves); }

int sl_tuner_changes(const sl_tuner *a) {
  sl_tuner *m = (sl_tuner *)a;
  pthread_mutex_lock(&m->mu);
  int n = m->nlog;
  pthread_mutex_unlock(&m->mu);
  return n;
}

int sl_tuner_log(char **out, const sl_tuner *a, bool json) {
  *out = NULL;
  sl_tuner *m = (sl_tuner *)a;
  json_t *arr = json ? json_array() : NULL;
  size_t cap = 256, len = 0;
  char *s = json ? NULL : sl__malloc(cap);
  if (json ? !arr : !s) return sl__oom("the tuner's log");
  if (s) s[0] = 0;
  int rc = 0;
  pthread_mutex_lock(&m->mu);
  for (int i = 0; i < m->nlog && !rc; i++) {
    const tune_change *c = &m->log[i];
    sl_op_stats st;
    sl_pipeline_op_stats(&st, m->p, c->op);
    if (json) {
      json_t *o = json_pack("{s:f, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "t", c->t, "op", st.path, "kind", st.op, "fn",
                            st.label, "knob", c->knob, "from", (json_int_t)c->from, "to", (json_int_t)c->to, "reason",
                            c->why);
      if (!o || json_array_append_new(arr, o)) rc = sl__oom("the tuner's log");
    } else {
      char line[600];
      int k = snprintf(line, sizeof line, "%7.2fs %s (%s %s) %s %lld -> %lld: %s\n", c->t, st.path, st.op, st.label,
                       c->knob, (long long)c->from, (long long)c->to, c->why);
      size_t need = len + (size_t)(k > 0 ? k : 0) + 1;
      if (need > cap) {
        size_t nc = need * 2;
        char *ns = sl__realloc(s, nc);
        if (!ns) {
          rc = sl__oom("the tuner's log");
          break;
        }
        s = ns;
        cap = nc;
      }
      memcpy(s + len, line, (size_t)k + 1);
      len += (size_t)k;
    }
  }
  pthread_mutex_unlock(&m->mu);
  if (json && !rc) {
    s = json_dumps(arr, JSON_COMPACT);
    if (!s) rc = sl__oom("the tuner's log");
  }
  json_decref(arr);
  if (rc) {
    sl__free(s);
    return rc;
  }
  *out = s;
  return 0;
}

void sl_tuner_stop(sl_tuner *a) {
  if (!a) return;
  pthread_mutex_lock(&a->mu);
  a->stop = true;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
  pthread_join(a->thread, NULL);
  pthread_mutex_destroy(&a->mu);
  pthread_cond_destroy(&a->cv);
  json_decref(a->spec);
  sl__free(a->origin);
  sl__free(a->c_solved);
  sl__free(a->c_prev);
  sl__free(a->trial_par);
  sl__free(a->pend_par);
  sl__free(a->rej);
  sl__free(a->net_lat);
  sl__free(a->log);
  sl__free(a);
}
