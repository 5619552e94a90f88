/* ops/engine.c: the iterator protocol: next (counting and sampling around every call), pulls from an input,
 * creation and freeing (each live iterator linked to its op so counts can be read while it runs), the single-
 * element iterator that starts a nested chain, errors that name the op, and interned names; and the engine's side of a
 * saved state (docs/state.md): reading an iterator's record as it opens, the pushback of elements made again, making
 * an element again from its ref, writing an iterator's record with its chain held still. Counters are in
 * engine_stats.c, knob readers in engine_knobs.c, thread hand-off helpers in engine_handoff.c, a state's bytes in
 * state_io.c, the state document in pipeline_state.c. */
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

/* ---- saved state: the engine's side (docs/state.md) ---- */
/* ---- pushback: elements made again, handed out before the input's ---- */
typedef struct {
  sl__it it;
  sl__op *by; /* the op whose output the refs are (the inner iterator's op) */
  sl_eref *refs;
  size_t n, next;
} pb_it;

static int pb_next(sl__it *it, sl_elem *out) {
  pb_it *b = (pb_it *)it;
  if (b->next < b->n) {
    int rc = sl__remake(b->by, it->run, &b->refs[b->next], out);
    if (rc) return rc;
    sl_buf_unref(b->refs[b->next].members);
    b->refs[b->next].members = NULL;
    b->next++;
    return 0;
  }
  return it->input ? it->input->vt->next(it->input, out) : SL_END; /* counted once, as this iterator's */
}
static void pb_free(sl__it *it) {
  pb_it *b = (pb_it *)it;
  for (size_t i = b->next; i < b->n; i++) sl_buf_unref(b->refs[i].members);
  sl__free(b->refs);
  sl__free(b);
}
static const sl__it_vt PB_IT = {pb_next, pb_free};
const sl__it_vt *sl__pushback_vt(void) { return &PB_IT; }

int sl__pushback(sl__it **in, sl__run *run, sl__op *by, const sl_eref *refs, size_t n) {
  if (!n && *in) return 0;
  sl__it *inner = *in;
  sl__it *w;
  int rc = sl__it_new_ex(&w, sizeof(pb_it), &PB_IT, inner ? inner->op : by, run, NULL, false);
  if (rc) return rc;
  pb_it *b = (pb_it *)w;
  b->refs = sl__mallocarray(n, sizeof *b->refs);
  if (!b->refs) {
    sl__it_free(w);
    return sl__oom("elements to make again");
  }
  for (size_t i = 0; i < n; i++) {
    b->refs[i] = refs[i];
    sl_buf_ref(b->refs[i].members);
  }
  b->n = n;
  b->by = by ? by : inner->op;
  w->epoch = inner ? inner->epoch : 0;
  w->input = inner;
  *in = w;
  return 0;
}

/* ---- making an element again ---- */
int sl__remake_input(sl__op *op, sl__run *run, uint16_t up_op, uint64_t up, sl_elem *out) {
  sl_eref r = {.op = up_op, .pos = up};
  if (op->input) return sl__remake(op->input, run, &r, out);
  sl__op *il = op->owner;
  if (!il || !il->input) return sl__op_err(op, SL_EINVAL, "cannot make its input element again");
  return sl__remake(il->input, run, &r, out);
}

static int remake_op(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  for (;;) {
    const sl__op_state *st = op->vt->state;
    if (!r->op)
      return sl__op_err(op, SL_EINVAL, "an element to make again has no ref (an op before it does not keep "
                                             "refs: docs/state.md lists the ops a saved state covers)");
    if (!st) return sl__op_err(op, SL_EINVAL, "'%s' cannot make an element again", op->vt->kind);
    if (r->op == op->index + 1 || !(st->flags & SL__STF_PASS)) {
      if (!st->remake) return sl__op_err(op, SL_EINVAL, "'%s' cannot make an element again", op->vt->kind);
      return st->remake(op, run, r, out);
    }
    if (!op->input) return sl__op_err(op, SL_ECORRUPT, "an element's ref names no op before this one");
    op = op->input;
  }
}

int sl__remake(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  sl__sr *saved = sl__t_restore; /* iterators opened to make an element again read no state, count no epoch */
  sl__t_restore = NULL;
  sl__t_remaking++;
  int rc = remake_op(op, run, r, out);
  sl__t_remaking--;
  sl__t_restore = saved;
  return rc;
}

/* ---- records ---- */
int sl__state_save_it(sl__it *it, sl__sw *w) {
  /* Pushbacks around the iterator (a restored one may have several): theirs come first, outermost first. */
  enum { MAX_PB = 8 };
  const pb_it *pbs[MAX_PB];
  int npb = 0;
  while (it->vt == &PB_IT) {
    if (npb == MAX_PB) return sl__err(SL_EINVAL, "a run restored more than %d times over without handing out what "
                                                  "it made again: save its state later", MAX_PB);
    pbs[npb++] = (const pb_it *)it;
    it = it->input;
  }
  sl__op *op = it->op;
  bool single = op->pl == NULL; /* the start of a nested chain */
  sl__sw_u64(w, single ? 0 : (uint64_t)op->index + 1);
  sl__sw_u64(w, it->epoch);
  if (!single) sl__sw_u64(w, it->input != NULL);
  int rc = 0;
  if (single) {
    rc = sl__single_save(it, w);
  } else {
    const sl__op_state *st = op->vt->state;
    if (!st)
      return sl__op_err(op, SL_EINVAL, "'%s' cannot save its position yet (docs/state.md lists the ops that "
                                             "can)", op->vt->kind);
    if (op->stamp == -2)
      return sl__op_err(op, SL_EINVAL, "more than %d random maps: a run of it cannot save its position",
                        SL_REF_STAMPS);
    if (it->input && (rc = st->save_input ? st->save_input(it, w) : sl__state_save_it(it->input, w))) return rc;
    if (st->save && (rc = st->save(it, w))) return rc;
  }
  /* Its pushback: a wrapper's elements not handed out yet, then those the op took for its consumer. */
  sl__sw own = {0};
  size_t left = 0;
  for (int k = 0; k < npb; k++) left += pbs[k]->n - pbs[k]->next;
  int pend = !single && op->vt->state->pending ? op->vt->state->pending(it, &own) : 0;
  sl__sw_u64(w, left + (size_t)pend);
  for (int k = 0; k < npb; k++)
    for (size_t i = pbs[k]->next; i < pbs[k]->n; i++) sl__sw_ref(w, &pbs[k]->refs[i]);
  sl__sw_bytes(w, own.p, own.n);
  if (own.err && !w->err) w->err = own.err;
  sl__free(own.p);
  return w->err ? w->err : rc;
}

void sl__state_hold(sl__it *it, bool on) {
  if (!it) return;
  if (it->vt == &PB_IT) {
    sl__state_hold(it->input, on);
    return;
  }
  const sl__op_state *st = it->op->pl ? it->op->vt->state : NULL;
  if (on && st && st->hold) st->hold(it, true);
  if (!st || !st->save_input) sl__state_hold(it->input, on); /* else its hold did */
  if (!on && st && st->hold) st->hold(it, false);
}

int sl__sr_pushback(sl__sr *r, sl__it **in, sl__run *run, sl__op *by, const char *what) {
  uint64_t n;
  int rc = sl__sr_u64(r, &n, what);
  if (rc || !n) return rc;
  if (n > r->n - r->at)
    return sl__err(SL_ECORRUPT, "the saved state is damaged at byte %zu (%llu refs of %s)", r->at,
                   (unsigned long long)n, what);
  sl_eref *refs = sl__calloc((size_t)n, sizeof *refs);
  if (!refs) return sl__oom(what);
  for (uint64_t i = 0; i < n && !rc; i++) rc = sl__sr_ref(r, &refs[i]);
  if (!rc) rc = sl__pushback(in, run, by, refs, (size_t)n);
  for (uint64_t i = 0; i < n; i++) sl_buf_unref(refs[i].members);
  sl__free(refs);
  return rc;
}

static int read_pushback(sl__it **it) {
  return sl__sr_pushback(sl__t_restore, it, (*it)->run, NULL, "the elements to make again");
}

int sl__state_load(sl__it *it) {
  if (!sl__restoring(it->run)) return 0;
  const sl__op_state *st = it->op->pl ? it->op->vt->state : NULL;
  if (!st) return sl__op_err(it->op, SL_EINVAL, "'%s' cannot restore a position yet", it->op->vt->kind);
  return st->load ? st->load(it, sl__t_restore) : 0;
}

int sl__state_after_open(sl__it **it) {
  if (!sl__restoring((*it)->run)) return 0;
  int rc = 0;
  const sl__op_state *st = (*it)->op->pl ? (*it)->op->vt->state : NULL;
  if (st && !(st->flags & SL__STF_LOADS_ITSELF)) rc = sl__state_load(*it);
  else if (!st && (*it)->op->pl) rc = sl__state_load(*it);
  return rc ? rc : read_pushback(it);
}

