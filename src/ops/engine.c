/* ops/engine.c: the iterator protocol's shared machinery: counting and sampled self-time around every next,
 * knob readers that name JSON paths, worker-to-consumer error transport, and the op table. */
#define _GNU_SOURCE /* PTHREAD_MUTEX_ADAPTIVE_NP, where the C library has it */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* The next stride: clock cost <= ~0.25% of the calls' time, a power of two in 1..SL_SAMPLE_STRIDE. */
static uint32_t next_stride(uint64_t wall_ns) {
  uint64_t want = timer_cost_ns() * 400 / (wall_ns ? wall_ns : 1);
  uint32_t s = 1;
  while (s < want && s < SL_SAMPLE_STRIDE) s <<= 1;
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
  if (!sl__timing_enabled() || (op && op->pl->no_timing)) {
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

static void it_link(sl__it *it) {
  sl__op *op = it->op;
  pthread_mutex_lock(&op->live_mu);
  it->live_prev = NULL;
  it->live_next = op->live;
  if (op->live) op->live->live_prev = it;
  op->live = it;
  pthread_mutex_unlock(&op->live_mu);
}

/* Hands the iterator's counts to its op and unlinks it, atomically for readers (they hold live_mu). */
static void it_unlink(sl__it *it) {
  sl__op *op = it->op;
  pthread_mutex_lock(&op->live_mu);
  sl__stat_add(&op->st.out, atomic_load_explicit(&it->pend_out, memory_order_relaxed));
  sl__stat_add(&op->st.in, atomic_load_explicit(&it->pend_in, memory_order_relaxed));
  sl__stat_add(&op->st.bytes_out, atomic_load_explicit(&it->pend_bytes, memory_order_relaxed));
  if (it->live_prev) it->live_prev->live_next = it->live_next;
  else op->live = it->live_next;
  if (it->live_next) it->live_next->live_prev = it->live_prev;
  pthread_mutex_unlock(&op->live_mu);
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

int sl__it_next(sl__it *it, sl_elem *out) {
  int rc;
  if (!sl__sampler_tick(&it->smp)) {
    rc = it->vt->next(it, out);
  } else {
    /* Inclusive time of this call; an op's own time is its inclusive time minus that of the inputs it pulls on
     * its own thread (see sl_pipeline_op_stats), so children need no clock reads of their own here. */
    uint64_t c0 = sl__cpu_ns(), w0 = sl__now_ns();
    rc = it->vt->next(it, out);
    sl__stats_sample(it->op, &it->smp, sl__cpu_ns() - c0, sl__now_ns() - w0);
  }
  if (rc == 0) {
    size_t b = 0;
    for (int i = 0; i < out->n; i++) b += out->c[i].size;
    sl__pend_add(&it->pend_bytes, b);
    sl__pend_add(&it->pend_out, 1);
  }
  return rc;
}

int sl__it_pull_from(sl__it *it, sl__it *child, sl_elem *out) {
  (void)it;
  return sl__it_next(child, out);
}

int sl__it_pull(sl__it *it, sl_elem *out) {
  int rc = sl__it_next(it->input, out);
  if (rc == 0) sl__pend_add(&it->pend_in, 1);
  return rc;
}

void sl__it_free(sl__it *it) {
  if (!it) return;
  sl__it *in = it->input;
  it_unlink(it);
  it->vt->free(it);
  sl__it_free(in);
}

int sl__it_new(sl__it **out, size_t size, const sl__it_vt *vt, sl__op *op, sl__run *run, const sl_elem *seed_elem) {
  return sl__it_new_ex(out, size, vt, op, run, seed_elem, true);
}

int sl__it_new_ex(sl__it **out, size_t size, const sl__it_vt *vt, sl__op *op, sl__run *run, const sl_elem *seed_elem,
                  bool open_input) {
  *out = NULL;
  sl__it *it = sl__calloc(1, size);
  if (!it) return sl__op_err(op, SL_ENOMEM, "out of memory starting the op");
  it->vt = vt;
  it->op = op;
  it->run = run;
  it->epoch = atomic_fetch_add_explicit(&op->opens, 1, memory_order_relaxed);
  sl__sampler_init(&it->smp, op);
  int rc = open_input ? sl__op_open_input(op, run, seed_elem, &it->input) : 0;
  if (rc) {
    sl__free(it);
    return rc;
  }
  it_link(it);
  *out = it;
  return 0;
}

int sl__op_open_input(sl__op *op, sl__run *run, const sl_elem *seed_elem, sl__it **out) {
  *out = NULL;
  if (op->input) return sl__op_open(op->input, run, seed_elem, out);
  if (!(op->vt->flags & SL_OPF_SOURCE) && seed_elem) return sl__it_single(op, run, seed_elem, out);
  return 0;
}

int sl__op_open(sl__op *op, sl__run *run, const sl_elem *seed_elem, sl__it **out) {
  return op->vt->open(op, run, seed_elem, out);
}

/* ---- single-element iterator: the start of a nested chain ---- */
typedef struct {
  sl__it it;
  sl_elem e;
  bool done;
} single_it;

static int single_next(sl__it *it, sl_elem *out) {
  single_it *s = (single_it *)it;
  if (s->done) return SL_END;
  s->done = true;
  sl_elem_move(out, &s->e);
  return 0;
}
static void single_free(sl__it *it) {
  single_it *s = (single_it *)it;
  sl_elem_clear(&s->e);
  sl__free(s);
}
static const sl__it_vt SINGLE_VT = {single_next, single_free};

/* The single iterator has no op of its own: its counts would double the interleave's input. It borrows the
 * consumer op only for error naming and is never passed through sl__it_next's accounting of another op. */
static const sl__op_vt SINGLE_OP_VT = {"single", NULL, NULL, NULL, 0};
/* Initialised once here, not per call: iterators are opened from several worker threads at once. */
static char g_single_path[] = "source";
static sl__op g_single_op = {.vt = &SINGLE_OP_VT, .path = g_single_path, .live_mu = PTHREAD_MUTEX_INITIALIZER};

int sl__it_single(sl__op *op, sl__run *run, const sl_elem *e, sl__it **out) {
  (void)op;
  single_it *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("a nested source");
  s->it.vt = &SINGLE_VT;
  s->it.op = &g_single_op;
  s->it.run = run;
  s->it.smp.countdown = UINT32_MAX; /* never timed (in practice: it yields one element) */
  s->it.smp.stride = 1;
  sl_elem_copy(&s->e, e);
  it_link(&s->it);
  *out = &s->it;
  return 0;
}

/* ---- errors ---- */
static void op_name(const sl__op *op, char *buf, size_t n) {
  if (op->label && strcmp(op->label, op->vt->kind))
    snprintf(buf, n, "%s (%s %s)", op->path, op->vt->kind, op->label);
  else
    snprintf(buf, n, "%s (%s)", op->path, op->vt->kind);
}

int sl__op_err(const sl__op *op, int code, const char *fmt, ...) {
  char name[256], msg[768];
  op_name(op, name, sizeof name);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return sl__err(code, "%s: %s", name, msg);
}

int sl__op_wrap(const sl__op *op, int code) {
  char name[256];
  op_name(op, name, sizeof name);
  /* Do not wrap twice when the message already names this op. */
  if (!strncmp(sl_error_last(), op->path, strlen(op->path))) return code;
  return sl__err_wrap(code, "%s", name);
}

void sl__errbox_capture(sl__errbox *b, int code) {
  b->code = code;
  snprintf(b->msg, sizeof b->msg, "%s", sl_error_last());
}

int sl__errbox_raise(const sl__errbox *b) { return sl__err(b->code, "%s", b->msg); }

void sl__cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += (long)ms * 1000000L;
  ts.tv_sec += ts.tv_nsec / 1000000000L;
  ts.tv_nsec %= 1000000000L;
  pthread_cond_timedwait(cv, mu, &ts);
}

void sl__handoff_poll(pthread_mutex_t *mu, const atomic_uint *counter) {
  unsigned seen = atomic_load_explicit(counter, memory_order_relaxed);
  pthread_mutex_unlock(mu);
  uint64_t t0 = sl__now_ns();
  for (bool changed = false; !changed && sl__now_ns() - t0 < SL_HANDOFF_SPIN_NS;)
    for (int i = 0; i < 64 && !changed; i++) {
      changed = atomic_load_explicit(counter, memory_order_relaxed) != seen;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  pthread_mutex_lock(mu);
}

void sl__handoff_mutex_init(pthread_mutex_t *mu) {
#ifdef PTHREAD_MUTEX_ADAPTIVE_NP
  pthread_mutexattr_t a;
  if (!pthread_mutexattr_init(&a)) {
    int rc = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP) || pthread_mutex_init(mu, &a);
    pthread_mutexattr_destroy(&a);
    if (!rc) return;
  }
#endif
  pthread_mutex_init(mu, NULL);
}

/* ---- knobs ---- */
int sl__knob_int(const sl__op *op, json_t *obj, const char *key, int64_t def, int64_t min, int64_t *out) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    *out = def;
    return 0;
  }
  if (!json_is_integer(v))
    return sl__err(SL_EINVAL, "%s.%s: expected an integer, found %s", op->path, key, sl__json_type_name(v));
  int64_t x = json_integer_value(v);
  if (x < min) return sl__err(SL_EINVAL, "%s.%s: %lld is below the minimum %lld", op->path, key, (long long)x, (long long)min);
  *out = x;
  return 0;
}

int sl__knob_tunable(const sl__op *op, json_t *obj, const char *key, int64_t def, int64_t min, int64_t *out,
                     bool *autotune) {
  json_t *v = json_object_get(obj, key);
  *autotune = false;
  if (v && json_is_string(v)) {
    if (strcmp(json_string_value(v), "autotune"))
      return sl__err(SL_EINVAL, "%s.%s: expected an integer or \"autotune\", found \"%s\"", op->path, key,
                     json_string_value(v));
    *autotune = true;
    *out = def;
    return 0;
  }
  /* A tunable knob is always written back, so the normalised spec shows the value in force. */
  if (!v) json_object_set_new(obj, key, json_integer(def));
  if (v && !json_is_integer(v))
    return sl__err(SL_EINVAL, "%s.%s: expected an integer or \"autotune\", found %s", op->path, key,
                   sl__json_type_name(v));
  return sl__knob_int(op, obj, key, def, min, out);
}

int sl__knob_bool(const sl__op *op, json_t *obj, const char *key, bool def, bool *out) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    *out = def;
    return 0;
  }
  if (!json_is_boolean(v))
    return sl__err(SL_EINVAL, "%s.%s: expected true or false, found %s", op->path, key, sl__json_type_name(v));
  *out = json_is_true(v);
  return 0;
}

int sl__knob_str(const sl__op *op, json_t *obj, const char *key, const char *def, const char **out) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    *out = def;
    return 0;
  }
  if (!json_is_string(v))
    return sl__err(SL_EINVAL, "%s.%s: expected a string, found %s", op->path, key, sl__json_type_name(v));
  *out = json_string_value(v);
  return 0;
}

int sl__knob_double(const sl__op *op, json_t *obj, const char *key, double def, double *out) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    *out = def;
    return 0;
  }
  if (!json_is_number(v))
    return sl__err(SL_EINVAL, "%s.%s: expected a number, found %s", op->path, key, sl__json_type_name(v));
  *out = json_number_value(v);
  return 0;
}

int sl__knob_check_keys(const sl__op *op, json_t *obj, const char *const *allowed) {
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    if (!strcmp(key, "op")) continue;
    bool ok = false;
    for (const char *const *a = allowed; *a; a++)
      if (!strcmp(*a, key)) ok = true;
    if (!ok) {
      char list[512] = "";
      for (const char *const *a = allowed; *a; a++) {
        if (list[0]) strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, *a, sizeof list - strlen(list) - 1);
      }
      return sl__err(SL_EINVAL, "%s.%s: unknown knob for op '%s' (known: %s)", op->path, key, op->vt->kind,
                     list[0] ? list : "none");
    }
  }
  return 0;
}

int64_t sl__autotune_parallelism(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? n : 1;
}

char *sl__resolve_path(const sl_pipeline *pl, const char *path) {
  if (path[0] == '/' || !pl->base_dir || !pl->base_dir[0]) return sl__strdup(path);
  sl__str s = {0};
  if (sl__str_printf(&s, "%s/%s", pl->base_dir, path)) return NULL;
  return s.s;
}

/* Intern table per op: a small linked list of names (a handful per op at most). */
typedef struct intern_node {
  struct intern_node *next;
  char name[];
} intern_node;
static pthread_mutex_t g_intern_mu = PTHREAD_MUTEX_INITIALIZER;
static intern_node *g_interned;

const char *sl__op_intern(sl__op *op, const char *name, size_t len) {
  (void)op;
  /* Interned names are process-wide and never freed: a bounded set (component names of cache files). */
  pthread_mutex_lock(&g_intern_mu);
  for (intern_node *n = g_interned; n; n = n->next)
    if (strlen(n->name) == len && !memcmp(n->name, name, len)) {
      pthread_mutex_unlock(&g_intern_mu);
      return n->name;
    }
  intern_node *n = malloc(sizeof *n + len + 1); /* not sl__malloc: lives for the process, outside fault tests */
  if (!n) {
    pthread_mutex_unlock(&g_intern_mu);
    return NULL;
  }
  memcpy(n->name, name, len);
  n->name[len] = 0;
  n->next = g_interned;
  g_interned = n;
  pthread_mutex_unlock(&g_intern_mu);
  return n->name;
}
