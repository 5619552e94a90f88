/* ops/engine.c: the iterator protocol: next (counting and sampling around every call), pulls from an input,
 * creation and freeing (each live iterator linked to its op so counts can be read while it runs), the single-
 * element iterator that starts a nested chain, errors that name the op, and interned names. Counters are in
 * engine_stats.c, knob readers in engine_knobs.c, thread hand-off helpers in engine_handoff.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/engine_int.h"

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

int sl__it_next(sl__it *it, sl_elem *out) {
  int rc;
  bool tick = sl__sampler_tick(&it->smp);
  if (!tick && !atomic_load_explicit(&it->nest_force, memory_order_relaxed)) {
    rc = it->vt->next(it, out);
  } else if (!tick && sl__nest_wall_only()) {
    /* Timed only for a sampled call above it on this thread, which reads this call's CPU from its wall time
     * (sl__nest_open): the wall clock alone, no system call. */
    sl__nest saved, inner;
    sl__nest_open(&saved, false);
    uint64_t w0 = sl__now_ns();
    rc = it->vt->next(it, out);
    uint64_t dw = sl__now_ns() - w0;
    sl__nest_close_wall(&saved, &inner, dw);
  } else {
    /* Timed: its own sample is due, or a timed call that pulls from it subtracts this one's inclusive time
     * (sl__nest). Only for its own sample are its input's calls timed too: a call timed for its caller needs its
     * inclusive time alone (so a batch of 2048 times its 2048 pulls, not the whole chain under each). */
    sl__nest saved, inner;
    sl__nest_open(&saved, tick);
    bool cpu = !tick || sl__sampler_cpu_due(&it->smp, it->op);
    if (tick) {
      sl__it_force(it->input, 1);
      atomic_store_explicit(&it->timing, true, memory_order_relaxed);
    }
    /* The run-queue delay only for the op's own samples that read the CPU clock, one in SL__RUNQ_EVERY (outside the
     * clock windows). */
    uint64_t r0 = tick && cpu && sl__sampler_runq_due(&it->smp) ? sl__runq_ns() : SL__RUNQ_NONE;
    uint64_t c0 = cpu ? sl__cpu_ns() : 0, w0 = sl__now_ns();
    rc = it->vt->next(it, out);
    uint64_t dc = cpu ? sl__cpu_ns() - c0 : 0, dw = sl__now_ns() - w0;
    uint64_t dr = sl__runq_since(r0);
    if (tick) {
      atomic_store_explicit(&it->timing, false, memory_order_relaxed);
      sl__it_force(it->input, -1); /* read again: a repeat replaces its input, and carries the mark over */
    }
    if (cpu) sl__nest_close(&saved, &inner, dc, dw);
    else sl__nest_close_wall(&saved, &inner, dw);
    if (r0 != SL__RUNQ_NONE) sl__nest_charge_runq();
    if (tick) sl__stats_sample(it->op, &it->smp, dc, dw, &inner, cpu, dr);
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
  if (!atomic_load_explicit(&it->timing, memory_order_relaxed)) return sl__it_next(child, out);
  sl__it_force(child, 1); /* a timed call of `it` subtracts this pull */
  int rc = sl__it_next(child, out);
  sl__it_force(child, -1);
  return rc;
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
  /* Its epoch: the op's count of iterators so far; a restored one's is in its record (sl__state_head); iterators
   * opened to make an element again, and pushbacks, count none. */
  bool restoring = sl__restoring(run) && vt != sl__pushback_vt();
  it->epoch = restoring || sl__t_remaking || vt == sl__pushback_vt()
                  ? 0
                  : atomic_fetch_add_explicit(&op->opens, 1, memory_order_relaxed);
  sl__sampler_init(&it->smp, op);
  bool rec_input = open_input;
  int rc = restoring ? sl__state_head(it, &rec_input) : 0;
  if (!rc && (open_input || rec_input)) {
    /* An input the record has is restored from it (even where this op would not open one now: a cache read in the
     * state's run but empty in this one); one it lacks is opened afresh. */
    sl__sr *rd = sl__t_restore;
    if (!rec_input) sl__t_restore = NULL;
    rc = sl__op_open_input(op, run, seed_elem, &it->input);
    sl__t_restore = rd;
  }
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
  if (!(op->vt->flags & SL__OPF_SOURCE) && seed_elem) return sl__it_single(op, run, seed_elem, out);
  return 0;
}

int sl__op_open(sl__op *op, sl__run *run, const sl_elem *seed_elem, sl__it **out) {
  int rc = op->vt->open(op, run, seed_elem, out);
  if (!rc && (rc = sl__state_after_open(out))) {
    sl__it_free(*out);
    *out = NULL;
  }
  return rc;
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
int sl__single_save(sl__it *it, sl__sw *w) {
  sl__sw_u64(w, ((single_it *)it)->done);
  return 0;
}

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
  if (sl__restoring(run)) { /* its record: the head, whether its element was taken, no pushback */
    uint64_t done, pb;
    int rc;
    if ((rc = sl__state_head(&s->it, NULL)) || (rc = sl__sr_u64(sl__t_restore, &done, "a nested source's start")) ||
        (rc = sl__sr_u64(sl__t_restore, &pb, "a nested source's start"))) {
      sl__it_free(&s->it);
      *out = NULL;
      return rc;
    }
    s->done = done != 0;
    if (s->done) sl_elem_clear(&s->e);
  }
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
