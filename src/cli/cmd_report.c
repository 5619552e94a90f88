/* cli/cmd_report.c: `sluice report TRACE -o report.html`: the trace's HTML report (sl_report_trace_html), with
 * the changes of a tuned spec (or of a trace of it) when --tuned names one. `sluice prov report` is in
 * cmd_prov_an.c. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli_int.h"

int cli_write_text(const char *cmd, const char *path, const char *text) {
  if (!path || !strcmp(path, "-")) {
    fputs(text, stdout);
    return fflush(stdout) == 0 ? CLI_OK : cli_fail(false, "%s: cannot write to stdout", cmd);
  }
  /* beside the file, then renamed: a failed write leaves the previous file; a link at `path` is replaced */
  if (sl_file_write(path, text, strlen(text))) return cli_fail(false, "%s: %s", cmd, sl_error_last());
  return CLI_OK;
}

static void report_help(FILE *f) {
  fprintf(f,
          "usage: sluice report TRACE [-o REPORT.html] [--tuned TUNED] [--spec SPEC] [planner options]\n\n"
          "Writes one self-contained HTML page (inline SVG and CSS; no script, nothing loaded from the network)\n"
          "about a trace ('sluice trace'): the pipeline as a graph, each op coloured by its share of CPU and the\n"
          "bottleneck marked; each op's rate at its parallelism against the traced throughput; traced, predicted\n"
          "and measured throughput; the LP bound and the what-ifs; the analyzer's table and sentences; and the\n"
          "spec's changes knob by knob. The figures are those of 'sluice analyze' with the same options.\n\n"
          "  -o FILE        write the page here (default: stdout)\n"
          "  --tuned TUNED  the tuned spec 'sluice optimize SPEC -o TUNED' wrote, or a trace of it ('sluice trace\n"
          "                 TUNED -o T2'): the page shows its changes instead of the plan's and, for a trace, its\n"
          "                 measured throughput against the prediction\n"
          "  --spec SPEC    check that the trace was taken of this spec\n"
          "%s",
          cli_plan_options_help());
}

/* --tuned: a trace (its "format" says so) or a spec, normalised as the trace's spec is. */
static int load_tuned(const char *path, sl_trace **trace, char **spec) {
  json_error_t e;
  char msg[1024];
  FILE *f = cli_open_regular(path, msg, sizeof msg); /* a FIFO is refused, not waited on */
  if (!f) return cli_fail(false, "report: --tuned %s", msg);
  json_t *j = json_loadf(f, 0, &e);
  fclose(f);
  if (!j && e.line < 1) return cli_fail(false, "report: --tuned %s: %s", path, e.text);
  if (!j) return cli_fail(false, "report: --tuned %s: line %d: %s", path, e.line, e.text);
  const char *fmt = json_string_value(json_object_get(j, "format"));
  bool is_trace = fmt && !strcmp(fmt, "sluice-trace");
  json_decref(j);
  if (is_trace) return sl_trace_load(trace, path) ? cli_fail(false, "report: --tuned %s", sl_error_last()) : CLI_OK;
  sl_pipeline *p = NULL;
  if (cli_open_spec(&p, path, msg, sizeof msg)) return cli_fail(false, "report: --tuned %s", msg);
  if (sl_pipeline_to_json(spec, p)) {
    sl_pipeline_free(p);
    return cli_fail(false, "report: --tuned %s", sl_error_last());
  }
  sl_pipeline_free(p);
  return CLI_OK;
}

int cmd_report(int argc, char **argv) {
  const char *path = NULL, *out = NULL, *tuned = NULL, *spec = NULL;
  sl_report_trace_opts ro = SL_REPORT_TRACE_OPTS_INIT;
  cli_plan_args pa;
  cli_opt plan[CLI_PLAN_NOPTS];
  cli_plan_table(plan, &pa, &ro.plan);
  const cli_opt opts[] = {
      {.name = "-o", .alias = "--output", .type = CLI_STR, .dst = &out, .needs = "a file name"},
      {.name = "--tuned", .type = CLI_STR, .dst = &tuned, .needs = "a file (a tuned spec or a trace of it)"},
      {.name = "--spec", .type = CLI_STR, .dst = &spec, .needs = "a file"},
      {.name = NULL},
  };
  const cli_args args = {.cmd = "report", .opts = opts, .more = plan, .help = report_help, .pos = &path, .npos = 1,
                         .noun = "trace"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  cli_plan_apply(&pa);
  if (!path) return cli_usage("report", "a TRACE file is required (make one with 'sluice trace SPEC -o TRACE')");
  sl_trace *t = NULL, *tt = NULL;
  char *tuned_spec = NULL, *html = NULL;
  int rc = cli_load_trace(path, spec, &t);
  if (rc == CLI_OK) cli_plan_cores_left(&ro.plan, t);
  if (rc == CLI_OK && tuned) rc = load_tuned(tuned, &tt, &tuned_spec);
  if (rc == CLI_OK) {
    ro.source = path;
    ro.tuned_spec = tuned_spec;
    ro.tuned_trace = tt;
    if (sl_report_trace_html(&html, t, &ro))
      rc = tuned ? cli_fail(false, "report: %s with --tuned %s: %s", path, tuned, sl_error_last())
                 : cli_fail(false, "report: %s: %s", path, sl_error_last());
    else rc = cli_write_text("report", out, html);
  }
  if (rc == CLI_OK && out) fprintf(stderr, "wrote %s\n", out);
  sl_free(html);
  sl_free(tuned_spec);
  sl_trace_free(tt);
  sl_trace_free(t);
  return rc;
}
