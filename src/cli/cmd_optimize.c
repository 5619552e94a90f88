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
          "                       [--quiet] [planner options]\n\n"
          "Traces SPEC, solves the Plumber model (LP bound, cache point, integer parallelism, buffer depths), writes\n"
          "the planned spec (an ordinary spec with every knob set), runs it, and prints predicted vs measured\n"
          "throughput and the speed-up over SPEC. decode_jpeg followed by a crop or resize is fused into one op when\n"
          "a trace of SPEC fused spends no more CPU per element than one unfused. When measured falls more than 10%%\n"
          "short of predicted it re-traces the tuned pipeline and solves again, at most twice. The plan with a worker\n"
          "per core, the all-sequential plan and (no consumer planned for) the plan without its root prefetch are\n"
          "measured once each; the best of them, when within 10%% of the plan, runs alternately against it (3 short\n"
          "runs each) and the higher median is kept (within 3%%, the one spending at most 0.8x the other's CPU per\n"
          "element). Last, the plan and SPEC run alternately (3 short runs each, medians); below 0.97x SPEC, SPEC's\n"
          "own configuration is written (\"kept:\" in the summary). The speed-up is over SPEC as written: when fusion\n"
          "was kept, SPEC unfused runs in that alternation too, and the summary says how much came from fusion and\n"
          "how much from the knobs, each measured. Each phase is said on stderr as it starts and ends.\n"
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
          "  --quiet        do not print the phases on stderr as they run\n"
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

/* The speed-up's parts when fusion was applied, each measured (1: no fusion). Their product is the speed-up over the
 * spec as written. */
static double speedup_fusion(const sl_optimize_result *r) {
  return r->fused && r->fused_baseline > 0 && r->baseline > 0 ? r->fused_baseline / r->baseline : 1;
}
static double speedup_knobs(const sl_optimize_result *r) {
  double got = r->measured > 0 ? r->measured : r->predicted;
  double base = r->fused && r->fused_baseline > 0 ? r->fused_baseline : r->baseline;
  return base > 0 ? got / base : 0;
}

/* The --json summary line. */
static void print_json(FILE *sum, const char *spec, const char *out, const sl_optimize_result *r, const sl_plan *pl,
                       double speedup) {
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
               "\"machine_speed_change\": %.4f, \"predicted_all_cores\": %.3f, \"predicted_cores\": %.3f, "
               "\"predicted_cores_from\": \"%s\", \"trace_cores\": %.3f, \"baseline_is\": \"the spec as written\", "
               "\"fused_baseline\": %.3f, \"speedup_fusion\": %.4f, \"speedup_knobs\": %.4f, \"measured_min\": %.3f, "
               "\"measured_max\": %.3f, \"check_rounds\": %d}\n",
          r->baseline, r->bound, r->predicted, r->measured,
          r->measured > 0 && r->predicted > 0 ? r->measured / r->predicted - 1 : 0, speedup, r->rounds,
          sl_plan_limit(pl), r->other_load, r->model_cpu, r->measured_cpu, r->measure_other_load,
          r->predicted_free, r->kept_input ? "true" : "false", r->checked ? "true" : "false",
          (unsigned long long)r->trace_elements, SL_PLAN_MIN_ELEMENTS, r->repeated_input ? "true" : "false",
          r->bound_from_run ? "true" : "false", r->fused ? "true" : "false", r->fused_cpu, r->unfused_cpu,
          r->core_share, r->input_cpu_traced, r->input_cpu_checked, speed_change(r), r->predicted_all,
          r->predicted_cores, r->cores_from_run ? "measured run" : "trace", r->trace_cores, r->fused_baseline,
          speedup_fusion(r), speedup_knobs(r), r->measured_lo, r->measured_hi, r->check_rounds);
}

/* The summary in text: the notes, the figures and what they mean. */
static void print_text(FILE *sum, const sl_optimize_result *r, const sl_plan *pl, double speedup) {
  if (r->repeated_input)
    fprintf(sum, "note:       the input may end before a trace or a run does (too few elements to plan from: at "
                 "least %d needed; or an epoch shorter than a run): it was traced and measured repeated (the "
                 "written spec does not repeat); the trace planned from saw %llu\n",
            SL_PLAN_MIN_ELEMENTS, (unsigned long long)r->trace_elements);
  if (r->unfused_cpu > 0)
    fprintf(sum, "fusion:     %s: the input traced fused spent %.1f us of CPU per element, unfused %.1f us\n",
            r->fused ? "kept" : "not kept", r->fused_cpu * 1e6, r->unfused_cpu * 1e6);
  fprintf(sum, "input spec: %10.1f elem/s (as written; %s)\n", r->baseline,
          r->checked ? "median of runs alternating with the plan's" : "traced");
  if (r->fused && r->fused_baseline > 0)
    fprintf(sum, "fused:      %10.1f elem/s (the input with fusion alone, its own knobs; %s)\n", r->fused_baseline,
            r->checked ? "median of the same alternating runs" : "traced");
  fprintf(sum, "bound:      %10.1f elem/s (LP, limited by %s%s)\n", r->bound, sl_plan_limit(pl),
          r->bound_from_run ? "; at the measured run's CPU per element, below the trace's" : "");
  if (r->predicted_all != r->predicted && r->cores_from_run)
    fprintf(sum, "predicted:  %10.1f elem/s (on the %.2f cores other processes left the plan in its measured run, "
                 "%.2f during the input's trace; the knobs are planned for every core, which would give %.1f elem/s "
                 "once the load is gone)\n",
            r->predicted, r->predicted_cores, r->trace_cores, r->predicted_all);
  else if (r->predicted_all != r->predicted)
    fprintf(sum, "predicted:  %10.1f elem/s (on the %.1f cores other processes left during the trace; the knobs are "
                 "planned for every core, which would give %.1f elem/s once the load is gone)\n",
            r->predicted, r->predicted_cores, r->predicted_all);
  else if (r->core_share > 0 && r->core_share < 1)
    fprintf(sum, "predicted:  %10.1f elem/s (on %.0f%% of the cores: a run of the CPU-bound plan kept that share "
                 "busy; its threads block and wake, leaving the rest idle)\n",
            r->predicted, 100 * r->core_share);
  else
    fprintf(sum, "predicted:  %10.1f elem/s\n", r->predicted);
  if (r->measured > 0) {
    fprintf(sum, "measured:   %10.1f elem/s (%+.1f%% vs predicted, %d solve%s", r->measured,
            100.0 * (r->measured / r->predicted - 1), r->rounds, r->rounds > 1 ? "s" : "");
    if (r->checked && r->check_rounds > 0)
      fprintf(sum, "; median of %d alternating runs, which ran %.1f-%.1f: %.0f%% apart on this machine",
              r->check_rounds, r->measured_lo, r->measured_hi,
              r->measured_lo > 0 ? 100.0 * (r->measured_hi / r->measured_lo - 1) : 0.0);
    fprintf(sum, ")\n");
    fprintf(sum, "speed-up:   %10.2fx over the input spec as written (measured)", speedup);
    if (r->fused && r->fused_baseline > 0)
      fprintf(sum, ": %.2fx from fusion, %.2fx from the knobs", speedup_fusion(r), speedup_knobs(r));
    fprintf(sum, "\n");
    if (r->kept_input)
      fprintf(sum, "kept:       the input's own configuration: the plan measured below %.2fx the input in "
                   "alternating runs, so the input's knobs are written\n", SL_PLAN_KEEP_RATIO);
    fprintf(sum, "CPU/element: %9.1f us in the model, %.1f us measured (%+.1f%%; independent of other load)\n",
            r->model_cpu * 1e6, r->measured_cpu * 1e6,
            r->model_cpu > 0 ? 100.0 * (r->measured_cpu / r->model_cpu - 1) : 0.0);
    double sc = speed_change(r);
    if (fabs(sc) >= SPEED_NOTE)
      fprintf(sum, "machine:    the input spent %.1f us of CPU per element in these runs, %.1f in its trace (%+.1f%%): "
                   "the machine ran it %s than when the plan was made (or its own threads spent %s)\n",
              r->input_cpu_checked * 1e6, r->input_cpu_traced * 1e6, 100 * sc, sc > 0 ? "slower" : "faster",
              sc > 0 ? "more" : "less");
  } else {
    fprintf(sum, "speed-up:   %10.2fx over the input spec as written (predicted; not measured)", speedup);
    if (r->fused && r->fused_baseline > 0)
      fprintf(sum, ": %.2fx from fusion (traced), %.2fx from the knobs (predicted)", speedup_fusion(r),
              speedup_knobs(r));
    fprintf(sum, "\n");
  }
  if (r->other_load >= 0.25)
    fprintf(sum, "warning:    other processes kept up to %.2f cores busy during these runs\n", r->other_load);
  if (r->measured > 0 && r->measure_other_load >= 0.25 && r->predicted_free > 0 && !r->cores_from_run)
    fprintf(sum, "load-adj.:  %10.1f elem/s predicted on the cores other processes left free during the measured "
                 "run (%.2f busy elsewhere): measured %+.1f%%\n", r->predicted_free, r->measure_other_load,
            100.0 * (r->measured / r->predicted_free - 1));
}

/* The optimizer's phases as they run, on stderr (stdout holds the spec or the JSON). */
static void say_phase(const char *line, void *ctx) {
  (void)ctx;
  fprintf(stderr, "optimize: %s\n", line);
  fflush(stderr);
}

int cmd_optimize(int argc, char **argv) {
  const char *spec = NULL, *out = NULL, *trace_path = NULL, *record = NULL;
  bool json = false, report = false, quiet = false;
  sl_optimize_opts oo = SL_OPTIMIZE_OPTS_INIT;
  sl_optimize_result res;
  oo.plan.knobs = SL_PLAN_KNOBS_ALL;
  oo.measure_seconds = 3;
  oo.result = &res;
  if (cli_has_option(argc, argv, "--workers")) return cmd_optimize_workers(argc, argv); /* cmd_optimize_dist.c */
  cli_plan_args pa;
  cli_opt plan[CLI_PLAN_NOPTS];
  cli_plan_table(plan, &pa, &oo.plan);
  const cli_opt opts[] = {
      {.name = "-o", .alias = "--output", .type = CLI_STR, .dst = &out, .needs = "a file name"},
      {.name = "--trace", .type = CLI_STR, .dst = &trace_path, .needs = "a file name"},
      {.name = "--seconds", .type = CLI_NUM, .dst = &oo.trace_seconds, .lo = 0, .lo_open = true,
       .hi = SL_TRACE_MAX_SECONDS, .must = "a positive number of seconds, at most 1e7 (115 days)"},
      {.name = "--measure", .type = CLI_NUM, .dst = &oo.measure_seconds, .lo = 0, .hi = SL_TRACE_MAX_SECONDS,
       .must = "0 or more seconds, at most 1e7 (115 days)"},
      {.name = "--record", .type = CLI_STR, .dst = &record, .needs = "a store (a path, sqlite:PATH or postgresql://...)"},
      {.name = "--json", .type = CLI_FLAG, .dst = &json},
      {.name = "--report", .type = CLI_FLAG, .dst = &report},
      {.name = "--quiet", .type = CLI_FLAG, .dst = &quiet},
      {.name = NULL},
  };
  const cli_args args = {.cmd = "optimize", .opts = opts, .more = plan, .help = optimize_help, .pos = &spec,
                         .npos = 1, .noun = "spec"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  cli_plan_apply(&pa);
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
  if (out && cli_check_writable(p, out, msg, sizeof msg)) {
    sl_pipeline_free(p);
    return fail_json(json, "optimize: %s", msg);
  }
  sl_trace *given = NULL;
  if (trace_path && sl_trace_load(&given, trace_path)) {
    sl_pipeline_free(p);
    return fail_json(json, "%s", sl_error_last());
  }
  oo.trace = given;
  if (!quiet) oo.progress = say_phase;
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
    if (json) print_json(sum, spec, out, &res, pl, speedup);
    else print_text(sum, &res, pl, speedup);
    if (!json && out) fprintf(sum, "wrote %s\n", out);
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
