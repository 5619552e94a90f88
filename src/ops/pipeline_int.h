/* ops/pipeline_int.h: what the layers above ops (the tracer, the planner, dist, report) see of a built pipeline:
 * its ops as graph nodes with their counters, and what each op declares of itself (its model kind, its knobs and
 * which are tunable). Op authors include ops/op_int.h, threaded ops ops/op_async_int.h as well. Not public. */
#ifndef SL_OPS_PIPELINE_INT_H
#define SL_OPS_PIPELINE_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "core/core_int.h"
#include "core/schema_int.h"
#include "io/stream_int.h"
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
  atomic_uint_fast64_t filled;         /* elements handed out again in place of dropped ones (shard "in_step") */
  atomic_uint_fast64_t cpu_ns, wall_ns, samples;   /* own time of next() calls on the consumer's side (sl__nest) */
  atomic_uint_fast64_t work_cpu_ns, work_wall_ns;  /* own work done on worker threads (map functions, pulls) */
  atomic_uint_fast64_t work_samples; /* elements in the worker chunks timed (the online tuner's first window) */
  atomic_uint_fast64_t wait_ns;
  /* Run-queue delay (waiting for a core while runnable) of the sampled calls that read it, and those calls' own
   * wall time: the op's share of wall time spent waiting for a core is runq_ns / runq_wall_ns (sl__runq_ns). */
  atomic_uint_fast64_t runq_ns, runq_wall_ns;
  atomic_uint_fast64_t occ_sum, occ_n, held, held_peak;
  /* Spread of per-call wall times (for buffer sizing): scaled sample counts and sums of squares in us^2. */
  atomic_uint_fast64_t next_n, next_sq_us, work_n, work_sq_us;
  /* A reader of remote files: its requests (retries among them), bytes received, summed time to first byte and
   * transfer time; its streams' read-ahead (the last one opened's: bytes per request, requests in flight). */
  atomic_uint_fast64_t net_requests, net_retries, net_bytes, net_ttfb_ns, net_xfer_ns, net_block, net_inflight;
  /* bytes and time of one request transferring alone, of two or more at once (sl__net_stats) */
  atomic_uint_fast64_t net_solo_bytes, net_solo_ns, net_ovl_bytes, net_ovl_ns;
  /* remote objects opened, their sizes summed, and those of them read from the reader's keep */
  atomic_uint_fast64_t net_objects, net_object_bytes, net_kept;
  atomic_uint_fast64_t net_cpu_ns; /* its streams' I/O threads' CPU */
} sl__stats;

/* What an op is to the planner and the tracer (its model node, as tf.data's CreateNode tells its autotuner). */
/* Each kind once: its enum name, the name the report and the trace give it, and what it is. A new kind is a line
 * here and its model in plan/plan_model.c (throughput, memory, buffer depth). */
#define SL__MODEL_KINDS(X)                                                                                          \
  X(SEQ, "sequential")    /* a synchronous one-in-one-out or counting op (take, skip, shard) */                     \
  X(SOURCE, "source")     /* makes elements from nothing (range, files) */                                          \
  X(READER, "reader")     /* reads records from the files its input names (tfrecord, lines) */                      \
  X(MAP, "map")           /* runs a function per element, possibly on workers */                                   \
  X(FILTER, "filter")     /* drops elements by a predicate */                                                       \
  X(INTERLEAVE, "interleave") /* runs a nested chain per input element, possibly on workers */                      \
  X(PREFETCH, "buffer")   /* a buffer filled by its own thread */                                                   \
  X(CACHE, "cache")       /* holds the first pass, replays it */                                                    \
  X(BATCH, "batch")       /* stacks a fixed number of elements */                                                   \
  X(BUCKET, "bucket")     /* batches by length buckets */                                                           \
  X(SHUFFLE, "shuffle")   /* a random-order buffer */                                                               \
  X(REPEAT, "repeat")     /* replays its input's epochs */                                                          \
  X(CUT, "cut")           /* a cut between processes (offload): in one process a pass-through */
#define SL__MK_ENUM(k, name) SL__MK_##k,
typedef enum sl__model_kind { SL__MODEL_KINDS(SL__MK_ENUM) SL__MK_COUNT } sl__model_kind;
#undef SL__MK_ENUM

enum {
  SL__OPS_NO_IDENTITY = 1u << 0, /* never part of the pipeline's identity: the planner adds and removes it (prefetch,
                                  * cache) */
  SL__OPS_LISTS_FILES = 1u << 1  /* names the data files (the tracer's disk probe reads data_file's) */
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
  /* With SL__OPS_LISTS_FILES: the first data file the parsed op reads (borrowed), or NULL when it has none. */
  const char *(*data_file)(const sl__op *op);
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
  const struct sl__op_state *state; /* how its iterators save and restore their position; NULL: they cannot yet */
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
  int stamp;       /* a random map's slot in sl_eref.stamp (-1: none): where it writes each element's index */
  int parent;      /* index of the consumer op, -1 for the root */
  int height;      /* ops on the longest path from this op to a source, itself included (<= SL__MAX_DEPTH) */
  bool nested;     /* inside an interleave's source chain */
  bool no_timing;  /* the pipeline's no_timing, copied here: its samplers never time */
  char *path;      /* "ops[3]" or "ops[1].source[0]" */
  char *label;     /* fn name for map/filter */
  json_t *json;    /* this op's object in the pipeline's spec (borrowed) */
  sl__op *input;   /* upstream op, NULL at the start of a chain */
  sl__op *source;  /* last op of the nested source chain (interleave) */
  sl__op *owner;   /* in a nested source chain: the interleave it is the source of (NULL in the top chain) */
  void *impl;
  sl__struct *shape;   /* the element structure after the op (validation; NULL until the pipeline is checked) */
  int64_t parallelism; /* resolved; 1 for synchronous ops */
  int64_t buffer;      /* resolved output buffer, 0 for none */
  bool par_autotune, buf_autotune, async, random;
  bool serial; /* its function is SL_FN_SERIAL */
  bool in_step; /* a shard with "in_step": the ops after it that drop elements fill their places (op_map.c) */
  int64_t cardinality; /* per epoch: >= 0 known, -1 unknown, -2 infinite */
  uint64_t source_bytes; /* `files`: total size of the files listed (0: unknown) */
  atomic_int active_par;    /* parallelism in force: an online tuner may change it during a run */
  atomic_int active_buf;    /* output buffer in force (prefetch with "autotune" buffer): likewise */
  atomic_int active_ra;     /* a remote reader's requests in flight for the files it opens next, set by an online
                             * tuner (0: its spec's readahead) */
  sl__keep *keep;           /* a remote reader's objects kept in memory for later epochs (its "keep" knob; NULL) */
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
  struct sl__skiplog *_Atomic skips; /* why elements were skipped (op_skips.c), made at the first skip */
};

/* Notes why op skipped an element (on_error / on_corrupt "skip"): `msg` is the error that would have failed the run;
 * `file` (NULL: none; `len` bytes) the file the element came from, named in the first message, not in the reason.
 * Thread-safe; nothing is noted when memory runs out (the count in op->st still is). */
void sl__op_skip_note(sl__op *op, const char *msg, const void *file, size_t len);
void sl__op_skips_free(sl__op *op);
/* The op's skip reasons as a JSON array (sl_pipeline_op_skips). */
int sl__op_skips_json(char **out, sl__op *op);

/* Upper bounds of the knobs that size threads and buffers (their tables' ranges): what one process can hold
 * whatever the element size, checked when the spec is validated, so that no size reaches an int or an allocation
 * unchecked. docs/spec.md lists them with each knob. */
#define SL__MAX_WORKERS 256
#define SL__MAX_BUFFER 65536
#define SL__MAX_CYCLE 4096
/* The deepest op tree a pipeline may have: the longest path from the last op to a source, the ops of nested
 * interleave sources counted. Opening, pulling, freeing and the planner's walks recurse along that path, a few
 * hundred bytes of stack per op, so 1000 ops stay well inside a thread's stack (docs/reliability.md). */
#define SL__MAX_DEPTH 1000

/* Documented defaults for "autotune" knobs until the planner has run (docs/spec.md). */
int64_t sl__autotune_parallelism(void);
#define SL__AUTOTUNE_BUFFER 2
/* Ring slots a prefetch with an "autotune" buffer allocates, so that a tuner may deepen it during a run. */
#define SL__AUTOTUNE_BUFFER_MAX 64

/* A producer whose elements cost less than this (running mean of its wall time per element) hands them over in
 * chunks; the planner's model of hand-off prices follows the same line. */
#define SL__HANDOFF_CHEAP_NS 10000

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
/* True when op `kind`'s table lists knob `key` as tunable (the planner and the tuners may set it). */
bool sl__op_tunable(const char *kind, const char *key);
/* True when `key` of op `kind` is a performance knob (not part of the pipeline's identity). */
bool sl__op_is_knob(const char *kind, const char *key);
/* True when op `kind` is never part of the pipeline's identity (prefetch, cache). */
bool sl__op_outside_identity(const char *kind);

/* The op's element and byte counts: its counters plus those of its live iterators. */
void sl__op_counts(sl__op *op, uint64_t *out, uint64_t *in, uint64_t *bytes_out);
/* Zeroes the op's counters (live iterators' counts included, by offsetting). */
void sl__op_reset_counts(sl__op *op);

/* Error helpers that name the op: "ops[3] (map decode_jpeg): ..." */
int sl__op_err(const sl__op *op, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Wraps the current thread error with the op's name. */
int sl__op_wrap(const sl__op *op, int code);
/* Interns a component name for the op's lifetime (names read back from cache files). */
const char *sl__op_intern(sl__op *op, const char *name, size_t len);

/* Waits on `cv` for at most `ms` milliseconds (cancellation is polled between waits). */
void sl__cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms);

/* Outputs against inputs (pipeline_outputs.c): SL_EINVAL naming both when one of `outs` is the same file as an input
 * of `files` (device and inode), or when `swept` (a directory whose dead writers' temporaries of names
 * `patterns` match are removed: sl__outfile_sweep_dir; NULL: none) holds an input named like such a temporary. `what` prefixes the message ("ops[2].file: "; NULL: none). */
int sl__pipeline_check_outputs(const sl_pipeline *p, const char *const *outs, size_t nout, const char *swept,
                               const char *const *patterns, const char *what);

#endif
