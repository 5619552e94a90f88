/* cli/cmd_analyze.c: `sluice analyze TRACE`: the model's view of a trace (per-op table, bottleneck, LP bound,
 * plan, what-ifs), and the planner options shared with `sluice optimize`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_int.h"

bool cli_parse_bytes(const char *cmd, const char *opt, const char *val, int64_t *out) {
  char *end;
  if (!val) {
    cli_usage(cmd, "%s needs a value", opt);
    return false;
  }
  double v = strtod(val, &end);
  double mul = 1;
  if (*end == 'k' || *end == 'K') mul = 1e3, end++;
  else if (*end == 'm' || *end == 'M') mul = 1e6, end++;
  else if (*end == 'g' || *end == 'G') mul = 1e9, end++;
  if (*end == 'B' || *end == 'b') end++;
  if (end == val || *end || v < 0) {
    cli_usage(cmd, "%s: '%s' is not a size (e.g. 512M, 2G, 1000000)", opt, val);
    return false;
  }
  *out = (int64_t)(v * mul);
  return true;
}

int cli_plan_option(const char *cmd, int argc, char **argv, int *i, sl_plan_opts *o) {
  const char *a = argv[*i];
  const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
  if (!strcmp(a, "--cores")) {
    if (!cli_parse_f64(cmd, a, v, &o->cores)) return -1;
    if (o->cores <= 0) {
      cli_usage(cmd, "--cores: infeasible budget %s (needs more than 0 cores)", v);
      return -1;
    }
  } else if (!strcmp(a, "--consumer-cores")) {
    if (!cli_parse_f64(cmd, a, v, &o->consumer_cores)) return -1;
  } else if (!strcmp(a, "--memory")) {
    if (!cli_parse_bytes(cmd, a, v, &o->memory)) return -1;
    if (o->memory <= 0) {
      cli_usage(cmd, "--memory: infeasible budget %s (needs at least one element's bytes)", v);
      return -1;
    }
  } else if (!strcmp(a, "--disk-bw")) {
    int64_t b;
    if (!cli_parse_bytes(cmd, a, v, &b)) return -1;
    o->disk_bandwidth = (double)b;
  } else if (!strcmp(a, "--no-cache")) {
    o->no_cache = true;
    return 1;
  } else if (!strcmp(a, "--no-prefetch")) {
    o->no_prefetch = true;
    return 1;
  } else if (!strcmp(a, "--only-autotune")) {
    o->knobs = SL_PLAN_KNOBS_AUTOTUNE;
    return 1;
  } else {
    return 0;
  }
  (*i)++;
  return 1;
}

const char *cli_plan_options_help(void) {
  return "  --cores C           cores for the pipeline (default: the traced machine's usable cores)\n"
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
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int r;
    if (cli_is_help(a)) {
      analyze_help(stdout);
      return CLI_OK;
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--spec")) {
      if (i + 1 >= argc) return cli_usage("analyze", "--spec needs a file");
      spec = argv[++i];
    } else if ((r = cli_plan_option("analyze", argc, argv, &i, &po)) != 0) {
      if (r < 0) return CLI_USAGE;
    } else if (a[0] == '-') {
      return cli_usage("analyze", "unknown option '%s'", a);
    } else if (!path) {
      path = a;
    } else {
      return cli_usage("analyze", "more than one trace given ('%s', '%s')", path, a);
    }
  }
  if (!path) return cli_usage("analyze", "a TRACE file is required (make one with 'sluice trace SPEC -o TRACE')");
  sl_trace *t = NULL;
  int rc = cli_load_trace(path, spec, &t);
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
