/* ops/engine_stats.c: the counters every iterator keeps: elements and bytes counted around each next, CPU and wall
 * self-time sampled on a stride (with the clock's own cost measured once and subtracted), bytes held; the
 * tracer reads them through sl__op_counts. */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/engine_int.h"

/* Clock costs, measured once per process: the full cost of one timed call's clock reads (for the stride), the
 * part of it that falls inside the measured windows (subtracted from every sample, so that a cheap op sampled
 * rarely is not charged the clock's cost times its stride), and the part outside them that a call nested in a
 * timed one adds to the enclosing call's time (charged to the nested call, sl__nest). Medians of a few trials. */
static atomic_uint_fast64_t g_timer_ns, g_in_cpu_ns, g_in_wall_ns, g_out_cpu_ns, g_out_wall_ns;
/* The same for a call timed on the wall clock alone (sl__nest_close_wall): its reads, and their part outside its
 * window that the enclosing call sees. */
static atomic_uint_fast64_t g_timerw_ns, g_outw_wall_ns, g_inw_wall_ns;
/* The run-queue delay read: its cost (g_runq_cost_ns, in the stride's budget like the clocks'). */
static atomic_uint_fast64_t g_runq_cost_ns;

/* Per thread, the open /proc/thread-self/schedstat (fd + 1; 0: not opened yet; -1: unavailable). The descriptor is
 * bound to the thread that opened it, so it is kept per thread and closed when the thread exits (a key's
 * destructor). */
static _Thread_local int tl_runq_fd;
static pthread_key_t g_runq_key;
static pthread_once_t g_runq_once = PTHREAD_ONCE_INIT;
static atomic_int g_runq_key_ok;
static void runq_close(void *v) { close((int)(intptr_t)v - 1); }
/* A forked child's one thread would read the forking thread's file (a data loader's worker processes): it opens
 * its own. */
static void runq_after_fork(void) {
  if (tl_runq_fd > 0) {
    close(tl_runq_fd - 1);
    pthread_setspecific(g_runq_key, NULL);
  }
  tl_runq_fd = 0;
}
static void runq_key_init(void) {
  const char *e = getenv("SL_NO_RUNQ");
  if (e && *e && strcmp(e, "0")) return; /* for measuring what the reads cost */
  if (!pthread_key_create(&g_runq_key, runq_close)) atomic_store(&g_runq_key_ok, 1);
  pthread_atfork(NULL, NULL, runq_after_fork);
}

uint64_t sl__runq_ns(void) {
  if (tl_runq_fd < 0) return SL__RUNQ_NONE;
  if (tl_runq_fd == 0) {
    pthread_once(&g_runq_once, runq_key_init);
    int fd = atomic_load(&g_runq_key_ok) ? open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0 || pthread_setspecific(g_runq_key, (void *)(intptr_t)(fd + 1))) {
      if (fd >= 0) close(fd);
      tl_runq_fd = -1;
      return SL__RUNQ_NONE;
    }
    tl_runq_fd = fd + 1;
  }
  /* "<cpu ns> <run-queue ns> <timeslices>\n": the file is made afresh at each read from offset 0. */
  char buf[96];
  ssize_t n = pread(tl_runq_fd - 1, buf, sizeof buf - 1, 0);
  if (n <= 0) return SL__RUNQ_NONE;
  buf[n] = 0;
  char *p = buf, *end;
  (void)strtoull(p, &end, 10);
  if (end == p) return SL__RUNQ_NONE;
  p = end;
  uint64_t r = strtoull(p, &end, 10);
  return end == p ? SL__RUNQ_NONE : r;
}

uint64_t sl__runq_since(uint64_t r0) {
  if (r0 == SL__RUNQ_NONE) return SL__RUNQ_NONE;
  uint64_t r1 = sl__runq_ns();
  return r1 == SL__RUNQ_NONE || r1 < r0 ? SL__RUNQ_NONE : r1 - r0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}
static uint64_t timer_cost_ns(void) {
  uint64_t c = atomic_load_explicit(&g_timer_ns, memory_order_relaxed);
  if (c) return c;
  enum { R = 15 };
  uint64_t full[R], icpu[R], iwall[R], ocpu[R], owall[R], fullw[R], owallw[R], iwallw[R];
  for (int r = 0; r < R; r++) {
    uint64_t aw = sl__now_ns(), w0 = sl__now_ns(), w1 = sl__now_ns(), bw = sl__now_ns();
    iwallw[r] = w1 - w0;
    uint64_t xw = sl__now_ns(), yw = sl__now_ns();
    int64_t ow = (int64_t)(bw - aw) - (int64_t)(yw - xw) - (int64_t)(w1 - w0);
    owallw[r] = ow > 0 ? (uint64_t)ow : 0;
    (void)sl__now_ns();
    fullw[r] = sl__now_ns() - yw;
  }
  for (int r = 0; r < R; r++) {
    /* A timed call with nothing inside, as an enclosing timed call sees it, less the same reads with none. */
    uint64_t a = sl__cpu_ns(), aw = sl__now_ns();
    uint64_t c0 = sl__cpu_ns(), w0 = sl__now_ns();
    uint64_t c1 = sl__cpu_ns(), w1 = sl__now_ns();
    uint64_t b = sl__cpu_ns(), bw = sl__now_ns();
    uint64_t x = sl__cpu_ns(), xw = sl__now_ns();
    uint64_t y = sl__cpu_ns(), yw = sl__now_ns();
    int64_t oc = (int64_t)(b - a) - (int64_t)(y - x) - (int64_t)(c1 - c0);
    int64_t ow = (int64_t)(bw - aw) - (int64_t)(yw - xw) - (int64_t)(w1 - w0);
    ocpu[r] = oc > 0 ? (uint64_t)oc : 0;
    owall[r] = ow > 0 ? (uint64_t)ow : 0;
  }
  for (int r = 0; r < R; r++) {
    uint64_t t0 = sl__now_ns(); /* a timed call reads both clocks twice */
    (void)sl__cpu_ns();
    (void)sl__now_ns();
    (void)sl__cpu_ns();
    full[r] = sl__now_ns() - t0;
    uint64_t a = sl__cpu_ns();
    (void)sl__now_ns();
    icpu[r] = sl__cpu_ns() - a;
    uint64_t b = sl__now_ns();
    (void)sl__cpu_ns();
    iwall[r] = sl__now_ns() - b;
  }
  uint64_t rq[R];
  for (int r = 0; r < R; r++) {
    uint64_t t0 = sl__now_ns();
    (void)sl__runq_ns();
    rq[r] = sl__now_ns() - t0;
  }
  qsort(rq, R, sizeof rq[0], cmp_u64);
  atomic_store_explicit(&g_runq_cost_ns, sl__runq_ns() == SL__RUNQ_NONE ? 0 : rq[R / 2], memory_order_relaxed);
  qsort(full, R, sizeof full[0], cmp_u64);
  qsort(icpu, R, sizeof icpu[0], cmp_u64);
  qsort(iwall, R, sizeof iwall[0], cmp_u64);
  qsort(ocpu, R, sizeof ocpu[0], cmp_u64);
  qsort(owall, R, sizeof owall[0], cmp_u64);
  qsort(fullw, R, sizeof fullw[0], cmp_u64);
  qsort(owallw, R, sizeof owallw[0], cmp_u64);
  qsort(iwallw, R, sizeof iwallw[0], cmp_u64);
  atomic_store_explicit(&g_inw_wall_ns, iwallw[R / 2], memory_order_relaxed);
  atomic_store_explicit(&g_outw_wall_ns, owallw[R / 2], memory_order_relaxed);
  atomic_store_explicit(&g_timerw_ns, fullw[R / 2] ? fullw[R / 2] : 1, memory_order_relaxed);
  atomic_store_explicit(&g_out_cpu_ns, ocpu[R / 2], memory_order_relaxed);
  atomic_store_explicit(&g_out_wall_ns, owall[R / 2], memory_order_relaxed);
  atomic_store_explicit(&g_in_cpu_ns, icpu[R / 2], memory_order_relaxed);
  atomic_store_explicit(&g_in_wall_ns, iwall[R / 2], memory_order_relaxed);
  /* One own sample in SL__RUNQ_EVERY that reads the CPU clock also reads the run-queue delay twice (outside its
   * windows). */
  c = full[R / 2] + 2 * atomic_load_explicit(&g_runq_cost_ns, memory_order_relaxed) / SL__RUNQ_EVERY;
  c = c ? c : 1;
  atomic_store_explicit(&g_timer_ns, c, memory_order_relaxed);
  return c;
}

/* SL_NO_TIMING=1 in the environment turns the sampled timing off (counts stay on): only for measuring what the
 * timing costs. */
bool sl__timing_enabled(void) {
  static atomic_int state; /* 0 unknown, 1 on, 2 off */
  int s = atomic_load_explicit(&state, memory_order_relaxed);
  if (!s) {
    const char *e = getenv("SL_NO_TIMING");
    s = e && *e && strcmp(e, "0") ? 2 : 1;
    atomic_store_explicit(&state, s, memory_order_relaxed);
  }
  return s == 1;
}

static _Thread_local sl__nest tl_nest;

void sl__nest_open(sl__nest *saved, bool wall_only) {
  *saved = tl_nest;
  memset(&tl_nest, 0, sizeof tl_nest);
  tl_nest.wall_only = wall_only;
}

bool sl__nest_wall_only(void) { return tl_nest.wall_only; }

void sl__nest_close(const sl__nest *saved, sl__nest *inner, uint64_t incl_cpu, uint64_t incl_wall) {
  *inner = tl_nest;
  tl_nest = *saved;
  timer_cost_ns();
  tl_nest.cpu += incl_cpu + atomic_load_explicit(&g_out_cpu_ns, memory_order_relaxed);
  tl_nest.wall += incl_wall + atomic_load_explicit(&g_out_wall_ns, memory_order_relaxed);
  tl_nest.n += 1 + inner->n;
  tl_nest.nw += inner->nw;
}

void sl__nest_charge_runq(void) {
  uint64_t c = atomic_load_explicit(&g_runq_cost_ns, memory_order_relaxed);
  c *= 2;        /* two reads; their CPU and wall alike (a system call that does not wait) */
  tl_nest.cpu += c;
  tl_nest.wall += c;
}

void sl__nest_close_wall(const sl__nest *saved, sl__nest *inner, uint64_t incl_wall) {
  *inner = tl_nest;
  tl_nest = *saved;
  timer_cost_ns();
  uint64_t w = incl_wall + atomic_load_explicit(&g_outw_wall_ns, memory_order_relaxed);
  tl_nest.wall += w;
  tl_nest.wall_nc += w; /* the calls timed inside it are in its wall time too, their CPU unread from here */
  tl_nest.n += inner->n;
  tl_nest.nw += 1 + inner->nw;
}

/* A sample's own time: without the clock reads' own cost, and without the calls nested in it. */
static void own_time(uint64_t *cpu_ns, uint64_t *wall_ns, const sl__nest *inner) {
  timer_cost_ns();
  uint64_t ic = atomic_load_explicit(&g_in_cpu_ns, memory_order_relaxed) + (inner ? inner->cpu : 0);
  uint64_t iw = atomic_load_explicit(&g_in_wall_ns, memory_order_relaxed) + (inner ? inner->wall : 0);
  if (inner && inner->wall_nc) {
    /* The CPU of the calls timed on the wall clock alone: their wall time less the time this call was off the
     * CPU (sl__nest_close_wall). */
    uint64_t off = *wall_ns > *cpu_ns ? *wall_ns - *cpu_ns : 0;
    ic += inner->wall_nc > off ? inner->wall_nc - off : 0;
  }
  *cpu_ns = *cpu_ns > ic ? *cpu_ns - ic : 0;
  *wall_ns = *wall_ns > iw ? *wall_ns - iw : 0;
  /* One thread cannot run longer than the time that passed. A CPU window longer than its wall window is the thread
   * CPU clock's own system call: its exit and entry halves fall inside the window, and inside a loop doing work
   * they cost more than the calibration's tight loop measured (1.3-3 us against 1.25-1.55 here). */
  if (*cpu_ns > *wall_ns) *cpu_ns = *wall_ns;
}

/* Clock reads of the calls nested in a timed one, x16, in units of one timed call's reads (those on the wall clock
 * alone cost a fraction of one); capped at 16 x 65536. */
static uint32_t nest16_of(const sl__nest *inner) {
  if (!inner) return 0;
  uint64_t full = timer_cost_ns();
  uint64_t w = atomic_load_explicit(&g_timerw_ns, memory_order_relaxed);
  uint64_t x = 16 * (uint64_t)inner->n + 16 * (uint64_t)inner->nw * w / full;
  return x < 16u * 65536u ? (uint32_t)x : 16u * 65536u;
}

/* The next stride: the clock reads of a timed call (its own and its nested calls', `nest16` / 16 of them on
 * average) <= ~0.25% of the calls' inclusive time, a power of two in 1..SL__SAMPLE_STRIDE. */
static uint32_t next_stride(uint64_t wall_ns, uint32_t nest16) {
  uint64_t want = timer_cost_ns() * (16 + (uint64_t)nest16) * 25 / (wall_ns ? wall_ns : 1);
  uint32_t s = 1;
  while (s < want && s < SL__SAMPLE_STRIDE) s <<= 1;
  return s;
}

/* The gap to the next timed call: geometric with success probability 1 / stride (at least 1). */
static uint32_t draw_gap(sl__sampler *s, uint32_t stride) {
  if (stride <= 1) return 1;
  s->rng ^= s->rng << 13;
  s->rng ^= s->rng >> 7;
  s->rng ^= s->rng << 17;
  double u = ((double)(s->rng >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  double g = floor(log(u) / log1p(-1.0 / (double)stride)) + 1;
  return g >= 4e9 ? 4000000000u : (uint32_t)g;
}

void sl__sampler_init(sl__sampler *s, sl__op *op) {
  s->rng = sl__mix64((uint64_t)(uintptr_t)s ^ sl__now_ns()) | 1;
  s->cpu_skip = 0;
  s->runq_skip = 0;
  s->avg_ns = op ? atomic_load_explicit(&op->avg_hint_ns, memory_order_relaxed) : 0;
  if (!sl__timing_enabled() || (op && op->no_timing)) {
    s->countdown = UINT32_MAX;
    s->stride = 1;
    return;
  }
  s->avg_nest16 = op ? atomic_load_explicit(&op->avg_nest16_hint, memory_order_relaxed) : 0;
  s->stride = s->avg_ns ? next_stride(s->avg_ns, s->avg_nest16) : 1;
  s->countdown = draw_gap(s, s->stride);
}

/* Updates the running means (1/16 weight per sample) of the inclusive wall time and of the nested timed calls, and
 * draws the next gap; returns the sample's weight. */
static uint64_t advance(sl__op *op, sl__sampler *smp, uint64_t cpu_ns, uint64_t wall_ns, const sl__nest *inner) {
  uint64_t scale = smp->stride ? smp->stride : 1;
  uint32_t n16 = nest16_of(inner);
  /* The call's time without the nested calls' clock reads, which a call not timed does not make. */
  uint64_t reads = (uint64_t)n16 * timer_cost_ns() / 16;
  wall_ns = wall_ns > reads ? wall_ns - reads : 1;
  if (!smp->avg_ns) {
    smp->avg_ns = wall_ns;
    smp->avg_nest16 = n16;
  } else if (cpu_ns / 4 > smp->avg_ns) {
    /* A call that spent far more CPU than the mean wall time: the op's cost rose (a 10 us stage became 600 us). The
     * stride follows at once, so that the next windows are not estimated from a few samples each standing for
     * hundreds of calls. (CPU, not wall time: a cheap call preempted for a time slice is no new cost. A sample's
     * weight is the stride its gap was drawn with, so the sums stay unbiased.) */
    smp->avg_ns = wall_ns;
    smp->avg_nest16 = smp->avg_nest16 - smp->avg_nest16 / 16 + n16 / 16;
  } else {
    smp->avg_ns = smp->avg_ns - smp->avg_ns / 16 + wall_ns / 16;
    smp->avg_nest16 = smp->avg_nest16 - smp->avg_nest16 / 16 + n16 / 16;
  }
  smp->stride = next_stride(smp->avg_ns, smp->avg_nest16);
  atomic_store_explicit(&op->avg_nest16_hint, smp->avg_nest16, memory_order_relaxed);
  smp->countdown = draw_gap(smp, smp->stride);
  atomic_store_explicit(&op->avg_hint_ns, smp->avg_ns, memory_order_relaxed);
  return scale;
}

/* Adds a sample's run-queue delay, its own part held to its own wall less its own CPU, and its own wall time as the
 * delay's base. Its own part: the inclusive delay pro rata to its own CPU (a thread queues for a core only while
 * runnable, as long in proportion to the CPU it gets whichever call runs; pro rata to wall time charged the waits
 * of a call blocked in its pulls to them, and left the rest looking blocked), or to its wall time without a CPU
 * reading. */
static void runq_add(sl__op *op, uint64_t runq_ns, uint64_t incl_cpu, uint64_t incl_wall, uint64_t cpu_ns,
                     uint64_t wall_ns, uint64_t scale) {
  if (runq_ns == SL__RUNQ_NONE) return;
  double share = incl_cpu ? (double)cpu_ns / (double)incl_cpu : incl_wall ? (double)wall_ns / (double)incl_wall : 1;
  double own = (double)runq_ns * (share < 1 ? share : 1);
  uint64_t off = wall_ns > cpu_ns ? wall_ns - cpu_ns : 0;
  uint64_t r = own < (double)off ? (uint64_t)own : off;
  sl__stat_add(&op->st.runq_ns, r * scale);
  sl__stat_add(&op->st.runq_wall_ns, wall_ns * scale);
}

void sl__stats_work_n(sl__op *op, sl__sampler *smp, uint64_t cpu_ns, uint64_t wall_ns, uint64_t n,
                      const sl__nest *inner, uint64_t runq_ns) {
  uint64_t incl_wall = wall_ns, incl_cpu = cpu_ns;
  if (n < 1) n = 1;
  /* The spread is of the whole chunk's wall time per element (the worker's service time), as before the nested
   * calls were measured apart. */
  uint64_t us = wall_ns / n / 1000; /* per-element spread: the chunk's mean stands for each of its elements */
  uint64_t scale = advance(op, smp, cpu_ns, wall_ns, inner); /* the stride is per timed chunk, as the ticks are */
  own_time(&cpu_ns, &wall_ns, inner);
  runq_add(op, runq_ns, incl_cpu, incl_wall, cpu_ns, wall_ns, scale);
  sl__stat_add(&op->st.work_cpu_ns, cpu_ns * scale);
  sl__stat_add(&op->st.work_wall_ns, wall_ns * scale);
  sl__stat_add(&op->st.work_n, scale * n);
  sl__stat_add(&op->st.work_samples, n);
  sl__stat_add(&op->st.work_sq_us, us * us * scale * n);
}

bool sl__sampler_cpu_due(sl__sampler *s, const sl__op *op) {
  if (s->avg_ns >= SL__CPU_ALWAYS_NS || !atomic_load_explicit(&op->own_wall_mean64, memory_order_relaxed)) return true;
  if (s->cpu_skip) {
    s->cpu_skip--;
    return false;
  }
  s->cpu_skip = SL__CPU_EVERY - 1;
  return true;
}

/* A sample whose own wall time is this far above the op's mean (and by at least SL__SLICE_NS) was off the CPU for
 * a time slice (or waited): a wall-clock-only one is charged the op's mean CPU, not its wall time at the ratio (a
 * 3 ms slice at a stride of 128 would charge 0.4 s), and one that read both clocks stays out of the means. Longer
 * calls of an op's own work (a bucket's batch, a new file opened) are far shorter than a slice. */
#define SL__SLICE_MULT 8u
#define SL__SLICE_NS 200000u
static bool off_for_a_slice(uint64_t own_wall_ns, uint64_t mean_wall64) {
  uint64_t mean = mean_wall64 / 64;
  return own_wall_ns > SL__SLICE_NS + mean && own_wall_ns > SL__SLICE_MULT * mean;
}

/* Own time of a sampled call that read the wall clock alone: its CPU is its own wall time times the op's ratio. */
static void own_time_wall(const sl__op *op, uint64_t *cpu_ns, uint64_t *wall_ns, const sl__nest *inner) {
  timer_cost_ns();
  uint64_t iw = atomic_load_explicit(&g_inw_wall_ns, memory_order_relaxed) + (inner ? inner->wall : 0);
  *wall_ns = *wall_ns > iw ? *wall_ns - iw : 0;
  uint64_t c = atomic_load_explicit(&op->own_cpu_mean64, memory_order_relaxed);
  uint64_t w = atomic_load_explicit(&op->own_wall_mean64, memory_order_relaxed);
  if (w && off_for_a_slice(*wall_ns, w)) *cpu_ns = c / 64;
  else *cpu_ns = w ? (uint64_t)((double)*wall_ns * ((double)c / (double)w)) : *wall_ns;
}

/* Updates the op's running means of own CPU and wall time (x64, weight 1/8) from a sample that read both clocks.
 * Several threads may do so at once: a lost update only drops one sample from the means. */
static void own_means_add(sl__op *op, uint64_t cpu_ns, uint64_t wall_ns) {
  uint64_t c = atomic_load_explicit(&op->own_cpu_mean64, memory_order_relaxed);
  uint64_t w = atomic_load_explicit(&op->own_wall_mean64, memory_order_relaxed);
  if (cpu_ns > UINT64_MAX / 128 || wall_ns > UINT64_MAX / 128) return;
  if (w && off_for_a_slice(wall_ns, w) && cpu_ns < wall_ns / 2) return;
  c = w ? c - c / 8 + cpu_ns * 8 : cpu_ns * 64;
  w = w ? w - w / 8 + wall_ns * 8 : wall_ns * 64;
  atomic_store_explicit(&op->own_cpu_mean64, c, memory_order_relaxed);
  atomic_store_explicit(&op->own_wall_mean64, w ? w : 1, memory_order_relaxed); /* 0 means "none yet" */
}

void sl__stats_sample(sl__op *op, sl__sampler *smp, uint64_t cpu_ns, uint64_t wall_ns, const sl__nest *inner,
                      bool cpu_read, uint64_t runq_ns) {
  uint64_t incl_wall = wall_ns, incl_cpu = cpu_ns;
  /* The spread of call times stays that of the inclusive calls (what the consumer of a synchronous op waits). */
  uint64_t us = wall_ns / 1000;
  /* Without the CPU clock the jump to a risen cost (advance) goes by the wall time: a cheap call preempted for a
   * time slice then samples often for a few dozen calls, which costs little. */
  uint64_t scale = advance(op, smp, cpu_read ? cpu_ns : wall_ns, wall_ns, inner);
  if (cpu_read) {
    own_time(&cpu_ns, &wall_ns, inner);
    own_means_add(op, cpu_ns, wall_ns);
    runq_add(op, runq_ns, incl_cpu, incl_wall, cpu_ns, wall_ns, scale);
  } else {
    own_time_wall(op, &cpu_ns, &wall_ns, inner);
  }
  sl__stat_add(&op->st.cpu_ns, cpu_ns * scale);
  sl__stat_add(&op->st.wall_ns, wall_ns * scale);
  sl__stat_add(&op->st.samples, 1);
  sl__stat_add(&op->st.next_n, scale);
  sl__stat_add(&op->st.next_sq_us, us * us * scale);
}

void sl__stats_held(sl__op *op, int64_t delta) {
  uint64_t now = atomic_fetch_add_explicit(&op->st.held, (uint64_t)delta, memory_order_relaxed) + (uint64_t)delta;
  uint64_t peak = atomic_load_explicit(&op->st.held_peak, memory_order_relaxed);
  while (delta > 0 && (int64_t)now > 0 && now > peak &&
         !atomic_compare_exchange_weak_explicit(&op->st.held_peak, &peak, now, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

void sl__op_counts(sl__op *op, uint64_t *out, uint64_t *in, uint64_t *bytes_out) {
  pthread_mutex_lock(&op->live_mu);
  uint64_t o = atomic_load_explicit(&op->st.out, memory_order_relaxed);
  uint64_t i = atomic_load_explicit(&op->st.in, memory_order_relaxed);
  uint64_t b = atomic_load_explicit(&op->st.bytes_out, memory_order_relaxed);
  for (sl__it *it = op->live; it; it = it->live_next) {
    o += atomic_load_explicit(&it->pend_out, memory_order_relaxed);
    i += atomic_load_explicit(&it->pend_in, memory_order_relaxed);
    b += atomic_load_explicit(&it->pend_bytes, memory_order_relaxed);
  }
  pthread_mutex_unlock(&op->live_mu);
  *out = o;
  *in = i;
  *bytes_out = b;
}

void sl__op_reset_counts(sl__op *op) {
  pthread_mutex_lock(&op->live_mu);
  uint64_t o = 0, i = 0, b = 0;
  for (sl__it *it = op->live; it; it = it->live_next) {
    o += atomic_load_explicit(&it->pend_out, memory_order_relaxed);
    i += atomic_load_explicit(&it->pend_in, memory_order_relaxed);
    b += atomic_load_explicit(&it->pend_bytes, memory_order_relaxed);
  }
  /* Unsigned wrap-around: counter + live counts reads 0 now and counts up from here. */
  atomic_store(&op->st.out, (uint64_t)0 - o);
  atomic_store(&op->st.in, (uint64_t)0 - i);
  atomic_store(&op->st.bytes_out, (uint64_t)0 - b);
  pthread_mutex_unlock(&op->live_mu);
}

