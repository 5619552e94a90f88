/* ops/op_prefetch.c: `prefetch`: one producer thread pulls ahead into a bounded ring of `buffer` elements, so the
 * consumer overlaps its work with the upstream's. Errors are queued like elements and end the stream. */
#include <string.h>

#include "ops/op_async_int.h"

typedef struct {
  sl__it it;
  pthread_mutex_t mu;
  pthread_cond_t cv_space, cv_ready;
  sl_elem *ring;
  size_t *ring_bytes;
  int cap, count, head; /* count: elements in the ring from head, claimed ones included */
  /* Slots allocated: the ring wraps at `span`, which starts small and doubles up to `cap` when the producer finds
   * it full below the depth in force (`grow`). Only the consumer grows it, under mu, on a trip where it holds no
   * claims: nobody then points into the ring. A deep buffer over a slow producer stays small. */
  int span;
  bool grow;
  int lent;             /* consumer only: the first `lent` from head are claimed (released on its next trip) */
  sl__claims cl;
  sl_elem *scratch;     /* producer only: a chunk made before it is published */
  bool done, stop;
  int end_rc;
  sl__errbox err;
  int waiting_consumer, waiting_producer;
  int consumer_want;      /* under mu: elements a waiting consumer is woken for (hysteresis) */
  uint64_t elem_ns;       /* under mu: the producer's running mean of wall time per element */
  bool cheap;             /* under mu: the producer's last chunk was of cheap elements */
  atomic_uint published;  /* chunks published: a consumer about to sleep polls it for a while first */
  atomic_uint released;   /* consumer trips: likewise for the producer */
  pthread_t thread;
  bool started;
  bool producing;         /* under mu: the producer is pulling a chunk (outside mu) */
  bool consumer_pulling;  /* under mu: the consumer is pulling inline (outside mu) */
  bool held;              /* under mu: a state is being saved: the producer starts no chunk */
  /* Saved states without waiting for a slow chunk: once a state was asked for in the run, the producer writes its
   * input's record after each chunk of expensive elements (snap, under mu: as of snap_pub elements published). */
  sl__sw snap;
  uint64_t snap_pub, pub_n;
  bool snap_ok, use_snap;
} pf_it;

/* Elements above this wall time each get a snapshot of the input's record (a few microseconds of writing per
 * element of a millisecond or more); cheaper ones are waited for when a state is taken. */
#define PF_SNAP_NS 1000000u

/* An "autotune" prefetch the tuner sets to depth 0 makes nothing ahead: its consumer pulls the input itself, once
 * the ring is empty and the producer is not pulling (a prefetch planned away costs no hand-off; the tuner's trial of
 * the all-sequential configuration sets it so, and measures). */
static bool pf_inline(const pf_it *f) {
  return f->it.op->buf_autotune && atomic_load_explicit(&f->it.op->active_buf, memory_order_relaxed) <= 0;
}

static int pf_parse(sl__op *op, json_t *o) {
  sl_args k = sl__op_knobs(op, o);
  int rc;
  if ((rc = sl__get_tunable(&op->buffer, &op->buf_autotune, &k, "buffer"))) return rc;
  if (op->buf_autotune) op->buffer = SL__AUTOTUNE_BUFFER;
  op->async = true;
  op->cardinality = op->input ? op->input->cardinality : -1;
  return 0;
}

/* Under mu: the depth in force (a tuner may change it during the run). */
static int pf_limit(const pf_it *f) {
  int lim = atomic_load_explicit(&f->it.op->active_buf, memory_order_relaxed);
  return lim < 1 ? 1 : lim > f->cap ? f->cap : lim;
}

static void *pf_producer(void *p) {
  pf_it *f = p;
  sl__op *op = f->it.op;
  sl__sampler smp;
  sl__sampler_init(&smp, op);
  int chunk = 1;
  uint64_t mean_ns = 0; /* running mean of the pulls' wall time per element (every chunk is timed for it) */
  for (;;) {
    /* A timed iteration spans the producer's whole work for one chunk (input pulls and hand-off) in CPU time,
     * the pulls timed inside it and subtracted, so that the hand-off counts as the prefetch's own; wall time is
     * the pulls' (the producer's spread). */
    bool timed = sl__sampler_tick(&smp);
    uint64_t c0 = timed ? sl__cpu_ns() : 0;
    pthread_mutex_lock(&f->mu);
    int k;
    bool spun = false;
    for (;;) {
      /* Hysteresis: with a full buffer, wait for a chunk's worth of room (at most half the depth). */
      int lim = pf_limit(f);
      if (lim > f->span) {
        if (f->count + 1 > f->span / 2) f->grow = true; /* the consumer doubles it on its next trip */
        lim = f->span;
      }
      int half = lim / 2 < 1 ? 1 : lim / 2;
      k = lim - f->count;
      if (f->stop) break;
      if (!pf_inline(f) && !f->consumer_pulling && !f->held && k >= (chunk < half ? chunk : half)) break;
      if (!spun && chunk > 1 && !f->waiting_consumer) {
        /* Cheap elements and the consumer is taking them: it gives room within microseconds. Poll a while. */
        spun = true;
        sl__handoff_poll(&f->mu, &f->released);
        continue;
      }
      f->waiting_producer++;
      sl__cond_wait_ms(&f->cv_space, &f->mu, 50);
      f->waiting_producer--;
      if (sl__canceled(f->it.run)) f->stop = true;
    }
    bool stop = f->stop;
    if (!stop) f->producing = true;
    pthread_mutex_unlock(&f->mu);
    if (stop) return NULL;
    if (k > chunk) k = chunk;
    uint64_t r0 = timed && sl__sampler_runq_due(&smp) ? sl__runq_ns() : SL__RUNQ_NONE; /* over the pulls */
    uint64_t w0 = sl__now_ns();
    int got = 0, rc = 0;
    sl__nest saved, inner;
    if (timed) { /* the pulls are timed inside the chunk and subtracted */
      sl__nest_open(&saved, false);
      sl__it_force(f->it.input, 1);
    }
    while (got < k) {
      sl_elem_init(&f->scratch[got]);
      if ((rc = sl__it_next(f->it.input, &f->scratch[got]))) break;
      got++;
    }
    uint64_t pw = sl__now_ns() - w0;
    sl__sw snap = {0};
    bool snapped = false;
    if (!rc && got && atomic_load_explicit(&f->it.run->want_state, memory_order_relaxed) && pw / (uint64_t)got >= PF_SNAP_NS) {
      sl__state_hold(f->it.input, true);
      snapped = sl__state_save_it(f->it.input, &snap) == 0;
      sl__state_hold(f->it.input, false);
    }
    uint64_t rq = timed ? sl__runq_since(r0) : SL__RUNQ_NONE;
    if (timed) {
      sl__it_force(f->it.input, -1);
      sl__nest_close(&saved, &inner, 0, 0); /* a worker's region: nothing encloses it */
    }
    if (got) sl__stat_add(&op->st.in, (uint64_t)got);
    pthread_mutex_lock(&f->mu);
    for (int j = 0; j < got; j++) { /* only this thread adds: the room seen above is still there */
      int pos = (f->head + f->count) % f->span;
      size_t b = sl_elem_bytes(&f->scratch[j]);
      sl_elem_move(&f->ring[pos], &f->scratch[j]);
      f->ring_bytes[pos] = b;
      f->count++;
      sl__stats_held(op, (int64_t)b);
    }
    f->pub_n += (uint64_t)got;
    if (snapped) {
      sl__sw old = f->snap;
      f->snap = snap;
      snap = old;
      f->snap_pub = f->pub_n;
      f->snap_ok = true;
    }
    if (rc) {
      f->done = true;
      f->end_rc = rc;
      if (rc < 0) sl__errbox_capture(&f->err, rc);
    }
    f->producing = false;
    bool wake = f->waiting_consumer > 0 && (f->done || f->count >= f->consumer_want || f->count >= pf_limit(f));
    if (got) {
      f->cheap = chunk > 1;
      f->elem_ns = mean_ns; /* as of the chunks before this one */
    }
    pthread_mutex_unlock(&f->mu);
    sl__free(snap.p);
    atomic_fetch_add_explicit(&f->published, 1, memory_order_relaxed);
    if (wake) pthread_cond_signal(&f->cv_ready); /* after the unlock: the consumer does not block on the mutex */
    if (got) {
      if (timed) sl__stats_work_n(op, &smp, sl__cpu_ns() - c0, pw, (uint64_t)got, &inner, rq);
      chunk = sl__handoff_chunk(&mean_ns, pw, (uint64_t)got);
    }
    if (rc) return NULL;
  }
}

/* Slots a ring starts with (an sl_elem is 2 KB): the default depths fit. */
#define PF_SPAN0 16

/* Under mu, no claims out: doubles the ring (up to cap), its elements moved to the front in order. */
static int pf_grow(pf_it *f) {
  f->grow = false;
  if (f->span >= f->cap) return 0;
  int ns = f->span * 2 < f->cap ? f->span * 2 : f->cap;
  sl_elem *r = sl__calloc((size_t)ns, sizeof *r);
  size_t *rb = sl__calloc((size_t)ns, sizeof *rb);
  if (!r || !rb) {
    sl__free(r);
    sl__free(rb);
    return SL_ENOMEM;
  }
  for (int i = 0; i < f->count; i++) {
    int pos = (f->head + i) % f->span;
    sl_elem_move(&r[i], &f->ring[pos]);
    rb[i] = f->ring_bytes[pos];
  }
  sl__free(f->ring);
  sl__free(f->ring_bytes);
  f->ring = r;
  f->ring_bytes = rb;
  f->head = 0;
  f->span = ns;
  if (f->waiting_producer) pthread_cond_signal(&f->cv_space); /* the room it waits for */
  return 0;
}

static int pf_next(sl__it *it, sl_elem *out) {
  pf_it *f = (pf_it *)it;
  sl_elem *from = sl__claims_next(&f->cl, out);
  if (from) {
    sl__stats_held(it->op, -(int64_t)f->ring_bytes[from - f->ring]);
    return 0;
  }
  pthread_mutex_lock(&f->mu);
  atomic_fetch_add_explicit(&f->released, 1, memory_order_relaxed);
  f->head = (f->head + f->lent) % f->span; /* the claims of the last trip are all served */
  f->count -= f->lent;
  f->lent = 0;
  f->cl.head = f->cl.n = 0;
  if (f->grow && pf_grow(f)) {
    pthread_mutex_unlock(&f->mu);
    return sl__op_err(it->op, SL_ENOMEM, "out of memory growing the buffer to %d elements", f->span * 2);
  }
  uint64_t w0 = 0;
  while (f->count == 0 && !f->done) {
    if (pf_inline(f) && !f->producing) {
      f->consumer_pulling = true;
      f->snap_ok = false; /* the input moves on without the producer: its snapshot is stale */
      pthread_mutex_unlock(&f->mu);
      if (w0) sl__stat_add(&it->op->st.wait_ns, sl__now_ns() - w0);
      int rc = sl__it_next(it->input, out);
      if (rc == 0) sl__stat_add(&it->op->st.in, 1);
      pthread_mutex_lock(&f->mu);
      f->consumer_pulling = false;
      if (rc) { /* the end or an error, as the producer would have queued it */
        f->done = true;
        f->end_rc = rc;
        if (rc < 0) sl__errbox_capture(&f->err, rc); /* for later calls; this one returns it as set */
      }
      /* A producer waits for the pull to finish only when the depth was raised meanwhile; at depth 0 it sleeps
       * until then, and waking it for every element cost a futex wake-up each. */
      bool wake = f->waiting_producer && (f->done || !pf_inline(f));
      pthread_mutex_unlock(&f->mu);
      if (wake) pthread_cond_signal(&f->cv_space);
      return rc;
    }
    if (sl__canceled(it->run)) {
      pthread_mutex_unlock(&f->mu);
      return sl__err(SL_ECANCELED, "%s: cancelled", it->op->path);
    }
    if (!w0) {
      w0 = sl__now_ns();
      if (f->cheap && !f->waiting_producer) {
        /* The producer is making cheap elements: its chunk is due within microseconds, sooner than a sleep and a
         * wake-up would take. Poll for it a while (once per call), then sleep. */
        sl__handoff_poll(&f->mu, &f->published);
        continue;
      }
    }
    if (f->waiting_producer) pthread_cond_signal(&f->cv_space); /* the released claims made room */
    /* Expensive elements from a producer slower than the consumer: sleep until what it makes within
     * SL__HANDOFF_RUN_NS is ready (at most a claim), not for every element. */
    f->consumer_want = f->cheap ? 1 : sl__handoff_want(f->elem_ns, 1, sl__claims_limit(pf_limit(f)));
    f->waiting_consumer++;
    sl__cond_wait_ms(&f->cv_ready, &f->mu, 50);
    f->waiting_consumer--;
  }
  if (w0) sl__stat_add(&it->op->st.wait_ns, sl__now_ns() - w0);
  if (f->count == 0) {
    sl__stat_add(&it->op->st.occ_n, 1);
    int rc = f->end_rc;
    pthread_mutex_unlock(&f->mu);
    return rc < 0 ? sl__errbox_raise(&f->err) : SL_END;
  }
  uint64_t occ = (uint64_t)f->count;
  sl_elem_move(out, &f->ring[f->head]);
  sl__stats_held(it->op, -(int64_t)f->ring_bytes[f->head]);
  f->head = (f->head + 1) % f->span;
  f->count--;
  /* Claim the ready elements after it, up to half the depth: the producer keeps the other half. */
  int lim = pf_limit(f), n = sl__claims_limit(lim) - 1;
  if (n > f->count) n = f->count;
  for (int i = 0; i < n; i++) f->cl.e[i] = &f->ring[(f->head + i) % f->span];
  f->cl.n = f->lent = n;
  sl__stat_add(&it->op->st.occ_sum, sl__occ_run(occ, (uint64_t)n + 1));
  sl__stat_add(&it->op->st.occ_n, (uint64_t)n + 1);
  /* Hysteresis: wake a waiting producer only once half the depth is free, not for every element taken. */
  bool wake = f->waiting_producer && f->count <= lim / 2;
  pthread_mutex_unlock(&f->mu);
  if (wake) pthread_cond_signal(&f->cv_space);
  return 0;
}

static void pf_free(sl__it *it) {
  pf_it *f = (pf_it *)it;
  pthread_mutex_lock(&f->mu);
  f->stop = true;
  pthread_cond_broadcast(&f->cv_space);
  pthread_mutex_unlock(&f->mu);
  if (f->started) pthread_join(f->thread, NULL);
  f->head = (f->head + f->cl.head) % f->span; /* claimed elements already served: their bytes are accounted */
  f->count -= f->cl.head;
  for (int i = 0; i < f->count; i++) {
    int pos = (f->head + i) % f->span;
    sl__stats_held(it->op, -(int64_t)f->ring_bytes[pos]);
    sl_elem_clear(&f->ring[pos]);
  }
  pthread_mutex_destroy(&f->mu);
  pthread_cond_destroy(&f->cv_space);
  pthread_cond_destroy(&f->cv_ready);
  sl__free(f->ring);
  sl__free(f->ring_bytes);
  sl__free(f->scratch);
  sl__free(f->snap.p);
  sl__free(f);
}
static const sl__it_vt PF_IT = {pf_next, pf_free};

/* ---- saved state: the elements made ahead are its input's again, as refs (made again on restore) ---- */
/* Undelivered elements: unserved claims, then the ring after the claims. */
static int pf_undelivered(const pf_it *f) { return (f->cl.n - f->cl.head) + (f->count - f->lent); }
static const sl_elem *pf_undelivered_at(const pf_it *f, int i) {
  int unserved = f->cl.n - f->cl.head;
  return i < unserved ? f->cl.e[f->cl.head + i] : &f->ring[(f->head + f->lent + (i - unserved)) % f->span];
}
/* With a snapshot taken after every element the consumer has: the input stays as it is (the snapshot is its
 * record); else the producer's chunk is waited for and the input held still, its record written live. */
static void pf_hold(sl__it *it, bool on) {
  pf_it *f = (pf_it *)it;
  if (on) {
    pthread_mutex_lock(&f->mu);
    f->held = true;
    uint64_t delivered = f->pub_n - (uint64_t)pf_undelivered(f);
    f->use_snap = f->snap_ok && f->snap_pub >= delivered;
    if (f->use_snap) return;
    while (f->producing) sl__cond_wait_ms(&f->cv_ready, &f->mu, 1);
    sl__state_hold(it->input, true);
  } else {
    if (!f->use_snap) sl__state_hold(it->input, false);
    f->held = false;
    pthread_mutex_unlock(&f->mu);
    pthread_cond_broadcast(&f->cv_space);
  }
}
static int pf_save_input(sl__it *it, sl__sw *w) {
  pf_it *f = (pf_it *)it;
  if (!f->use_snap) return sl__state_save_it(it->input, w);
  sl__sw_bytes(w, f->snap.p, f->snap.n);
  return 0;
}
static int pf_save(sl__it *it, sl__sw *w) {
  pf_it *f = (pf_it *)it;
  int n = pf_undelivered(f);
  if (f->use_snap) n -= (int)(f->pub_n - f->snap_pub); /* those published after the snapshot follow from it */
  sl__sw_u64(w, (uint64_t)n);
  for (int i = 0; i < n; i++) sl__sw_ref(w, &pf_undelivered_at(f, i)->ref);
  return 0;
}
static int pf_load(sl__it *it, sl__sr *r) {
  return sl__sr_pushback(r, &it->input, it->run, it->op->input, "a prefetch's elements made ahead");
}
static const sl__op_state PF_STATE = {pf_save,        pf_load, pf_hold, NULL, SL__STF_PASS | SL__STF_LOADS_ITSELF, NULL,
                                      pf_save_input};

static int pf_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  int rc = sl__it_new(out, sizeof(pf_it), &PF_IT, op, run, seed);
  if (rc) return rc;
  pf_it *f = (pf_it *)*out;
  sl__handoff_mutex_init(&f->mu);
  pthread_cond_init(&f->cv_space, NULL);
  pthread_cond_init(&f->cv_ready, NULL);
  /* An autotuned buffer may be deepened during the run: the ring has room for the largest depth. */
  f->cap = op->buf_autotune ? SL__AUTOTUNE_BUFFER_MAX : (int)op->buffer;
  f->span = f->cap < PF_SPAN0 ? f->cap : PF_SPAN0;
  f->ring = sl__calloc((size_t)f->span, sizeof *f->ring);
  f->ring_bytes = sl__calloc((size_t)f->span, sizeof *f->ring_bytes);
  f->scratch = sl__calloc(SL__HANDOFF_MAX, sizeof *f->scratch);
  if (!f->ring || !f->ring_bytes || !f->scratch) {
    int cap = f->cap;
    sl__it_free(*out);
    *out = NULL;
    return sl__op_err(op, SL_ENOMEM, "out of memory for a buffer of %d elements", cap);
  }
  if ((rc = sl__state_load(*out))) {
    sl__it_free(*out);
    *out = NULL;
    return rc;
  }
  if (pthread_create(&f->thread, NULL, pf_producer, f)) {
    sl__it_free(*out);
    *out = NULL;
    return sl__op_err(op, SL_ERROR, "cannot start the prefetch thread");
  }
  f->started = true;
  return 0;
}

static const sl__arg PF_KNOBS[] = {
    {"buffer", SL__ARG_INT, "1", SL__ARGF_TUNABLE | SL__ARGF_KNOB | SL__LOHI, 1, SL__MAX_BUFFER, NULL,
     "elements made ahead"},
    {NULL}};
static const sl__op_schema PF_SCHEMA = {SL__MK_PREFETCH, SL__OPS_NO_IDENTITY,
                                        "makes elements ahead on its own thread", PF_KNOBS, NULL};
const sl__op_vt sl__op_prefetch = {"prefetch", pf_parse, pf_open, NULL, SL__OPF_NEEDS_INPUT, &PF_SCHEMA, &PF_STATE};
