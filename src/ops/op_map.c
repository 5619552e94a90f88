/* ops/op_map.c: `map` (sequential, or parallel with ordered or unordered hand-off) and `filter`.
 * Parallel map: worker threads reserve an output slot (bounding memory by `buffer`), pull the next input under
 * the input lock (which fixes the element's sequence number), run the function without locks, and publish the
 * result; in deterministic mode slot = seq % cap, so the consumer takes results in input order. An error is a
 * result like any other and reaches the consumer at its element's position. */
#include <string.h>

#include "fns/fns_int.h"
#include "ops/op_async_int.h"

typedef struct {
  sl__fn fn;
  void *state;
  sl_args args;
  char *args_path;
  bool deterministic;
  bool is_filter;
  bool fill; /* after a shard "in_step": a dropped element's place is filled by the previous one handed out */
  bool skip_errors; /* on_error "skip": an element the function fails on is dropped and counted */
} map_cfg;

static int map_parse_common(sl__op *op, json_t *o, bool filter) {
  sl_args k = sl__op_knobs(op, o);
  map_cfg *c = sl__calloc(1, sizeof *c);
  if (!c) return sl__oom("map");
  op->impl = c;
  c->is_filter = filter;
  int rc;
  const char *fn;
  if ((rc = sl__get_str(&fn, &k, "fn"))) return rc;
  if (!fn) return sl__err(SL_EINVAL, "%s.fn: required (the function to run)", op->path);
  if (sl__fn_lookup(fn, &c->fn)) {
    const char **names = NULL;
    sl__str list = {0};
    char near[128] = "";
    if (!sl_fn_list(&names)) {
      size_t n = 0;
      for (; names[n]; n++) sl__str_printf(&list, "%s%s", n ? ", " : "", names[n]);
      const char *s = sl__name_suggest(names, n, fn);
      if (s) snprintf(near, sizeof near, "; did you mean '%s'?", s);
      sl__free(names);
    }
    rc = sl__err(SL_EINVAL, "%s.fn: unknown function '%s'%s (known: %s)", op->path, fn, near, list.s ? list.s : "");
    sl__str_dispose(&list);
    return rc;
  }
  if (filter && !(c->fn.def.flags & SL_FN_FILTER))
    return sl__err(SL_EINVAL, "%s.fn: '%s' is not a predicate; filter needs one (e.g. \"length\")", op->path, fn);
  if (!filter && (c->fn.def.flags & SL_FN_FILTER))
    return sl__err(SL_EINVAL, "%s.fn: '%s' is a predicate; use it in a filter op", op->path, fn);
  sl__free(op->label);
  op->label = sl__strdup(fn);
  sl__str ap = {0};
  rc = sl__str_printf(&ap, "%s.args", op->path);
  c->args_path = ap.s;
  if (rc || !op->label) return sl__oom("map");
  json_t *args = json_object_get(o, "args");
  if (args && !json_is_object(args))
    return sl__err(SL_EINVAL, "%s.args: expected an object, found %s", op->path, sl__json_type_name(args));
  c->args.obj = args;
  c->args.path = c->args_path;
  c->args.schema = c->fn.schema ? c->fn.schema->args : NULL;
  if ((rc = sl__fn_check_args(c->fn.schema, args, c->args_path, fn))) return rc;
  op->random = (c->fn.def.flags & SL_FN_RANDOM) && !(c->fn.schema && c->fn.schema->is_random &&
                                                     !c->fn.schema->is_random(args));
  op->serial = (c->fn.def.flags & SL_FN_SERIAL) != 0;
  if (!filter) {
    if ((rc = sl__get_tunable(&op->parallelism, &op->par_autotune, &k, "parallelism"))) return rc;
    if (op->par_autotune) op->parallelism = sl__autotune_parallelism();
    if ((rc = sl__get_bool(&c->deterministic, &k, "deterministic"))) return rc;
    const char *oe;
    if ((rc = sl__get_str(&oe, &k, "on_error"))) return rc;
    if (!strcmp(oe, "skip")) c->skip_errors = true;
    else if (strcmp(oe, "error")) /* the words of parse_csv's on_error and tfrecord's on_corrupt */
      return sl__err(SL_EINVAL, "%s.on_error: expected \"error\" or \"skip\", found \"%s\"", op->path, oe);
    /* Default output buffer: 4 per worker, at least 16, so cheap functions hand off in chunks (a quarter of it).
     * An "autotune" map's ring is sized here, before the tuner picks its workers, and is not resized live: at least
     * 32, the chunks of 8 that cheap elements need (tabular's parse_csv at 2 workers ran 0.88x with 16 as with 32,
     * 4 alternating pairs; the tuner that set those workers on a ring of 16 ran 0.75x the plan). */
    int64_t least = op->par_autotune ? 32 : 16, perw = 4 * op->parallelism > least ? 4 * op->parallelism : least;
    int64_t defbuf = op->parallelism > 1 ? perw : 0;
    if ((rc = sl__get_tunable_or(&op->buffer, &op->buf_autotune, &k, "buffer", defbuf))) return rc;
    if (op->buf_autotune) op->buffer = perw;
    if (op->parallelism > 1 && op->buffer < op->parallelism) op->buffer = op->parallelism;
    op->async = op->parallelism > 1 || op->par_autotune;
  }
  for (const sl__op *u = op->input; u && !c->fill; u = u->input) c->fill = u->in_step;
  op->cardinality = filter && !c->fill ? (op->input && op->input->cardinality == -2 ? -2 : -1)
                                       : (op->input ? op->input->cardinality : -1);
  /* A function without an arg table (a user's, through sl_fn_register): its init() says what it reads. */
  sl__args_asked asked = {c->fn.schema ? NULL : json_object(), false};
  if (!c->fn.schema && !asked.keys) return sl__oom("map");
  c->args.asked = asked.keys ? &asked : NULL;
  if (c->fn.def.init) rc = c->fn.def.init(&c->state, &c->args, c->fn.payload);
  if (!rc && asked.keys) {
    char what[160];
    snprintf(what, sizeof what, "function '%s'", fn);
    rc = sl__args_check_asked(&c->args, what);
  }
  c->args.asked = NULL; /* later reads (from call(), on worker threads) record nothing */
  json_decref(asked.keys);
  if (rc && strncmp(sl_error_last(), op->path, strlen(op->path))) sl__err_wrap(rc, "%s (fn %s)", op->path, fn);
  return rc;
}
static int map_parse(sl__op *op, json_t *o) { return map_parse_common(op, o, false); }
static int filter_parse(sl__op *op, json_t *o) { return map_parse_common(op, o, true); }

static void map_free_op(sl__op *op) {
  map_cfg *c = op->impl;
  if (!c) return;
  if (c->fn.def.free && c->state) c->fn.def.free(c->state);
  sl__free(c->args_path);
  sl__free(c);
}

/* Runs the function on one element; wraps errors with the op and element index. Under on_error "skip" a failed
 * element comes back as dropped (keep false) and is counted; cancellation and out-of-memory still stop the run,
 * as they say nothing about the element, and so does a component the element lacks (SL_ENOTFOUND, a name in the
 * spec that no earlier op makes, which the build could not see behind a function registered at run time). */
static int call_fn(sl__op *op, map_cfg *c, sl_elem *e, uint64_t epoch, uint64_t index, bool *keep) {
  uint64_t seeds[SL__MAX_SEED_OPS], base = sl_pipeline_seed(op->pl);
  for (int k = 0; k < op->nseed_ops; k++) seeds[k] = sl__seed_of(base, (uint64_t)op->seed_ops[k], epoch, index);
  sl_fn_call call = {index, seeds[0], true, op->path, op->nseed_ops > 1 ? seeds : NULL, op->nseed_ops > 1 ? op->nseed_ops : 0, 0};
  sl_error_clear();
  /* The element's ref is the op's to carry (a function may rebuild the element): kept aside, put back after. */
  sl_eref ref = e->ref;
  e->ref = (sl_eref){0};
  int rc = c->fn.def.call(c->state, e, &call);
  if (call.read_bytes) sl__stat_add(&op->st.disk_bytes, call.read_bytes); /* a function that read files */
  sl_buf_unref(e->ref.members);
  e->ref = ref;
  if (op->stamp >= 0) {
    e->ref.stamp[op->stamp] = epoch << 40 | (index & (((uint64_t)1 << 40) - 1));
    e->ref.nstamp |= 1u << op->stamp;
  }
  if (!rc) {
    *keep = call.keep;
    return 0;
  }
  if (!sl_error_last()[0]) sl__err(rc, "%s", sl_strerror(rc));
  if (strncmp(sl_error_last(), op->path, strlen(op->path))) {
    const char *file; /* an element made from a text line names its file and line */
    uint64_t line;
    if (sl__elem_origin(&file, &line, e))
      sl__err_wrap(rc < 0 ? rc : SL_ERROR, "%s (%s %s), element %llu (%s, line %llu)", op->path, op->vt->kind,
                   op->label, (unsigned long long)index, file, (unsigned long long)line);
    else
      sl__err_wrap(rc < 0 ? rc : SL_ERROR, "%s (%s %s), element %llu", op->path, op->vt->kind, op->label,
                   (unsigned long long)index);
  }
  if (c->skip_errors && rc != SL_ECANCELED && rc != SL_ENOMEM && rc != SL_ENOTFOUND) {
    const void *fname = NULL; /* an element that names its file (files' "filename") says which file was skipped */
    size_t flen = 0;
    const sl_comp *fc = sl_elem_get(e, "filename");
    if (!fc || fc->dtype != SL_BYTES || fc->rank != 0 || sl_comp_string(&fname, &flen, fc, 0)) fname = NULL;
    sl__op_skip_note(op, sl_error_last(), fname, flen);
    sl__stat_add(&op->st.errors_skipped, 1);
    sl_error_clear();
    *keep = false;
    return 0;
  }
  return rc < 0 ? rc : SL_ERROR;
}

/* ---------------- sequential map / filter ---------------- */
/* Filling (shard "in_step"): the consumer's side of a map keeps the last element it handed out; a dropped element's
 * place gets a copy of it (one dropped before any was handed out is owed, and paid after the first). */
typedef struct {
  sl_elem last;
  bool has;
  uint64_t owed;
} map_fill;
static void fill_note(map_fill *f, const sl_elem *out) {
  sl_elem_clear(&f->last);
  sl_elem_copy(&f->last, out);
  f->has = true;
}
static bool fill_give(map_fill *f, sl__op *op, sl_elem *out) {
  sl_elem_copy(out, &f->last);
  sl__stat_add(&op->st.filled, 1);
  return true;
}
/* A drop: true when its place was filled (out holds the copy). */
static bool fill_drop(map_fill *f, sl__op *op, sl_elem *out) {
  if (f->has) return fill_give(f, op, out);
  f->owed++;
  return false;
}
/* At a call's start: true when an owed place was filled. */
static bool fill_owed(map_fill *f, sl__op *op, sl_elem *out) {
  if (!f->owed || !f->has) return false;
  f->owed--;
  return fill_give(f, op, out);
}

typedef struct {
  sl__it it;
  uint64_t index;
  map_fill fill;
} smap_it;

static int smap_next(sl__it *it, sl_elem *out) {
  smap_it *m = (smap_it *)it;
  map_cfg *c = it->op->impl;
  if (c->fill && fill_owed(&m->fill, it->op, out)) return 0;
  for (;;) {
    int rc = sl__it_pull(it, out);
    if (rc) return rc;
    bool keep = true;
    rc = call_fn(it->op, c, out, it->epoch, m->index++, &keep);
    if (rc) {
      sl_elem_clear(out);
      return rc;
    }
    if (keep) {
      if (c->fill) fill_note(&m->fill, out);
      return 0;
    }
    if (!c->is_filter) sl__stat_add(&it->op->st.skipped, 1);
    sl_elem_clear(out);
    if (c->fill && fill_drop(&m->fill, it->op, out)) return 0;
  }
}
static void smap_free(sl__it *it) {
  sl_elem_clear(&((smap_it *)it)->fill.last);
  sl__free(it);
}
static const sl__it_vt SMAP_IT = {smap_next, smap_free};

/* ---------------- parallel map ---------------- */
enum { SLOT_FREE = 0, SLOT_BUSY = 1, SLOT_DONE = 2 };
/* A result code (positive, never returned to callers) for an element the function dropped. */
#define SLOT_DROPPED 2
#define INLINE_GIVEN_BACK 3 /* pmap_inline_run: the parallelism rose, the hold is given back (not SL_END, which is 1) */
typedef struct {
  sl_elem e;
  int rc;
  int state;
  sl__errbox *err; /* allocated only for an error result */
} slot;

typedef struct pmap_it pmap_it;
typedef struct {
  pmap_it *m;
  int id;
} worker_arg;

struct pmap_it {
  sl__it it;
  pthread_mutex_t mu, in_mu;
  pthread_cond_t cv_space, cv_ready, cv_park;
  slot *ring;
  uint64_t *fifo; /* unordered mode: completed sequence numbers in completion order */
  int cap;        /* slots allocated: they start at PMAP_CAP0 and double up to cap_max as the workers find them full */
  int cap_max;    /* the op's buffer */
  bool grow;      /* under mu: a worker found the ring full; no one reserves until it has grown (pmap_grow) */
  int reserved;   /* slots reserved, holding results not yet taken, or claimed and not yet released */
  uint64_t head;  /* next seq the consumer takes (ordered mode) */
  uint64_t next_seq;
  uint64_t fifo_head, fifo_tail;
  bool input_done; /* under mu: no more results will be reserved */
  bool in_eof;     /* under in_mu (or the consumer's inline hold): the input returned END or an error */
  uint64_t end_seq;
  bool stop, oom;
  int nthreads_ok;  /* workers that started (a worker that cannot allocate its scratch leaves) */
  int low_water;    /* free slots at which a waiting worker is woken (hysteresis) */
  int chunk_max;    /* largest chunk a worker takes: a share of the buffer that leaves room for the others */
  int claim_max;    /* most results the consumer takes in one trip */
  int waiting_consumer, waiting_workers; /* waiting_workers: waiting for space (parked ones wait on cv_park) */
  int consumer_want; /* results in hand-off order a waiting consumer is woken for (hysteresis) */
  uint64_t elem_ns;  /* the last publishing worker's running mean of wall time per element */
  int parked;       /* workers the tuner has parked */
  bool inline_pull; /* under mu: the consumer makes the elements itself (pmap_inline_next): no reservations */
  bool inline_hold; /* consumer only: it holds inline_pull across calls */
  atomic_uint published; /* chunks published so far: a consumer about to sleep polls it for a while first */
  atomic_uint released;  /* consumer trips that gave room: likewise for a worker about to sleep */
  bool cheap;             /* the last chunk measured was of cheap elements */
  /* Consumer only: results claimed on the last trip under mu, served without it. `lent` slots (claimed ones and
   * dropped results among them) keep their reservations until the next trip releases them, so that no worker
   * writes a slot before its element is served. */
  sl__claims cl;
  int lent;
  pthread_t *threads;
  worker_arg *args;
  int nthreads;
  bool deterministic;
  /* Under in_mu: the ref of each input element pulled, at seq % cap (a saved state makes those in flight again). */
  sl_eref *pref;
  bool held;
  map_fill fill; /* consumer only */
};

/* Under in_mu: notes the ref of the input element given sequence number seq. */
static void pmap_note(pmap_it *m, uint64_t seq, const sl_elem *e) {
  sl_eref *r = &m->pref[seq % (uint64_t)m->cap];
  sl_buf_unref(r->members);
  *r = e->ref;
  sl_buf_ref(r->members);
}

/* Workers at work: the tuner's parallelism, except that an "autotune" map it sets to 1 runs on the consumer's
 * thread (inline, no hand-offs), as a map planned at parallelism 1 does: the planner's model prices parallelism 1 as
 * no thread boundary, and on cheap elements (a CSV line) a worker and its hand-offs cost more than the work. */
static int pmap_workers(const sl__op *op) {
  int n = atomic_load_explicit(&((sl__op *)op)->active_par, memory_order_relaxed);
  return op->par_autotune && n <= 1 ? 0 : n;
}

/* Under mu: the next result in hand-off order when it is ready, else NULL. */
static slot *pmap_ready(pmap_it *m) {
  if (m->deterministic) {
    slot *s = &m->ring[m->head % (uint64_t)m->cap];
    return s->state == SLOT_DONE ? s : NULL;
  }
  return m->fifo_head < m->fifo_tail ? &m->ring[m->fifo_head % (uint64_t)m->cap] : NULL;
}

/* Under mu: whether the results ready in hand-off order reach `want` (a run from the head in ordered mode). */
static bool pmap_ready_run(pmap_it *m, int want) {
  if (!m->deterministic) return m->fifo_tail - m->fifo_head >= (uint64_t)want;
  for (int i = 0; i < want; i++)
    if (m->ring[(m->head + (uint64_t)i) % (uint64_t)m->cap].state != SLOT_DONE) return false;
  return true;
}

/* Under mu (unordered mode), or outside it into the worker's own reserved slots (deterministic mode: slot
 * seq % cap, which the reservation guarantees is released and which the consumer reads only once it is DONE):
 * stores the chunk's results. */
static void pmap_store(slot *sl, sl_elem *e, int rc, sl__errbox *err) {
  if (e) sl_elem_move(&sl->e, e);
  else sl_elem_init(&sl->e);
  sl->rc = rc;
  sl->err = err;
}

/* A worker's chunk: the elements it pulled and made, their results, and its timing. */
typedef struct pmap_chunk {
  sl_elem *els;                      /* SL__HANDOFF_MAX elements */
  int rcs[SL__HANDOFF_MAX];
  sl__errbox *boxes[SL__HANDOFF_MAX];
  uint64_t first, nres;              /* sequence number of the first result, results (an input error is one more) */
  int k, got, end_rc;                /* slots reserved, elements pulled, the input's end (SL_END or an error) */
  sl__errbox *in_err;
  sl__sampler smp;
  int chunk;                         /* elements to reserve next time */
  uint64_t mean_ns;                  /* running mean of wall time per element (every chunk is timed on the wall) */
  bool timed;
  uint64_t c0, fw;                   /* CPU at the top of a timed chunk, wall when its slots were reserved */
  uint64_t r0;                       /* run-queue delay at the timed chunk's start (SL__RUNQ_NONE: unknown) */
  uint64_t in_lock_ns;               /* the timed chunk's wait for the input lock (its input's time, not its own) */
  sl__nest inner;                    /* the input pulls timed inside the last timed chunk */
} pmap_chunk;

/* Under mu: publishes the last chunk's results (their slots become done) and folds its timing into the chunk size.
 * Returns whether the consumer waits for what was published. */
static bool pmap_publish(pmap_it *m, pmap_chunk *w) {
  sl__op *op = m->it.op;
  for (uint64_t j = 0; j < w->nres; j++) {
    slot *sl;
    if (m->deterministic) {
      sl = &m->ring[(w->first + j) % (uint64_t)m->cap];
    } else { /* unordered: results sit in the ring by arrival; fifo lists their sequence numbers */
      sl = &m->ring[m->fifo_tail % (uint64_t)m->cap];
      m->fifo[m->fifo_tail % (uint64_t)m->cap] = w->first + j;
      m->fifo_tail++;
      if (j < (uint64_t)w->got) pmap_store(sl, &w->els[j], w->rcs[j], w->boxes[j]);
      else pmap_store(sl, NULL, w->end_rc, w->in_err); /* the input's error: the last result */
    }
    sl->state = SLOT_DONE;
  }
  m->reserved -= w->k - (int)w->nres; /* reservations not used */
  if (w->end_rc != 0 && !m->input_done) {
    m->input_done = true;
    m->end_seq = w->first + w->nres;
  }
  /* Wake the consumer only for what it waits for: the next result in order (or any, unordered), or the end. */
  bool wake = m->waiting_consumer && (m->input_done || pmap_ready_run(m, m->consumer_want));
  atomic_fetch_add_explicit(&m->published, 1, memory_order_relaxed);
  if (w->got) {
    uint64_t wall = sl__now_ns() - w->fw;
    /* The run-queue delay to the same end as the wall time (one read under the lock, on sampled chunks only): the
     * lock's hand-off waits for a holder that was itself queued for a core, and ends queued once woken. */
    if (w->timed)
      sl__stats_work_n(op, &w->smp, sl__cpu_ns() - w->c0, wall, (uint64_t)w->got, &w->inner, sl__runq_since(w->r0));
    w->chunk = sl__handoff_chunk(&w->mean_ns, wall, (uint64_t)w->got);
    m->cheap = w->chunk > 1;
    m->elem_ns = w->mean_ns;
    if (w->chunk > m->chunk_max) w->chunk = m->chunk_max;
  }
  return wake;
}

/* Slots a ring starts with (a slot holds a 2 KB sl_elem): default buffers (4 per worker) fit, and at this size the
 * hand-off shares (a quarter of the ring, at most SL__HANDOFF_MAX) are already whole. */
#define PMAP_CAP0 64

/* Hand-off sizes from the ring's size: the consumer's claims, the workers' chunks in flight and the results ready
 * between them each get about a quarter of it, so that the consumer and two workers all work at once. */
static void pmap_shares(pmap_it *m) {
  m->low_water = m->cap / 4 < 1 ? 1 : m->cap / 4 > SL__HANDOFF_MAX ? SL__HANDOFF_MAX : m->cap / 4;
  m->chunk_max = m->claim_max = m->low_water;
}

/* Under mu, once a grow is asked for and nothing is reserved (no worker holds a slot between reserving and
 * publishing, no claim is lent, every result taken: ring[seq % cap] is free for every seq to come, so the size can
 * change under it): doubles the ring up to cap_max. Out of memory, the ring stays as it is and stops growing. */
static void pmap_grow(pmap_it *m) {
  if (m->reserved) return;
  m->grow = false;
  int n = m->cap > m->cap_max / 2 ? m->cap_max : 2 * m->cap;
  slot *ring = sl__realloc(m->ring, (size_t)n * sizeof *ring);
  if (ring) m->ring = ring;
  sl_eref *pref = ring ? sl__realloc(m->pref, (size_t)n * sizeof *pref) : NULL;
  if (pref) m->pref = pref;
  uint64_t *fifo = pref ? sl__realloc(m->fifo, (size_t)n * sizeof *fifo) : NULL;
  if (!fifo) { /* the arrays that did grow keep the old size in use */
    m->cap_max = m->cap;
    return;
  }
  m->fifo = fifo;
  memset(m->ring + m->cap, 0, (size_t)(n - m->cap) * sizeof *ring);
  memset(m->pref + m->cap, 0, (size_t)(n - m->cap) * sizeof *pref);
  m->cap = n;
  pmap_shares(m);
  if (m->waiting_workers) pthread_cond_broadcast(&m->cv_space);
}

/* Under mu: waits until there is room for a chunk (or the run stops); *wake is the consumer's pending wake-up, sent
 * before any sleep. Returns false when the worker is to stop. */
static bool pmap_wait_room(pmap_it *m, const worker_arg *wa, pmap_chunk *w, bool *wake) {
  /* Hysteresis: with a full buffer, wait until a chunk's worth of slots is free (at most low_water), so a
   * fast consumer and the workers do not wake each other for every element. */
  int want = w->chunk < m->low_water ? w->chunk : m->low_water;
  bool spun = false;
  while (!m->stop && !m->input_done) {
    /* A worker the tuner has parked waits apart, so that a wake-up for space always reaches a working one. */
    bool parked = wa->id >= pmap_workers(m->it.op) || m->inline_pull;
    if (!parked && m->cap - m->reserved < want && m->cap < m->cap_max) m->grow = true;
    if (m->grow) pmap_grow(m);
    if (!parked && !m->grow && m->cap - m->reserved >= want) break;
    if (!parked && !spun && w->chunk > 1 && !m->waiting_consumer &&
        m->waiting_workers + m->parked + 1 >= m->nthreads_ok) {
      /* The last worker at work, making cheap elements, and the consumer is taking them: it gives room within
       * microseconds. Poll for it a while, then sleep. */
      if (*wake) pthread_cond_signal(&m->cv_ready);
      *wake = false;
      spun = true;
      sl__handoff_poll(&m->mu, &m->released);
      continue;
    }
    if (*wake) pthread_cond_signal(&m->cv_ready); /* before sleeping: the consumer must not wait for it */
    *wake = false;
    int *count = parked ? &m->parked : &m->waiting_workers;
    (*count)++;
    sl__cond_wait_ms(parked ? &m->cv_park : &m->cv_space, &m->mu, 50);
    (*count)--;
    if (sl__canceled(m->it.run)) m->stop = true;
  }
  return !m->stop && !m->input_done;
}

/* Outside mu: pulls up to w->k inputs (their sequence numbers fixed under the input lock) and runs the function on
 * each; in order, the results go straight to their slots. */
static void pmap_make(pmap_it *m, pmap_chunk *w) {
  sl__op *op = m->it.op;
  map_cfg *c = op->impl;
  /* A timed chunk counts the wait for the input lock as part of its input pulls (subtracted from its own time):
   * another worker holds it while it waits for the input, so it is waiting for input, not blocked in this op. */
  uint64_t l0 = w->timed ? sl__now_ns() : 0;
  pthread_mutex_lock(&m->in_mu);
  w->in_lock_ns = w->timed ? sl__now_ns() - l0 : 0;
  w->first = m->next_seq;
  w->got = 0;
  w->end_rc = 0;
  while (w->got < w->k && !m->in_eof) {
    sl_elem_init(&w->els[w->got]);
    int rc = sl__it_next(m->it.input, &w->els[w->got]);
    if (rc) {
      w->end_rc = rc;
      m->in_eof = true;
      break;
    }
    pmap_note(m, w->first + (uint64_t)w->got, &w->els[w->got]);
    w->got++;
  }
  w->nres = (uint64_t)w->got + (w->end_rc < 0 ? 1 : 0); /* an input error is one more result */
  m->next_seq += w->nres;
  w->in_err = NULL;
  if (w->end_rc < 0) {
    w->in_err = sl__malloc(sizeof *w->in_err);
    if (w->in_err) sl__errbox_capture(w->in_err, w->end_rc);
  }
  pthread_mutex_unlock(&m->in_mu);
  if (w->got) sl__stat_add(&op->st.in, (uint64_t)w->got);
  for (int j = 0; j < w->got; j++) {
    bool keep = true;
    w->rcs[j] = call_fn(op, c, &w->els[j], m->it.epoch, w->first + (uint64_t)j, &keep);
    w->boxes[j] = NULL;
    if (w->rcs[j]) {
      sl_elem_clear(&w->els[j]);
      w->boxes[j] = sl__malloc(sizeof(sl__errbox));
      if (w->boxes[j]) sl__errbox_capture(w->boxes[j], w->rcs[j]);
    } else if (!keep) {
      /* A map function may drop its element (parse_csv's on_error "skip"): its slot says so. */
      sl_elem_clear(&w->els[j]);
      sl__stat_add(&op->st.skipped, 1);
      w->rcs[j] = SLOT_DROPPED;
    }
  }
  if (m->deterministic)
    for (uint64_t j = 0; j < w->nres; j++) {
      slot *sl = &m->ring[(w->first + j) % (uint64_t)m->cap];
      if (j < (uint64_t)w->got) pmap_store(sl, &w->els[j], w->rcs[j], w->boxes[j]);
      else pmap_store(sl, NULL, w->end_rc, w->in_err);
    }
}

static void *pmap_worker(void *p) {
  worker_arg *wa = p;
  pmap_it *m = wa->m;
  pmap_chunk w = {.chunk = 1};
  sl__sampler_init(&w.smp, m->it.op);
  w.els = sl__calloc(SL__HANDOFF_MAX, sizeof *w.els);
  if (!w.els) { /* cannot run: leave the work to the other workers, or report it when every one failed */
    pthread_mutex_lock(&m->mu);
    if (--m->nthreads_ok == 0 && !m->input_done) {
      m->input_done = true;
      m->end_seq = m->head;
      m->oom = true;
    }
    pthread_mutex_unlock(&m->mu);
    pthread_cond_signal(&m->cv_ready);
    return NULL;
  }
  /* One trip under mu per chunk: publish the last chunk's results, then reserve slots for the next. */
  pthread_mutex_lock(&m->mu);
  for (;;) {
    bool wake = w.k ? pmap_publish(m, &w) : false; /* the consumer waits for what this chunk published */
    if (w.k && w.end_rc != 0) {
      pthread_mutex_unlock(&m->mu);
      pthread_cond_broadcast(&m->cv_space);
      pthread_cond_broadcast(&m->cv_park);
      if (wake) pthread_cond_signal(&m->cv_ready);
      break;
    }
    /* A timed iteration spans everything the worker does for its chunk: in CPU time from the top (waiting for
     * slots included), in wall time from the slots on (input pulls, functions, hand-off: the worker's service
     * time). The input pulls are timed inside it and subtracted (sl__nest), so hand-off costs count as its own. */
    w.timed = sl__sampler_tick(&w.smp);
    w.c0 = w.timed ? sl__cpu_ns() : 0;
    if (!pmap_wait_room(m, wa, &w, &wake)) {
      pthread_mutex_unlock(&m->mu);
      if (wake) pthread_cond_signal(&m->cv_ready);
      break;
    }
    w.k = m->cap - m->reserved;
    if (w.k > w.chunk) w.k = w.chunk;
    m->reserved += w.k;
    /* Woken for space with more left than this chunk needs: pass the wake-up on to another worker. */
    bool pass = m->waiting_workers && m->cap - m->reserved >= m->low_water;
    pthread_mutex_unlock(&m->mu);
    /* Signals go out after the unlock, so that the woken thread does not block at once on the mutex. */
    if (wake) pthread_cond_signal(&m->cv_ready);
    if (pass) pthread_cond_signal(&m->cv_space);
    sl__nest saved;
    /* The run-queue delay from the chunk's start, read outside the lock. */
    w.r0 = w.timed && sl__sampler_runq_due(&w.smp) ? sl__runq_ns() : SL__RUNQ_NONE;
    w.fw = sl__now_ns();
    if (w.timed) {
      sl__nest_open(&saved, false);
      sl__it_force(m->it.input, 1);
    }
    pmap_make(m, &w);
    if (w.timed) {
      sl__it_force(m->it.input, -1);
      sl__nest_close(&saved, &w.inner, 0, 0); /* a worker's region: nothing encloses it */
      w.inner.wall += w.in_lock_ns;
    }
    pthread_mutex_lock(&m->mu);
  }
  sl__free(w.els);
  return NULL;
}

/* Under mu: moves the consumer past the result pmap_ready returned. Its slot is free for reuse once its
 * reservation is given back (at once, or for a claimed one when the claims are released). */
static void pmap_pass(pmap_it *m, slot *s) {
  s->state = SLOT_FREE;
  if (m->deterministic) m->head++;
  else m->fifo_head++;
}

/* Inline (pmap_workers 0): the consumer pulls and maps the elements itself. It takes the map over under mu once
 * nothing is in flight (no reservation: no worker between reserving and publishing, every result taken) by setting
 * inline_pull, and holds it across calls (inline_hold) while the parallelism stays 0: workers neither reserve nor
 * touch the input, next_seq or head meanwhile, so each element costs no lock (on cheap elements, a CSV line, two
 * lock pairs per element per map were a tenth of the run). The hold is given back under mu (pmap_inline_release),
 * with the sequence numbers and the ordered head moved together, and workers resume where it stopped. */
static void pmap_inline_release(pmap_it *m, int rc) {
  pthread_mutex_lock(&m->mu);
  if (rc) {
    m->input_done = true;
    m->end_seq = m->next_seq;
  }
  m->head = m->next_seq;
  m->inline_pull = false;
  m->inline_hold = false;
  /* Only when the tuner has raised the parallelism: parked workers are always there while the map runs inline. */
  bool waiting = (m->waiting_workers || m->parked) && pmap_workers(m->it.op) > 0;
  pthread_mutex_unlock(&m->mu);
  if (waiting) {
    pthread_cond_broadcast(&m->cv_space);
    pthread_cond_broadcast(&m->cv_park);
  }
}

/* The next element, made on the consumer's thread under the hold; SLOT_DROPPED when the function dropped it. The
 * input's end or error is returned at its position, the hold given back. */
static int pmap_inline_next(pmap_it *m, sl_elem *out) {
  sl__op *op = m->it.op;
  map_cfg *c = op->impl;
  uint64_t seq = m->next_seq;
  /* Counted on the iterator (a plain store, as a sequential map's pulls are): an atomic add per element was a
   * measurable part of a cheap element's cost. */
  int rc = m->in_eof ? SL_END : sl__it_pull(&m->it, out);
  if (rc) {
    m->in_eof = true;
    pmap_inline_release(m, rc);
    return rc;
  }
  m->next_seq++;
  bool keep = true;
  rc = call_fn(op, c, out, m->it.epoch, seq, &keep);
  if (rc) {
    sl_elem_clear(out);
    return rc;
  }
  if (keep) return 0;
  sl_elem_clear(out);
  sl__stat_add(&op->st.skipped, 1);
  return SLOT_DROPPED; /* nothing to hand out: look again */
}

/* Under the hold: the next element inline while the parallelism stays 0, else the hold given back and
 * INLINE_GIVEN_BACK returned (the caller goes on with its workers). */
static int pmap_inline_run(pmap_it *m, sl_elem *out) {
  bool fill = ((const map_cfg *)m->it.op->impl)->fill;
  while (pmap_workers(m->it.op) == 0) {
    int rc = pmap_inline_next(m, out);
    if (rc == SLOT_DROPPED) {
      if (fill && fill_drop(&m->fill, m->it.op, out)) return 0;
      continue;
    }
    if (rc == 0 && fill) fill_note(&m->fill, out);
    return rc;
  }
  pmap_inline_release(m, 0);
  return INLINE_GIVEN_BACK;
}

static int pmap_next(sl__it *it, sl_elem *out) {
  pmap_it *m = (pmap_it *)it;
  bool fill = ((const map_cfg *)it->op->impl)->fill;
  if (fill && fill_owed(&m->fill, it->op, out)) return 0;
  if (sl__claims_next(&m->cl, out)) {
    if (fill) fill_note(&m->fill, out);
    return 0;
  }
  if (m->inline_hold) {
    int rc = pmap_inline_run(m, out);
    if (rc != INLINE_GIVEN_BACK) return rc;
  }
  pthread_mutex_lock(&m->mu);
  if (m->lent) atomic_fetch_add_explicit(&m->released, 1, memory_order_relaxed);
  m->reserved -= m->lent; /* the claims of the last trip are all served */
  m->lent = 0;
  m->cl.head = m->cl.n = 0;
  slot *s;
  uint64_t wait0 = 0;
  for (;;) {
    if (m->grow) pmap_grow(m);
    s = pmap_ready(m);
    if (s && s->rc != SLOT_DROPPED) break;
    if (s) { /* a result the function dropped: nothing to hand out (or, filling, the last one again) */
      pmap_pass(m, s);
      m->reserved--;
      if (fill && fill_drop(&m->fill, it->op, out)) {
        pthread_mutex_unlock(&m->mu);
        if (wait0) sl__stat_add(&it->op->st.wait_ns, sl__now_ns() - wait0);
        return 0;
      }
      continue;
    }
    if (m->input_done && m->reserved == 0 && (!m->deterministic || m->head >= m->end_seq)) {
      pthread_mutex_unlock(&m->mu);
      return m->oom ? sl__op_err(it->op, SL_ENOMEM, "out of memory in a worker") : SL_END;
    }
    if (m->reserved == 0 && !m->input_done && pmap_workers(it->op) == 0) {
      m->inline_pull = true;
      m->inline_hold = true;
      pthread_mutex_unlock(&m->mu);
      if (wait0) sl__stat_add(&it->op->st.wait_ns, sl__now_ns() - wait0);
      wait0 = 0;
      int rc = pmap_inline_run(m, out);
      if (rc != INLINE_GIVEN_BACK) return rc;
      pthread_mutex_lock(&m->mu);
      continue;
    }
    if (sl__canceled(it->run)) {
      pthread_mutex_unlock(&m->mu);
      return sl__err(SL_ECANCELED, "%s: cancelled", it->op->path);
    }
    if (!wait0) {
      wait0 = sl__now_ns();
      if (m->cheap && m->waiting_workers + m->parked < m->nthreads_ok) {
        /* A worker is making cheap elements: its chunk is due within microseconds, sooner than a sleep and a
         * wake-up would take. Poll for it a while (once per call), then sleep. */
        sl__handoff_poll(&m->mu, &m->published);
        continue;
      }
    }
    /* Workers may wait for the space that dropped results just gave back. */
    if (m->waiting_workers && m->cap - m->reserved >= m->low_water) pthread_cond_signal(&m->cv_space);
    /* Expensive elements from workers slower than the consumer: sleep until what they make within
     * SL__HANDOFF_RUN_NS is ready (at most a claim), not for every element. Every reserved slot completes and
     * the ring has room for a claim, so the run is always reached. */
    int working = m->nthreads_ok - m->parked;
    m->consumer_want = m->cheap ? 1 : sl__handoff_want(m->elem_ns, working, m->claim_max);
    m->waiting_consumer++;
    sl__cond_wait_ms(&m->cv_ready, &m->mu, 50);
    m->waiting_consumer--;
  }
  if (wait0) sl__stat_add(&it->op->st.wait_ns, sl__now_ns() - wait0);
  uint64_t occ = (uint64_t)m->reserved, n = 1;
  int rc = s->rc;
  sl_elem_move(out, &s->e);
  sl__errbox *eb = s->err;
  s->err = NULL;
  pmap_pass(m, s);
  m->reserved--;
  /* Claim the run of ready results after it (an error stops the run: it is handed out on a trip of its own). */
  int lim = rc == 0 ? m->claim_max - 1 : 0;
  while (m->cl.n < lim && (s = pmap_ready(m)) && s->rc >= 0 && !(fill && s->rc == SLOT_DROPPED)) {
    if (s->rc != SLOT_DROPPED) {
      m->cl.e[m->cl.n++] = &s->e;
      n++;
    }
    pmap_pass(m, s);
    m->lent++;
  }
  sl__stat_add(&it->op->st.occ_sum, sl__occ_run(occ, n));
  sl__stat_add(&it->op->st.occ_n, n);
  /* A worker still running takes the room itself when it comes back (and wakes another if there is more): wake one
   * only when none is, so that a consumer slower than its workers seldom pays for a wake-up. */
  bool wake = m->waiting_workers && m->waiting_workers + m->parked >= m->nthreads_ok &&
              m->cap - m->reserved >= m->low_water;
  pthread_mutex_unlock(&m->mu);
  if (wake) pthread_cond_signal(&m->cv_space);
  if (rc < 0) {
    if (eb) rc = sl__errbox_raise(eb);
    else sl__err(rc, "%s: error (message lost: out of memory)", it->op->path);
    sl__free(eb);
    return rc;
  }
  if (fill) fill_note(&m->fill, out);
  return rc;
}

static void pmap_free(sl__it *it) {
  pmap_it *m = (pmap_it *)it;
  pthread_mutex_lock(&m->mu);
  m->stop = true;
  pthread_cond_broadcast(&m->cv_space);
  pthread_cond_broadcast(&m->cv_park);
  pthread_mutex_unlock(&m->mu);
  for (int i = 0; i < m->nthreads; i++) pthread_join(m->threads[i], NULL);
  if (m->ring)
    for (int i = 0; i < m->cap; i++) {
      sl_elem_clear(&m->ring[i].e);
      sl__free(m->ring[i].err);
    }
  if (m->pref)
    for (int i = 0; i < m->cap; i++) sl_buf_unref(m->pref[i].members);
  sl__free(m->pref);
  sl_elem_clear(&m->fill.last);
  pthread_mutex_destroy(&m->mu);
  pthread_mutex_destroy(&m->in_mu);
  pthread_cond_destroy(&m->cv_space);
  pthread_cond_destroy(&m->cv_ready);
  pthread_cond_destroy(&m->cv_park);
  sl__free(m->ring);
  sl__free(m->fifo);
  sl__free(m->threads);
  sl__free(m->args);
  sl__free(m);
}
static const sl__it_vt PMAP_IT = {pmap_next, pmap_free};

static int map_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  if (!op->async) {
    int rc = sl__it_new(out, sizeof(smap_it), &SMAP_IT, op, run, seed);
    if (!rc && (rc = sl__state_load(*out))) {
      sl__it_free(*out);
      *out = NULL;
    }
    return rc;
  }
  map_cfg *c = op->impl;
  int rc = sl__it_new(out, sizeof(pmap_it), &PMAP_IT, op, run, seed);
  if (rc) return rc;
  pmap_it *m = (pmap_it *)*out;
  m->deterministic = c->deterministic;
  sl__handoff_mutex_init(&m->mu);
  sl__handoff_mutex_init(&m->in_mu);
  pthread_cond_init(&m->cv_space, NULL);
  pthread_cond_init(&m->cv_ready, NULL);
  pthread_cond_init(&m->cv_park, NULL);
  int64_t par = op->parallelism;
  if (op->par_autotune && par < sl__autotune_parallelism()) par = sl__autotune_parallelism();
  m->cap_max = (int)(op->buffer > 0 ? op->buffer : par);
  m->cap = m->cap_max < PMAP_CAP0 ? m->cap_max : PMAP_CAP0;
  pmap_shares(m);
  m->ring = sl__calloc((size_t)m->cap, sizeof *m->ring);
  m->pref = sl__calloc((size_t)m->cap, sizeof *m->pref);
  m->fifo = sl__calloc((size_t)m->cap, sizeof *m->fifo);
  m->threads = sl__calloc((size_t)par, sizeof *m->threads);
  m->args = sl__calloc((size_t)par, sizeof *m->args);
  if (!m->ring || !m->pref || !m->fifo || !m->threads || !m->args) {
    int cap = m->cap;
    sl__it_free(*out);
    *out = NULL;
    return sl__op_err(op, SL_ENOMEM, "out of memory for %d buffered elements", cap);
  }
  if ((rc = sl__state_load(*out))) { /* before any worker runs */
    sl__it_free(*out);
    *out = NULL;
    return rc;
  }
  m->nthreads_ok = (int)par; /* set before any worker runs: workers read it */
  for (int i = 0; i < par; i++) {
    m->args[i] = (worker_arg){m, i};
    if (pthread_create(&m->threads[i], NULL, pmap_worker, &m->args[i])) {
      sl__it_free(*out);
      *out = NULL;
      return sl__op_err(op, SL_ERROR, "cannot start worker thread %d", i);
    }
    m->nthreads++;
  }
  return 0;
}

/* ---- saved state: the index of the next element the consumer gets, and the refs of the input elements after it
 * that are in flight (made again on restore, through the input). One format for the sequential and the parallel
 * map: a state restores on another parallelism. */
/* Filling's part: whether it has a last element (then its ref), and how many places are owed. */
static void fill_save(const map_fill *f, sl__sw *w) {
  sl__sw_u64(w, f->has);
  if (f->has) sl__sw_ref(w, &f->last.ref);
  sl__sw_u64(w, f->owed);
}
static int fill_load(map_fill *f, sl__it *it, sl__sr *r) {
  uint64_t has;
  int rc = sl__sr_u64(r, &has, "a map's filling");
  if (!rc && has) {
    sl_eref ref;
    if ((rc = sl__sr_ref(r, &ref))) return rc;
    rc = sl__remake(it->op, it->run, &ref, &f->last);
    sl_buf_unref(ref.members);
    f->has = rc == 0;
  }
  return rc ? rc : sl__sr_u64(r, &f->owed, "a map's filling");
}

static int map_save(sl__it *it, sl__sw *w) {
  if (!it->op->async) {
    sl__sw_u64(w, ((smap_it *)it)->index);
    sl__sw_u64(w, 0);
    fill_save(&((smap_it *)it)->fill, w);
    return 0;
  }
  pmap_it *m = (pmap_it *)it;
  if (!m->deterministic)
    return sl__op_err(it->op, SL_EINVAL, "a map with \"deterministic\": false cannot save its position (its order "
                                         "depends on timing)");
  uint64_t first = m->head;
  if (m->cl.head < m->cl.n) { /* claimed results not served yet: the first of them is next */
    slot *s = (slot *)((char *)m->cl.e[m->cl.head] - offsetof(slot, e));
    uint64_t idx = (uint64_t)(s - m->ring), cap = (uint64_t)m->cap;
    first = m->head - 1 - ((m->head - 1 - idx) % cap);
  }
  if (m->inline_hold) first = m->next_seq;
  sl__sw_u64(w, first);
  sl__sw_u64(w, m->next_seq - first);
  for (uint64_t q = first; q < m->next_seq; q++) sl__sw_ref(w, &m->pref[q % (uint64_t)m->cap]);
  fill_save(&m->fill, w);
  return 0;
}
static int map_load(sl__it *it, sl__sr *r) {
  uint64_t index;
  int rc = sl__sr_u64(r, &index, "a map's index");
  if (!rc) rc = sl__sr_pushback(r, &it->input, it->run, it->op->input, "a map's elements in flight");
  if (!rc) rc = fill_load(it->op->async ? &((pmap_it *)it)->fill : &((smap_it *)it)->fill, it, r);
  if (rc) return rc;
  if (!it->op->async) ((smap_it *)it)->index = index;
  else ((pmap_it *)it)->head = ((pmap_it *)it)->next_seq = index;
  return 0;
}
/* Holds the workers still: none pulls (in_mu) or publishes (mu) until let go. */
static void map_hold(sl__it *it, bool on) {
  if (!it->op->async) return;
  pmap_it *m = (pmap_it *)it;
  if (on) {
    pthread_mutex_lock(&m->in_mu);
    pthread_mutex_lock(&m->mu);
  } else {
    pthread_mutex_unlock(&m->mu);
    pthread_mutex_unlock(&m->in_mu);
  }
}
/* A map's element made again: its input's, through the function with the index and epoch it had. */
static int map_remake(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  int rc = sl__remake(op->input, run, r, out);
  if (rc) return rc;
  uint64_t epoch = 0, index = 0;
  if (op->stamp >= 0 && (r->nstamp & (1u << op->stamp))) {
    epoch = r->stamp[op->stamp] >> 40;
    index = r->stamp[op->stamp] & (((uint64_t)1 << 40) - 1);
  }
  bool keep = true;
  if (!(rc = call_fn(op, op->impl, out, epoch, index, &keep)) && !keep)
    rc = sl__op_err(op, SL_ECORRUPT, "an element made again was dropped this time (a function that is not "
                                     "deterministic?)");
  if (rc) sl_elem_clear(out);
  return rc;
}
static const sl__op_state MAP_STATE = {map_save, map_load, map_hold, map_remake, SL__STF_LOADS_ITSELF};
static const sl__op_state FILTER_STATE = {map_save, map_load, map_hold, NULL, SL__STF_LOADS_ITSELF | SL__STF_PASS};

static const sl__arg MAP_KNOBS[] = {
    {"fn", SL__ARG_STR, NULL, SL__ARGF_REQUIRED, 0, 0, NULL, "the function (docs/functions.md)"},
    {"args", SL__ARG_OBJECT, NULL, 0, 0, 0, NULL, "the function's args"},
    {"parallelism", SL__ARG_INT, "1", SL__ARGF_TUNABLE | SL__ARGF_KNOB | SL__LOHI, 1, SL__MAX_WORKERS, NULL,
     "worker threads"},
    {"deterministic", SL__ARG_BOOL, "true", 0, 0, 0, NULL, "keep the input order under parallelism"},
    {"buffer", SL__ARG_INT, NULL, SL__ARGF_TUNABLE | SL__ARGF_KNOB | SL__LOHI, 0, SL__MAX_BUFFER, NULL,
     "output slots (default: 4 per worker, at least 16 (32 when parallelism is \"autotune\"), under parallelism; else 0)"},
    {"on_error", SL__ARG_ENUM, "error", 0, 0, 0, "error|skip",
     "a function error fails the run, or drops the element and counts it (tf.data's ignore_errors)"},
    {NULL}};
static const sl__arg FILTER_KNOBS[] = {
    {"fn", SL__ARG_STR, NULL, SL__ARGF_REQUIRED, 0, 0, NULL, "the predicate (docs/functions.md)"},
    {"args", SL__ARG_OBJECT, NULL, 0, 0, 0, NULL, "the predicate's args"},
    {NULL}};
/* The function's schema says what it reads and writes. */
static int map_infer(sl__op *op, sl__struct *s, const sl__struct *src) {
  (void)src;
  const map_cfg *c = op->impl;
  char who[300];
  snprintf(who, sizeof who, "%s (%s %s)", op->path, op->vt->kind, op->label);
  if (!c->fn.schema) return sl__fn_infer_decl(s, c->fn.decl, op->path, who);
  return sl__fn_infer(s, c->fn.schema, c->args.obj, c->args_path, op->path, who);
}
static const sl__op_schema MAP_SCHEMA = {SL__MK_MAP, 0, "runs a function on each element", MAP_KNOBS, map_infer};
static const sl__op_schema FILTER_SCHEMA = {SL__MK_FILTER, 0, "keeps the elements a predicate accepts",
                                            FILTER_KNOBS, map_infer};
const sl__op_vt sl__op_map = {"map", map_parse, map_open, map_free_op, SL__OPF_NEEDS_INPUT, &MAP_SCHEMA, &MAP_STATE};
const sl__op_vt sl__op_filter = {"filter", filter_parse, map_open, map_free_op, SL__OPF_NEEDS_INPUT, &FILTER_SCHEMA,
                                 &FILTER_STATE};
