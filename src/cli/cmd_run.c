/* cli/cmd_run.c: `sluice run` (run a spec, report throughput) and `sluice validate` (build it without running). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_int.h"

static void run_help(FILE *f) {
  fprintf(f,
          "usage: sluice run SPEC [--take N] [--seconds S] [--warmup S] [--warmup-caches] [--tuner autotune] [--record DB] [--json] [--quiet]\n\n"
          "Runs the pipeline in SPEC (a JSON file) and reports what it produced and how fast.\n\n"
          "  --take N      stop after N output elements\n"
          "  --seconds S   stop after S seconds (of measurement, after the warm-up)\n"
          "  --warmup S    run S seconds before measuring (not counted in the figures)\n"
          "  --warmup-caches  also warm up until every cache op holds its complete first pass (at most 300 s)\n"
          "  --record DB   record the run in an ML Metadata store (a path, sqlite:PATH or postgresql://...);\n"
          "                SLUICE_PROV in the environment does the same\n"
          "  --tuner T     'autotune': tune the spec's \"autotune\" knobs online with the tf.data-AUTOTUNE\n"
          "                equivalent (HILL_CLIMB, re-optimised on a 10 ms -> 60 s doubling schedule)\n"
          "  --json        print the summary as JSON on stdout\n"
          "  --quiet       no progress line\n\n"
          "Output elements are what the last op yields (batches, when the pipeline batches); 'examples' counts the\n"
          "leading dimension of batched elements. Ctrl-C stops cleanly, prints the summary and exits with 130.\n");
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cmd_run(int argc, char **argv) {
  const char *spec = NULL;
  int64_t take = -1;
  double seconds = -1, warmup = 0;
  bool warm_caches = false;
  const char *record = NULL;
  bool json = false, quiet = false, autotune = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (cli_is_help(a)) {
      run_help(stdout);
      return CLI_OK;
    } else if (!strcmp(a, "--take")) {
      if (i + 1 >= argc || !cli_parse_i64("run", a, argv[++i], &take)) return CLI_USAGE;
    } else if (!strcmp(a, "--seconds")) {
      if (i + 1 >= argc || !cli_parse_f64("run", a, argv[++i], &seconds)) return CLI_USAGE;
    } else if (!strcmp(a, "--warmup-caches")) {
      warm_caches = true;
    } else if (!strcmp(a, "--warmup")) {
      if (i + 1 >= argc || !cli_parse_f64("run", a, argv[++i], &warmup)) return CLI_USAGE;
    } else if (!strcmp(a, "--record")) {
      if (i + 1 >= argc) return cli_usage("run", "--record needs a store (a path, sqlite:PATH or postgresql://...)");
      record = argv[++i];
    } else if (!strcmp(a, "--tuner")) {
      if (i + 1 >= argc) return cli_usage("run", "--tuner needs a name (autotune or none)");
      const char *t = argv[++i];
      if (!strcmp(t, "autotune")) autotune = true;
      else if (strcmp(t, "none")) return cli_usage("run", "--tuner: unknown tuner '%s' (known: autotune, none)", t);
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--quiet")) {
      quiet = true;
    } else if (a[0] == '-') {
      return cli_usage("run", "unknown option '%s'", a);
    } else if (!spec) {
      spec = a;
    } else {
      return cli_usage("run", "more than one spec given ('%s', '%s')", spec, a);
    }
  }
  if (!spec) return cli_usage("run", "a SPEC file is required");
  record = cli_record_target(record);
  sl_pipeline *p = NULL;
  if (sl_pipeline_from_file(&p, spec)) {
    int r = cli_fail(false, "%s", sl_error_last());
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", sl_error_last());
    cli_record(record, "sluice.Run", spec, NULL, NULL, 0, 0, 0, 0, msg);
    return r;
  }
  sl_iter *it = NULL;
  if (sl_pipeline_iter(&it, p)) {
    int r = cli_fail(false, "%s", sl_error_last());
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", sl_error_last());
    cli_record(record, "sluice.Run", spec, p, NULL, 0, 0, 0, 0, msg);
    sl_pipeline_free(p);
    return r;
  }
  sl_autotuner *tuner = NULL;
  if (autotune && sl_autotune_start(&tuner, p, NULL)) {
    int r = cli_fail(false, "%s", sl_error_last());
    sl_iter_free(it);
    sl_pipeline_free(p);
    return r;
  }
  cli_sigint_install();
  cli_progress p_bar;
  cli_progress_start(&p_bar, "run", take);
  if (quiet) p_bar.tty = false;
  double t0 = cli_now(), c0 = cpu_seconds();
  int64_t n = 0, examples = 0;
  double bytes = 0;
  sl_elem e;
  sl_elem_init(&e);
  int rc = 0;
  bool interrupted = false, warm = warmup <= 0 && (!warm_caches || sl_pipeline_caches_complete(p));
  while (take < 0 || n < take) {
    rc = sl_iter_next(&e, it);
    if (rc) break;
    if (!warm && cli_now() - t0 >= warmup &&
        (!warm_caches || sl_pipeline_caches_complete(p) || cli_now() - t0 >= warmup + SL_TRACE_MAX_FILL)) {
      /* the warm-up is not measured: counts and clocks start here */
      warm = true;
      t0 = cli_now();
      c0 = cpu_seconds();
      n = examples = 0;
      bytes = 0;
    }
    n++;
    examples += e.n > 0 && e.c[0].rank > 0 ? e.c[0].shape[0] : 1;
    bytes += (double)sl_elem_bytes(&e);
    sl_elem_clear(&e);
    double el = cli_now() - t0; /* a vDSO clock read: cheap next to an element */
    if (warm && seconds > 0 && el >= seconds) break;
    if ((n & 63) == 0) {
      char extra[64];
      snprintf(extra, sizeof extra, "%.1f elem/s", el > 0 ? (double)n / el : 0.0);
      cli_progress_update(&p_bar, n, extra);
    }
    if (cli_sigint_seen()) {
      interrupted = true;
      break;
    }
  }
  double wall = cli_now() - t0, cpu = cpu_seconds() - c0;
  cli_progress_end(&p_bar);
  char errmsg[1024] = "";
  if (rc < 0) snprintf(errmsg, sizeof errmsg, "%s", sl_error_last());
  int rounds = tuner ? sl_autotune_rounds(tuner) : 0;
  sl_autotune_stop(tuner);
  sl_iter_free(it);
  double rate = wall > 0 ? (double)n / wall : 0;
  if (json) {
    printf("{\"spec\": \"%s\", \"elements\": %lld, \"examples\": %lld, \"bytes\": %.0f, \"wall_seconds\": %.6f, "
           "\"cpu_seconds\": %.6f, \"elements_per_second\": %.3f, \"examples_per_second\": %.3f, "
           "\"mb_per_second\": %.3f, \"status\": \"%s\", \"tuner\": \"%s\", \"tuner_rounds\": %d}\n",
           spec, (long long)n, (long long)examples, bytes, wall, cpu, rate, wall > 0 ? (double)examples / wall : 0,
           wall > 0 ? bytes / wall / 1e6 : 0, rc < 0 ? "error" : interrupted ? "interrupted" : "ok",
           autotune ? "autotune" : "none", rounds);
  } else if (!quiet || rc >= 0) {
    printf("%s: %lld elements (%lld examples) in %.3f s\n", sl_pipeline_name(p), (long long)n, (long long)examples, wall);
    printf("  %.1f elements/s, %.1f examples/s, %.2f MB/s\n", rate, wall > 0 ? (double)examples / wall : 0,
           wall > 0 ? bytes / wall / 1e6 : 0);
    printf("  wall %.3f s, CPU %.3f s (%.2f cores)\n", wall, cpu, wall > 0 ? cpu / wall : 0);
    if (autotune) {
      printf("  tuner autotune: %d re-optimisations; final knobs:", rounds);
      for (int i = 0; i < sl_pipeline_op_count(p); i++) {
        sl_op_stats s;
        if (sl_pipeline_op_stats(&s, p, i) == 0 && s.async)
          printf(" %s parallelism %lld buffer %lld;", s.path, (long long)s.parallelism, (long long)s.buffer);
      }
      printf("\n");
    }
  }
  cli_record(record, "sluice.Run", spec, p, NULL, 0, rate, cpu, wall, rc < 0 ? errmsg : NULL);
  sl_pipeline_free(p);
  if (rc < 0) return cli_fail(false, "%s", errmsg);
  if (interrupted) {
    fprintf(stderr, "sluice: interrupted after %lld elements\n", (long long)n);
    return CLI_INTERRUPTED;
  }
  return CLI_OK;
}

int cmd_validate(int argc, char **argv) {
  if (argc < 2 || cli_is_help(argv[1])) {
    FILE *f = argc < 2 ? stderr : stdout;
    fprintf(f, "usage: sluice validate SPEC [--print]\n\nBuilds the pipeline in SPEC without running it: checks the "
               "JSON, every op, knob and function, and that input files exist.\n  --print   print the normalised spec\n");
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  bool print = argc > 2 && !strcmp(argv[2], "--print");
  sl_pipeline *p = NULL;
  if (sl_pipeline_from_file(&p, argv[1])) return cli_fail(false, "%s", sl_error_last());
  if (print) {
    char *s = NULL;
    if (sl_pipeline_to_json(&s, p) == 0) {
      printf("%s\n", s);
      sl_free(s);
    }
  } else {
    printf("%s: ok (%d ops)\n", argv[1], sl_pipeline_op_count(p));
  }
  sl_pipeline_free(p);
  return CLI_OK;
}
