/* plan/plan_autotune.c: the baseline tuner, a tf.data AUTOTUNE equivalent (tensorflow/core/framework/model.cc):
 * tf.data's analytical model (sync node output time = self + ratio x inputs; async node output time = the M/M/1/K
 * wait of its buffer between its consumer and its producer), HILL_CLIMB from every knob at its minimum under a
 * CPU budget (schedulable CPUs) and a RAM budget (half of available memory), re-run online on the 10 ms -> 60 s
 * doubling schedule by a thread that sets the knobs of the running pipeline. It never inserts a cache. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "ops/pipeline_int.h"
#include "plan/plan_int.h"

typedef struct at_node {
  sl__model_kind kind;
  bool has_par; /* its table lists a tunable parallelism */
  bool par_tunable, buf_tunable;
  double self;    /* seconds of own work per element produced */
  double bytes;   /* bytes per element produced */
  int input, source;
  double r_in, r_src; /* elements consumed from input / source per element produced */
} at_node;

typedef struct at_model {
  int n, root;
  at_node *nodes;
  int64_t *par, *buf;
  double budget_cpu, budget_ram;
  int max_par, max_buf;
} at_model;

/* The expected wait of a consumer with inter-request time x on a buffer of n slots filled by a producer with
 * service time y: P(buffer empty) x y, P from the M/M/1/K queue. */
static double wait_time(double x, double y, double n) {
  if (y <= 0) return 0;
  if (n <= 0 || x <= 0) return y;
  double r = x / y, p;
  if (fabs(r - 1) < 1e-9) {
    p = 1.0 / (n + 1);
  } else {
    double rn = pow(r, n + 1);
    p = isfinite(rn) ? (1 - r) / (1 - rn) : 0;
  }
  if (!(p >= 0)) p = 0;
  return p * y;
}

static bool is_async(const at_model *m, int i) {
  const at_node *d = &m->nodes[i];
  if (d->kind == SL__MK_PREFETCH) return true;
  return d->has_par && (m->par[i] > 1 || d->par_tunable);
}

/* Output time of node i when its consumer asks every x seconds. A sync node adds its own time to its inputs'; an
 * async node's workers split its own time p ways, and its consumer waits on its buffer as an M/M/1/K queue whose
 * producer is the inputs' output time (tf.data's AsyncKnownRatio). */
static double output_time(const at_model *m, int i, double x) {
  const at_node *d = &m->nodes[i];
  double p = d->has_par ? (double)m->par[i] : 1;
  if (p < 1) p = 1;
  bool async = is_async(m, i);
  double xc = async ? d->self / p : x + d->self;
  double in = 0;
  if (d->input >= 0) in += d->r_in * output_time(m, d->input, d->r_in > 0 ? xc / d->r_in : xc);
  if (d->source >= 0) in += d->r_src * output_time(m, d->source, d->r_src > 0 ? xc / d->r_src : xc);
  if (!async) return d->self + in;
  double n = d->kind == SL__MK_PREFETCH ? (double)m->buf[i] : p;
  return d->self / p + wait_time(x, in, n);
}

/* Total processing time per output element: every node's self time, weighted by how often it runs. */
static double processing_time(const at_model *m, int i, double visits) {
  const at_node *d = &m->nodes[i];
  double t = visits * d->self;
  if (d->input >= 0) t += processing_time(m, d->input, visits * d->r_in);
  if (d->source >= 0) t += processing_time(m, d->source, visits * d->r_src);
  return t;
}

static double buffered_bytes(const at_model *m) {
  double b = 0;
  for (int i = 0; i < m->n; i++) {
    const at_node *d = &m->nodes[i];
    if (d->kind == SL__MK_PREFETCH) b += (double)m->buf[i] * d->bytes;
    else if (is_async(m, i)) b += (double)m->par[i] * d->bytes;
  }
  return b;
}

/* HILL_CLIMB: all knobs at their minimum, then +1 on the knob that cuts the output time most, until the output time
 * beats processing time / CPU budget, no knob can grow, or the buffers would pass the RAM budget. */
static void hill_climb(at_model *m) {
  for (int i = 0; i < m->n; i++) {
    if (m->nodes[i].par_tunable) m->par[i] = 1;
    if (m->nodes[i].buf_tunable) m->buf[i] = 1;
  }
  double proc = processing_time(m, m->root, 1);
  for (int guard = 0; guard < 4096; guard++) {
    double cur = output_time(m, m->root, 0);
    if (cur < proc / m->budget_cpu) break;
    int best = -1;
    bool best_par = false;
    double best_delta = 0;
    for (int i = 0; i < m->n; i++) {
      for (int k = 0; k < 2; k++) {
        int64_t *v = k == 0 ? &m->par[i] : &m->buf[i];
        bool tun = k == 0 ? m->nodes[i].par_tunable : m->nodes[i].buf_tunable;
        int mx = k == 0 ? m->max_par : m->max_buf;
        if (!tun || *v >= mx) continue;
        (*v)++;
        double t = output_time(m, m->root, 0);
        bool fits = buffered_bytes(m) <= m->budget_ram;
        (*v)--;
        if (fits && cur - t > best_delta) {
          best_delta = cur - t;
          best = i;
          best_par = k == 0;
        }
      }
    }
    if (best < 0) break;
    if (best_par) m->par[best]++;
    else m->buf[best]++;
  }
}

static double default_ram(void) {
  sl_machine mc;
  sl_machine_probe(&mc, NULL, 0);
  return mc.mem_available > 0 ? 0.5 * (double)mc.mem_available : 1e18;
}

int sl_autotune_solve(int64_t *par, int64_t *buf, const sl_pipeline *p, const sl_op_stats *st,
                      const sl_autotune_opts *opts) {
  sl_autotune_opts def = SL_AUTOTUNE_OPTS_INIT;
  if (!opts) opts = &def;
  at_model m = {0};
  m.n = sl_pipeline_op_count(p);
  m.root = sl__pipeline_root(p)->index;
  m.nodes = sl__calloc((size_t)m.n, sizeof *m.nodes);
  if (!m.nodes) return sl__oom("the tuner's model");
  m.par = par;
  m.buf = buf;
  m.budget_cpu = opts->cpu_budget > 0 ? opts->cpu_budget : (double)sl__autotune_parallelism();
  m.budget_ram = opts->ram_budget > 0 ? (double)opts->ram_budget : default_ram();
  m.max_par = (int)ceil(m.budget_cpu);
  m.max_buf = SL__AUTOTUNE_BUFFER_MAX;
  for (int i = 0; i < m.n; i++) {
    const sl__op *op = sl__pipeline_op(p, i);
    at_node *d = &m.nodes[i];
    d->kind = sl__op_model(op->vt->kind);
    d->has_par = sl__op_tunable(op->vt->kind, "parallelism");
    d->par_tunable = op->par_autotune; /* set only where its table says parallelism is tunable */
    d->buf_tunable = op->buf_autotune && d->kind == SL__MK_PREFETCH;
    double n = (double)st[i].elements_out;
    d->self = n > 0 ? st[i].cpu_seconds / n : 0;
    d->bytes = n > 0 ? (double)st[i].bytes_out / n : 0;
    d->input = op->input ? op->input->index : -1;
    d->source = op->source ? op->source->index : -1;
    d->r_in = d->input >= 0 && n > 0 ? (double)st[d->input].elements_out / n : 1;
    d->r_src = d->source >= 0 && n > 0 ? (double)st[d->source].elements_out / n : 1;
    par[i] = op->parallelism;
    buf[i] = op->buffer;
  }
  if (m.max_par < 1) m.max_par = 1;
  hill_climb(&m);
  sl__free(m.nodes);
  return 0;
}

/* ---- online ---- */
struct sl_autotuner {
  sl_pipeline *p;
  sl_autotune_opts opts;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
  atomic_int rounds;
};

static void *tuner_main(void *arg) {
  sl_autotuner *a = arg;
  sl_pipeline *p = a->p;
  sl_op_stats *st = sl__calloc((size_t)sl_pipeline_op_count(p), sizeof *st);
  int64_t *par = sl__calloc((size_t)sl_pipeline_op_count(p), sizeof *par), *buf = sl__calloc((size_t)sl_pipeline_op_count(p), sizeof *buf);
  double period = a->opts.first_period > 0 ? a->opts.first_period : 0.01;
  double maxp = a->opts.max_period > 0 ? a->opts.max_period : 60;
  pthread_mutex_lock(&a->mu);
  while (!a->stop && st && par && buf) {
    /* Sleep one period (woken early by stop), then re-optimise from the counters so far. */
    uint64_t until = sl__now_ns() + (uint64_t)(period * 1e9);
    while (!a->stop && sl__now_ns() < until) {
      uint64_t left_ms = (until - sl__now_ns()) / 1000000;
      sl__cond_wait_ms(&a->cv, &a->mu, (int)(left_ms > 50 ? 50 : left_ms + 1));
    }
    if (a->stop) break;
    pthread_mutex_unlock(&a->mu);
    for (int i = 0; i < sl_pipeline_op_count(p); i++) sl_pipeline_op_stats(&st[i], p, i);
    if (st[sl__pipeline_root(p)->index].elements_out > 0 && sl_autotune_solve(par, buf, p, st, &a->opts) == 0) {
      for (int i = 0; i < sl_pipeline_op_count(p); i++) {
        sl__op *op = sl__pipeline_op(p, i);
        if (op->par_autotune) atomic_store_explicit(&op->active_par, (int)par[i], memory_order_relaxed);
        if (op->buf_autotune && sl__op_model(op->vt->kind) == SL__MK_PREFETCH)
          atomic_store_explicit(&op->active_buf, (int)buf[i], memory_order_relaxed);
      }
      atomic_fetch_add(&a->rounds, 1);
    }
    period = period * 2 < maxp ? period * 2 : maxp;
    pthread_mutex_lock(&a->mu);
  }
  pthread_mutex_unlock(&a->mu);
  sl__free(st);
  sl__free(par);
  sl__free(buf);
  return NULL;
}

int sl_autotune_start(sl_autotuner **out, sl_pipeline *p, const sl_autotune_opts *opts) {
  *out = NULL;
  sl_autotune_opts def = SL_AUTOTUNE_OPTS_INIT;
  if (!opts) opts = &def;
  if (opts->version != SL_AUTOTUNE_OPTS_VERSION)
    return sl__err(SL_EINVAL, "sl_autotune_opts version %d, expected %d", opts->version, SL_AUTOTUNE_OPTS_VERSION);
  sl_autotuner *a = sl__calloc(1, sizeof *a);
  if (!a) return sl__oom("the tuner");
  a->p = p;
  a->opts = *opts;
  if (a->opts.ram_budget <= 0) a->opts.ram_budget = (int64_t)fmin(default_ram(), 9e18);
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->cv, NULL);
  atomic_init(&a->rounds, 0);
  if (pthread_create(&a->thread, NULL, tuner_main, a)) {
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    sl__free(a);
    return sl__err(SL_ERROR, "cannot start the tuner thread");
  }
  *out = a;
  return 0;
}

int sl_autotune_rounds(const sl_autotuner *a) { return atomic_load(&((sl_autotuner *)a)->rounds); }

void sl_autotune_stop(sl_autotuner *a) {
  if (!a) return;
  pthread_mutex_lock(&a->mu);
  a->stop = true;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
  pthread_join(a->thread, NULL);
  pthread_mutex_destroy(&a->mu);
  pthread_cond_destroy(&a->cv);
  sl__free(a);
}
