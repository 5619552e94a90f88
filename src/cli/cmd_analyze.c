/* cli/cmd_analyze.c: `sluice analyze TRACE`: the model's view of a trace (per-op table, bottleneck, LP bound,
 * plan, what-ifs), and the planner options shared with `sluice optimize`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_int.h"

void cli_plan_table(cli_opt t[CLI_PLAN_NOPTS], cli_plan_args *pa, sl_plan_opts *o) {
  pa->o = o;
  pa->disk_bw = -1;
  pa->knobs = -1;
  const cli_opt T[CLI_PLAN_NOPTS] = {
      {.name = "--cores", .type = CLI_NUM, .dst = &o->cores, .lo = 0, .lo_open = true, .hi = HUGE_VAL,
       .must = "more than 0 cores (an infeasible budget otherwise)"},
      {.name = "--consumer-cores", .type = CLI_NUM, .dst = &o->consumer_cores},
      {.name = "--memory", .type = CLI_SIZE, .dst = &o->memory, .lo = 1, .hi = 9e18,
       .must = "at least one element's bytes (an infeasible budget otherwise)"},
      {.name = "--disk-bw", .type = CLI_SIZE, .dst = &pa->disk_bw},
      {.name = "--no-cache", .type = CLI_FLAG, .dst = &o->no_cache},
      {.name = "--no-prefetch", .type = CLI_FLAG, .dst = &o->no_prefetch},
      {.name = "--only-autotune", .type = CLI_SET, .dst = &pa->knobs, .set = SL_PLAN_KNOBS_AUTOTUNE},
      {.name = NULL},
  };
  memcpy(t, T, sizeof T);
}

void cli_plan_apply(cli_plan_args *pa) {
  if (pa->disk_bw >= 0) pa->o->disk_bandwidth = (double)pa->disk_bw;
  if (pa->knobs >= 0) pa->o->knobs = (sl_plan_knobs)pa->knobs;
}

void cli_plan_cores_left(sl_plan_opts *o, const sl_trace *t) {
  const sl_machine *m = sl_trace_machine(t);
  if (o->cores == 0 && m->other_load >= 0.25 && m->cores > 0) o->cores = fmax(m->cores - m->other_load, 0.05);
}

const char *cli_plan_options_help(void) {
  return "  --cores C           cores for the pipeline (default: the traced machine's usable cores, less those\n"
         "                      other processes kept busy during the trace when a quarter core or more)\n"
         "  --consumer-cores C  cores the consumer needs, taken off --cores (default 0)\n"
         "  --memory SIZE       memory budget, e.g. 512M (default: 0.5 x available memory at trace time)\n"
         "  --disk-bw RATE      disk bandwidth in bytes/s, e.g. 200M (default: measured by the trace)\n"
         "  --no-cache          never insert a cache\n"
         "  --no-prefetch       never insert a prefetch at the root\n"
         "  --only-autotune     change only knobs the spec sets to \"autotune\"\n";
}

int cli_load_trace(const char *path, const char *spec, sl_trace **out) {
  *out = NULL;
  if (sl_trace_load(out, path)) return cli_fail(false, "%s", sl_error_last());
  int rc = CLI_OK;
  if (spec) {
    sl_pipeline *p = NULL;
    char msg[1024];
    if (cli_open_spec(&p, spec, msg, sizeof msg)) rc = cli_fail(false, "%s", msg);
    else if (sl_trace_check_spec(*out, p)) rc = cli_fail(false, "%s vs %s: %s", path, spec, sl_error_last());
    sl_pipeline_free(p);
  }
  return rc;
}

static void analyze_help(FILE *f) {
  fprintf(f,
          "usage: sluice analyze TRACE [--spec SPEC] [--json] [planner options]\n\n"
          "Reads a trace ('sluice trace') and prints, per op: visit ratio, CPU per output element, rate per core,\n"
          "parallelism, share of CPU and utilisation; the bottleneck in a sentence; the LP's throughput bound on\n"
          "this machine and what limits it; the plan 'sluice optimize' would apply; and what-ifs (one more core,\n"
          "a cache, more memory).\n\n"
          "  --spec SPEC   check that the trace was taken of this spec\n"
          "  --json        the report as JSON (on failure {\"status\": \"error\", \"error\": ...})\n"
          "%s",
          cli_plan_options_help());
}

int cmd_analyze(int argc, char **argv) {
  const char *path = NULL, *spec = NULL;
  bool json = false;
  sl_plan_opts po = SL_PLAN_OPTS_INIT;
  cli_plan_args pa;
  cli_opt plan[CLI_PLAN_NOPTS];
  cli_plan_table(plan, &pa, &po);
  const cli_opt opts[] = {
      {.name = "--json", .type = CLI_FLAG, .dst = &json},
      {.name = "--spec", .type = CLI_STR, .dst = &spec, .needs = "a file"},
      {.name = NULL},
  };
  const cli_args args = {.cmd = "analyze", .opts = opts, .more = plan, .help = analyze_help, .pos = &path, .npos = 1,
                         .noun = "trace"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  cli_plan_apply(&pa);
  if (!path) return cli_usage("analyze", "a TRACE file is required (make one with 'sluice trace SPEC -o TRACE')");
  sl_trace *t = NULL;
  int rc = cli_load_trace(path, spec, &t);
  if (rc == CLI_OK) cli_plan_cores_left(&po, t);
  sl_plan *pl = NULL;
  if (rc == CLI_OK && sl_plan_solve(&pl, t, &po)) rc = cli_fail(false, "%s: %s", path, sl_error_last());
  if (rc == CLI_OK && sl_trace_elements(t) < SL_PLAN_MIN_ELEMENTS)
    fprintf(stderr, "warning: %s saw %llu output elements; at least %d are needed for figures to plan from: "
                    "these are a few elements' noise or warm-up\n", path, (unsigned long long)sl_trace_elements(t),
            SL_PLAN_MIN_ELEMENTS);
  if (rc == CLI_OK) {
    char *s = NULL;
    if (sl_plan_report(&s, pl, json)) rc = cli_fail(false, "%s", sl_error_last());
    else fputs(s, stdout);
    if (json && s) fputc('\n', stdout);
    sl_free(s);
  }
  if (rc != CLI_OK && json) cli_json_error(cli_last_error());
  sl_plan_free(pl);
  sl_trace_free(t);
  return rc;
}
