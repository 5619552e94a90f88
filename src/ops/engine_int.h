/* ops/engine_int.h: the engine's inside: ops (graph nodes built from the spec), iterators (one run of an op),
 * sampled self-time accounting, and the shared pieces every operator file uses. Not public. */
#ifndef SL_OPS_ENGINE_H
#define SL_OPS_ENGINE_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "core/args_int.h"
#include "core/core_int.h"
#include "core/schema_int.h"
#include "sluice/fn.h"
#include "sluice/pipeline.h"

typedef struct sl__op sl__op;
typedef struct sl__it sl__it;
typedef struct sl__run sl__run;

/* Always-on counters of one op, summed over every iterator of it. CPU and wall times are estimates from sampled
 * calls, each sample scaled by the sampling stride, so the sums are unbiased. next() times are inclusive; the
 * op's own time subtracts the inclusive time of inputs it pulls on the same thread (sync_input/sync_source). */
typedef struct sl__stats {
  atomic_uint_fast64_t out, in, bytes_out, disk_bytes, skipped;
  atomic_uint_fast64_t errors_skipped; /* the part of `skipped` a map's on_error "skip" dropped */
  atomic_uint_fast64_t cpu_ns, wall_ns, samples;   /* own time of next() calls on the consumer's side (sl__nest) */
  atomic_uint_fast64_t work_cpu_ns, work_wall_ns;  /* own work done on worker threads (map functions, pulls) */
  atomic_uint_fast64_t wait_ns;
  atomic_uint_fast64_t occ_sum, occ_n, held, held_peak;
  /* Spread of per-call wall times (for buffer sizing): scaled sample counts and sums of squares in us^2. */
  atomic_uint_fast64_t next_n, next_sq_us, work_n, work_sq_us;
} sl__stats;

/* What an op is to the planner and the tracer (its model node, as tf.data's CreateNode tells its autotuner). */
typedef enum sl__model_kind {
  SL__MK_SEQ,        /* a synchronous one-in-one-out or counting op (take, skip, shard) */
  SL__MK_SOURCE,     /* makes elements from nothing (range, files) */
  SL__MK_READER,     /* reads records from the files its input names (tfrecord, lines) */
  SL__MK_MAP,        /* runs a function per element, possibly on workers */
  SL__MK_FILTER,     /* drops elements by a predicate */
  SL__MK_INTERLEAVE, /* runs a nested chain per input element, possibly on workers */
  SL__MK_PREFETCH,   /* a buffer filled by its own thread */
  SL__MK_CACHE,      /* holds the first pass, replays it */
  SL__MK_BATCH,      /* stacks a fixed number of elements */
  SL__MK_BUCKET,     /* batches by length buckets */
  SL__MK_SHUFFLE,    /* a random-order buffer */
  SL__MK_REPEAT,     /* replays its input's epochs */
  SL__MK_CUT,        /* a cut between processes (offload): in one process a pass-through */
  SL__MK_COUNT
} sl__model_kind;

enum {
  SL__OPS_NO_IDENTITY = 1u << 0, /* never part of the pipeline's identity: the planner adds and removes it (prefetch,
                                  * cache) */
  SL__OPS_LISTS_FILES = 1u << 1  /* names the data files (the tracer's disk probe reads one) */
};

/* An op's self-description, one static table beside its implementation: its knobs (the keys of its spec object
 * besides "op"), its model kind, and how it changes the element structure. */
typedef struct sl__op_schema {
  sl__model_kind model;
  unsigned flags; /* SL__OPS_* */
  const char *doc;
  const sl__arg *knobs;
  /* The element structure after the op: `s` holds the structure before it (its input's, or the seed element's at the
   * start of a nested chain) and is changed in place; `src` is the nested chain's output (interleave), else NULL.
   * NULL: the op passes elements through unchanged. Errors name op->path. */
  int (*infer)(sl__op *op, sl__struct *s, const sl__struct *src);
} sl__op_schema;

typedef struct sl__op_vt {
  const char *kind;
  /* Reads and validates the op's knobs from its JSON object; sets op->impl and the op's flags. */
  int (*parse)(sl__op *op, json_t *obj);
  /* Starts one iterator of the op. `seed_elem` is the element a nested source chain was opened for. */
  int (*open)(sl__op *op, sl__run *run, const sl_elem *seed_elem, sl__it **out);
  /* Frees op->impl. Optional. */
  void (*free)(sl__op *op);
  unsigned flags;
  const sl__op_schema *schema; /* every registered op has one (test_schema checks) */
} sl__op_vt;

enum {
  SL__OPF_SOURCE = 1u << 0,      /* makes elements from nothing (range, files): takes no input */
  SL__OPF_NEEDS_INPUT = 1u << 1, /* must have an input op (or sit first in an interleave source) */
  SL__OPF_TAKES_SOURCE = 1u << 2 /* has a nested "source" chain (interleave) */
};

#define SL__MAX_SEED_OPS 4
struct sl__op {
  const sl__op_vt *vt;
  sl_pipeline *pl;
  int index;       /* pre-order index in the pipeline's op array */
  /* The op indices its per-element seeds derive from: its own index unless the spec's "seed_op" says otherwise
   * (the planner's fusion keeps a rewritten spec drawing the seeds the ops it replaced drew); a fused map has one
   * per op it stands for, seed_ops[0] giving call->seed. */
  int seed_ops[SL__MAX_SEED_OPS];
  int nseed_ops;
  int parent;      /* index of the consumer op, -1 for the root */
  bool nested;     /* inside an interleave's source chain */
  bool no_timing;  /* the pipeline's no_timing, copied here: its samplers never time */
  char *path;      /* "ops[3]" or "ops[1].source[0]" */
  char *label;     /* fn name for map/filter */
  json_t *json;    /* this op's object in the pipeline's spec (borrowed) */
  sl__op *input;   /* upstream op, NULL at the start of a chain */
  sl__op *source;  /* last op of the nested source chain (interleave) */
  void *impl;
  sl__struct *shape;   /* the element structure after the op (validation; NULL until the pipeline is checked) */
  int64_t parallelism; /* resolved; 1 for synchronous ops */
  int64_t buffer;      /* resolved output buffer, 0 for none */
  bool par_autotune, buf_autotune, async, random;
  bool serial; /* its function is SL_FN_SERIAL */
  int64_t cardinality; /* per epoch: >= 0 known, -1 unknown, -2 infinite */
  uint64_t source_bytes; /* `files`: total size of the files listed (0: unknown) */
  atomic_int active_par;    /* parallelism in force: an online tuner may change it during a run */
  atomic_int active_buf;    /* output buffer in force (prefetch with "autotune" buffer): likewise */
  /* repeat: bytes of its input's next whole epoch an online tuner lets it keep and replay instead of running the
   * input again (the plan's cache at the repeat's input, inserted live; 0: none). Set once, by the tuner. */
  atomic_int_fast64_t live_cache;
  atomic_bool live_cache_settled; /* a repeat's live cache replays its epoch, or was given up (tuner thread reads) */
  atomic_uint_fast64_t opens; /* iterators made so far: the epoch number of the next one */
  pthread_mutex_t live_mu;    /* guards `live`, and the hand-over of a freed iterator's counts */
  sl__it *live;
  atomic_uint_fast64_t avg_hint_ns; /* running mean of its sampled call time: new iterators' samplers start from
                                     * it, so that short-lived iterators sample at the op's long-run stride */
  atomic_uint avg_nest16_hint; /* and of the calls timed inside its timed calls (x16), likewise */
  /* Running means (x64, weight 1/8) of own CPU and own wall time over the sampled calls that read the CPU clock:
   * their ratio gives the CPU of those that read the wall clock alone (sl__sampler_cpu_due). 0: none yet. */
  atomic_uint_fast64_t own_cpu_mean64, own_wall_mean64;
  sl__stats st;
};

/* Shared state of one run (one sl_iter). */
struct sl__run {
  sl_pipeline *pl;
  atomic_bool cancel;
};

/* When to time the next call. Each call is timed with probability 1/stride (gaps between timed calls are drawn
 * from a geometric distribution) and a timed call stands for `stride` calls, so the scaled sums are unbiased
 * whatever an iterator's lifetime (nested sources and epochs under repeat live briefly) and wherever its costly
 * calls fall. The stride follows a running mean of the sampled wall time, not the last sample, so that a sample's
 * weight does not depend on its neighbours' values. */
typedef struct sl__sampler {
  uint32_t countdown;  /* calls until the next timed one (timed when it is 1) */
  uint32_t stride;     /* 1 / the probability the next gap was drawn with: the weight of the next sample */
  uint64_t avg_ns;     /* running mean of sampled wall time, nested calls included (0: none yet) */
  uint32_t avg_nest16; /* running mean of the op calls timed inside a timed call, x16 (their clock reads) */
  uint64_t rng;        /* xorshift state for the gaps */
  uint32_t cpu_skip;   /* sampled calls still to time on the wall clock alone before one reads the CPU clock too */
} sl__sampler;

/* Own time. A timed region (a sampled next, a worker's timed chunk) times every op call nested in it on the same
 * thread and subtracts their inclusive time from its own, in the same region: an op's own time is measured, not
 * the difference of its inclusive time and its input's, each sampled apart (on a chain of ops run on one thread
 * that difference was noisier than a light op's whole cost; docs/trace-format.md has the figures). */
typedef struct sl__nest {
  uint64_t cpu, wall; /* inclusive time of the timed calls nested in the region (their clock reads included) */
  uint64_t wall_nc;   /* the part of `wall` whose CPU was not read (calls timed on the wall clock alone) */
  uint32_t n;         /* how many were timed on both clocks (for the stride: each costs its clock reads) */
  uint32_t nw;        /* how many on the wall clock alone */
  bool wall_only;     /* this region times the calls nested in it on the wall clock alone */
} sl__nest;
/* Opens a region: the enclosing region's nested sums are saved in *saved and this one's start at zero. A region
 * also marks the iterators it calls (sl__it.nest_force) so that their calls are timed whether or not their own
 * samplers tick (a mark on the iterator, not a thread-local flag: the untimed path reads no thread-local).
 * wall_only: the calls timed for this region alone read the wall clock only (a consumer's sampled call: the thread
 * CPU clock is a system call with after-effects, and a sampled batch would make two per element; their CPU is
 * estimated, sl__nest_close_wall; docs/trace-format.md has the figures). A worker's region reads both (it spans waiting). */
void sl__nest_open(sl__nest *saved, bool wall_only);
/* True when the innermost open region on this thread times its nested calls on the wall clock alone. */
bool sl__nest_wall_only(void);
/* Closes it: *inner gets the sums of the calls nested in it; the enclosing region (restored from *saved) gets this
 * region's inclusive time (incl_cpu, incl_wall: 0 for a worker's region, which nothing encloses) and its clock
 * reads. */
void sl__nest_close(const sl__nest *saved, sl__nest *inner, uint64_t incl_cpu, uint64_t incl_wall);
/* The same for a call timed on the wall clock alone: the enclosing region gets its inclusive wall time as time
 * whose CPU it did not read. The enclosing call's own CPU then counts that wall time as the nested calls' CPU less
 * the time the call spent off the CPU (its wall less its CPU): a sampled call waits in its pulls, not in its own
 * work, so its own CPU is its own wall time, at most its CPU less the nested calls'. */
void sl__nest_close_wall(const sl__nest *saved, sl__nest *inner, uint64_t incl_wall);
/* A sampler for op `op` (NULL: none), starting from the op's running mean; never times when SL_NO_TIMING is set. */
void sl__sampler_init(sl__sampler *s, sl__op *op);
/* True when this call is to be timed (and counts the call down otherwise). */
static inline bool sl__sampler_tick(sl__sampler *s) {
  if (s->countdown > 1) {
    s->countdown--;
    return false;
  }
  return true;
}

typedef struct sl__it_vt {
  int (*next)(sl__it *it, sl_elem *out);
  void (*free)(sl__it *it);
} sl__it_vt;

/* The common head of every iterator; op iterators embed it first. */
struct sl__it {
  const sl__it_vt *vt;
  sl__op *op;
  sl__run *run;
  sl__it *input;
  uint64_t epoch;
  sl__sampler smp;
  /* Timed regions (sl__nest) that call this iterator now: its calls are timed for them. Set and cleared by the
   * caller around its pulls; another thread that pulls meanwhile times its call for nothing (no region there). */
  atomic_int nest_force;
  atomic_bool timing; /* a timed call of it is under way (its nested pulls from other iterators mark those) */
  /* Counts kept by the iterator (one writer: relaxed load + store, no locked instruction per element) and added
   * to the op's counters when it is freed; readers add the live iterators' counts (sl__op_counts). */
  atomic_uint_fast64_t pend_out, pend_bytes, pend_in;
  sl__it *live_prev, *live_next; /* in op->live, under op->live_mu */
};

/* Calls an iterator's next with counting and sampled timing. */
int sl__it_next(sl__it *it, sl_elem *out);
/* Marks `it` as called from a timed region (on > 0) or no longer (on < 0); NULL: nothing. */
static inline void sl__it_force(sl__it *it, int on) {
  if (it) atomic_fetch_add_explicit(&it->nest_force, on, memory_order_relaxed);
}
/* From inside an op's next: pulls from its input (a timed call of this op subtracts the pull's time, sl__nest). */
int sl__it_pull(sl__it *it, sl_elem *out);
/* Same for another child (an interleave's nested iterators); does not count an input element. */
int sl__it_pull_from(sl__it *it, sl__it *child, sl_elem *out);
void sl__it_free(sl__it *it);
/* The op's element and byte counts: its counters plus those of its live iterators. */
void sl__op_counts(sl__op *op, uint64_t *out, uint64_t *in, uint64_t *bytes_out);
/* Zeroes the op's counters (live iterators' counts included, by offsetting). */
void sl__op_reset_counts(sl__op *op);
static inline void sl__pend_add(atomic_uint_fast64_t *c, uint64_t v) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v, memory_order_relaxed);
}
/* Allocates an iterator of `size` bytes (zeroed), fills its head and opens its input (when the op has one). */
int sl__it_new(sl__it **out, size_t size, const sl__it_vt *vt, sl__op *op, sl__run *run, const sl_elem *seed_elem);
/* Same, opening the input only when open_input is true (a cache that reads its contents needs no upstream). */
int sl__it_new_ex(sl__it **out, size_t size, const sl__it_vt *vt, sl__op *op, sl__run *run, const sl_elem *seed_elem,
                  bool open_input);
/* Opens the input of `op`: its input op's iterator, or at the start of a nested chain the seed element. */
int sl__op_open_input(sl__op *op, sl__run *run, const sl_elem *seed_elem, sl__it **out);
/* Opens an op's iterator (recursively opens inputs). */
int sl__op_open(sl__op *op, sl__run *run, const sl_elem *seed_elem, sl__it **out);

/* Sampling of self time: the largest stride (a cheap op is timed once in SL__SAMPLE_STRIDE calls; a tuner window of
 * such an op at 500k calls/s still holds about 120 samples a second). */
#define SL__SAMPLE_STRIDE 4096u
/* Adds one sampled measurement (ns, inclusive; the calls nested in it, `inner`, are subtracted: may be NULL),
 * scaled by the number of calls it stands for, and sets the next stride and countdown: calls are timed often
 * enough for good estimates but so that the clocks' cost (measured once per process: a thread CPU clock read is a
 * system call on some machines), the nested calls' included, stays near 0.25% of the op's inclusive time. */
void sl__stats_sample(sl__op *op, sl__sampler *smp, uint64_t cpu_ns, uint64_t wall_ns, const sl__nest *inner,
                      bool cpu_read);
/* Whether this sampled call reads the thread CPU clock too. A call of a cheap op (a mean under SL__CPU_ALWAYS_NS)
 * does so one time in SL__CPU_EVERY (and until its op has one such sample): the others read the wall clock alone
 * and are charged their own wall time times the op's CPU/wall ratio over the ones that read both. The system call
 * is not just a cost: the call timed after it runs slower (a kernel that flushes the TLB on every system call), by
 * a large part of a cheap op's cost (docs/trace-format.md), and a sample stands for `stride` calls. The wall-clock-only samples do not
 * carry that excess; the ratio barely moves with it. Worker iterations always read both. */
bool sl__sampler_cpu_due(sl__sampler *s, const sl__op *op);
#define SL__CPU_EVERY 4u
#define SL__CPU_ALWAYS_NS 50000u
/* False when SL_NO_TIMING is set (counts only; for measuring the cost of timing). */
bool sl__timing_enabled(void);
/* The same for one timed chunk of n elements a worker thread handled together (a parallel map worker's batch,
 * a prefetch producer's pulls): its own time, the input pulls nested in it (`inner`) subtracted. */
void sl__stats_work_n(sl__op *op, sl__sampler *smp, uint64_t cpu_ns, uint64_t wall_ns, uint64_t n,
                      const sl__nest *inner);
static inline void sl__stat_add(atomic_uint_fast64_t *c, uint64_t v) {
  atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}
void sl__stats_held(sl__op *op, int64_t delta);

/* Error helpers that name the op: "ops[3] (map decode_jpeg): ..." */
int sl__op_err(const sl__op *op, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Wraps the current thread error with the op's name. */
int sl__op_wrap(const sl__op *op, int code);

/* Knob readers for parse(): they name the JSON path on errors. */
int sl__knob_int(const sl__op *op, json_t *obj, const char *key, int64_t def, int64_t min, int64_t *out);
/* An int knob that also accepts "autotune" (sets *autotune and leaves *out = def). */
int sl__knob_tunable(const sl__op *op, json_t *obj, const char *key, int64_t def, int64_t min, int64_t *out,
                     bool *autotune);
int sl__knob_bool(const sl__op *op, json_t *obj, const char *key, bool def, bool *out);
int sl__knob_str(const sl__op *op, json_t *obj, const char *key, const char *def, const char **out);
int sl__knob_double(const sl__op *op, json_t *obj, const char *key, double def, double *out);
/* Fails on keys of `obj` that are not in the NULL-terminated list (catches typos in specs). */
int sl__knob_check_keys(const sl__op *op, json_t *obj, const char *const *allowed);

/* Documented defaults for "autotune" knobs until the planner has run (docs/spec.md). */
int64_t sl__autotune_parallelism(void);
#define SL__AUTOTUNE_BUFFER 2
/* Ring slots a prefetch with an "autotune" buffer allocates, so that a tuner may deepen it during a run. */
#define SL__AUTOTUNE_BUFFER_MAX 64

/* A pipeline's insides are private to ops/pipeline.c; the ops, the tracer and the planner read them through
 * these. sl__pipeline_op(pl, i) for i in [0, sl_pipeline_op_count(pl)) is the i-th op in pre-order. */
sl__op *sl__pipeline_op(const sl_pipeline *pl, int i);
/* The last op of the top chain (the one the pipeline's elements come out of). */
sl__op *sl__pipeline_root(const sl_pipeline *pl);
/* The normalised spec (borrowed) and where it came from (a file name, "<spec>" or NULL). */
json_t *sl__pipeline_spec(const sl_pipeline *pl);
const char *sl__pipeline_origin(const sl_pipeline *pl);
/* True when the pipeline's samplers never time (like SL_NO_TIMING for one pipeline: bench/trace_cost.c's
 * untraced twin); set it before any iterator is opened. */
void sl__pipeline_set_no_timing(sl_pipeline *pl, bool no_timing);
/* Replaces p's insides with q's (the caller's handle now holds q's pipeline, its ops pointing back at p) and
 * frees q with p's old insides. Neither may have an open iterator. */
void sl__pipeline_replace(sl_pipeline *p, sl_pipeline *q);

/* Resolves a path from the spec against the spec's directory. Returns a new string. */
char *sl__resolve_path(const sl_pipeline *pl, const char *path);

/* The op table. */
const sl__op_vt *sl__op_lookup(const char *kind);
/* Comma-separated op names, for messages (made from the table). */
const char *sl__op_names(void);
/* The i-th registered op (NULL past the end), for docs and tests. */
const sl__op_vt *sl__op_at(size_t i);
/* The schema of op `kind`, NULL when there is no such op (or it has no schema). */
const sl__op_schema *sl__op_schema_of(const char *kind);
/* The model kind of op `kind` (SL__MK_SEQ when unknown) and its name ("map", "source", ...). */
sl__model_kind sl__op_model(const char *kind);
const char *sl__model_kind_name(sl__model_kind k);
/* True when `key` of op `kind` is a performance knob (not part of the pipeline's identity). */
bool sl__op_is_knob(const char *kind, const char *key);
/* True when op `kind` is never part of the pipeline's identity (prefetch, cache). */
bool sl__op_outside_identity(const char *kind);

/* Checks the op's spec object against its schema (unknown knobs with the nearest name, types, ranges). */
int sl__op_check(const sl__op *op, json_t *obj);
/* Fails, naming the op, the knob at `where` and the components that exist, unless component `name` is in s. */
int sl__op_need(const sl__op *op, const sl__struct *s, const char *name, const char *where);
/* Every component of s gains a leading batch dim of `size` (SL__DIM_UNKNOWN: not fixed); a dim that varies between
 * elements fails unless `padded` (then it becomes the batch's longest). */
int sl__op_batch_shape(sl__op *op, sl__struct *s, int64_t size, bool padded);
/* Follows the element structure to op `op` (its input's and source's structures are set): sets op->shape. */
int sl__op_infer(sl__op *op, const sl__struct *seed);

/* Interns a component name for the op's lifetime (names read back from cache files). */
const char *sl__op_intern(sl__op *op, const char *name, size_t len);

/* Opens the single-element iterator that starts a nested source chain. */
int sl__it_single(sl__op *op, sl__run *run, const sl_elem *e, sl__it **out);

/* Waits on `cv` for at most `ms` milliseconds (cancellation is polled between waits). */
void sl__cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms);
static inline bool sl__canceled(const sl__run *run) { return atomic_load_explicit(&run->cancel, memory_order_relaxed); }

/* Hand-off of cheap elements between threads (parallel map, parallel interleave, prefetch). A lock round-trip and a
 * wake-up cost more than a cheap element's work, so both sides move runs of elements:
 *  - the consumer, under one lock, takes the first ready element and claims the ready ones after it (up to a share
 *    of the buffer, so producers keep room to fill while it serves them); it serves claimed elements on later calls
 *    without locking. Claimed elements stay in their buffer slots, still counting against the buffer, until the
 *    consumer's next trip under the lock releases them: memory stays bounded by the op's `buffer`;
 *  - a producer whose elements are cheap (running mean below SL__HANDOFF_CHEAP_NS) makes up to SL__HANDOFF_MAX of
 *    them before publishing under one lock; an expensive element is published as soon as it is made;
 *  - a waiting side is woken only for a run's worth of room or elements (hysteresis), one waiter at a time, by a
 *    signal sent after the unlock.
 * One consumer thread owns an sl__claims; producers never touch it. */
#define SL__HANDOFF_MAX 16
#define SL__HANDOFF_CHEAP_NS 10000
typedef struct sl__claims {
  sl_elem *e[SL__HANDOFF_MAX]; /* claimed slots, in hand-off order */
  int head, n;                /* e[head..n) are not served yet */
} sl__claims;
/* Moves the next claimed element into `out` and returns the (now empty) slot it came from; NULL when none is left. */
static inline sl_elem *sl__claims_next(sl__claims *q, sl_elem *out) {
  if (q->head >= q->n) return NULL;
  sl_elem *s = q->e[q->head++];
  sl_elem_move(out, s);
  return s;
}
/* How many elements one trip may take from a buffer of `cap` (the one returned at once included). */
static inline int sl__claims_limit(int cap) {
  int k = cap / 2;
  return k < 1 ? 1 : k > SL__HANDOFF_MAX ? SL__HANDOFF_MAX : k;
}
/* Sum of the buffer occupancies seen by n elements taken together from a buffer holding `occ` (as if one by one). */
static inline uint64_t sl__occ_run(uint64_t occ, uint64_t n) { return n * occ - n * (n - 1) / 2; }
/* Folds a timed chunk (n elements in wall_ns) into a producer's running mean per element and returns the chunk
 * size it implies: SL__HANDOFF_MAX for cheap elements, 1 for expensive ones. */
static inline int sl__handoff_chunk(uint64_t *mean_ns, uint64_t wall_ns, uint64_t n) {
  uint64_t per = wall_ns / (n ? n : 1);
  *mean_ns = *mean_ns ? *mean_ns - *mean_ns / 4 + per / 4 : per;
  return *mean_ns < SL__HANDOFF_CHEAP_NS ? SL__HANDOFF_MAX : 1;
}

/* The longest a waiting consumer is held back so that it is woken for a run of expensive elements rather than
 * for each one: a run is worth waiting for only when elements arrive that often. A wake-up costs microseconds
 * (a context switch, and a core taken from a worker when threads exceed cores), which matters for elements of
 * tens to hundreds of microseconds and not for slow ones, whose latency it would only add to. */
#define SL__HANDOFF_RUN_NS 1000000
/* How many elements a waiting consumer asks to be woken for: the elements its producers make within
 * SL__HANDOFF_RUN_NS (`per_ns` wall per element per producer, `producers` of them), at least 1, at most `max`. */
static inline int sl__handoff_want(uint64_t per_ns, int producers, int max) {
  if (per_ns == 0 || producers < 1) return 1;
  uint64_t k = (uint64_t)SL__HANDOFF_RUN_NS * (uint64_t)producers / per_ns;
  return k < 1 ? 1 : k > (uint64_t)max ? max : (int)k;
}

/* Called with `mu` held, before sleeping on a condition that a running peer makes true within microseconds when
 * its elements are cheap (a sleep and a wake-up cost more than that, most on virtual machines): releases `mu`,
 * polls *counter (the peer's publish or release count) for up to SL__HANDOFF_SPIN_NS until it changes, and takes
 * `mu` again. The caller re-checks its condition, and polls at most once per wait. */
void sl__handoff_poll(pthread_mutex_t *mu, const atomic_uint *counter);
#define SL__HANDOFF_SPIN_NS 10000

/* Initialises the mutex of a hand-off buffer: one that spins briefly before sleeping where the C library offers it,
 * since its critical sections are a few hundred nanoseconds and sleeping on contention costs microseconds. */
void sl__handoff_mutex_init(pthread_mutex_t *mu);

/* Carries an error (code + message) from a worker thread to the consumer. */
typedef struct sl__errbox {
  int code;
  char msg[1024];
} sl__errbox;
void sl__errbox_capture(sl__errbox *b, int code);
int sl__errbox_raise(const sl__errbox *b);

#endif
