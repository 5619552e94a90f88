/* cli/cmd_optimize_dist.c: `sluice optimize SPEC --workers K`: traces SPEC on this machine and plans an offload
 * to worker ranks (sl_plan_offload): where the `offload` cut goes and how many workers a trainer needs, under a
 * link bandwidth; writes the spec with the cut and prints the prediction. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli_int.h"
#include "run_dist_int.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: sluice optimize SPEC --workers K [-o OUT] [--link-gbps G] [--worker-cores C] [--trainer-cores C]\n"
          "                       [--recv-gbps G] [--send-gbps G] [--min-gain F] [--seconds S] [--json]\n\n"
          "Traces SPEC for S seconds (default 2) and plans an offload to worker ranks (docs/distributed.md): for each\n"
          "cut between top-level ops, one trainer's rate is the least of its cores over the CPU per element below the\n"
          "cut, K workers' cores over the CPU above it, and the link over the bytes shipped per element. Writes SPEC\n"
          "with {\"op\": \"offload\"} at the best cut (none when no cut beats the trainer alone by --min-gain) and prints the cut,\n"
          "the workers a trainer needs and the predicted rates. Measure with: mpirun -np 1+W sluice run OUT --workers W\n\n"
          "  --workers K        worker ranks per trainer at most\n"
          "  -o OUT             write the spec with the cut here (default: stdout, the summary to stderr)\n"
          "  --link-gbps G      link bandwidth a trainer receives at, in Gbit/s (default 10)\n"
          "  --worker-cores C   cores of one worker rank (default: this machine's)\n"
          "  --trainer-cores C  cores of the trainer (default: this machine's)\n"
          "  --recv-gbps G      Gbit a trainer receives per CPU second of its own: the transport's CPU is charged to\n"
          "                     the trainer's cores (default: not charged; measure it on loopback/TCP)\n"
          "  --send-gbps G      Gbit a worker packs and sends per CPU second of its own, charged to the workers'\n"
          "                     cores (default: --recv-gbps's figure)\n"
          "  --min-gain F       take a cut only when it beats the trainer alone by this fraction (default 0.10,\n"
          "                     the model's error on one machine)\n"
          "  --seconds S        trace for S seconds (default 2)\n"
          "  --json             print the summary as JSON on stdout\n");
}

int cmd_optimize_workers(int argc, char **argv) {
  const char *spec = NULL, *out = NULL;
  sl_offload_opts oo = SL_OFFLOAD_OPTS_INIT;
  double gbps = 10, seconds = 2;
  bool json = false;
  int64_t k = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (cli_is_help(a)) {
      help(stdout);
      return CLI_OK;
    } else if (!strcmp(a, "--workers")) {
      if (!cli_parse_i64("optimize", a, i + 1 < argc ? argv[++i] : NULL, &k)) return CLI_USAGE;
      if (k < 1 || k > 1 << 20) return cli_usage("optimize", "--workers must be 1 or more, not %s", argv[i]);
    } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
      if (i + 1 >= argc) return cli_usage("optimize", "%s needs a file name", a);
      out = argv[++i];
    } else if (!strcmp(a, "--link-gbps") || !strcmp(a, "--worker-cores") || !strcmp(a, "--trainer-cores") ||
               !strcmp(a, "--recv-gbps") || !strcmp(a, "--send-gbps") || !strcmp(a, "--min-gain") ||
               !strcmp(a, "--seconds")) {
      double v;
      if (!cli_parse_f64("optimize", a, i + 1 < argc ? argv[++i] : NULL, &v)) return CLI_USAGE;
      if (!strcmp(a, "--min-gain")) {
        if (!(v >= 0 && v < 100)) return cli_usage("optimize", "--min-gain must be 0 or more, not %s", argv[i]);
        oo.min_gain = v > 0 ? v : -1; /* 0 on the command line: any gain (0 in the struct is the default) */
        continue;
      }
      if (!(v > 0)) return cli_usage("optimize", "%s must be positive, not %s", a, argv[i]);
      if (!strcmp(a, "--link-gbps")) gbps = v;
      else if (!strcmp(a, "--worker-cores")) oo.worker_cores = v;
      else if (!strcmp(a, "--trainer-cores")) oo.trainer_cores = v;
      else if (!strcmp(a, "--recv-gbps")) oo.recv_bandwidth = v * 1e9 / 8;
      else if (!strcmp(a, "--send-gbps")) oo.send_bandwidth = v * 1e9 / 8;
      else seconds = v;
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (a[0] == '-') {
      return cli_usage("optimize", "--workers: unknown option '%s' (the offload planner takes the options in "
                       "`sluice optimize --workers 1 --help`)", a);
    } else if (!spec) {
      spec = a;
    } else {
      return cli_usage("optimize", "more than one spec given ('%s', '%s')", spec, a);
    }
  }
  if (!spec) return cli_usage("optimize", "a SPEC file is required");
  oo.workers = (int)k;
  oo.link_bandwidth = gbps * 1e9 / 8;
  char msg[1024];
  sl_pipeline *p = NULL;
  if (cli_open_spec(&p, spec, msg, sizeof msg)) return cli_fail(false, "%s", msg);
  sl_trace_opts to = SL_TRACE_OPTS_INIT;
  to.seconds = seconds;
  to.no_disk_probe = true;
  sl_trace *t = NULL;
  sl_offload_plan pl;
  char *text = NULL;
  int rc = sl_trace_run(&t, p, &to);
  if (!rc) rc = sl_plan_offload(&text, &pl, t, &oo);
  if (rc) {
    snprintf(msg, sizeof msg, "%s", sl_error_last());
    sl_trace_free(t);
    sl_pipeline_free(p);
    if (json) cli_json_error(msg);
    return cli_fail(false, "%s", msg);
  }
  int ret = out || !json ? cli_write_text("optimize", out, text) : CLI_OK;
  FILE *f = out || json ? stdout : stderr;
  if (json) {
    fprintf(f, "{\"spec\": ");
    cli_json_string(f, spec);
    fprintf(f, ", \"cut\": %d, \"workers\": %d, \"bytes_per_element\": %.1f, \"worker_cpu_per_element\": %.9f, "
               "\"trainer_cpu_per_element\": %.9f, \"predicted\": %.3f, \"predicted_local\": %.3f, \"limit\": \"%s\", "
               "\"measured_local\": %.3f}\n",
            pl.cut, pl.workers, pl.bytes_per_element, pl.worker_cpu, pl.trainer_cpu,
            isfinite(pl.predicted) ? pl.predicted : -1, isfinite(pl.predicted_local) ? pl.predicted_local : -1,
            pl.limit, sl_trace_throughput(t));
  } else if (pl.cut > 0) {
    fprintf(f, "offload before ops[%d]: %.0f bytes per element over the link; %d worker(s) per trainer\n"
               "  predicted %.1f elements/s (bound: %s) vs %.1f on the trainer alone (measured alone: %.1f)\n",
            pl.cut, pl.bytes_per_element, pl.workers, pl.predicted, pl.limit, pl.predicted_local,
            sl_trace_throughput(t));
  } else {
    fprintf(f, "no cut pays: none is predicted %.0f%% faster than the trainer alone (%.1f elements/s; measured "
               "%.1f)\n", oo.min_gain > 0 ? oo.min_gain * 100 : oo.min_gain < 0 ? 0 : 10, pl.predicted_local,
            sl_trace_throughput(t));
  }
  sl_free(text);
  sl_trace_free(t);
  sl_pipeline_free(p);
  return ret;
}
