/* plan/plan_int.h: the planner's model of a traced pipeline, shared by the model (plan_model.c), the LP
 * (plan_lp.c), the integer search (plan_search.c), the solver (plan_solve.c), the report (plan_report.c) and the
 * optimizer (plan_optimize.c). Op indices are the trace's (pre-order). */
#ifndef SL_PLAN_INT_H
#define SL_PLAN_INT_H

#include <jansson.h>

#include "ops/pipeline_int.h"
#include "sluice/plan.h"
#include "trace/trace_int.h"

/* A machine whose cores were this busy (this process and others) was CPU-saturated. */
#define SL__PLAN_SATURATED 0.85
/* Below this share of the readers' bytes from the block devices, the reads were page-cache reads: no disk work. */
#define SL__PLAN_CACHED_READS 0.05
/* The LP's largest throughput: an op with no measurable cost does not make the LP unbounded. */
#define SL__PLAN_X_MAX 1e12
/* Bytes an element costs beyond its payload (element slots, buffer headers, allocator overhead). */
#define SL__PLAN_ELEM_OVERHEAD 128.0
/* Elements that take less than this per element are handed between threads in chunks: the engine's threshold. */
#define SL__PLAN_CHEAP_ELEMENT_S (SL__HANDOFF_CHEAP_NS * 1e-9)

/* Runs each of the plan and the input makes in `sluice optimize`'s final comparison. */
#define SL__PLAN_CHECK_ROUNDS 3
/* ... and up to this many when its first rounds of one side spread more than SL__PLAN_CHECK_SPREAD (the highest
 * over the lowest, minus 1): on this project's 2-vCPU VM one plan's CPU per element moved 1.34x between 2 s runs
 * on a quiet machine (docs/planner.md, "machine"), so a median of 3 can sit on a burst. */
#define SL__PLAN_CHECK_MAX_ROUNDS 5
#define SL__PLAN_CHECK_SPREAD 0.10
/* Whether the rounds so far (throughputs r[s][0..k) of n sides) call for more: some side's runs spread more than
 * SL__PLAN_CHECK_SPREAD. */
bool sl__plan_check_spread(const double (*r)[SL__PLAN_CHECK_MAX_ROUNDS], int n, int k);
/* The process CPU seconds per output element a trace spent; 0 when it saw none. */
double sl__plan_trace_cpu(const sl_trace *t);
/* The median of v[0..n) (sorted in place); 0 for n = 0. */
double sl__plan_median(double *v, int n);
/* Two configurations measured within this fraction of each other are a tie on this machine (medians of a few
 * short runs move that much), and within it one that spends at most SL__PLAN_CHEAPER of the other's CPU per
 * element is preferred: it leaves cores to the consumer and to other load. */
#define SL__PLAN_TIE 0.03
#define SL__PLAN_CHEAPER 0.8
/* Whether configuration b (median throughput mb, CPU per element cb) is to be preferred to a (ma, ca): the higher
 * throughput, except within SL__PLAN_TIE where the clearly cheaper one wins (a CPU figure <= 0 is unknown). */
bool sl__plan_prefer(double ma, double ca, double mb, double cb);
/* The bound at a measured run's CPU per element `run_cpu` (s) when that is below the model's `model_cpu`: cores `C`
 * over it for limit "cpu" (when higher than `bound`), `bound` times model / run for "sequential" and "serial" (one
 * thread's work); `bound` unchanged otherwise (disk, waits, no run). */
double sl__plan_bound_at_run(const char *limit, double C, double bound, double model_cpu, double run_cpu);
/* The share of the `avail` cores a run of a CPU-bound plan kept busy (`used` cores: its process CPU over its wall
 * time), for sl__plan_set_core_share: within [0.5, 1] (a run that used under half its cores was held back by
 * something other than wake-ups; the model is not bent that far), and 1 from 99% busy up. */
double sl__plan_learn_share(double used, double avail);
/* The cores of `C` a prediction counts on when the trace saw `trace_other` cores busy in other processes (at least
 * SL_PLAN_LOAD_CORES; else C): C less what they kept busy beside the final plan's own measured run (`run_other`,
 * -1: not measured; *from_run set), or less what they kept busy during the trace when the plan was not run. */
double sl__plan_load_cores(double C, double trace_other, double run_other, bool *from_run);
/* The core share (sl__plan_learn_share) a run of plan P that measured `measured` elements/s at `cpu` process CPU
 * seconds per element with `busy` cores busy, `other` cores taken by other processes (-1 unknown), teaches: 1 unless
 * P's LP is CPU-limited, its prediction counts on every free core, and the run fell short of it while spending
 * within 10% of the model's CPU per element (plan_optimize.c says why); the share is of the cores `other` left. */
double sl__plan_run_share(const sl_plan *P, double measured, double cpu, double busy, double other);

enum { SL__WAIT_NONE, SL__WAIT_CORE, SL__WAIT_IO };

/* The buffer the plan gives op i: its planned buffer, except a map's, which exists only under workers. */
int64_t sl__plan_buffer_of(const sl_plan *P, int i);

typedef struct sl__pm_op {
  sl__model_kind kind;           /* what its op's schema declares it is to the planner */
  /* Its tunable knobs, from its op's table (SL__ARGF_TUNABLE): a "parallelism" runs its work on that many worker
   * threads, a "buffer" holds elements handed between threads, a "cycle_length" keeps that many nested chains. */
  bool has_par, has_buf, has_cyc;
  const char *path, *label, *op; /* owned by the plan (strs) */
  int parent, input, source;     /* -1 when none */
  bool nested;
  bool random;                   /* this op draws random numbers */
  bool serial;                   /* its function holds a process-wide lock (SL_FN_SERIAL): one core for all */
  bool par_tunable, buf_tunable, cyc_tunable;
  int64_t par0, buf0, cyc0;      /* as traced */
  bool async0;                   /* ran its own threads in the trace (its costs include hand-offs) */
  int64_t batch_size, shuffle_buf;
  double n;       /* elements produced in the trace */
  double V;       /* visit ratio n / N */
  double d;       /* CPU seconds per element */
  double c;       /* CPU seconds per output element (d x V) */
  double w;       /* own wall seconds per output element */
  double tt;      /* thread-seconds per output element: c, or the wall time of an op that mostly waits (I/O) */
  double busy_wall; /* own wall seconds per output element, blocked waits on its input aside */
  double stretch;   /* how far waiting for a core stretches CPU time into wall time: 1 + the trace's runqueue delay
                     * per CPU second, or the machine's demand over its cores when it was CPU-saturated */
  double runq;      /* seconds per output element runnable but waiting for a core (measured); -1: not measured */
  double blocked;   /* seconds per output element blocked (I/O, sleep, locks): busy_wall - c - runq, when measured */
  int waits;        /* SL__WAIT_NONE, SL__WAIT_CORE (runnable, but the cores were busy), SL__WAIT_IO (I/O, sleeps) */
  double bytes;   /* mean bytes per element produced */
  double b_disk;  /* disk bytes per output element */
  double cv;      /* coefficient of variation of per-call time */
  double elem_cost; /* CPU seconds to make one of its elements (an interleave: its source chain's), which decides
                     * whether a hand-off after it goes in chunks */
  int64_t card;   /* elements per epoch: >= 0, -1 unknown, -2 infinite */
  double disk;    /* disk bytes it read in the trace */
  double src_bytes; /* a `files` op: bytes of one epoch's files (0: unknown) */
} sl__pm_op;

/* One cache candidate and the verdict on it. */
typedef struct sl__pm_cache {
  int at;           /* op index: the cache would consume this op's output */
  bool legal;
  bool estimated;   /* the size is scaled from the part of the dataset the trace read */
  double bytes;     /* estimated size */
  double bound;     /* LP bound with it (legal ones) */
  char why[160];    /* reason when refused */
} sl__pm_cache;

struct sl_plan {
  sl_plan_opts opts;
  json_t *spec;         /* the traced spec (owned copy) */
  int nops;
  sl__pm_op *ops;
  char **strs;          /* 3 per op */
  int root;
  double N, T;          /* output elements and seconds of the trace */
  double traced_rate;
  double C, M, B;       /* cores, memory budget, disk bandwidth (0: none) */
  double handoff;       /* CPU seconds a new thread boundary costs per element handed over one at a time */
  double handoff_cheap; /* the same for cheap elements, handed over in chunks (see measure_handoff) */
  double resid;         /* the consumer's CPU per output element outside the ops (its loop, freeing elements) */
  bool seq_trace;       /* built on the trace of the input's sequential variant (sl_optimize) */
  double hscale;        /* multiplies both: 1, or learned from a measured run (sl__plan_solve) */
  double core_share;    /* share of the free cores a CPU-bound run keeps busy: 1, or learned from measured runs
                         * (sl__plan_set_core_share): threads that block and wake leave a core idle while another
                         * waits its turn on the other (docs/planner.md: measured). Predictions only. */
  sl_machine machine;
  /* results */
  double bound, bound_nocache, predicted;
  const char *limit;
  int bottleneck;
  int cache_at;
  double cache_bytes;
  bool add_prefetch;
  int64_t prefetch_buf; /* depth of the inserted root prefetch */
  int64_t *par, *buf, *cyc;
  double mem;
  sl__pm_cache *cands;
  int ncands;
  double bound_plus_core, bound_more_mem;
  int more_mem_cache_at;
  double theta_total;   /* cores the plan keeps busy (model) */
  double busy_cores;    /* cores busy during the trace: this process's CPU per second plus other processes' load */
  bool ended;           /* the traced stream ended (a finite input: a longer trace needs a repeat) */
  bool saturated;       /* busy_cores >= SL__PLAN_SATURATED x the machine's cores: waits were for cores */
  /* The share of the bytes the readers read that the block devices delivered during the trace (its
   * device_read_bytes over the ops' disk_bytes, at most 1): the rest came from the page cache, which is CPU and
   * memory bandwidth, not disk. -1: unknown (a version 1 trace): every byte read counts as disk. */
  double dev_share;
  double read_bytes; /* the bytes the readers read in the trace (the ops' disk_bytes) */
  int counts;        /* sl__trace_counts of the trace: SL__COUNT_OUTPUT, _HEAVY or _SHORT */
  int dominant;      /* the op with an unambiguous share of the CPU (sl__trace_counts), or -1 */
  double heavy_min;  /* the fewest elements an op with SL__COUNT_HEAVY_SHARE of the CPU made */
  struct sl__pm_net *net; /* the readers of remote files and their network model (plan_net.c), nnet of them */
  int nnet;
  double mem_floor;  /* bytes the pipeline holds at its least (parallelism 1, smallest buffers), read-ahead aside */
  const char *link_source; /* where the link's bandwidth comes from: "user" (SLUICE_LINK_BANDWIDTH), "measured"
                            * (the trace saw it saturate, plan_net.c) or "unknown" (infinite) */
};

/* A reader of remote files as the network model sees it (plan_net.c): from the trace's counters, the time to first
 * byte, the bandwidth of one stream while it transfers, bytes per request, requests in flight per file and files
 * read at once; the rate min(in_flight x block / (latency + block / stream_bw), link) per file; what the plan sets. */
typedef struct sl__pm_net {
  int op;              /* the reader */
  double latency;      /* seconds to first byte, mean over its requests */
  double stream_bw;    /* bytes/s of one request while it transfers (INFINITY: too fast to time) */
  double block;        /* bytes per request */
  double link;         /* the link's bytes/s (SLUICE_LINK_BANDWIDTH, or measured saturated; INFINITY: unknown) */
  double bytes_per_elem; /* network bytes per output element */
  int64_t in_flight0, in_flight; /* per file: as traced, as planned */
  int64_t q_cap;       /* the most requests in flight per file the plan may use: the caps and the memory left */
  int64_t streams;     /* files read at once (the enclosing interleave's cycle_length, planned) */
  double rate0, rate;  /* bytes/s the model gives as traced and as planned */
  double bound;        /* output elements/s the network carries as planned */
  /* One epoch's objects: the files its `files` op lists times their mean size (the trace's objects), 0 unknown;
   * whether a later epoch reads them again (a repeat after the `files` op); and the bytes the plan keeps in memory
   * for those epochs (the reader's "keep" knob; 0: none): a reader that keeps its epoch is off the link after the
   * first, which the LP, a steady-state model, leaves out as it does the ops above a cache. */
  double epoch_bytes, epoch_objects;
  bool reread;
  double keep, keep0;  /* keep0: the traced spec's own "keep", in force when it holds the epoch */
  double cpu;          /* CPU seconds per output element of its I/O threads (receiving, copying) */
} sl__pm_net;
/* Fills P's network model from the trace (in sl__plan_model): a remote reader's time blocked on the network is
 * priced here, not by the LP as a waiter. */
int sl__plan_net_model(sl_plan *P, const sl_trace *t);
/* After the plan is solved: each remote reader's rates as traced and as planned for the report, and the reader
 * that limits when the LP's limit is "network". */
int sl__plan_network(sl_plan *P);
/* Decides which remote readers keep their objects in memory for later epochs (after sl__plan_net_model, before
 * the LP): each whose epoch is known, read again, and fits in `room` bytes with a 5% margin, when the LP's bound
 * with the keeps beats the bound without by 2% or more. Returns the bytes kept. */
double sl__plan_net_keep(sl_plan *P, double room);
/* The bytes the readers' keeps hold. */
double sl__plan_net_kept(const sl_plan *P);
/* The rate (bytes/s) of one file with k requests in flight. */
double sl__plan_net_rate(const sl__pm_net *n, double k);
/* Whether reader x feeds the plan at cache point cache_at (a reader upstream of the cache reads only in the first
 * epoch, which the LP does not price) and the model can price it (bytes per element, a finite request rate). */
bool sl__plan_net_active(const sl_plan *P, const sl__pm_net *x, int cache_at);
/* Bytes per second one request in flight carries: B / (L + B / b) (INFINITY: too fast to time). */
double sl__plan_net_per_request(const sl__pm_net *x);
/* Requests in flight per file the caps allow reader x: 64, and 256 MiB of read-ahead over its files. */
double sl__plan_net_qmax(const sl__pm_net *x);
/* Bytes the read-ahead may hold in a plan with a cache of cache_bytes: the budget less the pipeline's floor and
 * the cache, and at least one request per file of each reader; INFINITY when the budget is unconstrained. */
double sl__plan_net_room(const sl_plan *P, double cache_bytes);
/* Bytes of read-ahead the readers hold at their planned in_flight, with the interleave cycles cyc[]. */
double sl__plan_net_memory(const sl_plan *P, const int64_t *cyc);
/* Sets each reader's files at once (the planned cycles) and q_cap from the caps and the memory room (the LP's
 * bounds, before it is solved for a plan with a cache of cache_bytes). */
void sl__plan_net_caps(sl_plan *P, double cache_bytes);
/* Sets each reader's requests in flight: the least that carries the predicted rate with a tenth to spare, at most
 * q_cap (after the parallelism is chosen; sl__plan_fit_memory may take some back). */
void sl__plan_net_size(sl_plan *P);
/* The throughput the network carries at each reader's q_cap, and the link (INFINITY when nothing limits). */
double sl__plan_net_bound(const sl_plan *P, int cache_at);

/* The model's units: the threads the work runs on (a sequential thread, or a worker pool), with the CPU and
 * thread time per output element of the work in each. */
typedef struct sl__pm_units {
  int n;
  double *cap;   /* threads (tunable pools: 0 = decided by the LP) */
  double *cost;  /* CPU seconds per output element of the work in it */
  double *tcost; /* thread-seconds per output element (>= cost: waits hold a thread) */
  int *owner;    /* the tunable op whose pool it is, else -1 */
  double b;      /* disk bytes per output element */
  double total;  /* CPU seconds per output element, all ops */
  double serial; /* CPU seconds per output element of SL_FN_SERIAL functions: together at most one core */
} sl__pm_units;

/* Copies `in` (NULL: the defaults) into out with every default applied: knobs 0 becomes knobs_default. A version
 * of 0 is accepted when `embedded` (inside another options struct whose version covers it). SL_EINVAL for a
 * version this library does not speak. */
int sl__plan_opts_resolve(sl_plan_opts *out, const sl_plan_opts *in, bool embedded, sl_plan_knobs knobs_default);
/* True when opts (resolved) plans only "autotune" knobs. */
static inline bool sl__plan_only_autotune(const sl_plan_opts *o) { return o->knobs == SL_PLAN_KNOBS_AUTOTUNE; }

/* sl_plan_solve with the hand-off costs multiplied by `hscale` (learned by the optimizer from a measured run). */
int sl__plan_solve(sl_plan **out, const sl_trace *t, const sl_plan_opts *opts, double hscale);
/* Counts a CPU-bound prediction on `share` (in (0, 1]) of the cores and re-evaluates P->predicted; the LP bound
 * keeps every core. */
int sl__plan_set_core_share(sl_plan *P, double share);
/* Sets every tunable parallelism (outside a cache) to `par`, then re-sizes buffers and re-evaluates the
 * prediction. 1 when nothing changed, 0 when done, < 0 on error. */
int sl__plan_force_parallelism(sl_plan *P, int64_t par);
/* Sets every knob to its traced value (no cache, no inserted prefetch) and re-evaluates the prediction: the plan
 * that rewrites the traced spec as it ran, "autotune" knobs at the values they resolved to. < 0 on error. */
int sl__plan_as_traced(sl_plan *P);
/* CPU seconds per output element the plan's model charges for its thread hand-offs. */
double sl__plan_handoff_cpu(const sl_plan *P);
/* The same for the parallelism `par` (one per op) instead of the plan's. */
double sl__plan_handoff_cpu_for(const sl_plan *P, const int64_t *par);
/* Fills a plan's model from a trace (no solving). */
int sl__plan_model(sl_plan *P, const sl_trace *t, const sl_plan_opts *opts);

/* Whether trace t counted enough to plan from (issue 48 row 6): SL__COUNT_OUTPUT when its root made
 * SL_PLAN_MIN_ELEMENTS; SL__COUNT_HEAVY when it made fewer but at least SL__COUNT_MIN_ROOT and every op that did
 * SL__COUNT_HEAVY_SHARE or more of the ops' CPU made SL_PLAN_MIN_ELEMENTS itself (25 batches of 64 are 1,600
 * decodes: the costs that matter rest on those); else SL__COUNT_SHORT. *dominant (may be NULL): the op that did
 * SL__COUNT_DOMINANT or more of the ops' CPU over at least SL__COUNT_MIN_ROOT of its own elements, or -1. */
enum { SL__COUNT_OUTPUT, SL__COUNT_HEAVY, SL__COUNT_SHORT };
#define SL__COUNT_MIN_ROOT 8
#define SL__COUNT_HEAVY_SHARE 0.05
#define SL__COUNT_DOMINANT 0.5
int sl__trace_counts(const sl_trace *t, int *dominant);
/* The LP bound for cache point `cache_at` (-1 none, a cache of cache_bytes) on `cores` cores; sets *limit. The
 * remote readers' requests in flight are its variables too (plan_lp.c). */
int sl__plan_lp(const sl_plan *P, int cache_at, double cache_bytes, double cores, double *X, const char **limit);
/* Frees the calling thread's GLPK environment: call before a thread that solved LPs ends. */
void sl__plan_lp_thread_done(void);
/* The model's throughput for integer parallelism par[] (cache_at, prefetch as in the plan). */
double sl__plan_eval(const sl_plan *P, const int64_t *par, int cache_at, double cores);
/* True when op j is inside the subtree that feeds op k (k included). */
bool sl__plan_upstream(const sl_plan *P, int j, int k);
/* Units for a plan of nops ops (sl__plan_units_free frees them); SL_ENOMEM on failure. */
int sl__plan_units_new(sl__pm_units *u, int nops);
void sl__plan_units_free(sl__pm_units *u);
/* Fills U with the units of parallelism par[] (< 0: a pool the LP sizes) and cache point cache_at; h = 1 charges
 * the thread boundaries the trace did not have their hand-off cost, h = 0 leaves hand-offs out. */
void sl__plan_units_build(const sl_plan *P, const int64_t *par, int cache_at, double h, sl__pm_units *U);
/* The op whose rate min(p, cores) / cost is the smallest at the traced configuration, or -1. */
int sl__plan_pick_bottleneck(const sl_plan *P);
/* Bytes op i's input elements cost (its own when it has no input), overhead included. */
double sl__plan_in_bytes(const sl_plan *P, int i);
/* Bytes a configuration may hold at most. */
double sl__plan_memory(const sl_plan *P, const int64_t *par, const int64_t *buf, const int64_t *cyc, int cache_at,
                       double cache_bytes, int64_t prefetch_buf);
/* The smallest buffers a configuration can run with, into buf[]. */
void sl__plan_min_buffers(const sl_plan *P, const int64_t *par, int64_t *buf);
/* Bytes as "12.39 GB" / "1.8 MB" / "3.0 kB" / "512 B" into b (n bytes). */
void sl__plan_fmt_bytes(char *b, size_t n, double v);
/* Integer parallelism around the LP point for cache point cache_at: sets P->par and P->predicted. */
int sl__plan_search_parallelism(sl_plan *P, int cache_at);
/* Buffer depths (and interleave cycle lengths) for the plan's parallelism: sets P->buf, P->cyc, P->prefetch_buf. */
void sl__plan_size_buffers(sl_plan *P);
/* The same for op i alone (its model kind's rule: plan_model.c, beside the kind's throughput and memory). */
void sl__plan_size_buffer(sl_plan *P, int i);
/* A buffering model kind (shuffle, prefetch): one element out per element in, in steady state. */
bool sl__plan_kind_buffers(sl__model_kind k);
/* Whether op o's work runs on threads of its own. */
bool sl__plan_op_threaded(const sl__pm_op *o);
/* Shrinks buffers, then workers, until the plan fits P->M; SL_EINVAL naming the shortfall when it cannot. */
int sl__plan_fit_memory(sl_plan *P);
/* The analyzer's report as a JSON object (the document sl_plan_report writes with json) and the planned spec (the
 * one sl_plan_spec_json writes), new references; NULL with SL_ENOMEM set when an allocation failed. */
json_t *sl__plan_report_json(const sl_plan *P);
json_t *sl__plan_spec(const sl_plan *P);

#endif
