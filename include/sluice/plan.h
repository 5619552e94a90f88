/* sluice/plan.h: the planner (the Plumber model: rates from a trace, an LP bound under cores, disk bandwidth and
 * memory, cache points, prefetch and buffer depths, integer parallelism), its report (`sluice analyze`), the
 * optimizer (`sluice optimize`, sl_pipeline_optimize) and the tf.data-AUTOTUNE-equivalent baseline tuner.
 * See docs/planner.md. Thread rules: an sl_plan is immutable once solved and may be read from any thread. */
#ifndef SLUICE_PLAN_H
#define SLUICE_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "pipeline.h"
#include "trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The default memory budget: this fraction of the memory available when the trace was taken. */
#define SL_PLAN_MEMORY_FRACTION 0.5

/* Which knobs the planner may change. */
typedef enum sl_plan_knobs {
  SL_PLAN_KNOBS_DEFAULT = 0, /* every knob for sl_plan_solve; only "autotune" knobs for sl_optimize */
  SL_PLAN_KNOBS_ALL = 1,     /* every knob */
  SL_PLAN_KNOBS_AUTOTUNE = 2 /* only knobs the spec sets to "autotune"; other knobs stay as they are */
} sl_plan_knobs;

/* handoff value for "no hand-off cost" (0 is the default: measured). */
#define SL_PLAN_HANDOFF_NONE (-1.0)

/* The planner's budget and choices. Every field left 0 takes its default. Embedded in sl_optimize_opts and
 * sl_report_trace_opts, where version may stay 0 (the enclosing struct's version covers it). */
typedef struct sl_plan_opts {
  int version;            /* SL_PLAN_OPTS_VERSION */
  double cores;           /* cores for the pipeline; 0: the traced machine's usable cores */
  double consumer_cores;  /* cores the consumer of the pipeline needs, taken off `cores`; 0: none */
  int64_t memory;         /* memory budget in bytes; 0: SL_PLAN_MEMORY_FRACTION x available memory */
  double disk_bandwidth;  /* bytes/s; 0: the traced machine's measured bandwidth (none: not constrained) */
  sl_plan_knobs knobs;    /* which knobs to plan; 0: SL_PLAN_KNOBS_DEFAULT */
  bool no_cache;          /* may not insert a cache op; false (default): may */
  bool no_prefetch;       /* may not insert a prefetch op at the root; false (default): may */
  double handoff;         /* CPU seconds per element that handing elements between two threads costs, charged to
                           * each thread boundary the plan adds (predictions only, not the LP bound); 0 (default):
                           * measured once per process; SL_PLAN_HANDOFF_NONE (any value < 0): none */
} sl_plan_opts;
#define SL_PLAN_OPTS_VERSION 1
#define SL_PLAN_OPTS_INIT {SL_PLAN_OPTS_VERSION}

typedef struct sl_plan sl_plan;

/* Models trace `t` and solves for the best configuration under `opts`. Errors: SL_EINVAL naming the problem for
 * an infeasible budget (no cores, memory below what the pipeline holds at its smallest buffers) or a trace with no
 * output elements. */
SL_EXTERN int sl_plan_solve(sl_plan **out, const sl_trace *t, const sl_plan_opts *opts);
SL_EXTERN void sl_plan_free(sl_plan *pl);

/* The throughput bound of the LP (output elements/s) and the model's throughput for the chosen integer plan. */
SL_EXTERN double sl_plan_bound(const sl_plan *pl);
SL_EXTERN double sl_plan_predicted(const sl_plan *pl);
/* The model's throughput for the chosen plan if only `cores` cores were free (e.g. the machine's cores minus what
 * other processes use): the same integer knobs, evaluated on fewer cores. NaN when it could not be evaluated (out
 * of memory: sl_error_last() says so), never a made-up 0. */
SL_EXTERN double sl_plan_predict_on(const sl_plan *pl, double cores);
/* CPU seconds the plan's model spends per output element (all ops, hand-offs included): with the process CPU per
 * element of a measured run, a check of the model that does not depend on what else the machine runs. */
SL_EXTERN double sl_plan_cpu_per_element(const sl_plan *pl);
/* Index (in the trace's op order) of the bottleneck op, and the chosen cache point (-1: none). */
SL_EXTERN int sl_plan_bottleneck(const sl_plan *pl);
SL_EXTERN int sl_plan_cache_point(const sl_plan *pl);
/* The most output elements/s op i (trace order) can make at its traced parallelism: min(parallelism, cores) over
 * its CPU (or, for an op that waits, wall) seconds per output element; INFINITY for an op that costs nothing
 * measurable. The bottleneck is the op with the smallest. */
SL_EXTERN double sl_plan_op_rate(const sl_plan *pl, int i);
/* What binds the bound: "cpu", "sequential", "disk", "wait" (I/O waits in fixed threads) or "none". */
SL_EXTERN const char *sl_plan_limit(const sl_plan *pl);
/* The chosen parallelism / buffer of op i (trace order); 0 when the op has no such knob. */
SL_EXTERN int64_t sl_plan_parallelism(const sl_plan *pl, int i);
SL_EXTERN int64_t sl_plan_buffer(const sl_plan *pl, int i);
/* Bytes the planned pipeline may hold at most (buffers, batches, shuffle buffers, cache). */
SL_EXTERN int64_t sl_plan_memory(const sl_plan *pl);
/* The planned spec: the traced spec with every knob set and any cache/prefetch inserted. Free with sl_free(). */
SL_EXTERN int sl_plan_spec_json(char **out, const sl_plan *pl);
/* The analyzer's report: a table per op, the bottleneck in a sentence, the bound, what-ifs. Text for a terminal
 * or (json) a JSON document. Free with sl_free(). */
SL_EXTERN int sl_plan_report(char **out, const sl_plan *pl, bool json);

/* ---- optimize: trace, solve, rewrite, run the result, compare ---- */
/* Output elements a trace must have seen for sl_optimize to plan from it (fewer: it traces longer, repeating a
 * finite input, or refuses). */
#define SL_PLAN_MIN_ELEMENTS 32
/* sl_optimize keeps the input's configuration when the plan's median throughput is below this fraction of the
 * input's, measured alternately. */
#define SL_PLAN_KEEP_RATIO 0.97
typedef struct sl_optimize_result {
  double baseline;    /* measured throughput of the input pipeline (elements/s): while it was traced, or (checked) the
                       * median of the alternating runs */
  double predicted;   /* the model's throughput for the final plan */
  double measured;    /* measured throughput of the tuned pipeline (0 when measure_seconds is 0) */
  double bound;       /* the LP bound, or (bound_from_run) the bound at the least CPU per element a measured run
                       * of the final plan spent when that is lower than the model's: cores over it (limit "cpu"),
                       * the LP's times model / run (limits "sequential" and "serial", one thread's work) */
  int rounds;         /* solves made (1 + re-traces, at most 3) */
  double other_load;  /* most cores other processes kept busy during any of the runs (-1 unknown) */
  double model_cpu;   /* the final plan's CPU seconds per element (sl_plan_cpu_per_element) */
  double measured_cpu; /* process CPU seconds per element in the measured runs of the final plan (checked: the
                        * median of its alternating runs; 0: not run) */
  double measure_other_load; /* cores other processes kept busy during the measured run of the final plan */
  double predicted_free; /* the model's throughput for the final plan on the cores those processes left free */
  bool kept_input;    /* the plan measured below SL_PLAN_KEEP_RATIO x the input (medians of alternating runs): the
                       * final plan is the input's own configuration ("autotune" knobs at their resolved values) */
  bool checked;       /* baseline and measured are the medians of alternating runs of the input and the final plan */
  uint64_t trace_elements; /* output elements the trace the plan was built from saw */
  bool repeated_input; /* the input may end before a trace or a run does: it was traced and measured under a root
                        * repeat (the written spec does not repeat) */
  bool bound_from_run; /* bound is at the least CPU per element a measured run of the final plan spent, which
                        * was below the LP's (sl_plan_bound does not hold for that run) */
  /* Operator fusion (decode_jpeg + crop/resize into one op): the input's process CPU per element traced fused and
   * unfused (0, 0: nothing to fuse, or a given trace); fused: the plan is of the fused pipeline, which is kept only
   * when it spent no more CPU per element. */
  double fused_cpu, unfused_cpu;
  bool fused;
  /* The share of the free cores the prediction counts on when the plan is CPU-bound: 1, or what a measured run of
   * a plan expected to keep every free core busy kept busy when it fell short while spending within 10% of the
   * model's CPU per element (its threads blocked and woke, leaving the rest idle). The bound keeps every core. */
  double core_share;
  /* checked: the input's process CPU per element in the trace the plan was built from and in the alternating runs
   * (median). The same work: their ratio is how much slower (> 1) or faster the machine ran the final runs than the
   * trace, which the prediction, made at the trace's speed, cannot know. 0: not measured. */
  double input_cpu_traced, input_cpu_checked;
  /* A trace taken beside other load (at least SL_PLAN_LOAD_CORES busy elsewhere): `predicted` counts on the cores
   * the others left (predicted_cores of them), while the plan's knobs are for every core, so that it is ready when
   * the load goes; predicted_all is the prediction on every core. Without such load the three agree with the
   * machine's cores. cores_from_run: the cores left are those the others left the final plan in its own measured
   * run (a plan for every core contends for cores the input left them, and they yield some), not the trace's;
   * trace_cores: the cores they left during the input's trace. */
  double predicted_all, predicted_cores, trace_cores;
  bool cores_from_run;
  /* Fusion applied (fused true): `baseline` is the input spec as written (unfused, its own knobs), fused_baseline
   * the input fused with its own knobs, each measured beside the plan (checked: medians of runs alternating among
   * the three; not checked: their traces). The speed-up over the spec as written is measured / baseline, of which
   * fused_baseline / baseline came from fusion and measured / fused_baseline from the knobs. 0 without fusion. */
  double fused_baseline;
  /* checked: the lowest and highest throughput of the final plan's runs whose median is `measured`, and the rounds
   * each side ran (3, two more at a time while some side's runs spread more than 10%, at most 5): how far this
   * machine moved one configuration from run to run, which bounds how close any prediction can come. 0: not
   * checked. */
  double measured_lo, measured_hi;
  int check_rounds;
} sl_optimize_result;
/* Cores other processes must keep busy during a trace for the prediction to count on the cores they leave. */
#define SL_PLAN_LOAD_CORES 0.25

/* Options of sl_optimize / sl_pipeline_optimize. Every field left 0 takes its default. */
typedef struct sl_optimize_opts {
  int version;             /* SL_OPTIMIZE_OPTS_VERSION */
  sl_plan_opts plan;       /* the planner's options (its version may stay 0); plan.knobs 0: only "autotune" knobs */
  double trace_seconds;    /* how long to trace the input pipeline; 0: 2 s */
  double measure_seconds;  /* how long to run the tuned pipeline to measure it; 0 (default): do not measure */
  int max_retraces;        /* re-trace and re-solve while measured is off the prediction by more than 10% (either
                            * way), at most this often; 0: 2, < 0: never */
  const sl_machine *machine; /* machine description to use instead of probing; NULL (default): probe */
  sl_optimize_result *result; /* filled when not NULL */
  const sl_trace *trace;   /* a trace of the pipeline to start from instead of tracing it (checked: SL_EINVAL when
                            * it is of another pipeline); NULL (default): trace */
  /* Added after the first fields (new fields go last): */
  char **report; /* sl_pipeline_optimize: when not NULL, *report gets the final plan's analyzer report as JSON
                  * (sl_plan_report: the bottleneck sentence, the bound, the what-ifs), freed with sl_free() */
  /* When not NULL, called with one line (no newline) as each phase starts or ends (traces, solves, each measured
   * run with its throughput, the final check's rounds), on the calling thread; NULL (default): silent. */
  void (*progress)(const char *line, void *ctx);
  void *progress_ctx;
} sl_optimize_opts;
#define SL_OPTIMIZE_OPTS_VERSION 1
#define SL_OPTIMIZE_OPTS_INIT {SL_OPTIMIZE_OPTS_VERSION}

/* Traces `p`, plans its knobs and rebuilds `p` in place from the planned spec (sl_pipeline_to_json then shows
 * every knob set). By default (opts->plan.knobs 0) only knobs set to "autotune" change. No
 * iterator of `p` may be live. On error `p` is unchanged. opts may be NULL for the defaults. */
SL_EXTERN int sl_pipeline_optimize(sl_pipeline *p, const sl_optimize_opts *opts);
/* The same without changing `p`: *out gets the final plan (its spec via sl_plan_spec_json). */
SL_EXTERN int sl_optimize(sl_plan **out, sl_pipeline *p, const sl_optimize_opts *opts);

/* ---- the baseline: a tf.data AUTOTUNE equivalent ---- */
typedef struct sl_autotuner sl_autotuner;
/* Options of the baseline tuner. Every field left 0 takes its default. */
typedef struct sl_autotune_opts {
  int version;           /* SL_AUTOTUNE_OPTS_VERSION */
  double cpu_budget;     /* cores; 0: schedulable CPUs */
  int64_t ram_budget;    /* bytes; 0: half of available memory */
  double first_period;   /* seconds before the first re-optimisation, doubling up to max_period; 0: 0.01 */
  double max_period;     /* 0: 60 */
} sl_autotune_opts;
#define SL_AUTOTUNE_OPTS_VERSION 1
#define SL_AUTOTUNE_OPTS_INIT {SL_AUTOTUNE_OPTS_VERSION}

/* Starts the online tuner on pipeline `p`: a thread that re-optimises the "autotune" parallelism knobs (map,
 * interleave) and prefetch buffers of `p` with HILL_CLIMB over tf.data's model, from the counters of the runs of
 * `p` going on, and sets them in the running pipeline. Stop it with sl_autotune_stop before freeing `p`. The
 * knobs in force are visible through sl_pipeline_op_stats (parallelism, buffer). Thread rules: start and stop
 * from the thread that owns `p`; sl_autotune_rounds is safe from any thread. */
SL_EXTERN int sl_autotune_start(sl_autotuner **out, sl_pipeline *p, const sl_autotune_opts *opts);
/* Number of re-optimisations made so far. */
SL_EXTERN int sl_autotune_rounds(const sl_autotuner *a);
/* Stops and joins the tuner thread. Accepts NULL. */
SL_EXTERN void sl_autotune_stop(sl_autotuner *a);
/* One HILL_CLIMB solve on counters (exposed for tests): given per-op counters of `p` (as sl_pipeline_op_stats
 * gives), writes the chosen parallelism of every op into par[] and buffer into buf[] (nops entries each; ops
 * without autotune knobs keep their values). */
SL_EXTERN int sl_autotune_solve(int64_t *par, int64_t *buf, const sl_pipeline *p, const sl_op_stats *stats,
                      const sl_autotune_opts *opts);

/* ---- the online tuner: the planner's model and LP, re-solved while the pipeline runs (`--tuner sluice`) ---- */
typedef struct sl_tuner sl_tuner;
/* Options of sl_pipeline_tune. Every field left 0 takes its default. */
typedef struct sl_tune_opts {
  int version;          /* SL_TUNE_OPTS_VERSION */
  sl_plan_opts plan;    /* the planner's budget (its version may stay 0); knobs: always only "autotune" knobs */
  double interval;      /* seconds between looks at the counters; 0: 1 (shorter windows hold too few timing samples
                         * of cheap ops). The first window ends sooner, once its counts can carry a solve (8 root
                         * elements, 16 timed elements of each op doing 5% of its CPU: plan_tune.c, docs/planner.md).
                         * A window with fewer than SL_PLAN_MIN_ELEMENTS output
                         * elements grows into the next (after two intervals a quarter of that is
                         * enough; fewer for windows only waited out or compared) */
  double drift;         /* re-solve when an op's CPU per output element moved since the last solve by more than
                         * this fraction of the pipeline's total CPU per element, in two windows in a row that agree
                         * with each other within it; 0: 0.2 */
} sl_tune_opts;
#define SL_TUNE_OPTS_VERSION 1
#define SL_TUNE_OPTS_INIT {SL_TUNE_OPTS_VERSION}

/* Starts the online tuner on `p`: a thread that every interval models the window of `p`'s counters (the runs of
 * `p` going on) and the machine's load over it, solves the planner's LP and integer search when the costs drifted
 * (always the first time; a drift is solved on in the second window that shows it, which ran after the change), and
 * sets the "autotune" parallelism (map, interleave) and prefetch depths of the running pipeline, logging every
 * change with its reason (the drift, the bottleneck, the predicted gain). It inserts no prefetch; a cache it inserts
 * once, where the plan puts one right before a `repeat` and it fits the memory budget: the repeat keeps its input's
 * next epoch and replays it (knob "cache" in the log, from 0 to the bytes allowed: twice the model's estimate).
 * Start it before the pipeline's first iterator where you can: its one-off probes (the machine, the hand-off
 * costs, about 0.1 s) measure process CPU, which a running pipeline's threads would add to.
 * Stop it with sl_tuner_stop before freeing `p`. Thread rules: start and stop from the thread that owns `p`;
 * sl_tuner_solves, sl_tuner_changes and sl_tuner_log are safe from any thread while it runs. */
SL_EXTERN int sl_pipeline_tune(sl_tuner **out, sl_pipeline *p, const sl_tune_opts *opts);
/* The rewrite the online tuner's caller applies before it builds the iterator, since a live pipeline cannot take a
 * new op: every decode_jpeg followed by random_resized_crop, center_crop or resize fused into decode_and_crop_jpeg,
 * which decodes only the crop's window at the smallest DCT scale that keeps the output size, with random_flip and
 * normalize after it folded into its output pass, as `sluice optimize` fuses them (same seeds; "fuse": false keeps
 * an op apart). A resize decodes the whole image either way; fused, the decoder's workers resize too, for no more CPU
 * per image (docs/planner.md has the measurements). *out is a new pipeline (sl_pipeline_free), NULL when
 * nothing was fused; *note (may be NULL) says what was ("ops[5] decode_jpeg + ops[6] random_resized_crop, ...";
 * sl_free), NULL when nothing was. */
SL_EXTERN int sl_pipeline_fuse(sl_pipeline **out, const sl_pipeline *p, char **note);
/* Solves made so far (counted once that solve's knobs are set), and knob changes made so far. */
SL_EXTERN int sl_tuner_solves(const sl_tuner *t);
SL_EXTERN int sl_tuner_changes(const sl_tuner *t);
/* The changes so far, one line each ("  1.52s ops[2] (map spin) parallelism 1 -> 2: first solve; bottleneck ...")
 * or (json) a JSON array of {t, op, kind, fn, knob, from, to, reason}. Free with sl_free(). */
SL_EXTERN int sl_tuner_log(char **out, const sl_tuner *t, bool json);
/* Stops and joins the tuner thread and frees it. Accepts NULL. */
SL_EXTERN void sl_tuner_stop(sl_tuner *t);

#ifdef __cplusplus
}
#endif
#endif
