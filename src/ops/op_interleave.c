/* ops/op_interleave.c: `interleave`: for each input element, opens the nested `source` chain on it and cycles
 * through `cycle_length` of them, `block_length` elements at a time (tf.data's order). With parallelism > 1,
 * worker threads fill a small per-slot buffer ahead of the consumer, which keeps the deterministic order (or, with
 * "deterministic": false, takes whatever slot is ready). Slots are opened and closed on the consumer's thread,
 * so the order in which input elements enter the cycle does not depend on timing. */
#include <string.h>

#include "ops/op_async_int.h"

typedef struct {
  int64_t cycle, block_length;
  bool deterministic;
} il_cfg;

typedef struct {
  sl__it *it;      /* nested iterator, NULL when the slot is empty */
  sl_elem *q;      /* parallel: buffered results */
  int qhead, qn;   /* qn counts the consumer's claimed elements too: the first `lent` from qhead */
  int lent;
  /* Slots allocated in q: it wraps at `span`, which starts small and doubles up to the op's buffer when a maker
   * finds it full (`grow`). Only the consumer grows it, under mu, on a trip that holds no claims: nobody then points
   * into q (makers write into it under mu only). */
  int span;
  bool grow;
  bool busy;       /* a worker is inside it->next */
  bool exhausted;  /* the nested iterator returned SL_END */
  int err;         /* a nested error, delivered after the buffered elements */
  sl__errbox *box;
  sl_eref seed;    /* the ref of the input element its chain was opened for (a saved state makes it again) */
} il_slot;

typedef struct il_it il_it;
typedef struct {
  il_it *m;
  int id;
} il_warg;

struct il_it {
  sl__it it;
  il_slot *slots;
  int cycle, cur;
  int64_t block;
  bool input_eof;
  /* parallel */
  bool parallel;
  int qcap;  /* the op's buffer: the most a slot's q grows to */
  bool grow; /* under mu: some slot asks to grow */
  pthread_mutex_t mu;
  pthread_cond_t cv_work, cv_ready;
  bool stop, sync_init;
  pthread_t *threads;
  il_warg *args;
  sl_elem *scratch; /* SL__HANDOFF_MAX per worker: a chunk made before it is published */
  sl_elem *cscratch; /* the same for the consumer (at the end of scratch) */
  int chunk;        /* under mu: elements made per trip, from the running mean of a nested element's wall time */
  uint64_t mean_ns;
  int nthreads;
  int waiting_consumer, waiting_workers;
  /* Written by the consumer under mu, read by workers under mu: while no worker may work (an "autotune" interleave
   * the tuner set to 1) and nothing is buffered, the consumer pulls from the slots itself, as il_next_seq does,
   * without the lock, the buffers or the clock reads of a trip per element; workers leave the slots alone. */
  bool direct;
  /* Consumer only: elements claimed on its last trip under mu, and the slot each came from (to release it). */
  sl__claims cl;
  il_slot *cl_slot[SL__HANDOFF_MAX];
  bool held; /* under mu: a state is being saved: workers start no chunk */
};

static int il_parse(sl__op *op, json_t *o) {
  sl_args k = sl__op_knobs(op, o);
  il_cfg *c = sl__calloc(1, sizeof *c);
  if (!c) return sl__oom("interleave");
  op->impl = c;
  int rc;
  bool cyc_auto;
  if ((rc = sl__get_tunable_or(&c->cycle, &cyc_auto, &k, "cycle_length", sl__autotune_parallelism())) ||
      (rc = sl__get_int(&c->block_length, &k, "block_length")) ||
      (rc = sl__get_tunable(&op->parallelism, &op->par_autotune, &k, "parallelism")) ||
      (rc = sl__get_bool(&c->deterministic, &k, "deterministic")) ||
      (rc = sl__get_tunable(&op->buffer, &op->buf_autotune, &k, "buffer")))
    return rc;
  if (op->par_autotune) op->parallelism = sl__autotune_parallelism();
  if (op->buf_autotune) op->buffer = 2;
  /* Each open chain has a buffer of its own: together they are held to what one op's buffer may hold. */
  if (c->cycle * op->buffer > SL__MAX_BUFFER)
    return sl__err(SL_EINVAL, "%s: cycle_length %lld x buffer %lld is %lld slots, more than the %d one op may hold",
                   op->path, (long long)c->cycle, (long long)op->buffer, (long long)(c->cycle * op->buffer),
                   SL__MAX_BUFFER);
  if (op->parallelism > c->cycle) op->parallelism = c->cycle;
  op->async = op->parallelism > 1;
  op->cardinality = (op->input && op->input->cardinality == 0) ? 0 : -1;
  return 0;
}

static int64_t il_cycle(const sl__op *op) { return ((const il_cfg *)op->impl)->cycle; }

/* Opens the next input element's nested chain into slot s (consumer thread). 0, SL_END (input done) or error. */
static int il_fill(il_it *m, il_slot *s) {
  sl_elem in;
  sl_elem_init(&in);
  int rc = sl__it_pull(&m->it, &in);
  if (rc == SL_END) {
    m->input_eof = true;
    return SL_END;
  }
  if (rc) return rc;
  sl__it *nit = NULL;
  rc = sl__op_open(m->it.op->source, m->it.run, &in, &nit);
  sl_eref seed = in.ref;
  seed.members = NULL;
  if (in.ref.members) seed.op = 0; /* a batch as an interleave's input: no ref kept */
  sl_elem_clear(&in);
  if (rc) return rc;
  if (m->parallel) pthread_mutex_lock(&m->mu);
  s->seed = seed;
  s->it = nit;
  s->exhausted = false;
  s->err = 0;
  if (m->parallel) {
    if (!m->direct) pthread_cond_broadcast(&m->cv_work);
    pthread_mutex_unlock(&m->mu);
  }
  return 0;
}

static void il_advance(il_it *m) {
  m->cur = (m->cur + 1) % m->cycle;
  m->block = 0;
}

static bool all_empty(const il_it *m) {
  for (int i = 0; i < m->cycle; i++)
    if (m->slots[i].it) return false;
  return true;
}

/* ---- sequential ---- */
static int il_next_seq(sl__it *it, sl_elem *out) {
  il_it *m = (il_it *)it;
  const il_cfg *c = it->op->impl;
  for (;;) {
    il_slot *s = &m->slots[m->cur];
    if (!s->it) {
      if (m->input_eof) {
        if (all_empty(m)) return SL_END;
        il_advance(m);
        continue;
      }
      int rc = il_fill(m, s);
      if (rc == SL_END) continue;
      if (rc) return rc;
    }
    int rc = sl__it_pull_from(it, s->it, out);
    if (rc == 0) {
      if (++m->block >= c->block_length) il_advance(m);
      return 0;
    }
    sl__it_free(s->it);
    s->it = NULL;
    if (rc != SL_END) return rc;
    il_advance(m);
  }
}

/* ---- parallel ---- */
/* Under mu: whether a worker should fill slot t now: it has room for `want` elements (hysteresis: a worker making
 * cheap elements waits for room for a chunk), or nothing the consumer has not claimed yet. */
static bool il_wants_work(const il_it *m, const il_slot *t, int want) {
  return !m->held && t->it && !t->busy && !t->exhausted && !t->err && t->qn < t->span &&
         (t->span - t->qn >= want || t->qn <= t->lent);
}

/* Under mu: the slot a worker should fill next (the one the consumer needs soonest first; not `other`), or NULL. */
static il_slot *il_pick(il_it *m, int want, const il_slot *other) {
  for (int k = 0; k < m->cycle; k++) {
    il_slot *t = &m->slots[(m->cur + k) % m->cycle];
    if (t != other && il_wants_work(m, t, want)) return t;
  }
  return NULL;
}

/* Under mu, released while it works: makes up to `chunk` elements of slot s (as many as it has room for: cheap
 * nested elements a chunk at a time, expensive ones one by one, so that the consumer gets each as soon as it is
 * made) into `els`, then publishes them, the slot's end or its error. Returns the number made. `consumer`: called
 * inside this op's next (whose timed calls subtract the pulls), not by a worker. */
static int il_make(il_it *m, il_slot *s, sl_elem *els, int chunk, bool consumer) {
  int k = s->span - s->qn;
  if (k > chunk) k = chunk;
  s->busy = true;
  sl__it *nit = s->it;
  pthread_mutex_unlock(&m->mu);
  uint64_t t0 = sl__now_ns();
  int got = 0, rc = 0;
  while (got < k) {
    sl_elem_init(&els[got]);
    if ((rc = consumer ? sl__it_pull_from(&m->it, nit, &els[got]) : sl__it_next(nit, &els[got]))) break;
    got++;
  }
  uint64_t wall = sl__now_ns() - t0;
  sl__errbox *box = NULL;
  if (rc < 0) {
    box = sl__malloc(sizeof *box);
    if (box) sl__errbox_capture(box, rc);
  }
  pthread_mutex_lock(&m->mu);
  s->busy = false;
  for (int j = 0; j < got; j++) { /* only the maker adds to a slot: the room seen above is still there */
    sl_elem_move(&s->q[(s->qhead + s->qn) % s->span], &els[j]);
    s->qn++;
  }
  if (s->qn == s->span && s->span < m->qcap) s->grow = m->grow = true; /* the consumer doubles it on its next trip */
  if (rc == SL_END) {
    s->exhausted = true;
  } else if (rc) {
    s->err = rc;
    s->box = box;
  }
  if (got) m->chunk = sl__handoff_chunk(&m->mean_ns, wall, (uint64_t)got);
  return got;
}

/* Workers at work: the tuner's parallelism, except that an "autotune" interleave it sets to 1 makes its elements on
 * the consumer's thread, as one planned at parallelism 1 does (no hand-offs: see op_map.c's pmap_workers). */
static int il_workers(const sl__op *op) {
  int n = atomic_load_explicit(&((sl__op *)op)->active_par, memory_order_relaxed);
  return op->par_autotune && n <= 1 ? 0 : n;
}

static void *il_worker(void *p) {
  il_warg *wa = p;
  il_it *m = wa->m;
  sl__op *op = m->it.op;
  sl_elem *els = m->scratch + (size_t)wa->id * SL__HANDOFF_MAX;
  int half = m->qcap / 2 < 1 ? 1 : m->qcap / 2;
  pthread_mutex_lock(&m->mu);
  while (!m->stop) {
    int chunk = m->chunk, want = chunk < half ? chunk : half;
    il_slot *s = wa->id < il_workers(op) && !m->direct ? il_pick(m, want, NULL) : NULL;
    if (!s) {
      m->waiting_workers++;
      sl__cond_wait_ms(&m->cv_work, &m->mu, 50);
      m->waiting_workers--;
      if (sl__canceled(m->it.run)) m->stop = true;
      continue;
    }
    /* Expensive elements: if another slot wants work too, let a sleeping worker take it. */
    if (chunk == 1 && m->waiting_workers && il_pick(m, 1, s)) pthread_cond_signal(&m->cv_work);
    il_make(m, s, els, chunk, false);
    /* In deterministic order the consumer waits for its current slot only. */
    if (m->waiting_consumer && (s == &m->slots[m->cur] || !((const il_cfg *)op->impl)->deterministic)) {
      /* After the unlock, so that the consumer does not block at once on the mutex. */
      pthread_mutex_unlock(&m->mu);
      pthread_cond_signal(&m->cv_ready);
      pthread_mutex_lock(&m->mu);
    }
  }
  pthread_mutex_unlock(&m->mu);
  return NULL;
}

static void slot_close(il_it *m, il_slot *s) {
  sl__it *nit = s->it;
  s->it = NULL;
  s->exhausted = false;
  pthread_mutex_unlock(&m->mu);
  sl__it_free(nit);
  pthread_mutex_lock(&m->mu);
}

/* Under mu: whether slot t, which just gave room, is worth waking a worker for. A wake-up costs more than a few
 * cheap elements: for those, only room for half a chunk is; smaller gaps the consumer fills itself when it gets to
 * them (il_next_par). */
static bool il_worth_waking(const il_it *m, const il_slot *t) {
  int half = t->span / 2 < 1 ? 1 : t->span / 2;
  if (m->chunk == 1) return il_wants_work(m, t, half);
  return il_wants_work(m, t, SL__HANDOFF_MAX / 2) && t->span - t->qn >= SL__HANDOFF_MAX / 2;
}

/* Under mu: the slot the consumer takes its next element from, when that element is ready and may be claimed
 * (at most half of a slot's buffer is claimed at once, so that its worker keeps room to fill); NULL when not. In
 * deterministic order that is the current slot only; unordered, any slot with an element ready. */
static il_slot *il_claimable(il_it *m, const il_cfg *c) {
  for (int k = 0; k < m->cycle; k++) {
    il_slot *t = &m->slots[(m->cur + k) % m->cycle];
    int most = t->span / 2 < 1 ? 1 : t->span / 2;
    if (t->it && t->qn > t->lent && t->lent < most) {
      if (k) {
        m->cur = (m->cur + k) % m->cycle;
        m->block = 0;
      }
      return t;
    }
    if (c->deterministic) break;
  }
  return NULL;
}

/* Under mu: whether the consumer may pull from the slots itself: no worker may work, none is inside a slot, and
 * nothing is buffered, claimed, exhausted or failed that the parallel path has yet to hand out. */
static bool il_may_go_direct(const il_it *m) {
  if (il_workers(m->it.op) > 0 || m->cl.n) return false;
  for (int i = 0; i < m->cycle; i++) {
    const il_slot *t = &m->slots[i];
    if (t->busy || t->qn || t->exhausted || t->err) return false;
  }
  return true;
}

/* Slots a source's buffer starts with (an sl_elem is 2 KB). */
#define IL_SPAN0 4

/* Under mu, no claims out: doubles (up to the op's buffer) the buffers of the slots that asked, their elements
 * moved to the front in order. */
static int il_grow(il_it *m) {
  m->grow = false;
  for (int i = 0; i < m->cycle; i++) {
    il_slot *s = &m->slots[i];
    if (!s->grow) continue;
    s->grow = false;
    int ns = s->span * 2 < m->qcap ? s->span * 2 : m->qcap;
    sl_elem *q = sl__calloc((size_t)ns, sizeof *q);
    if (!q) return SL_ENOMEM;
    for (int k = 0; k < s->qn; k++) sl_elem_move(&q[k], &s->q[(s->qhead + k) % s->span]);
    sl__free(s->q);
    s->q = q;
    s->qhead = 0;
    s->span = ns;
  }
  return 0;
}

static int il_next_par(sl__it *it, sl_elem *out) {
  il_it *m = (il_it *)it;
  const il_cfg *c = it->op->impl;
  if (m->direct) {
    if (il_workers(it->op) == 0) return il_next_seq(it, out);
    /* The tuner raised the parallelism: hand the slots back to the workers. */
    pthread_mutex_lock(&m->mu);
    m->direct = false;
    pthread_cond_broadcast(&m->cv_work);
    pthread_mutex_unlock(&m->mu);
  }
  if (sl__claims_next(&m->cl, out)) return 0;
  uint64_t w0 = 0;
  pthread_mutex_lock(&m->mu);
  bool wake = false; /* a slot that gave room this trip wants a worker */
  for (int i = 0; i < m->cl.n; i++) { /* the claims of the last trip are all served: release them */
    il_slot *s = m->cl_slot[i];
    s->qhead = (s->qhead + 1) % s->span;
    s->qn--;
    s->lent--;
  }
  for (int i = 0; i < m->cl.n && m->waiting_workers && !wake; i++) wake = il_worth_waking(m, m->cl_slot[i]);
  m->cl.head = m->cl.n = 0;
  if (m->grow) {
    if (il_grow(m)) {
      pthread_mutex_unlock(&m->mu);
      return sl__op_err(it->op, SL_ENOMEM, "out of memory growing a source's buffer");
    }
    wake = wake || m->waiting_workers;
  }
  if (il_may_go_direct(m)) {
    m->direct = true;
    pthread_mutex_unlock(&m->mu);
    return il_next_seq(it, out);
  }
  for (;;) {
    il_slot *s = &m->slots[m->cur];
    if (!s->it) {
      if (m->input_eof) {
        if (all_empty(m)) {
          pthread_mutex_unlock(&m->mu);
          return SL_END;
        }
        il_advance(m);
        continue;
      }
      pthread_mutex_unlock(&m->mu);
      int rc = il_fill(m, s);
      pthread_mutex_lock(&m->mu);
      if (rc == SL_END) continue;
      if (rc) {
        pthread_mutex_unlock(&m->mu);
        return rc;
      }
    }
    if (!c->deterministic && s->qn == 0 && !s->exhausted && !s->err) {
      /* Unordered: take any slot that has something ready. */
      for (int k = 1; k < m->cycle; k++) {
        il_slot *t = &m->slots[(m->cur + k) % m->cycle];
        if (t->it && t->qn > 0) {
          m->cur = (m->cur + k) % m->cycle;
          m->block = 0;
          s = t;
          break;
        }
      }
    }
    if (s->qn > 0) {
      uint64_t occ = (uint64_t)s->qn, n = 1;
      sl_elem_move(out, &s->q[s->qhead]);
      s->qhead = (s->qhead + 1) % s->span;
      s->qn--;
      /* Not while no worker may work (an "autotune" interleave at parallelism 1): a woken worker would only go back
       * to sleep, a futex wake-up per element (transformer under the tuner: 6% of the CPU, and 0.5-0.8x the plan). */
      wake = wake || (m->waiting_workers && il_workers(it->op) > 0 && il_worth_waking(m, s));
      if (++m->block >= c->block_length) il_advance(m);
      /* Claim the elements that follow in hand-off order while they are ready. */
      il_slot *t;
      while (m->cl.n < SL__HANDOFF_MAX && (t = il_claimable(m, c))) {
        occ += (uint64_t)(t->qn - t->lent);
        m->cl.e[m->cl.n] = &t->q[(t->qhead + t->lent) % t->span];
        m->cl_slot[m->cl.n++] = t;
        t->lent++;
        n++;
        if (++m->block >= c->block_length) il_advance(m);
      }
      sl__stat_add(&it->op->st.occ_sum, occ);
      sl__stat_add(&it->op->st.occ_n, n);
      pthread_mutex_unlock(&m->mu);
      if (wake) pthread_cond_signal(&m->cv_work); /* after the unlock: the worker does not block on the mutex */
      if (w0) sl__stat_add(&it->op->st.wait_ns, sl__now_ns() - w0);
      return 0;
    }
    if (s->err) {
      int rc = s->err;
      sl__errbox *box = s->box;
      s->box = NULL;
      s->err = 0;
      slot_close(m, s);
      pthread_mutex_unlock(&m->mu);
      if (box) {
        sl__errbox_raise(box);
        sl__free(box);
      }
      return rc;
    }
    if (s->exhausted && !s->busy) {
      slot_close(m, s);
      il_advance(m);
      continue;
    }
    if (sl__canceled(it->run)) {
      pthread_mutex_unlock(&m->mu);
      return sl__err(SL_ECANCELED, "%s: cancelled", it->op->path);
    }
    if ((m->chunk > 1 || il_workers(it->op) == 0) && il_wants_work(m, s, 1)) {
      /* Cheap nested elements and no worker on this slot: make them here, which costs less than waking a worker
       * and sleeping until it has (and with no workers, who else would). A timed call of this op times the
       * source's calls made here and subtracts them (sl__nest). */
      il_make(m, s, m->cscratch, m->chunk, true);
      continue;
    }
    if (!w0) w0 = sl__now_ns();
    /* The slot waited on (or one that gave room) may have a sleeping worker's work. */
    if (m->waiting_workers && il_workers(it->op) > 0 && (wake || il_wants_work(m, s, 1)))
      pthread_cond_signal(&m->cv_work);
    wake = false;
    m->waiting_consumer++;
    sl__cond_wait_ms(&m->cv_ready, &m->mu, 50);
    m->waiting_consumer--;
  }
}

static int il_next(sl__it *it, sl_elem *out) {
  return ((il_it *)it)->parallel ? il_next_par(it, out) : il_next_seq(it, out);
}

static void il_free(sl__it *it) {
  il_it *m = (il_it *)it;
  if (m->sync_init) {
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_cond_broadcast(&m->cv_work);
    pthread_mutex_unlock(&m->mu);
    for (int i = 0; i < m->nthreads; i++) pthread_join(m->threads[i], NULL);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv_work);
    pthread_cond_destroy(&m->cv_ready);
  }
  if (m->slots)
    for (int i = 0; i < m->cycle; i++) {
      il_slot *s = &m->slots[i];
      sl__it_free(s->it);
      if (s->q)
        for (int k = 0; k < s->qn; k++) sl_elem_clear(&s->q[(s->qhead + k) % s->span]);
      sl__free(s->q);
      sl__free(s->box);
    }
  sl__free(m->slots);
  sl__free(m->threads);
  sl__free(m->args);
  sl__free(m->scratch);
  sl__free(m);
}
static const sl__it_vt IL_IT = {il_next, il_free};

/* ---- saved state: the cycle's position; each slot's input element (as a ref), its nested chain's record and its
 * buffered elements (refs, made again through the chain); the elements the consumer claimed and has not served yet
 * are handed out first on restore (they are this op's output, after the cycle position they advanced). */
static void il_hold(sl__it *it, bool on) {
  il_it *m = (il_it *)it;
  if (!m->parallel) {
    for (int i = 0; i < m->cycle; i++) sl__state_hold(m->slots[i].it, on);
    return;
  }
  if (on) {
    pthread_mutex_lock(&m->mu);
    m->held = true;
    for (bool busy = true; busy;) {
      busy = false;
      for (int i = 0; i < m->cycle; i++) busy = busy || m->slots[i].busy;
      if (busy) sl__cond_wait_ms(&m->cv_ready, &m->mu, 1);
    }
    for (int i = 0; i < m->cycle; i++) sl__state_hold(m->slots[i].it, true);
  } else {
    for (int i = 0; i < m->cycle; i++) sl__state_hold(m->slots[i].it, false);
    m->held = false;
    pthread_mutex_unlock(&m->mu);
    pthread_cond_broadcast(&m->cv_work);
  }
}
static int il_save(sl__it *it, sl__sw *w) {
  il_it *m = (il_it *)it;
  sl__sw_u64(w, (uint64_t)m->cycle);
  sl__sw_u64(w, (uint64_t)m->cur);
  sl__sw_u64(w, (uint64_t)m->block);
  sl__sw_u64(w, m->input_eof);
  for (int i = 0; i < m->cycle; i++) {
    il_slot *s = &m->slots[i];
    if (s->err) return sl__op_err(it->op, SL_EINVAL, "cannot save its position: a nested source failed and its "
                                                     "error is not handed out yet");
    sl__sw_u64(w, s->it != NULL);
    if (!s->it) continue;
    sl__sw_ref(w, &s->seed);
    int rc = sl__state_save_it(s->it, w);
    if (rc) return rc;
    int rest = m->parallel ? s->qn - s->lent : 0;
    sl__sw_u64(w, (uint64_t)rest);
    for (int k = 0; k < rest; k++) sl__sw_ref(w, &s->q[(s->qhead + s->lent + k) % s->span].ref);
  }
  return 0;
}
static int il_pending(sl__it *it, sl__sw *w) {
  il_it *m = (il_it *)it;
  for (int i = m->cl.head; i < m->cl.n; i++) sl__sw_ref(w, &m->cl.e[i]->ref);
  return m->cl.n - m->cl.head;
}
static int il_load_slot(il_it *m, il_slot *s, sl__sr *r) {
  sl__op *op = m->it.op;
  sl_elem in;
  sl_elem_init(&in);
  int rc = sl__sr_ref(r, &s->seed);
  if (!rc) rc = sl__remake(op->input, m->it.run, &s->seed, &in);
  sl_buf_unref(s->seed.members);
  s->seed.members = NULL;
  if (!rc) rc = sl__op_open(op->source, m->it.run, &in, &s->it);
  sl_elem_clear(&in);
  if (!rc) rc = sl__sr_pushback(r, &s->it, m->it.run, op->source, "a nested source's buffered elements");
  return rc;
}
static int il_load(sl__it *it, sl__sr *r) {
  il_it *m = (il_it *)it;
  uint64_t v[4];
  int rc;
  for (int i = 0; i < 4; i++)
    if ((rc = sl__sr_u64(r, &v[i], "an interleave's cycle"))) return rc;
  if (v[0] != (uint64_t)m->cycle || v[1] >= v[0])
    return sl__op_err(it->op, SL_EINVAL, "the saved state has a cycle of %llu sources; this op has %d (cycle_length "
                                         "changes what it makes)", (unsigned long long)v[0], m->cycle);
  m->cur = (int)v[1];
  m->block = (int64_t)v[2];
  m->input_eof = v[3] != 0;
  for (int i = 0; i < m->cycle; i++) {
    uint64_t present;
    if ((rc = sl__sr_u64(r, &present, "an interleave's source"))) return rc;
    if (present && (rc = il_load_slot(m, &m->slots[i], r))) return rc;
  }
  return 0;
}
static int il_remake(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  return sl__remake(op->source, run, r, out);
}
static const sl__op_state IL_STATE = {il_save, il_load, il_hold, il_remake, SL__STF_LOADS_ITSELF, il_pending};

static int il_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  int rc = sl__it_new(out, sizeof(il_it), &IL_IT, op, run, seed);
  if (rc) return rc;
  il_it *m = (il_it *)*out;
  m->cycle = (int)il_cycle(op);
  m->parallel = op->async;
  m->qcap = (int)op->buffer;
  m->slots = sl__calloc((size_t)m->cycle, sizeof *m->slots);
  if (!m->slots) goto oom;
  if ((rc = sl__state_load(*out))) { /* before any worker runs */
    sl__it_free(*out);
    *out = NULL;
    return rc;
  }
  if (!m->parallel) return 0;
  for (int i = 0; i < m->cycle; i++) {
    m->slots[i].span = m->qcap < IL_SPAN0 ? m->qcap : IL_SPAN0;
    m->slots[i].q = sl__calloc((size_t)m->slots[i].span, sizeof(sl_elem));
    if (!m->slots[i].q) goto oom;
  }
  sl__handoff_mutex_init(&m->mu);
  pthread_cond_init(&m->cv_work, NULL);
  pthread_cond_init(&m->cv_ready, NULL);
  m->sync_init = true;
  int64_t par = op->parallelism;
  m->threads = sl__calloc((size_t)par, sizeof *m->threads);
  m->args = sl__calloc((size_t)par, sizeof *m->args);
  m->scratch = sl__calloc((size_t)(par + 1) * SL__HANDOFF_MAX, sizeof *m->scratch);
  if (!m->threads || !m->args || !m->scratch) goto oom;
  m->cscratch = m->scratch + (size_t)par * SL__HANDOFF_MAX;
  m->chunk = 1;
  for (int i = 0; i < par; i++) {
    m->args[i] = (il_warg){m, i};
    if (pthread_create(&m->threads[i], NULL, il_worker, &m->args[i])) {
      sl__it_free(*out);
      *out = NULL;
      return sl__op_err(op, SL_ERROR, "cannot start worker thread %d", i);
    }
    m->nthreads++;
  }
  return 0;
oom:
  sl__it_free(*out);
  *out = NULL;
  return sl__op_err(op, SL_ENOMEM, "out of memory starting the interleave");
}
static void il_free_op(sl__op *op) { sl__free(op->impl); }

static const sl__arg IL_KNOBS[] = {
    {"source", SL__ARG_CHAIN, NULL, SL__ARGF_REQUIRED, 0, 0, NULL, "the chain run for each input element"},
    {"cycle_length", SL__ARG_INT, NULL, SL__ARGF_TUNABLE | SL__ARGF_KNOB | SL__LOHI, 1, SL__MAX_CYCLE, NULL,
     "nested chains open at once (default: the number of cores)"},
    {"block_length", SL__ARG_INT, "1", SL__ARGF_LO, 1, 0, NULL, "elements taken from a chain before moving on"},
    {"parallelism", SL__ARG_INT, "1", SL__ARGF_TUNABLE | SL__ARGF_KNOB | SL__LOHI, 1, SL__MAX_WORKERS, NULL,
     "worker threads pulling the chains"},
    {"deterministic", SL__ARG_BOOL, "true", 0, 0, 0, NULL, "keep the round-robin order under parallelism"},
    {"buffer", SL__ARG_INT, "2", SL__ARGF_TUNABLE | SL__ARGF_KNOB | SL__LOHI, 1, 1024, NULL,
     "elements buffered per chain under parallelism"},
    {NULL}};
static int il_infer(sl__op *op, sl__struct *s, const sl__struct *src) {
  (void)op;
  if (src) *s = *src;
  else s->open = true;
  return 0;
}
static const sl__op_schema IL_SCHEMA = {SL__MK_INTERLEAVE, 0, "runs `source` for each input element and "
                                        "interleaves their outputs", IL_KNOBS, il_infer};
const sl__op_vt sl__op_interleave = {"interleave", il_parse, il_open, il_free_op,
                                     SL__OPF_NEEDS_INPUT | SL__OPF_TAKES_SOURCE, &IL_SCHEMA, &IL_STATE};
