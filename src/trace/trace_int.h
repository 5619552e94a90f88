/* trace/trace_int.h: the inside of an sl_trace, shared with src/plan (which reads traces to model them).
 * A trace owns copies of everything it holds: the spec, per-op counters with their strings, the machine. */
#ifndef SL_TRACE_INT_H
#define SL_TRACE_INT_H

#include <jansson.h>

#include "core/core_int.h"
#include "sluice/trace.h"

typedef struct sl__trace_op {
  sl_op_stats s;            /* path/label/op point at the strings below */
  char *path, *label, *kind;
  bool par_autotune, buf_autotune; /* the spec's knob says "autotune" */
  double call_wall_mean, call_wall_sd; /* seconds per sampled call (inclusive), from the spec's counters */
} sl__trace_op;

struct sl_trace {
  json_t *spec;             /* the traced spec (normalised) */
  char *origin;
  sl_machine machine;
  double seconds, process_cpu;
  double run_delay; /* runqueue wait per CPU second of this process's threads during the run (0: none/unknown) */
  /* Bytes the block devices delivered to this process during the run (read_bytes of /proc/self/io: page-cache hits
   * are not in it) and bytes its read calls returned (rchar: page cache, pipes, /proc files included); -1: unknown
   * (a version 1 trace, a kernel without task I/O accounting; the tuner sets its window's after
   * sl__trace_from_counters). */
  int64_t device_bytes, read_chars;
  uint64_t elements;
  bool ended;
  /* The consumer's CPU per output element outside the ops, when it was measured on another run than this trace's
   * (the planner's costs refreshed from a run of a plan, plan_optimize.c): the model takes it as it is instead of
   * process_cpu less the ops' CPU. Not serialised. */
  bool has_resid;
  double resid;
  int nops;
  sl__trace_op *ops;
};

/* Buffer depths the hand-off probe measures with, and the planner gives: a parallel map's smallest ring (its waiting
 * consumer is woken for runs of a quarter of it), and the depth that lets cheap elements cross a thread boundary
 * in full chunks (the engine's chunks are SL__HANDOFF_MAX = 16). */
#define SL__HANDOFF_RUN_BUFFER 16
#define SL__HANDOFF_CHEAP_BUFFER 32
/* The engine's hand-off cost on this machine now, in CPU seconds per element per thread boundary: for expensive
 * elements (handed over one at a time) and cheap ones (in chunks). Measured once per process (about 0.1 s) and
 * cached; thread-safe. Measured rather than assumed because it moves with the machine and its load. */
void sl__trace_handoff_costs(double *expensive, double *cheap);

/* The JSON object of the op at `path` ("ops[3]", "ops[1].source[0]") inside `spec`, or NULL. Borrowed. */
json_t *sl__spec_op_at(json_t *spec, const char *path);
/* Knob names the planner may change: their values are not part of a pipeline's identity. */
bool sl__is_knob(const char *op_kind, const char *key);
/* One line per op of `spec` (planner-inserted prefetch and cache ops left out, knobs removed), for comparing
 * the pipelines two specs describe. Returns a JSON array (new reference) or NULL on OOM. */
json_t *sl__spec_identity(json_t *spec);

/* What the machine and this process did up to now, to tell the load over an interval: the busy and total jiffies
 * of all CPUs (/proc/stat) and the CPU time and runqueue wait of this process's threads (schedstat, ns). */
typedef struct sl__load_snap {
  bool jif, sch; /* which of the two could be read */
  double jb, jt, sc, sd;
} sl__load_snap;
void sl__load_snap_take(sl__load_snap *s);
/* Busy and total jiffies from /proc/stat's first 8 "cpu" fields; niced processes' time (field 2) counts as busy
 * only when this process is niced too (`self_niced`): a nice > 0 job yields its core to a nice-0 pipeline. */
void sl__jiffies_busy(const unsigned long long v[8], bool self_niced, double *busy, double *total);
/* Over the interval from `a` to `b` (`secs` wall seconds in which this process spent `process_cpu` CPU seconds, on
 * `cpus` online CPUs): *other_load, the cores other processes kept busy (-1: unknown), and *run_delay, how long
 * this process's threads waited for a CPU per CPU second they got (0: unknown; threads that ended meanwhile are
 * missing, so a lower bound). */
/* This process's I/O counters now (/proc/self/io): bytes read from block devices and bytes read() returned; false
 * when they cannot be read. */
bool sl__proc_io(int64_t *read_bytes, int64_t *rchar);
/* The same for the calling thread (/proc/thread-self/io). */
bool sl__thread_io(int64_t *read_bytes, int64_t *rchar);
void sl__load_between(double *other_load, double *run_delay, const sl__load_snap *a, const sl__load_snap *b,
                      double secs, double process_cpu, int cpus);

/* A trace made from live counters (an online tuner's window): the counters `now` minus `base` (NULL: none) of
 * nops ops of a pipeline with spec `spec` (copied), over `seconds` of wall time in which the process spent
 * `process_cpu` CPU seconds, `m` being the machine (its other_load: during the window) and `run_delay` the window's
 * runqueue wait per CPU second. SL_ENOMEM on failure. */
int sl__trace_from_counters(sl_trace **out, json_t *spec, const char *origin, const sl_machine *m,
                            const sl_op_stats *now, const sl_op_stats *base, int nops, double seconds,
                            double process_cpu, double run_delay);

#endif
