/* cli/cmd_optimize.c: `sluice optimize SPEC -o TUNED`: traces the spec, solves the model, writes the planned spec,
 * runs it, and prints predicted vs measured throughput and the speed-up over the input spec. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli_int.h"
#include "run_dist_int.h"

/* How much more CPU per element (+) or less the input spent in the final alternating runs than in its trace: the
 * machine's change of speed between the trace the plan was made from and the runs it was measured by (0: not
 * measured). Said in the summary from SPEED_NOTE on. */
#define SPEED_NOTE 0.05
static double speed_change(const sl_optimize_result *r) {
  return r->checked && r->input_cpu_traced > 0 && r->input_cpu_checked > 0 ? r->input_cpu_checked / r->input_cpu_traced - 1
                                                                            : 0;
}

static void optimize_help(FILE *f) {
  fprintf(f,
          "usage: sluice optimize SPEC [-o TUNED] [--trace TRACE] [--seconds S] [--measure S] [--json] [--report] [--record DB]\n"
          "                       [planner options]\n\n"
          "Traces SPEC, solves the Plumber model (LP bound, cache point, integer parallelism, buffer depths), writes\n"
          "the planned spec (an ordinary spec with every knob set), runs it, and prints predicted vs measured\n"
          "throughput and the speed-up over SPEC. decode_jpeg followed by a crop or resize is fused into one op when\n"
          "a trace of SPEC fused spends no more CPU per element than one unfused. When measured falls more than 10%%\n"
          "short of predicted it re-traces the tuned pipeline and solves again, at most twice. The plan with a worker\n"
          "per core, the all-sequential plan and (no consumer planned for) the plan without its root prefetch are\n"
          "measured once each; the best of them, when within 10%% of the plan, runs alternately against it (3 short\n"
          "runs each) and the higher median is kept (within 3%%, the one spending at most 0.8x the other's CPU per\n"
          "element). Last, the plan and SPEC run alternately (3 short runs each, medians); below 0.97x SPEC, SPEC's\n"
          "own configuration is written (\"kept:\" in the summary).\n"
          "Traces start after a warm-up; one that saw fewer than 32 output elements is traced longer (a finite\n"
          "SPEC repeated for the traces and runs only), else optimize refuses, saying how many it saw.\n\n"
          "  -o TUNED       write the planned spec here (default: stdout, the summary then goes to stderr; with\n"
          "                 --json the spec is written only with -o); checked before tracing starts\n"
          "  --trace TRACE  start from this trace of SPEC instead of tracing it (refused if it is of another spec)\n"
          "  --seconds S    trace SPEC for S seconds (default 2)\n"
          "  --measure S    run the planned spec S seconds to measure it (default 3; 0: do not run it)\n"
          "  --json         print the summary as JSON on stdout (on failure {\"status\": \"error\", \"error\": ...})\n"
          "  --record DB    record the run in an ML Metadata store (or set SLUICE_PROV)\n"
          "  --report       also print the analyzer's report of the final plan\n"
          "  --workers K    plan an offload to K worker ranks instead (sluice optimize --workers 1 --help)\n"
          "%s\nCtrl-C (SIGTERM) stops at once, writes nothing and exits with 130 (143).\n",
          cli_plan_options_help());
}

/* cli_fail, and with --json the same message as the error document on stdout. */
static int fail_json(bool json, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail_json(bool json, const char *fmt, ...) {
  char m[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  if (json) cli_json_error(m);
  return cli_fail(false, "%s", m);
}

int cmd_optimize(int argc, char **argv) {
  const char *spec = NULL, *out = NULL, *trace_path = NULL, *record = NULL;
  bool json = false, report = false;
  sl_optimize_opts oo = SL_OPTIMIZE_OPTS_INIT;
  sl_optimize_result res;
  oo.plan.knobs = SL_PLAN_KNOBS_ALL;
  oo.measure_seconds = 3;
  oo.result = &res;
  for (int i = 1; i < argc; i++) /* the offload planner: its own options (cmd_optimize_dist.c) */
    if (!strcmp(argv[i], "--workers")) return cmd_optimize_workers(argc, argv);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int r;
    if (cli_is_help(a)) {
      optimize_help(stdout);
      return CLI_OK;
    } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
      if (i + 1 >= argc) return cli_usage("optimize", "%s needs a file name", a);
      out = argv[++i];
    } else if (!strcmp(a, "--trace")) {
      if (i + 1 >= argc) return cli_usage("optimize", "--trace needs a file name");
      trace_path = argv[++i];
    } else if (!strcmp(a, "--seconds")) {
      if (!cli_parse_f64("optimize", a, i + 1 < argc ? argv[++i] : NULL, &oo.trace_seconds)) return CLI_USAGE;
      if (!(oo.trace_seconds > 0))
        return cli_usage("optimize", "--seconds must be a positive number of seconds, not %s", argv[i]);
    } else if (!strcmp(a, "--measure")) {
      if (!cli_parse_f64("optimize", a, i + 1 < argc ? argv[++i] : NULL, &oo.measure_seconds)) return CLI_USAGE;
      if (!(oo.measure_seconds >= 0)) return cli_usage("optimize", "--measure must not be negative (got %s)", argv[i]);
    } else if (!strcmp(a, "--record")) {
      if (i + 1 >= argc) return cli_usage("optimize", "--record needs a store (a path, sqlite:PATH or postgresql://...)");
      record = argv[++i];
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--report")) {
      report = true;
    } else if ((r = cli_plan_option("optimize", argc, argv, &i, &oo.plan)) != 0) {
      if (r < 0) return CLI_USAGE;
    } else if (a[0] == '-') {
      return cli_usage("optimize", "unknown option '%s'", a);
    } else if (!spec) {
      spec = a;
    } else {
      return cli_usage("optimize", "more than one spec given ('%s', '%s')", spec, a);
    }
  }
  if (!spec) return cli_usage("optimize", "a SPEC file is required");
  record = cli_record_target(record);
  double t_start = cli_now();
  if (out && !strcmp(out, "-")) out = NULL;
  sl_pipeline *p = NULL;
  char msg[1024];
  if (cli_open_spec(&p, spec, msg, sizeof msg)) {
    cli_record(record, "sluice.Optimize", spec, NULL, NULL, 0, 0, 0, 0, msg);
    return fail_json(json, "%s", msg);
  }
  /* an output that cannot be written fails now, not after seconds of tracing */
  if (out && cli_check_writable(out, msg, sizeof msg)) {
    sl_pipeline_free(p);
    return fail_json(json, "optimize: %s", msg);
  }
  sl_trace *given = NULL;
  if (trace_path && sl_trace_load(&given, trace_path)) {
    sl_pipeline_free(p);
    return fail_json(json, "%s", sl_error_last());
  }
  oo.trace = given;
  sl_plan *pl = NULL;
  cli_stop_on_signal("optimize", "no spec written");
  int opt_rc = sl_optimize(&pl, p, &oo);
  cli_stop_on_signal(NULL, NULL);
  if (opt_rc) {
    snprintf(msg, sizeof msg, "%s", sl_error_last());
    int r = trace_path ? fail_json(json, "%s vs %s: %s", trace_path, spec, msg) : fail_json(json, "%s", msg);
    cli_record(record, "sluice.Optimize", spec, p, NULL, 0, 0, 0, cli_now() - t_start, msg);
    sl_trace_free(given);
    sl_pipeline_free(p);
    return r;
  }
  sl_trace_free(given);
  int rc = CLI_OK;
  char *tuned = NULL;
  if (sl_plan_spec_json(&tuned, pl)) rc = fail_json(json, "%s", sl_error_last());
  FILE *sum = stdout;
  if (rc == CLI_OK) {
    if (out) {
      size_t len = strlen(tuned);
      tuned[len] = '\n'; /* ends its line (the NUL is not written); beside the file, then renamed */
      if (sl_file_write(out, tuned, len + 1)) rc = fail_json(json, "optimize: cannot write the spec: %s", sl_error_last());
      tuned[len] = 0;
    } else if (!json) { /* --json: the JSON owns stdout; the spec is written only with -o */
      printf("%s\n", tuned);
      sum = stderr;
    }
  }
  if (rc == CLI_OK) {
    double speedup = res.baseline > 0 ? (res.measured > 0 ? res.measured : res.predicted) / res.baseline : 0;
    if (json) {
      fprintf(sum, "{\"status\": \"ok\", \"spec\": ");
      cli_json_string(sum, spec);
      fprintf(sum, ", \"tuned\": ");
      if (out) cli_json_string(sum, out);
      else fprintf(sum, "null");
      fprintf(sum, ", \"baseline\": %.3f, \"bound\": %.3f, \"predicted\": %.3f, "
                   "\"measured\": %.3f, \"prediction_error\": %.4f, \"speedup\": %.4f, \"rounds\": %d, \"limit\": \"%s\", "
                   "\"other_load\": %.3f, \"model_cpu_per_element\": %.9f, \"measured_cpu_per_element\": %.9f, "
                   "\"measure_other_load\": %.3f, \"predicted_on_free_cores\": %.3f, \"kept_input\": %s, "
                   "\"alternating\": %s, \"trace_elements\": %llu, \"min_trace_elements\": %d, \"repeated_input\": %s, "
                   "\"bound_from_run\": %s, \"fused\": %s, \"fused_cpu_per_element\": %.9f, \"unfused_cpu_per_element\": %.9f, "
                   "\"core_share\": %.4f, \"input_cpu_traced\": %.9f, \"input_cpu_checked\": %.9f, "
                   "\"machine_speed_change\": %.4f}\n",
              res.baseline, res.bound, res.predicted, res.measured,
              res.measured > 0 && res.predicted > 0 ? res.measured / res.predicted - 1 : 0, speedup, res.rounds,
              sl_plan_limit(pl), res.other_load, res.model_cpu, res.measured_cpu, res.measure_other_load,
              res.predicted_free, res.kept_input ? "true" : "false", res.checked ? "true" : "false",
              (unsigned long long)res.trace_elements, SL_PLAN_MIN_ELEMENTS, res.repeated_input ? "true" : "false",
              res.bound_from_run ? "true" : "false", res.fused ? "true" : "false", res.fused_cpu, res.unfused_cpu,
              res.core_share, res.input_cpu_traced, res.input_cpu_checked, speed_change(&res));
    } else {
      if (res.repeated_input)
        fprintf(sum, "note:       a trace of the input saw too few elements to plan from (at least %d needed) and the "
                     "input may end: it was traced and measured repeated (the written spec does not repeat), and "
                     "the repeated trace saw %llu\n",
                SL_PLAN_MIN_ELEMENTS, (unsigned long long)res.trace_elements);
      if (res.unfused_cpu > 0)
        fprintf(sum, "fusion:     %s: the input traced fused spent %.1f us of CPU per element, unfused %.1f us\n",
                res.fused ? "kept" : "not kept", res.fused_cpu * 1e6, res.unfused_cpu * 1e6);
      fprintf(sum, "input spec: %10.1f elem/s (%s)\n", res.baseline,
              res.checked ? "median of runs alternating with the plan's" : "traced");
      fprintf(sum, "bound:      %10.1f elem/s (LP, limited by %s%s)\n", res.bound, sl_plan_limit(pl),
              res.bound_from_run ? "; at the measured run's CPU per element, below the trace's" : "");
      if (res.core_share > 0 && res.core_share < 1)
        fprintf(sum, "predicted:  %10.1f elem/s (on %.0f%% of the cores: a run of the CPU-bound plan kept that share "
                     "busy; its threads block and wake, leaving the rest idle)\n",
                res.predicted, 100 * res.core_share);
      else
        fprintf(sum, "predicted:  %10.1f elem/s\n", res.predicted);
      if (res.measured > 0) {
        fprintf(sum, "measured:   %10.1f elem/s (%+.1f%% vs predicted, %d solve%s%s)\n", res.measured,
                100.0 * (res.measured / res.predicted - 1), res.rounds, res.rounds > 1 ? "s" : "",
                res.checked ? "; median of alternating runs" : "");
        fprintf(sum, "speed-up:   %10.2fx over the input spec (measured)\n", speedup);
        if (res.kept_input)
          fprintf(sum, "kept:       the input's own configuration: the plan measured below %.2fx the input in "
                       "alternating runs, so the input's knobs are written\n", SL_PLAN_KEEP_RATIO);
        fprintf(sum, "CPU/element: %9.1f us in the model, %.1f us measured (%+.1f%%; independent of other load)\n",
                res.model_cpu * 1e6, res.measured_cpu * 1e6,
                res.model_cpu > 0 ? 100.0 * (res.measured_cpu / res.model_cpu - 1) : 0.0);
        double sc = speed_change(&res);
        if (fabs(sc) >= SPEED_NOTE) {
          /* At the final runs' speed: a CPU-limited plan's throughput scales with the machine's speed. */
          const char *lim = sl_plan_limit(pl);
          bool cpu_set = !strcmp(lim, "cpu") || !strcmp(lim, "sequential") || !strcmp(lim, "serial");
          fprintf(sum, "machine:    the input spent %.1f us of CPU per element in these runs, %.1f in its trace (%+.1f%%): "
                       "the same work, so the machine ran %s than when the plan was made (or the input's own threads spent %s)",
                  res.input_cpu_checked * 1e6, res.input_cpu_traced * 1e6, 100 * sc, sc > 0 ? "slower" : "faster",
                  sc > 0 ? "more" : "less");
          if (cpu_set && res.measured > 0)
            fprintf(sum, "; at this speed the prediction is %.1f elem/s (measured %+.1f%%)",
                    res.predicted / (1 + sc), 100.0 * (res.measured * (1 + sc) / res.predicted - 1));
          fprintf(sum, "\n");
        }
      } else {
        fprintf(sum, "speed-up:   %10.2fx over the input spec (predicted; not measured)\n", speedup);
      }
      if (res.other_load >= 0.25)
        fprintf(sum, "warning:    other processes kept up to %.2f cores busy during these runs\n", res.other_load);
      if (res.measured > 0 && res.measure_other_load >= 0.25 && res.predicted_free > 0)
        fprintf(sum, "load-adj.:  %10.1f elem/s predicted on the cores other processes left free during the measured "
                     "run (%.2f busy elsewhere): measured %+.1f%%\n", res.predicted_free, res.measure_other_load,
                100.0 * (res.measured / res.predicted_free - 1));
      if (out) fprintf(sum, "wrote %s\n", out);
    }
    if (report) {
      char *s = NULL;
      if (!sl_plan_report(&s, pl, false)) fprintf(sum, "\n%s", s);
      sl_free(s);
    }
  }
  if (rc == CLI_OK) {
    sl_prov_output po = {out, "sluice.Spec"};
    cli_record(record, "sluice.Optimize", spec, p, out ? &po : NULL, out ? 1 : 0,
               res.measured > 0 ? res.measured : res.predicted, 0, cli_now() - t_start, NULL);
  }
  sl_free(tuned);
  sl_plan_free(pl);
  sl_pipeline_free(p);
  return rc;
}
