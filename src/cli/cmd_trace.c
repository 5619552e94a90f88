/* cli/cmd_trace.c: `sluice trace SPEC -o trace.json`: runs a pipeline with its counters and the machine probe and
 * writes the trace (docs/trace-format.md). */
#include <stdio.h>
#include <string.h>

#include "cli_int.h"

static void trace_help(FILE *f) {
  fprintf(f,
          "usage: sluice trace SPEC [-o TRACE] [--seconds S] [--take N] [--warmup S] [--no-disk] [--record DB] [--quiet]\n\n"
          "Runs the pipeline in SPEC with its per-op counters, probes the machine (usable cores, memory, and the\n"
          "read bandwidth of the disk holding the data, page cache kept out) and writes a trace for\n"
          "'sluice analyze' and 'sluice optimize'. The format is versioned: docs/trace-format.md.\n\n"
          "  -o TRACE      write the trace here (default: stdout); checked before the run starts\n"
          "  --seconds S   trace for S seconds (default 5; the trace also ends with the stream)\n"
          "  --take N      stop after N output elements\n"
          "  --warmup S    run S seconds before counting (default 0)\n"
          "  --no-disk     do not measure disk bandwidth\n"
          "  --record DB   record the run in an ML Metadata store (or set SLUICE_PROV)\n"
          "  --quiet       no summary line on stderr\n\n"
          "Ctrl-C (SIGTERM) stops the run at once, writes nothing and exits with 130 (143).\n");
}

int cmd_trace(int argc, char **argv) {
  const char *spec = NULL, *out = NULL, *record = NULL;
  sl_trace_opts o = SL_TRACE_OPTS_INIT;
  bool quiet = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (cli_is_help(a)) {
      trace_help(stdout);
      return CLI_OK;
    } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
      if (i + 1 >= argc) return cli_usage("trace", "%s needs a file name", a);
      out = argv[++i];
    } else if (!strcmp(a, "--seconds")) {
      if (!cli_parse_f64("trace", a, i + 1 < argc ? argv[++i] : NULL, &o.seconds)) return CLI_USAGE;
      if (!(o.seconds > 0)) return cli_usage("trace", "--seconds must be a positive number of seconds, not %s", argv[i]);
    } else if (!strcmp(a, "--take")) {
      if (!cli_parse_i64("trace", a, i + 1 < argc ? argv[++i] : NULL, &o.take)) return CLI_USAGE;
      if (o.take <= 0) return cli_usage("trace", "--take must be a positive number of elements, not %s", argv[i]);
    } else if (!strcmp(a, "--warmup")) {
      if (!cli_parse_f64("trace", a, i + 1 < argc ? argv[++i] : NULL, &o.warmup)) return CLI_USAGE;
      if (!(o.warmup >= 0)) return cli_usage("trace", "--warmup must not be negative (got %s)", argv[i]);
    } else if (!strcmp(a, "--record")) {
      if (i + 1 >= argc) return cli_usage("trace", "--record needs a store (a path, sqlite:PATH or postgresql://...)");
      record = argv[++i];
    } else if (!strcmp(a, "--no-disk")) {
      o.no_disk_probe = true;
    } else if (!strcmp(a, "--quiet")) {
      quiet = true;
    } else if (a[0] == '-') {
      return cli_usage("trace", "unknown option '%s'", a);
    } else if (!spec) {
      spec = a;
    } else {
      return cli_usage("trace", "more than one spec given ('%s', '%s')", spec, a);
    }
  }
  if (!spec) return cli_usage("trace", "a SPEC file is required");
  record = cli_record_target(record);
  sl_pipeline *p = NULL;
  char msg[1024];
  if (cli_open_spec(&p, spec, msg, sizeof msg)) {
    cli_record(record, "sluice.Run", spec, NULL, NULL, 0, 0, 0, 0, msg);
    return cli_fail(false, "%s", msg);
  }
  /* an output that cannot be written fails now, not after the run */
  if (out && strcmp(out, "-") && cli_check_writable(out, msg, sizeof msg)) {
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
              sl_trace_ended(t) ? ", or let 'sluice optimize' trace, which repeats a finite input" : "");
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
