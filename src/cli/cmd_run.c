/* cli/cmd_run.c: `sluice run` (run a spec, report throughput) and `sluice validate` (build it without running). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_int.h"
#include "run_dist_int.h"

static void run_help(FILE *f) {
  fprintf(f,
          "usage: sluice run SPEC [--take N] [--seconds S] [--warmup S] [--warmup-caches] [--tuner T] [--record DB]\n"
          "                  [--record-optional] [--digest] [--json] [--quiet]\n\n"
          "Runs the pipeline in SPEC (a JSON file) and reports what it produced and how fast.\n\n"
          "  --take N      stop after N output elements\n"
          "  --seconds S   stop after S seconds (of measurement, after the warm-up)\n"
          "  --warmup S    run S seconds before measuring (not counted in the figures)\n"
          "  --warmup-caches  also warm up until every cache op holds its complete first pass (at most 300 s)\n"
          "  --record DB   record the run in an ML Metadata store (a path, sqlite:PATH or postgresql://...);\n"
          "                SLUICE_PROV in the environment does the same. The execution is recorded RUNNING when the\n"
          "                run starts and finished at its end; a store that cannot take it fails the command\n"
          "  --record-optional  a store that cannot take the record is a warning: the run goes on\n"
          "  --tuner T     'autotune': tune the spec's \"autotune\" knobs online with the tf.data-AUTOTUNE\n"
          "                equivalent (HILL_CLIMB, re-optimised on a 10 ms -> 60 s doubling schedule); 'sluice': with\n"
          "                the planner's model and LP, re-solved from the counters every 1 s when the costs drift;\n"
          "                tries the all-sequential knobs once and keeps what measured faster (within 3%%: what spent\n"
          "                clearly less CPU), takes back a change that measured clearly slower (or added CPU for no\n"
          "                gain beyond 3%%), and may keep a repeat's epoch in memory (the plan's cache);\n"
          "                before the run, fuses decode_jpeg + random_resized_crop/center_crop/resize as optimize does;\n"
          "                every change printed with its reason (--json and --record: tuner_changes)\n"
          "  --digest      print a digest of the output: the sum modulo 2^64 of each element's 64-bit hash\n"
          "                (XXH3 of its component names, dtypes, shapes and values), 16 hex digits. Runs that\n"
          "                yield the same elements in any order have the same digest; digests of disjoint parts\n"
          "                (shards) add up to the whole's. Warm-up elements are included\n"
          "  --json        print the summary as JSON on stdout (on failure {\"status\": \"error\", \"error\": ...})\n"
          "  --quiet       no progress line\n");
  run_dist_help(f);
  fprintf(f, "\n"
          "Output elements are what the last op yields (batches, when the pipeline batches); 'examples' counts the\n"
          "leading dimension of batched elements. Ctrl-C (SIGTERM) stops cleanly, prints the summary and exits with\n"
          "130 (143).\n");
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Bad records dropped per op (on_corrupt / on_error "skip"): as a JSON object {"ops[3]": 2} (only ops that
 * dropped some) or as one summary line; nothing in text when none was dropped. */
static void print_skipped(const sl_pipeline *p, bool json) {
  bool any = false;
  if (json) printf(", \"skipped\": {");
  for (int i = 0; i < sl_pipeline_op_count(p); i++) {
    sl_op_stats s;
    if (sl_pipeline_op_stats(&s, p, i) || !s.skipped) continue;
    if (json) {
      printf("%s", any ? ", " : "");
      cli_json_string(stdout, s.path);
      printf(": %llu", (unsigned long long)s.skipped);
    } else {
      printf("%s %s (%s %s) %llu", any ? ";" : "  skipped:", s.path, s.op, s.label, (unsigned long long)s.skipped);
      if (s.errors_skipped) printf(" (%llu failed in the function)", (unsigned long long)s.errors_skipped);
    }
    any = true;
  }
  if (json) printf("}");
  else if (any) printf("\n");
}

int cmd_run(int argc, char **argv) {
  const char *spec = NULL;
  int64_t take = -1;
  double seconds = -1, warmup = 0;
  bool warm_caches = false;
  const char *record = NULL;
  bool json = false, quiet = false, autotune = false, digest = false, record_optional = false, stune = false;
  int64_t workers = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (cli_is_help(a)) {
      run_help(stdout);
      return CLI_OK;
    } else if (!strcmp(a, "--take")) {
      if (!cli_parse_i64("run", a, i + 1 < argc ? argv[++i] : NULL, &take)) return CLI_USAGE;
      if (take <= 0) return cli_usage("run", "--take must be a positive number of elements, not %s", argv[i]);
    } else if (!strcmp(a, "--seconds")) {
      if (!cli_parse_f64("run", a, i + 1 < argc ? argv[++i] : NULL, &seconds)) return CLI_USAGE;
      if (!(seconds > 0)) return cli_usage("run", "--seconds must be a positive number of seconds, not %s", argv[i]);
    } else if (!strcmp(a, "--warmup-caches")) {
      warm_caches = true;
    } else if (!strcmp(a, "--warmup")) {
      if (!cli_parse_f64("run", a, i + 1 < argc ? argv[++i] : NULL, &warmup)) return CLI_USAGE;
      if (!(warmup >= 0)) return cli_usage("run", "--warmup must not be negative (got %s)", argv[i]);
    } else if (!strcmp(a, "--record")) {
      if (i + 1 >= argc) return cli_usage("run", "--record needs a store (a path, sqlite:PATH or postgresql://...)");
      record = argv[++i];
    } else if (!strcmp(a, "--record-optional")) {
      record_optional = true;
    } else if (!strcmp(a, "--tuner")) {
      if (i + 1 >= argc) return cli_usage("run", "--tuner needs a name (sluice, autotune or none)");
      const char *t = argv[++i];
      if (!strcmp(t, "autotune")) autotune = true;
      else if (!strcmp(t, "sluice")) stune = true;
      else if (strcmp(t, "none")) return cli_usage("run", "--tuner: unknown tuner '%s' (known: sluice, autotune, none)", t);
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--digest")) {
      digest = true;
    } else if (!strcmp(a, "--workers")) {
      if (!cli_parse_i64("run", a, i + 1 < argc ? argv[++i] : NULL, &workers)) return CLI_USAGE;
      if (workers < 0 || workers > 1 << 20) return cli_usage("run", "--workers must be 0 or more ranks, not %s", argv[i]);
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
  char msg[1024];
  if (run_dist_start((int)workers, msg, sizeof msg)) {
    if (json) cli_json_error(msg);
    return cli_fail(false, "%s", msg);
  }
  if (cli_open_spec(&p, spec, msg, sizeof msg)) {
    if (json) cli_json_error(msg);
    cli_record(record, "sluice.Run", spec, NULL, NULL, 0, 0, 0, 0, msg);
    return cli_fail(false, "%s", msg);
  }
  if (run_dist_is_worker()) return run_dist_serve(p, spec, json, quiet);
  char *fused_note = NULL; /* --tuner sluice: what was fused before the run (a live pipeline takes no new op) */
  if (stune) {
    sl_pipeline *f = NULL;
    if (sl_pipeline_fuse(&f, p, &fused_note)) {
      snprintf(msg, sizeof msg, "%s", sl_error_last());
      if (json) cli_json_error(msg);
      sl_pipeline_free(p);
      return cli_fail(false, "%s", msg);
    }
    if (f) {
      sl_pipeline_free(p);
      p = f;
    }
  }
  if (cli_record_begin(record, "sluice.Run", spec, p, record_optional)) {
    if (json) cli_json_error(cli_last_error());
    sl_free(fused_note);
    sl_pipeline_free(p);
    return CLI_FAIL;
  }
  /* --tuner sluice: the planner's model, online (plan_tune.c). Started before the run, so that its one-off probes
   * (the machine, the hand-off costs) measure a machine the pipeline's threads are not yet busy on. */
  sl_tuner *stuner = NULL;
  if (stune && sl_pipeline_tune(&stuner, p, NULL)) {
    snprintf(msg, sizeof msg, "%s", sl_error_last());
    if (json) cli_json_error(msg);
    cli_record(record, "sluice.Run", spec, p, NULL, 0, 0, 0, 0, msg);
    sl_free(fused_note);
    sl_pipeline_free(p);
    return cli_fail(false, "%s", msg);
  }
  sl_iter *it = NULL;
  if (sl_pipeline_iter(&it, p)) {
    snprintf(msg, sizeof msg, "%s", sl_error_last());
    if (json) cli_json_error(msg);
    cli_record(record, "sluice.Run", spec, p, NULL, 0, 0, 0, 0, msg);
    if (stuner) sl_tuner_stop(stuner);
    sl_free(fused_note);
    sl_pipeline_free(p);
    return cli_fail(false, "%s", msg);
  }
  sl_autotuner *tuner = NULL;
  if (autotune && sl_autotune_start(&tuner, p, NULL)) {
    snprintf(msg, sizeof msg, "%s", sl_error_last());
    if (json) cli_json_error(msg);
    cli_record(record, "sluice.Run", spec, p, NULL, 0, 0, 0, 0, msg);
    sl_iter_free(it);
    if (stuner) sl_tuner_stop(stuner);
    sl_free(fused_note);
    sl_pipeline_free(p);
    return cli_fail(false, "%s", msg);
  }
  cli_signals_install();
  cli_progress p_bar;
  cli_progress_start(&p_bar, "run", take);
  if (quiet) p_bar.tty = false;
  double t0 = cli_now(), c0 = cpu_seconds();
  int64_t n = 0, examples = 0;
  double bytes = 0;
  sl_elem e;
  sl_elem_init(&e);
  int rc = 0, sig = 0;
  uint64_t sum = 0; /* --digest: element digests add modulo 2^64 (unsigned wrap-around) */
  bool warm = warmup <= 0 && (!warm_caches || sl_pipeline_caches_complete(p));
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
      bytes = 0; /* the digest goes on: it covers every element the pipeline yields */
    }
    if (digest) {
      uint64_t d;
      if ((rc = sl_elem_digest(&d, &e)) != 0) {
        sl_elem_clear(&e);
        break;
      }
      sum += d;
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
    if ((sig = cli_signal_seen()) != 0) break;
  }
  double wall = cli_now() - t0, cpu = cpu_seconds() - c0;
  cli_progress_end(&p_bar);
  if (!sig) sig = cli_signal_seen(); /* a signal that ended a blocked next() as a failure is still a stop */
  char errmsg[1024] = "";
  if (rc < 0) snprintf(errmsg, sizeof errmsg, "%s", sl_error_last());
  int rounds = tuner ? sl_autotune_rounds(tuner) : 0;
  sl_autotune_stop(tuner);
  char *tlog = NULL, *tjson = NULL; /* the change log as printed, and as JSON for --json and --record */
  if (stuner) {
    rounds = sl_tuner_solves(stuner);
    if (sl_tuner_log(&tlog, stuner, json)) tlog = NULL;
    if (record && !json && sl_tuner_log(&tjson, stuner, true)) {
      fprintf(stderr, "sluice: warning: the tuner's changes will not be recorded: %s\n", cli_safe(sl_error_last()));
      tjson = NULL;
    }
    sl_tuner_stop(stuner);
  }
  if (autotune || stune) cli_record_tuner(autotune ? "autotune" : "sluice", rounds, json ? tlog : tjson);
  sl_iter_free(it);
  double rate = wall > 0 ? (double)n / wall : 0;
  const char *status = rc < 0 ? "error" : sig == SIGTERM ? "terminated" : sig ? "interrupted" : "ok";
  if (json) {
    printf("{\"spec\": ");
    cli_json_string(stdout, spec);
    printf(", \"elements\": %lld, \"examples\": %lld, \"bytes\": %.0f, \"wall_seconds\": %.6f, "
           "\"cpu_seconds\": %.6f, \"elements_per_second\": %.3f, \"examples_per_second\": %.3f, "
           "\"mb_per_second\": %.3f, \"status\": \"%s\", \"tuner\": \"%s\", \"tuner_rounds\": %d",
           (long long)n, (long long)examples, bytes, wall, cpu, rate, wall > 0 ? (double)examples / wall : 0,
           wall > 0 ? bytes / wall / 1e6 : 0, status, autotune ? "autotune" : stune ? "sluice" : "none", rounds);
    if (stune) {
      printf(", \"tuner_changes\": %s, \"tuner_fused\": ", tlog ? tlog : "[]");
      if (fused_note) cli_json_string(stdout, fused_note);
      else printf("null");
    }
    if (digest) printf(", \"digest\": \"%016llx\"", (unsigned long long)sum);
    print_skipped(p, true);
    run_dist_json(stdout);
    if (rc < 0) {
      printf(", \"error\": ");
      cli_json_string(stdout, cli_safe(errmsg));
    }
    printf("}\n");
  } else if (!quiet || rc >= 0) {
    printf("%s: %lld elements (%lld examples) in %.3f s\n", sl_pipeline_name(p), (long long)n, (long long)examples, wall);
    printf("  %.1f elements/s, %.1f examples/s, %.2f MB/s\n", rate, wall > 0 ? (double)examples / wall : 0,
           wall > 0 ? bytes / wall / 1e6 : 0);
    printf("  wall %.3f s, CPU %.3f s (%.2f cores)\n", wall, cpu, wall > 0 ? cpu / wall : 0);
    if (digest) printf("  digest %016llx%s\n", (unsigned long long)sum, rc < 0 || sig ? " (of the elements so far)" : "");
    print_skipped(p, false);
    if (autotune) {
      printf("  tuner autotune: %d re-optimisations; final knobs:", rounds);
      for (int i = 0; i < sl_pipeline_op_count(p); i++) {
        sl_op_stats s;
        if (sl_pipeline_op_stats(&s, p, i) == 0 && s.async)
          printf(" %s parallelism %lld buffer %lld;", s.path, (long long)s.parallelism, (long long)s.buffer);
      }
      printf("\n");
    }
    if (stune && fused_note) printf("  tuner sluice: fused before the run: %s\n", fused_note);
    if (stune) printf("  tuner sluice: %d solves; changes:\n%s", rounds, tlog && *tlog ? tlog : "  (none)\n");
  }
  if (sig) cli_record_canceled();
  int rec = cli_record(record, "sluice.Run", spec, p, NULL, 0, rate, cpu, wall, rc < 0 ? errmsg : NULL);
  sl_free(tlog);
  sl_free(tjson);
  sl_free(fused_note);
  sl_pipeline_free(p);
  if (rc < 0) return cli_fail(false, "%s", errmsg);
  if (rec && !sig) return CLI_FAIL; /* said by cli_record */
  if (sig) {
    fprintf(stderr, "sluice: %s after %lld elements\n", sig == SIGTERM ? "terminated" : "interrupted", (long long)n);
    return 128 + sig;
  }
  return CLI_OK;
}

static void validate_help(FILE *f) {
  fprintf(f, "usage: sluice validate SPEC [--print | --print-spec]\n\nBuilds the pipeline in SPEC without running it: "
             "checks the JSON, every op, knob and function arg, the components each op reads, and that input files "
             "exist.\n  --print        print the element structure after each op (components, dtypes, shapes)\n"
             "  --print-spec   print the normalised spec\n");
}

int cmd_validate(int argc, char **argv) {
  const char *spec = NULL;
  bool print = false, print_spec = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (cli_is_help(a)) {
      validate_help(stdout);
      return CLI_OK;
    } else if (!strcmp(a, "--print")) {
      print = true;
    } else if (!strcmp(a, "--print-spec")) {
      print_spec = true;
    } else if (a[0] == '-') {
      return cli_usage("validate", "unknown option '%s'", a);
    } else if (!spec) {
      spec = a;
    } else {
      return cli_usage("validate", "more than one spec given ('%s', '%s')", spec, a);
    }
  }
  if (!spec) return cli_usage("validate", "a SPEC file is required");
  sl_pipeline *p = NULL;
  char msg[1024];
  if (cli_open_spec(&p, spec, msg, sizeof msg)) return cli_fail(false, "%s", msg);
  int rc = CLI_OK;
  if (print) {
    rc = cli_validate_print(p);
  } else if (print_spec) {
    char *s = NULL;
    if (sl_pipeline_to_json(&s, p) == 0) printf("%s\n", s);
    else rc = cli_fail(false, "%s", sl_error_last());
    sl_free(s);
  } else {
    printf("%s: ok (%d ops)\n", spec, sl_pipeline_op_count(p));
  }
  sl_pipeline_free(p);
  return rc;
}
