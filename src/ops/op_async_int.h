/* ops/op_async_int.h: what a threaded op (parallel map and interleave, prefetch) needs besides ops/op_int.h:
 * timing the work its threads do (timed regions, chunked samples), handing elements between threads in runs, and
 * carrying a worker's error to the consumer. Not public. */
#ifndef SL_OPS_OP_ASYNC_INT_H
#define SL_OPS_OP_ASYNC_INT_H

#include "ops/op_int.h"

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
 * estimated, sl__nest_close_wall; docs/trace-format.md has the figures). A worker's region reads both (it spans
 * waiting). */
void sl__nest_open(sl__nest *saved, bool wall_only);
/* True when the innermost open region on this thread times its nested calls on the wall clock alone. */
bool sl__nest_wall_only(void);
/* Closes it: *inner gets the sums of the calls nested in it; the enclosing region (restored from *saved) gets this
 * region's inclusive time (incl_cpu, incl_wall: 0 for a worker's region, which nothing encloses) and its clock
 * reads. */
void sl__nest_close(const sl__nest *saved, sl__nest *inner, uint64_t incl_cpu, uint64_t incl_wall);

/* The same for one timed chunk of n elements a worker thread handled together (a parallel map worker's batch,
 * a prefetch producer's pulls): its own time, the input pulls nested in it (`inner`) subtracted. */
void sl__stats_work_n(sl__op *op, sl__sampler *smp, uint64_t cpu_ns, uint64_t wall_ns, uint64_t n,
                      const sl__nest *inner, uint64_t runq_ns);

/* This thread's run-queue delay so far (ns runnable but not running: the second field of
 * /proc/thread-self/schedstat, read through a descriptor kept open per thread, one pread), or SL__RUNQ_NONE when
 * the kernel does not say (no schedstat, or SL_NO_RUNQ set). Read only at the ends of sampled calls: one system call
 * each, costed in the sampling stride (docs/trace-format.md has its price). */
#define SL__RUNQ_NONE UINT64_MAX
uint64_t sl__runq_ns(void);
/* Whether this sample (one that reads the CPU clock) reads the run-queue delay too: one in SL__RUNQ_EVERY. The op's
 * delay is a share of the wall time of the samples that read it, so a subset estimates it; the reads are system
 * calls. Otherwise SL__RUNQ_NONE is passed as the sample's delay. */
#define SL__RUNQ_EVERY 4u
static inline bool sl__sampler_runq_due(sl__sampler *s) {
  if (s->runq_skip) {
    s->runq_skip--;
    return false;
  }
  s->runq_skip = SL__RUNQ_EVERY - 1;
  return true;
}
/* The delay between two reads (SL__RUNQ_NONE when either is unknown). */
uint64_t sl__runq_since(uint64_t r0);

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
