/* cli/cmd_trace.c: `sluice trace SPEC -o trace.json`: runs a pipeline with its counters and the machine probe and
 * writes the trace (docs/trace-format.md). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli_int.h"

static void trace_help(FILE *f) {
  fprintf(f,
          "usage: sluice trace SPEC [-o TRACE] [--seconds S] [--take N] [--warmup S] [--warmup-caches] [--no-disk]\n"
          "                    [--repeat] [--record DB] [--quiet]\n\n"
          "Runs the pipeline in SPEC with its per-op counters, probes the machine (usable cores, memory, and the\n"
          "read bandwidth of the disk holding the data, page cache kept out) and writes a trace for\n"
          "'sluice analyze' and 'sluice optimize'. The format is versioned: docs/trace-format.md.\n\n"
          "  -o TRACE      write the trace here (default: stdout); checked before the run starts\n"
          "  --seconds S   trace for S seconds (default 5; the trace also ends with the stream)\n"
          "  --take N      stop after N output elements\n"
          "  --warmup S    run S seconds before counting (default 0)\n"
          "  --warmup-caches  also warm up until every cache op holds its complete first pass (at most 300 s):\n"
          "                the trace is of the steady state, as 'sluice optimize' traces and measures\n"
          "  --no-disk     do not measure disk bandwidth\n"
          "  --repeat      repeat a finite input (a root repeat, left out of the trace) so that it is traced for\n"
          "                --seconds, as 'sluice optimize' does with a short input\n"
          "  --record DB   record the run in an ML Metadata store (or set SLUICE_PROV)\n"
          "  --quiet       no summary line on stderr\n\n"
          "Ctrl-C (SIGTERM) stops the run at once, writes nothing and exits with 130 (143).\n");
}

int cmd_trace(int argc, char **argv) {
  const char *spec = NULL, *out = NULL, *record = NULL;
  sl_trace_opts o = SL_TRACE_OPTS_INIT;
  bool quiet = false;
  const cli_opt opts[] = {
      {.name = "-o", .alias = "--output", .type = CLI_STR, .dst = &out, .needs = "a file name"},
      {.name = "--seconds", .type = CLI_NUM, .dst = &o.seconds, .lo = 0, .lo_open = true,
       .hi = SL_TRACE_MAX_SECONDS, .must = "a positive number of seconds, at most 1e7 (115 days)"},
      {.name = "--take", .type = CLI_INT, .dst = &o.take, .lo = 1, .hi = (double)INT64_MAX, .must = "a positive number of elements"},
      {.name = "--warmup", .type = CLI_NUM, .dst = &o.warmup, .lo = 0, .hi = SL_TRACE_MAX_SECONDS,
       .must = "0 or more seconds, at most 1e7 (115 days)"},
      {.name = "--record", .type = CLI_STR, .dst = &record, .needs = "a store (a path, sqlite:PATH or postgresql://...)"},
      {.name = "--warmup-caches", .type = CLI_FLAG, .dst = &o.warmup_fills_caches},
      {.name = "--no-disk", .type = CLI_FLAG, .dst = &o.no_disk_probe},
      {.name = "--repeat", .type = CLI_FLAG, .dst = &o.repeat},
      {.name = "--quiet", .type = CLI_FLAG, .dst = &quiet},
      {.name = NULL},
  };
  const cli_args args = {.cmd = "trace", .opts = opts, .help = trace_help, .pos = &spec, .npos = 1, .noun = "spec"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  if (!spec) return cli_usage("trace", "a SPEC file is required");
  record = cli_record_target(record);
  sl_pipeline *p = NULL;
  char msg[1024];
  if (cli_open_spec(&p, spec, msg, sizeof msg)) {
    cli_record(record, "sluice.Run", spec, NULL, NULL, 0, 0, 0, 0, msg);
    return cli_fail(false, "%s", msg);
  }
  /* an output that cannot be written fails now, not after the run */
  if (out && strcmp(out, "-") && cli_check_writable(p, out, msg, sizeof msg)) {
    sl_pipeline_free(p);
    return cli_fail(false, "trace: %s", msg);
  }
  sl_trace *t = NULL;
  cli_stop_on_signal("trace", "no trace written");
  int run_rc = sl_trace_run(&t, p, &o);
  cli_stop_on_signal(NULL, NULL);
  if (run_rc) {
    int r = cli_fail(false, "%s", sl_error_last());
    snprintf(msg, sizeof msg, "%s", sl_error_last());
    cli_record(record, "sluice.Run", spec, p, NULL, 0, 0, 0, 0, msg);
    sl_pipeline_free(p);
    return r;
  }
  int rc = CLI_OK;
  if (out && !strcmp(out, "-")) out = NULL;
  if (out) {
    if (sl_trace_save(t, out)) rc = cli_fail(false, "%s", sl_error_last());
  } else {
    char *s = NULL;
    if (sl_trace_to_json(&s, t)) rc = cli_fail(false, "%s", sl_error_last());
    else printf("%s\n", s);
    sl_free(s);
  }
  if (rc == CLI_OK && !quiet) {
    const sl_machine *m = sl_trace_machine(t);
    fprintf(stderr, "%s: %llu elements in %.2f s (%.1f elem/s)%s; %d ops; %.3g cores, %.1f GB available",
            out ? out : "trace", (unsigned long long)sl_trace_elements(t), sl_trace_seconds(t),
            sl_trace_throughput(t), sl_trace_ended(t) ? ", stream ended" : "", sl_trace_op_count(t), m->cores,
            (double)m->mem_available / 1e9);
    if (m->disk_bandwidth > 0) fprintf(stderr, ", disk %.0f MB/s (%s)", m->disk_bandwidth / 1e6, m->disk_method);
    fprintf(stderr, "\n");
    if (sl_trace_elements(t) < SL_PLAN_MIN_ELEMENTS)
      fprintf(stderr, "warning: the trace saw %llu output elements; the planner needs at least %d to plan from "
                      "(trace longer%s)\n", (unsigned long long)sl_trace_elements(t), SL_PLAN_MIN_ELEMENTS,
              sl_trace_ended(t) ? ", with --repeat for a finite input, or let 'sluice optimize' trace" : "");
  }
  if (rc == CLI_OK) {
    sl_prov_output po = {out, "sluice.Trace"};
    cli_record(record, "sluice.Run", spec, p, out ? &po : NULL, out ? 1 : 0, sl_trace_throughput(t),
               sl_trace_process_cpu(t), sl_trace_seconds(t), NULL);
  }
  sl_trace_free(t);
  sl_pipeline_free(p);
  return rc;
}
