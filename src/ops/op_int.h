/* ops/op_int.h: what an op author needs: the iterator protocol (an op's iterator embeds sl__it and pulls from its
 * input), reading knobs through the op's table, element-structure checks and errors that name the op. A threaded
 * op includes ops/op_async_int.h as well. Not public. */
#ifndef SL_OPS_OP_INT_H
#define SL_OPS_OP_INT_H

#include "core/args_int.h"
#include "io/stream_int.h"
#include "ops/pipeline_int.h"

typedef struct sl__sr sl__sr;
/* Shared state of one run (one sl_iter). */
struct sl__run {
  sl_pipeline *pl;
  atomic_bool cancel;
  atomic_bool want_state; /* a state was taken of this run: ops that can prepare the next one cheaply do */
};
/* While sl_pipeline_iter_at opens a run's iterators: the saved state they read their parts from (op_state.c), on the
 * opening thread only (threads an op starts meanwhile open nested chains afresh; making an element again clears it
 * for its while). */
extern _Thread_local sl__sr *sl__t_restore;
/* Above 0 while an element is made again (sl__remake): the iterators opened for it count no epoch. */
extern _Thread_local int sl__t_remaking;
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
/* A reader's network counters: what stream s did since *seen (a remote file's requests, bytes, times; nothing for
 * a local file) added to op's, *seen moved on (op_read.c). Start *seen at zero for each stream. */
void sl__op_net_account(sl__op *op, const sl__stream *s, sl__net_stats *seen);
/* A reader's stream options `o` (from its spec) with the requests in flight an online tuner set (active_ra), for
 * the next file it opens. */
sl__stream_opts sl__op_stream_opts(const sl__op *op, sl__stream_opts o);
/* A remote reader's knobs into its stream options: "readahead", and "keep" (bytes of remote objects to keep in
 * memory for later epochs; > 0 makes op->keep). */
int sl__op_net_knobs(sl__op *op, sl__stream_opts *o, const sl_args *k);
/* Counts a stream the reader just opened: a remote object (from the link or its keep) and its size. */
void sl__op_net_opened(sl__op *op, const sl__stream *s);
/* The knob table rows of a remote reader's "readahead" and "keep" (op_read.c), for the readers' tables. */
#define SL__NET_KNOBS                                                                                               \
  {"readahead", SL__ARG_INT, "0", SL__ARGF_KNOB | SL__LOHI, 0, 256, NULL,                                         \
   "remote files: ranged requests kept in flight ahead of the reader, per file (0: SLUICE_REMOTE_INFLIGHT, else 4)"}, \
  {"keep", SL__ARG_INT, "0", SL__ARGF_KNOB | SL__ARGF_LO, 0, 0, NULL,                                              \
   "remote files: bytes of objects read in full to keep in memory, so that later epochs read them from memory "  \
   "(0: none)"}

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

/* image_folder's listing as a resume checks it (pipeline_state.c): its classes in label order, and per class its
 * image count and a hash of its images' paths under the root, sizes and modification times. Returns the class
 * count; the arrays are the op's. */
int64_t sl__folder_listing(const sl__op *op, const char *const **classes, const uint64_t **count,
                           const uint64_t **hash);
/* A shuffled order of 0..n-1 (*order, sl__free'd by the caller) for a file-listing op: from `seed` (-1: the
 * pipeline's), the op's seed and, when `reshuffle`, the epoch (op_read.c; `files` and `image_folder`). */
/* Every cache op's file checked so (at build: validate says it too). */
int sl__pipeline_check_caches(const sl_pipeline *p);
/* A cache op's file, NULL for another op or a memory cache. */
const char *sl__cache_file(const sl__op *op);
int sl__file_order(int64_t **order, const sl__op *op, int64_t n, int64_t seed, bool reshuffle, uint64_t epoch);
/* Opens the single-element iterator that starts a nested source chain. */
int sl__it_single(sl__op *op, sl__run *run, const sl_elem *e, sl__it **out);

/* ---- Saved state of a run (op_state.c; docs/state.md) ----
 * A state is the position of a run as its consumer sees it. Each iterator writes a record: its op and epoch, its
 * input's record, its own part (the op's `save`), then the refs of elements to be made again and handed out before
 * anything else (a pushback). Elements made ahead (a prefetch's ring, a parallel map's elements in flight, a batch's
 * partial batch) are saved as refs (sl_eref) and made again on restore (sl__remake), not as bytes. */
typedef struct sl__sw {
  unsigned char *p;
  size_t n, cap;
  int err;
} sl__sw;
struct sl__sr {
  const unsigned char *p;
  size_t n, at;
};
void sl__sw_u64(sl__sw *w, uint64_t v);
void sl__sw_str(sl__sw *w, const char *s);
void sl__sw_bytes(sl__sw *w, const void *p, size_t n); /* raw, no length */
void sl__sw_ref(sl__sw *w, const sl_eref *r); /* a batch's members too */
/* Reads fail with SL_ECORRUPT naming `what` and the byte (a truncated or damaged state). */
int sl__sr_u64(sl__sr *r, uint64_t *v, const char *what);
int sl__sr_str(sl__sr *r, char *buf, size_t n, const char *what);
int sl__sr_ref(sl__sr *r, sl_eref *out); /* out->members is a new reference */
/* A position in 0..n (a listing's next entry) into *pos; SL_ECORRUPT naming op when past n. */
int sl__sr_index(sl__sr *r, int64_t *pos, int64_t n, const sl__op *op, const char *what);

typedef struct sl__op_state {
  /* Writes the iterator's own part (the chain is held still: sl__state_hold). NULL: nothing of its own. */
  int (*save)(sl__it *it, sl__sw *w);
  /* Reads it back into a freshly opened iterator, before any thread of it starts. */
  int (*load)(sl__it *it, sl__sr *r);
  /* Holds the op's threads still (on) or lets them go: no element is between its input and its buffers. */
  void (*hold)(sl__it *it, bool on);
  /* Makes again the element with ref `r` that this op handed out (readers, maps, batches, interleave). NULL with
   * SL__STF_PASS: the element is its input's, made again by the input. */
  int (*remake)(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out);
  unsigned flags;
  /* Writes the refs of elements it has taken for its consumer but not handed out yet (they come first on restore);
   * returns how many. NULL: none. */
  int (*pending)(sl__it *it, sl__sw *w);
  /* Writes its input's record (NULL: the input iterator writes it, held still by this op's hold, which then also
   * holds its input: an op with save_input holds its input itself, or not at all). */
  int (*save_input)(sl__it *it, sl__sw *w);
} sl__op_state;
enum {
  SL__STF_PASS = 1u << 0,        /* hands its input's elements out unchanged (shuffle, take, prefetch, ...) */
  SL__STF_LOADS_ITSELF = 1u << 1 /* its open calls sl__state_load before starting threads */
};
/* True on the thread that restores a run while it opens iterators. */
bool sl__restoring(const sl__run *run);
/* Reads the op's own part when restoring (0 otherwise); ops with SL__STF_LOADS_ITSELF call it from open. */
int sl__state_load(sl__it *it);
/* Makes again the element `r` as op `op` handed it out. */
int sl__remake(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out);
/* The input element of a reader op (a filename) made again from its ref (up_op, up). */
int sl__remake_input(sl__op *op, sl__run *run, uint16_t up_op, uint64_t up, sl_elem *out);
/* Wraps *in so that the elements of refs[0..n) are made again (by `by`, NULL: by (*in)->op) and handed out first;
 * *in NULL: an iterator of those elements alone. */
int sl__pushback(sl__it **in, sl__run *run, sl__op *by, const sl_eref *refs, size_t n);
/* Reads a count and that many refs, and pushes them back onto *in (sl__pushback). */
int sl__sr_pushback(sl__sr *r, sl__it **in, sl__run *run, sl__op *by, const char *what);
/* Writes an iterator's record (its input's, its own, its pushback). */
int sl__state_save_it(sl__it *it, sl__sw *w);
/* Holds or lets go every threaded op of the chain from `it` up its inputs (nested chains included). */
void sl__state_hold(sl__it *it, bool on);
/* The engine's side (engine.c, pipeline.c): a record's head read into a new iterator; its own part and pushback after its op's
 * open; the part of a nested chain's single-element start; the pushback iterator's table. */
int sl__state_head(sl__it *it, bool *has_input);
int sl__state_after_open(sl__it **it);
int sl__single_save(sl__it *it, sl__sw *w);
const sl__it_vt *sl__pushback_vt(void);
/* The state document around the root's record (sl_iter_state), and its checks before the records are read. */
/* pipeline.c's run, for pipeline_state.c: a run opened from a state's records (rd NULL: afresh), its root, its
 * pipeline, its failure code. */
int sl__iter_open(sl_iter **out, sl_pipeline *p, sl__sr *rd, uint64_t delivered);
sl__it *sl__iter_root(sl_iter *it);
sl_pipeline *sl__iter_pipeline(sl_iter *it);
int sl__iter_sticky(const sl_iter *it);

/* The ref an op stamps on an element it makes from its input element `in`: position `pos` (and `aux`) within it. */
static inline void sl__ref_set(sl_elem *e, const sl__op *op, const sl_eref *in, uint64_t pos, uint64_t aux) {
  sl_buf_unref(e->ref.members);
  e->ref = (sl_eref){0};
  e->ref.op = (uint16_t)(op->index + 1);
  if (in) {
    e->ref.up_op = in->op;
    e->ref.up = in->pos;
  }
  e->ref.pos = pos;
  e->ref.aux = aux;
}

#endif
