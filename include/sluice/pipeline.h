/* sluice/pipeline.h: pipelines from JSON specs or the builder, iterators, and per-op counters.
 * A pipeline is an immutable graph built from a spec (see docs/spec.md); each sl_pipeline_iter() call starts an
 * independent run of it. Thread rules: an sl_pipeline may be shared by threads for sl_pipeline_iter,
 * sl_pipeline_op_stats and sl_pipeline_to_json; an sl_iter is used by one consumer thread, except
 * sl_iter_cancel(), which is safe from any thread (for signal-driven stops use it from a normal thread). */
#ifndef SLUICE_PIPELINE_H
#define SLUICE_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "element.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A knob value meaning "let the planner choose" (JSON "autotune"). */
#define SL_AUTOTUNE (-1)

typedef struct sl_pipeline sl_pipeline;
typedef struct sl_iter sl_iter;

/* Builds a pipeline from a JSON spec. `origin` names the spec in messages (a path, or NULL for "<spec>").
 * Errors: SL_EINVAL with a message giving line and column for malformed JSON, or the JSON path
 * (e.g. "ops[3].parallelism") for a bad op, knob or function; SL_ENOMEM. */
SL_EXTERN int sl_pipeline_from_json(sl_pipeline **out, const char *json, size_t len, const char *origin);
/* Reads and builds the spec in file `path`. SL_EIO names the file when it cannot be read. */
SL_EXTERN int sl_pipeline_from_file(sl_pipeline **out, const char *path);
/* Frees a pipeline; every iterator of it must have been freed. Accepts NULL. */
SL_EXTERN void sl_pipeline_free(sl_pipeline *p);
/* The spec as normalised JSON (every knob written, autotune kept as "autotune"). Free with sl_free(). */
SL_EXTERN int sl_pipeline_to_json(char **out, const sl_pipeline *p);
/* The pipeline's name and seed from its spec. */
SL_EXTERN const char *sl_pipeline_name(const sl_pipeline *p);
SL_EXTERN uint64_t sl_pipeline_seed(const sl_pipeline *p);
/* The data files the pipeline's `files` ops list (after glob expansion), NULL-terminated. The array is freed with
 * sl_free(); the strings belong to the pipeline. */
SL_EXTERN int sl_pipeline_input_files(const char ***paths, size_t *n, const sl_pipeline *p);
/* 0, or SL_EINVAL naming both when `path` (an output about to be written: -o, a state file) is the same file as
 * one of those inputs (by device and inode: a symlink or hard link to one counts). Call before opening it. */
SL_EXTERN int sl_pipeline_check_output(const sl_pipeline *p, const char *path);

/* Starts a run. The iterator owns its worker threads; sl_iter_free joins them all. */
SL_EXTERN int sl_pipeline_iter(sl_iter **out, sl_pipeline *p);
/* Next element: 0 with `out` filled (out must be empty; the caller owns it and clears it), SL_END when the
 * stream is exhausted, or a negative error whose message names the op (its JSON path) and the record. After an
 * error or cancellation every later call returns the same code. */
SL_EXTERN int sl_iter_next(sl_elem *out, sl_iter *it);
/* Asks the run to stop: blocked calls return SL_ECANCELED promptly. Safe from any thread. */
SL_EXTERN void sl_iter_cancel(sl_iter *it);
/* Stops and joins every worker, frees every buffer. Accepts NULL. */
SL_EXTERN void sl_iter_free(sl_iter *it);

/* ---- Resuming a run (docs/state.md) ---- */
/* The position of run `it` as its consumer sees it (what sl_iter_next has returned so far, not what workers and
 * buffers made ahead) in *buf (*len bytes; free with sl_free). Small: elements held in buffers are saved as references
 * to their records, made again on restore. Call from the consumer thread between sl_iter_next calls. SL_EINVAL naming
 * the op when the pipeline has an op that cannot save its position. */
SL_EXTERN int sl_iter_state(sl_iter *it, void **buf, size_t *len);
/* Starts a run of `p` that continues where the run a state was taken of stood: the same elements in the same order
 * for a spec with a seed (docs/state.md has the rules). The state may come from a spec with other performance knobs.
 * SL_EINVAL when it is of another pipeline (naming the op that differs) or a data file changed since (naming it);
 * SL_ECORRUPT for a truncated or damaged state; SL_EVERSION for another format. Nothing runs on error. */
SL_EXTERN int sl_pipeline_iter_at(sl_iter **out, sl_pipeline *p, const void *buf, size_t len);
/* Says a state will be asked of run `it`: from now on ops that can keep what a state needs at hand do (a prefetch of
 * slow elements keeps its input's record after each one), so that every sl_iter_state is quick, the first included.
 * Without it the first state of a run may wait for the element being made. Costs microseconds per slow element. */
SL_EXTERN void sl_iter_keep_state(sl_iter *it);
/* Elements the run has handed out, those before the state it resumed from included. */
SL_EXTERN uint64_t sl_iter_position(const sl_iter *it);
/* Makes the next run of p epoch `epoch` (each run is the next epoch; a per-epoch order is a function of the seed and
 * the epoch, DistributedSampler's set_epoch convention). Not while a run of p is open. */
SL_EXTERN void sl_pipeline_set_epoch(sl_pipeline *p, uint64_t epoch);

/* ---- Builder: the same specs, from C ---- */
typedef struct sl_builder sl_builder;
/* A new builder for a pipeline named `name` with `seed`. NULL on allocation failure. */
SL_EXTERN sl_builder *sl_builder_new(const char *name, uint64_t seed);
/* Appends op `op` with knobs given as a JSON object text (NULL or "" for none), e.g.
 * sl_builder_op(b, "map", "{\"fn\": \"spin\", \"args\": {\"us\": 50}, \"parallelism\": 2}"). */
SL_EXTERN int sl_builder_op(sl_builder *b, const char *op, const char *knobs_json);
/* Typed shorthands. A count or size of SL_AUTOTUNE writes "autotune". */
SL_EXTERN int sl_builder_range(sl_builder *b, int64_t start, int64_t stop, int64_t step);
SL_EXTERN int sl_builder_map(sl_builder *b, const char *fn, const char *args_json, int parallelism);
SL_EXTERN int sl_builder_batch(sl_builder *b, int64_t size, bool drop_remainder);
SL_EXTERN int sl_builder_prefetch(sl_builder *b, int buffer);
/* Opens the nested source chain of the last op (an interleave); ops appended until sl_builder_end_source go
 * into it. */
SL_EXTERN int sl_builder_begin_source(sl_builder *b);
SL_EXTERN int sl_builder_end_source(sl_builder *b);
/* Builds the pipeline; the builder stays usable. */
SL_EXTERN int sl_builder_build(sl_pipeline **out, sl_builder *b);
SL_EXTERN void sl_builder_free(sl_builder *b);

/* ---- Per-op counters (always on; read them while a run goes on or after it) ---- */
typedef struct sl_op_stats {
  const char *op;       /* op kind ("map") */
  const char *path;     /* JSON path of the op in the spec ("ops[2]", "ops[1].source[0]") */
  const char *label;    /* the function name for map/filter, else the op kind */
  int parent;           /* index of the op that consumes this op's output, -1 for the root */
  int nested;           /* 1 when inside an interleave source chain */
  int64_t parallelism;  /* resolved parallelism (1 for synchronous ops) */
  int64_t buffer;       /* resolved output buffer (0 for none) */
  bool async;           /* runs its own worker threads */
  bool random;          /* its output depends on a random seed */
  bool serial;          /* runs a function flagged SL_FN_SERIAL (all of these together get one core) */
  uint64_t elements_out;  /* elements produced */
  uint64_t elements_in;   /* elements consumed from the input */
  uint64_t bytes_out;     /* payload bytes produced */
  double cpu_seconds;     /* CPU time in the op's own work, children excluded (estimated from sampled calls) */
  double wall_seconds;    /* wall time in the op's own work */
  double wait_seconds;    /* consumer time blocked waiting for this op's output (async ops) */
  uint64_t disk_bytes;    /* bytes read from files (readers) */
  uint64_t source_bytes;  /* `files` ops: total size of the files listed, one epoch's worth (0: unknown) */
  uint64_t skipped;       /* records skipped under on_corrupt/on_error "skip" */
  double buffer_occupancy; /* mean elements waiting in the output buffer, sampled at each take */
  uint64_t bytes_held;    /* bytes currently held (cache contents, buffered elements) */
  uint64_t bytes_held_peak;
  int64_t cardinality;    /* elements per epoch when known from the spec, -1 unknown, -2 infinite */
  double call_mean;       /* mean wall seconds of one unit of the op's work (a function call on a worker for
                           * parallel map, else one next() call, inputs included), from sampled calls */
  double call_sd;         /* standard deviation of the same (0 when unknown) */
  /* Added after 0.x's first fields (new fields go last, so that existing offsets stay): */
  uint64_t errors_skipped; /* the part of `skipped` that a map's "on_error": "skip" dropped (its function failed) */
  double runq_seconds;     /* the part of wall_seconds spent runnable, waiting for a core (the threads' run-queue
                            * delay over sampled calls); -1 when unknown (a kernel without schedstat, an old trace).
                            * wall - cpu - runq is time blocked (I/O, sleep, locks) */
  uint64_t filled; /* elements a map or filter after a shard with "in_step" handed out again in place of ones it
                    * dropped, so that every rank's count stays the same (docs/distributed.md) */
  /* A reader of remote files (docs/remote.md): ranged requests sent (retries included), of which retries, bytes
   * received, the requests' summed time to first byte and transfer time, and its read-ahead (bytes per request,
   * requests in flight per file). All 0 for a reader of local files. */
  uint64_t net_requests, net_retries, net_bytes;
  double net_ttfb_seconds, net_xfer_seconds;
  uint64_t net_block_bytes, net_in_flight;
  /* Of its bytes: those received while one request of a file was asked and not ended alone, and its transfer time
   * then (its first bytes aside); those received while two or more were, and the time they transferred (the union
   * of the intervals between their bytes). A link that gave each request less when more ran at once was full: the
   * planner reads its bandwidth from them. */
  uint64_t net_solo_bytes;
  double net_solo_seconds;
  uint64_t net_overlap_bytes;
  double net_overlap_seconds;
  /* Remote objects it opened, their sizes summed (one epoch's bytes are its files times their mean size), and how
   * many of them it read from its keep (the "keep" knob: objects read in full in an earlier epoch, in memory). */
  uint64_t net_objects, net_object_bytes, net_kept;
  /* CPU seconds its remote streams' I/O threads spent (receiving and copying the bytes), outside cpu_seconds. */
  double net_cpu_seconds;
} sl_op_stats;

/* Number of ops, nested source ops included (pre-order: an interleave is followed by its source ops). */
SL_EXTERN int sl_pipeline_op_count(const sl_pipeline *p);
/* Counters of op i, summed over every run since creation or the last reset. Safe while runs go on. */
SL_EXTERN int sl_pipeline_op_stats(sl_op_stats *out, const sl_pipeline *p, int i);
/* True when every cache op of `p` holds a complete first pass and every remote reader with a "keep" has begun a
 * later epoch with nothing left to read into it (true when it has neither): from then on the pipeline runs in its
 * steady state. Safe while runs go on. */
SL_EXTERN bool sl_pipeline_caches_complete(const sl_pipeline *p);
/* The element structure after op i (pre-order, as for sl_pipeline_op_stats), as the schemas of the ops and functions
 * before it describe it: each component's name, dtype and shape, e.g. "image uint8 [?, ?, 3], label int64 []"
 * ("?": a dim not known before running; "*": one that varies between elements; a trailing "...": components a
 * function registered at run time may add). *out is freed with sl_free(). SL_EINVAL for a bad index. */
SL_EXTERN int sl_pipeline_structure(char **out, const sl_pipeline *p, int i);
/* Why op i skipped elements (a map's "on_error", a reader's "on_corrupt": "skip"), as JSON text: an array of
 * {"reason", "count", "first", "last"}, one per distinct reason (the key that groups them: the error message with its
 * numbers written '#'; at most 8, later ones counted under the reason "other"), "first" and "last" the first and the
 * latest such message verbatim (op, element, file, shard and key or record where known). Over every run since creation; not zeroed by sl_pipeline_reset_stats. *out is freed with
 * sl_free(). Safe while runs go on. SL_EINVAL for a bad index. */
SL_EXTERN int sl_pipeline_op_skips(char **out, const sl_pipeline *p, int i);
/* Zeroes every op's counters. */
SL_EXTERN void sl_pipeline_reset_stats(sl_pipeline *p);

#ifdef __cplusplus
}
#endif
#endif
