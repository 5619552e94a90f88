/* sluice/trace.h: traces (a run's per-op counters, the machine and the run, as a versioned JSON document; see
 * docs/trace-format.md) and the machine probe (usable cores, memory, disk bandwidth).
 * Thread rules: an sl_trace is immutable once made and may be read from any thread; sl_trace_run drives one run of
 * the pipeline on the calling thread (the pipeline's own workers aside). */
#ifndef SLUICE_TRACE_H
#define SLUICE_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The trace format's version: a trace of a later version is refused with SL_EVERSION. Version 2 added the run's
 * device_read_bytes and read_chars; version 1 traces are still read (the device's share of reads unknown). */
#define SL_TRACE_VERSION 2

/* What the machine offers a pipeline. */
typedef struct sl_machine {
  double cores;          /* usable cores: CPU affinity, capped by a cgroup CPU quota (may be fractional) */
  int cpus_online;       /* CPUs the kernel has online */
  uint64_t mem_total;    /* bytes of RAM (MemTotal, or the cgroup limit when lower) */
  uint64_t mem_available; /* bytes available now: MemAvailable, capped by the cgroup's limit minus its usage */
  double disk_bandwidth; /* read bytes/s the block device holding the data delivered; 0 when not measured */
  char disk_method[32];  /* "o_direct", "fadvise" (a file the probe wrote beside the data, evicted) or "none" */
  char disk_path[256];   /* the file the bandwidth was measured on ("" when none) */
  double other_load;     /* cores other processes kept busy during the traced run (from /proc/stat; -1 unknown) */
} sl_machine;

/* Probes cores and memory; when `data_path` is a readable file, also measures the read bandwidth of its block device
 * as the device delivers it (an O_DIRECT read of it, or where O_DIRECT is refused a cold read of a file the probe
 * writes beside it and removes; the device's bytes checked with /proc/thread-self/io), reading at most `max_bytes`
 * (0: 256 MiB) or for about half a second. The user's cached pages are never evicted. */
SL_EXTERN int sl_machine_probe(sl_machine *out, const char *data_path, uint64_t max_bytes);

typedef struct sl_trace sl_trace;

/* Options of sl_trace_run. Every field left 0 takes its default. */
typedef struct sl_trace_opts {
  int version;        /* SL_TRACE_OPTS_VERSION */
  double seconds;     /* stop after this long; 0: 5 s; SL_TRACE_UNTIL_END (any value < 0): at the end of the stream,
                       * at most 3600 s */
  int64_t take;       /* stop after this many output elements; 0: no limit */
  double warmup;      /* seconds run before counting starts (counters are reset after it); 0: none */
  bool no_disk_probe; /* do not measure the disk holding the pipeline's files; false (default): measure it (the
                       * first file a `files` op lists) */
  const sl_machine *machine; /* use this machine description instead of probing; NULL (default): probe */
  bool warmup_fills_caches; /* the warm-up also lasts until every in-memory or file cache of the pipeline is
                             * complete (its first pass done), at most SL_TRACE_MAX_FILL seconds: a steady-state
                             * measurement of a pipeline with a cache; false (default): no */
  bool repeat;        /* run the pipeline under a `repeat` appended at its root, so that a finite input is traced for
                       * as long as asked; the trace is of the pipeline as given (the repeat stripped: its spec and
                       * ops are the input's, `ended` false); false (default): run it as it is */
} sl_trace_opts;
#define SL_TRACE_OPTS_VERSION 1
#define SL_TRACE_OPTS_INIT {SL_TRACE_OPTS_VERSION}
/* sl_trace_opts.seconds for "until the end of the stream". */
#define SL_TRACE_UNTIL_END (-1.0)
#define SL_TRACE_MAX_FILL 300.0
/* The most seconds and warmup may be (115 days): 1e18 or inf once overflowed the deadline into a 0-element trace. */
#define SL_TRACE_MAX_SECONDS 1e7

/* Runs pipeline `p` (from its counters' reset) under `opts` and records a trace: the spec, every op's counters,
 * the machine and the run. The pipeline's counters are reset first. Errors: those of the run (naming the op). */
SL_EXTERN int sl_trace_run(sl_trace **out, sl_pipeline *p, const sl_trace_opts *opts);
/* The trace as JSON text (docs/trace-format.md). Free with sl_free(). */
SL_EXTERN int sl_trace_to_json(char **out, const sl_trace *t);
/* Reads a trace. SL_EVERSION for a trace of another format version, SL_EINVAL (naming the field) for a malformed
 * one. `origin` names the source in messages. */
SL_EXTERN int sl_trace_from_json(sl_trace **out, const char *json, size_t len, const char *origin);
/* Reads a trace file: a regular file of at most SL_TRACE_MAX_BYTES (a FIFO, a device or a larger file is refused
 * with its path and, for the size, the cap: a trace of the largest spec is a few MB). SL_ENOTFOUND when it does not
 * exist, SL_EIO when it cannot be read. */
#define SL_TRACE_MAX_BYTES (256u << 20)
SL_EXTERN int sl_trace_load(sl_trace **out, const char *path);
SL_EXTERN int sl_trace_save(const sl_trace *t, const char *path);
SL_EXTERN void sl_trace_free(sl_trace *t);

/* Checks that trace `t` was taken of the same pipeline as `p` (same ops, functions and arguments; knob values
 * may differ). SL_EINVAL naming the first difference otherwise. */
SL_EXTERN int sl_trace_check_spec(const sl_trace *t, const sl_pipeline *p);

/* Read access. The run: output elements, elapsed seconds, whether the stream ended, and throughput. */
SL_EXTERN uint64_t sl_trace_elements(const sl_trace *t);
SL_EXTERN double sl_trace_seconds(const sl_trace *t);
SL_EXTERN bool sl_trace_ended(const sl_trace *t);
SL_EXTERN double sl_trace_throughput(const sl_trace *t);
/* Process CPU seconds used during the traced interval. */
SL_EXTERN double sl_trace_process_cpu(const sl_trace *t);
SL_EXTERN const sl_machine *sl_trace_machine(const sl_trace *t);
SL_EXTERN int sl_trace_op_count(const sl_trace *t);
/* Op i's counters (strings owned by the trace). */
SL_EXTERN int sl_trace_op(sl_op_stats *out, const sl_trace *t, int i);
/* The traced spec as JSON text. Free with sl_free(). */
SL_EXTERN int sl_trace_spec_json(char **out, const sl_trace *t);

#ifdef __cplusplus
}
#endif
#endif
