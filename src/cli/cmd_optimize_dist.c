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
  double min_gain = -1, worker_cores = 0, trainer_cores = 0, recv = 0, send = 0;
#define POSITIVE .lo = 0, .lo_open = true, .hi = HUGE_VAL, .must = "positive"
#define SECONDS .lo = 0, .lo_open = true, .hi = SL_TRACE_MAX_SECONDS, .must = "positive, at most 1e7 (115 days)"
  const cli_opt opts[] = {
      {.name = "--workers", .type = CLI_INT, .dst = &k, .lo = 1, .hi = 1 << 20, .must = "1 or more (at most 2^20)"},
      {.name = "-o", .alias = "--output", .type = CLI_STR, .dst = &out, .needs = "a file name"},
      {.name = "--link-gbps", .type = CLI_NUM, .dst = &gbps, POSITIVE},
      {.name = "--worker-cores", .type = CLI_NUM, .dst = &worker_cores, POSITIVE},
      {.name = "--trainer-cores", .type = CLI_NUM, .dst = &trainer_cores, POSITIVE},
      {.name = "--recv-gbps", .type = CLI_NUM, .dst = &recv, POSITIVE},
      {.name = "--send-gbps", .type = CLI_NUM, .dst = &send, POSITIVE},
      {.name = "--min-gain", .type = CLI_NUM, .dst = &min_gain, .lo = 0, .hi = 100, .hi_open = true,
       .must = "0 or more (below 100)"},
      {.name = "--seconds", .type = CLI_NUM, .dst = &seconds, SECONDS},
      {.name = "--json", .type = CLI_FLAG, .dst = &json},
      {.name = NULL},
  };
#undef POSITIVE
  const cli_args args = {.cmd = "optimize", .opts = opts, .help = help, .pos = &spec, .npos = 1, .noun = "spec",
                         .hint = " (the offload planner takes the options in `sluice optimize --workers 1 --help`)"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  if (min_gain >= 0) oo.min_gain = min_gain > 0 ? min_gain : -1; /* 0 on the command line: any gain (0 in the struct is the default) */
  if (worker_cores > 0) oo.worker_cores = worker_cores;
  if (trainer_cores > 0) oo.trainer_cores = trainer_cores;
  if (recv > 0) oo.recv_bandwidth = recv * 1e9 / 8;
  if (send > 0) oo.send_bandwidth = send * 1e9 / 8;
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
