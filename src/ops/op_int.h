/* ops/op_int.h: what an op author needs: the iterator protocol (an op's iterator embeds sl__it and pulls from its
 * input), reading knobs through the op's table, element-structure checks and errors that name the op. A threaded
 * op includes ops/op_async_int.h as well. Not public. */
#ifndef SL_OPS_OP_INT_H
#define SL_OPS_OP_INT_H

#include "core/args_int.h"
#include "ops/pipeline_int.h"

/* Shared state of one run (one sl_iter). */
struct sl__run {
  sl_pipeline *pl;
  atomic_bool cancel;
};
static inline bool sl__canceled(const sl__run *run) { return atomic_load_explicit(&run->cancel, memory_order_relaxed); }

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
  uint32_t runq_skip;  /* CPU-reading samples still to take before one reads the run-queue delay too */
} sl__sampler;

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

static inline void sl__stat_add(atomic_uint_fast64_t *c, uint64_t v) {
  atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}
void sl__stats_held(sl__op *op, int64_t delta);

/* The view parse() reads its knobs through (sl__get_int(&v, &k, "size"), ...): the op's knob table gives each
 * default, range and tunability; errors name the op's JSON path. Borrows obj. */
sl_args sl__op_knobs(const sl__op *op, json_t *obj);

/* Checks the op's spec object against its schema (unknown knobs with the nearest name, types, ranges). */
int sl__op_check(const sl__op *op, json_t *obj);
/* Fails, naming the op, the knob at `where` and the components that exist, unless component `name` is in s. */
int sl__op_need(const sl__op *op, const sl__struct *s, const char *name, const char *where);
/* Every component of s gains a leading batch dim of `size` (SL__DIM_UNKNOWN: not fixed); a dim that varies between
 * elements fails unless `padded` (then it becomes the batch's longest). */
int sl__op_batch_shape(sl__op *op, sl__struct *s, int64_t size, bool padded);
/* Follows the element structure to op `op` (its input's and source's structures are set): sets op->shape. */
int sl__op_infer(sl__op *op, const sl__struct *seed);

/* A shuffled order of 0..n-1 (*order, sl__free'd by the caller) for a file-listing op: from `seed` (-1: the
 * pipeline's), the op's seed and, when `reshuffle`, the epoch (op_read.c; `files` and `image_folder`). */
int sl__file_order(int64_t **order, const sl__op *op, int64_t n, int64_t seed, bool reshuffle, uint64_t epoch);
/* Opens the single-element iterator that starts a nested source chain. */
int sl__it_single(sl__op *op, sl__run *run, const sl_elem *e, sl__it **out);

#endif
