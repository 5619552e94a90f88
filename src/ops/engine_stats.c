/* ops/engine_stats.c: the counters every iterator keeps: elements and bytes counted around each next, CPU and wall
 * self-time sampled on a stride (with the clock's own cost measured once and subtracted), bytes held; the
 * tracer reads them through sl__op_counts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/engine_int.h"

/* Clock costs, measured once per process: the full cost of one timed call's clock reads (for the stride), and the
 * part of it that falls inside the measured windows (subtracted from every sample, so that a cheap op sampled
 * rarely is not charged the clock's cost times its stride). Medians of a few trials. */
static atomic_uint_fast64_t g_timer_ns, g_in_cpu_ns, g_in_wall_ns;
static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}
static uint64_t timer_cost_ns(void) {
  uint64_t c = atomic_load_explicit(&g_timer_ns, memory_order_relaxed);
  if (c) return c;
  enum { R = 15 };
  uint64_t full[R], icpu[R], iwall[R];
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
  qsort(full, R, sizeof full[0], cmp_u64);
  qsort(icpu, R, sizeof icpu[0], cmp_u64);
  qsort(iwall, R, sizeof iwall[0], cmp_u64);
  atomic_store_explicit(&g_in_cpu_ns, icpu[R / 2], memory_order_relaxed);
  atomic_store_explicit(&g_in_wall_ns, iwall[R / 2], memory_order_relaxed);
  c = full[R / 2] ? full[R / 2] : 1;
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

/* A sample without the clock reads' own cost. */
static void unbias(uint64_t *cpu_ns, uint64_t *wall_ns) {
  timer_cost_ns();
  uint64_t ic = atomic_load_explicit(&g_in_cpu_ns, memory_order_relaxed);
  uint64_t iw = atomic_load_explicit(&g_in_wall_ns, memory_order_relaxed);
  *cpu_ns = *cpu_ns > ic ? *cpu_ns - ic : 0;
  *wall_ns = *wall_ns > iw ? *wall_ns - iw : 0;
}

/* The next stride: clock cost <= ~0.25% of the calls' time, a power of two in 1..SL__SAMPLE_STRIDE. */
static uint32_t next_stride(uint64_t wall_ns) {
  uint64_t want = timer_cost_ns() * 400 / (wall_ns ? wall_ns : 1);
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
  s->avg_ns = op ? atomic_load_explicit(&op->avg_hint_ns, memory_order_relaxed) : 0;
  if (!sl__timing_enabled() || (op && op->no_timing)) {
    s->countdown = UINT32_MAX;
    s->stride = 1;
    return;
  }
  s->stride = s->avg_ns ? next_stride(s->avg_ns) : 1;
  s->countdown = draw_gap(s, s->stride);
}

/* Updates the running mean (1/16 weight per sample) and draws the next gap; returns the sample's weight. */
static uint64_t advance(sl__op *op, sl__sampler *smp, uint64_t wall_ns) {
  uint64_t scale = smp->stride ? smp->stride : 1;
  if (!smp->avg_ns) smp->avg_ns = wall_ns ? wall_ns : 1;
  else smp->avg_ns = smp->avg_ns - smp->avg_ns / 16 + wall_ns / 16;
  smp->stride = next_stride(smp->avg_ns);
  smp->countdown = draw_gap(smp, smp->stride);
  atomic_store_explicit(&op->avg_hint_ns, smp->avg_ns, memory_order_relaxed);
  return scale;
}

void sl__stats_work(sl__op *op, sl__sampler *smp, uint64_t cpu_ns, uint64_t wall_ns) {
  unbias(&cpu_ns, &wall_ns);
  uint64_t scale = advance(op, smp, wall_ns);
  sl__stat_add(&op->st.work_cpu_ns, cpu_ns * scale);
  sl__stat_add(&op->st.work_wall_ns, wall_ns * scale);
  uint64_t us = wall_ns / 1000;
  sl__stat_add(&op->st.work_n, scale);
  sl__stat_add(&op->st.work_sq_us, us * us * scale);
}

void sl__stats_work_n(sl__op *op, sl__sampler *smp, uint64_t cpu_ns, uint64_t wall_ns, uint64_t n) {
  if (n <= 1) {
    sl__stats_work(op, smp, cpu_ns, wall_ns);
    return;
  }
  unbias(&cpu_ns, &wall_ns);
  uint64_t scale = advance(op, smp, wall_ns); /* the stride is per timed chunk, as the ticks are */
  sl__stat_add(&op->st.work_cpu_ns, cpu_ns * scale);
  sl__stat_add(&op->st.work_wall_ns, wall_ns * scale);
  uint64_t us = wall_ns / n / 1000; /* per-element spread: the chunk's mean stands for each of its elements */
  sl__stat_add(&op->st.work_n, scale * n);
  sl__stat_add(&op->st.work_sq_us, us * us * scale * n);
}

void sl__stats_sample(sl__op *op, sl__sampler *smp, uint64_t cpu_ns, uint64_t wall_ns) {
  unbias(&cpu_ns, &wall_ns);
  uint64_t scale = advance(op, smp, wall_ns);
  sl__stat_add(&op->st.cpu_ns, cpu_ns * scale);
  sl__stat_add(&op->st.wall_ns, wall_ns * scale);
  sl__stat_add(&op->st.samples, 1);
  uint64_t us = wall_ns / 1000;
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

