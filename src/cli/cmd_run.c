/* cli/cmd_run.c: `sluice run` (run a spec, report throughput) and `sluice validate` (build it without running). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_int.h"
#include "run_dist_int.h"

static void run_help(FILE *f) {
  fprintf(f,
          "usage: sluice run SPEC [--take N] [--seconds S] [--warmup S] [--warmup-caches] [--tuner T] [--record DB]\n"
          "                  [--record-optional] [--digest] [--json] [--quiet] [--save-state FILE [--every N]]\n"
          "                  [--resume FILE]\n\n"
          "Runs the pipeline in SPEC (a JSON file) and reports what it produced and how fast.\n\n"
          "  --take N      stop after N output elements\n"
          "  --save-state FILE  write the run's position to FILE when it ends (--take, Ctrl-C and the end included),\n"
          "                written whole or not at all; `--resume FILE` continues from it (docs/state.md)\n"
          "  --every N     with --save-state: also every N elements (the last state wins)\n"
          "  --resume FILE continue the run a state was saved of: the elements after it, in the same order\n"
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
          "                gain beyond 3%%), and may keep a repeat's epoch in memory (the plan's cache); sets a\n"
          "                remote reader's readahead (unless the spec does) again when its latency or bandwidth moves;\n"
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

/* Why each op skipped elements: its first three reasons, with their counts and first message. */
static void print_skip_reasons(const sl_pipeline *p) {
  for (int i = 0; i < sl_pipeline_op_count(p); i++) {
    char *text = NULL;
    if (sl_pipeline_op_skips(&text, p, i)) continue;
    json_t *a = json_loads(text, 0, NULL);
    sl_free(text);
    size_t k;
    json_t *r;
    json_array_foreach(a, k, r) {
      if (k == 3) {
        printf("    ... %zu more reasons\n", json_array_size(a) - 3);
        break;
      }
      const char *first = json_string_value(json_object_get(r, "first"));
      printf("    %lld x %s\n", (long long)json_integer_value(json_object_get(r, "count")),
             first ? first : json_string_value(json_object_get(r, "reason")));
    }
    json_decref(a);
  }
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
  if (!json && any) print_skip_reasons(p);
}

/* What `sluice run` was asked for. */
typedef struct run_opts {
  const char *spec, *record;
  int64_t take, workers, every;
  const char *save_state, *resume;
  double seconds, warmup;
  bool warm_caches, json, quiet, autotune, stune, digest, record_optional;
} run_opts;

/* What a run holds while it goes: every field NULL-safe for run_free. */
typedef struct run_ctx {
  sl_pipeline *p;
  sl_iter *it;
  sl_tuner *stuner;     /* --tuner sluice */
  sl_autotuner *tuner;  /* --tuner autotune */
  char *fused_note;     /* --tuner sluice: what was fused before the run (a live pipeline takes no new op) */
} run_ctx;

/* What the loop measured. */
typedef struct run_result {
  int64_t n, examples;
  double bytes, wall, cpu;
  uint64_t sum; /* --digest: element digests add modulo 2^64 (unsigned wrap-around) */
  int rc, sig;
  char errmsg[1024];
} run_result;

static int run_parse(run_opts *o, int argc, char **argv) {
  *o = (run_opts){.take = -1, .seconds = -1};
  const char *tuner = "none";
  const cli_opt opts[] = {
      {.name = "--take", .type = CLI_INT, .dst = &o->take, .lo = 1, .hi = (double)INT64_MAX,
       .must = "a positive number of elements"},
      {.name = "--seconds", .type = CLI_NUM, .dst = &o->seconds, .lo = 0, .lo_open = true, .hi = HUGE_VAL,
       .must = "a positive number of seconds"},
      {.name = "--warmup", .type = CLI_NUM, .dst = &o->warmup, .lo = 0, .hi = HUGE_VAL, .must = "0 or more seconds"},
      {.name = "--warmup-caches", .type = CLI_FLAG, .dst = &o->warm_caches},
      {.name = "--record", .type = CLI_STR, .dst = &o->record,
       .needs = "a store (a path, sqlite:PATH or postgresql://...)"},
      {.name = "--record-optional", .type = CLI_FLAG, .dst = &o->record_optional},
      {.name = "--tuner", .type = CLI_STR, .dst = &tuner, .needs = "a name (sluice, autotune or none)"},
      {.name = "--json", .type = CLI_FLAG, .dst = &o->json},
      {.name = "--digest", .type = CLI_FLAG, .dst = &o->digest},
      {.name = "--workers", .type = CLI_INT, .dst = &o->workers, .lo = 0, .hi = 1 << 20,
       .must = "0 or more ranks (at most 2^20)"},
      {.name = "--quiet", .type = CLI_FLAG, .dst = &o->quiet},
      {.name = "--save-state", .type = CLI_STR, .dst = &o->save_state, .needs = "a file to write the state to"},
      {.name = "--every", .type = CLI_INT, .dst = &o->every, .lo = 1, .hi = (double)INT64_MAX,
       .must = "a positive number of elements"},
      {.name = "--resume", .type = CLI_STR, .dst = &o->resume, .needs = "a state file (from --save-state)"},
      {.name = NULL},
  };
  const cli_args args = {.cmd = "run", .opts = opts, .help = run_help, .pos = &o->spec, .npos = 1, .noun = "spec"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed;
  if (!strcmp(tuner, "autotune")) o->autotune = true;
  else if (!strcmp(tuner, "sluice")) o->stune = true;
  else if (strcmp(tuner, "none"))
    return cli_usage("run", "--tuner: unknown tuner '%s' (known: sluice, autotune, none)", tuner);
  if (!o->spec) return cli_usage("run", "a SPEC file is required");
  if (o->every && !o->save_state) return cli_usage("run", "--every needs --save-state FILE");
  if ((o->save_state || o->resume) && (o->autotune || o->workers))
    return cli_usage("run", "--save-state and --resume run on one process without --tuner autotune");
  return 0;
}

/* --save-state: the run's position, written whole (a temporary renamed into place) or not at all. */
static int run_save_state(const run_opts *o, sl_iter *it) {
  void *buf;
  size_t len;
  int rc = sl_iter_state(it, &buf, &len);
  if (!rc) rc = sl_file_write(o->save_state, buf, len);
  sl_free(buf);
  if (rc) fprintf(stderr, "sluice run: --save-state %s: %s\n", o->save_state, sl_error_last());
  return rc;
}

/* --resume: the state file's bytes (at most 64 MiB: a state holds refs, not data). */
static int run_read_state(const char *path, void **buf, size_t *len) {
  char msg[1024];
  FILE *f = cli_open_regular(path, msg, sizeof msg); /* a directory or a FIFO is named so, not "read error" */
  if (!f) return cli_fail(false, "--resume %s", msg);
  size_t cap = 1 << 16, n = 0;
  unsigned char *b = malloc(cap);
  while (b) {
    n += fread(b + n, 1, cap - n, f);
    if (n < cap || cap >= (64u << 20)) break;
    unsigned char *nb = realloc(b, cap * 2);
    if (!nb) {
      free(b);
      b = NULL;
      break;
    }
    b = nb;
    cap *= 2;
  }
  bool err = ferror(f), big = n == cap;
  fclose(f);
  if (!b || err || big) {
    free(b);
    return cli_fail(false, "--resume %s: %s", path, !b ? "out of memory" : err ? "read error" : "larger than 64 MiB: not a state");
  }
  *buf = b;
  *len = n;
  return 0;
}

/* The tuners stop before the run ends, and the run before its pipeline is freed. */
static void run_free(run_ctx *c) {
  sl_autotune_stop(c->tuner);
  if (c->stuner) sl_tuner_stop(c->stuner);
  sl_iter_free(c->it);
  sl_free(c->fused_note);
  sl_pipeline_free(c->p);
}

/* A failure of the library before the run: said (and with --json on stdout), recorded when `record`, the run's
 * parts freed. */
static int run_start_fail(const run_opts *o, run_ctx *c, bool record) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", sl_error_last());
  if (o->json) cli_json_error(msg);
  if (record) cli_record(o->record, "sluice.Run", o->spec, c->p, NULL, 0, 0, 0, 0, msg);
  run_free(c);
  return cli_fail(false, "%s", msg);
}

/* After the spec is open: the fusion and the tuners of --tuner, the recording's start and the iterator. */
static int run_start(const run_opts *o, run_ctx *c) {
  if (o->stune) {
    sl_pipeline *f = NULL;
    if (sl_pipeline_fuse(&f, c->p, &c->fused_note)) return run_start_fail(o, c, false);
    if (f) {
      sl_pipeline_free(c->p);
      c->p = f;
    }
  }
  if (cli_record_begin(o->record, "sluice.Run", o->spec, c->p, o->record_optional)) {
    if (o->json) cli_json_error(cli_last_error());
    run_free(c);
    return CLI_FAIL;
  }
  /* --tuner sluice: the planner's model, online (plan_tune.c). Started before the run, so that its one-off probes
   * (the machine, the hand-off costs) measure a machine the pipeline's threads are not yet busy on. */
  if (o->stune && sl_pipeline_tune(&c->stuner, c->p, NULL)) return run_start_fail(o, c, true);
  if (o->save_state && sl_pipeline_check_output(c->p, o->save_state)) { /* an input: refused before any read */
    char msg[1200];
    snprintf(msg, sizeof msg, "--save-state %s: %s", o->save_state, sl_error_last());
    if (o->json) cli_json_error(msg);
    run_free(c);
    return cli_fail(false, "%s", msg);
  }
  if (o->resume) {
    void *buf = NULL;
    size_t len = 0;
    if (run_read_state(o->resume, &buf, &len)) {
      run_free(c);
      return CLI_FAIL;
    }
    int rc = sl_pipeline_iter_at(&c->it, c->p, buf, len);
    free(buf);
    if (rc) {
      char msg[1200];
      snprintf(msg, sizeof msg, "--resume %s: %s", o->resume, sl_error_last());
      if (o->json) cli_json_error(msg);
      run_free(c);
      return cli_fail(false, "%s", msg);
    }
  } else if (sl_pipeline_iter(&c->it, c->p)) return run_start_fail(o, c, true);
  if (o->save_state) sl_iter_keep_state(c->it); /* every state quick, the first included */
  if (o->autotune && sl_autotune_start(&c->tuner, c->p, NULL)) return run_start_fail(o, c, true);
  return CLI_OK;
}

/* Pulls elements until --take, --seconds, the stream's end, an error or a signal. */
static void run_loop(run_result *r, const run_opts *o, run_ctx *c) {
  cli_signals_install();
  cli_run_guard_start(c->it); /* failing, the loop still stops at a signal between elements */
  cli_progress p_bar;
  cli_progress_start(&p_bar, "run", o->take);
  if (o->quiet) p_bar.tty = false;
  double t0 = cli_now(), c0 = cpu_seconds();
  sl_elem e;
  sl_elem_init(&e);
  bool warm = o->warmup <= 0 && (!o->warm_caches || sl_pipeline_caches_complete(c->p));
  while (o->take < 0 || r->n < o->take) {
    r->rc = sl_iter_next(&e, c->it);
    if (r->rc) break;
    if (!warm && cli_now() - t0 >= o->warmup &&
        (!o->warm_caches || sl_pipeline_caches_complete(c->p) || cli_now() - t0 >= o->warmup + SL_TRACE_MAX_FILL)) {
      /* the warm-up is not measured: counts and clocks start here */
      warm = true;
      t0 = cli_now();
      c0 = cpu_seconds();
      r->n = r->examples = 0;
      r->bytes = 0; /* the digest goes on: it covers every element the pipeline yields */
    }
    if (o->digest) {
      uint64_t d;
      if ((r->rc = sl_elem_digest(&d, &e)) != 0) {
        sl_elem_clear(&e);
        break;
      }
      r->sum += d;
    }
    r->n++;
    r->examples += e.n > 0 && e.c[0].rank > 0 ? e.c[0].shape[0] : 1;
    r->bytes += (double)sl_elem_bytes(&e);
    sl_elem_clear(&e);
    if (o->every && r->n % o->every == 0 && run_save_state(o, c->it)) {
      r->rc = SL_EIO;
      break;
    }
    double el = cli_now() - t0; /* a vDSO clock read: cheap next to an element */
    if (warm && o->seconds > 0 && el >= o->seconds) break;
    if ((r->n & 63) == 0) {
      char extra[64];
      snprintf(extra, sizeof extra, "%.1f elem/s", el > 0 ? (double)r->n / el : 0.0);
      cli_progress_update(&p_bar, r->n, extra);
    }
    if ((r->sig = cli_signal_seen()) != 0) break;
  }
  r->wall = cli_now() - t0;
  r->cpu = cpu_seconds() - c0;
  if (o->save_state && r->rc >= 0 && run_save_state(o, c->it)) r->rc = SL_EIO;
  cli_progress_end(&p_bar);
  if (!r->sig) r->sig = cli_signal_seen(); /* a signal that ended a blocked next() as a failure is still a stop */
  if (r->rc < 0) snprintf(r->errmsg, sizeof r->errmsg, "%s", sl_error_last());
}

static void run_print_json(const run_opts *o, const run_ctx *c, const run_result *r, int rounds, const char *tlog) {
  double rate = r->wall > 0 ? (double)r->n / r->wall : 0;
  const char *status = r->rc < 0 ? "error" : r->sig == SIGTERM ? "terminated" : r->sig ? "interrupted" : "ok";
  printf("{\"spec\": ");
  cli_json_string(stdout, o->spec);
  printf(", \"elements\": %lld, \"examples\": %lld, \"bytes\": %.0f, \"wall_seconds\": %.6f, "
         "\"cpu_seconds\": %.6f, \"elements_per_second\": %.3f, \"examples_per_second\": %.3f, "
         "\"mb_per_second\": %.3f, \"status\": \"%s\", \"tuner\": \"%s\", \"tuner_rounds\": %d",
         (long long)r->n, (long long)r->examples, r->bytes, r->wall, r->cpu, rate,
         r->wall > 0 ? (double)r->examples / r->wall : 0, r->wall > 0 ? r->bytes / r->wall / 1e6 : 0, status,
         o->autotune ? "autotune" : o->stune ? "sluice" : "none", rounds);
  if (o->stune) {
    printf(", \"tuner_changes\": %s, \"tuner_fused\": ", tlog ? tlog : "[]");
    if (c->fused_note) cli_json_string(stdout, c->fused_note);
    else printf("null");
  }
  if (o->digest) printf(", \"digest\": \"%016llx\"", (unsigned long long)r->sum);
  print_skipped(c->p, true);
  run_dist_json(stdout);
  if (r->rc < 0) {
    printf(", \"error\": ");
    cli_json_string(stdout, cli_safe(r->errmsg));
  }
  printf("}\n");
}

static void run_print_text(const run_opts *o, const run_ctx *c, const run_result *r, int rounds, const char *tlog) {
  double wall = r->wall;
  printf("%s: %lld elements (%lld examples) in %.3f s\n", sl_pipeline_name(c->p), (long long)r->n,
         (long long)r->examples, wall);
  printf("  %.1f elements/s, %.1f examples/s, %.2f MB/s\n", wall > 0 ? (double)r->n / wall : 0,
         wall > 0 ? (double)r->examples / wall : 0, wall > 0 ? r->bytes / wall / 1e6 : 0);
  printf("  wall %.3f s, CPU %.3f s (%.2f cores)\n", wall, r->cpu, wall > 0 ? r->cpu / wall : 0);
  if (o->digest)
    printf("  digest %016llx%s\n", (unsigned long long)r->sum, r->rc < 0 || r->sig ? " (of the elements so far)" : "");
  print_skipped(c->p, false);
  if (o->autotune) {
    printf("  tuner autotune: %d re-optimisations; final knobs:", rounds);
    for (int i = 0; i < sl_pipeline_op_count(c->p); i++) {
      sl_op_stats s;
      if (sl_pipeline_op_stats(&s, c->p, i) == 0 && s.async)
        printf(" %s parallelism %lld buffer %lld;", s.path, (long long)s.parallelism, (long long)s.buffer);
    }
    printf("\n");
  }
  if (o->stune && c->fused_note) printf("  tuner sluice: fused before the run: %s\n", c->fused_note);
  if (o->stune) printf("  tuner sluice: %d solves; changes:\n%s", rounds, tlog && *tlog ? tlog : "  (none)\n");
}

/* After the loop: the tuners stopped (their rounds and change log taken), the summary printed and the run
 * recorded. Returns the exit code. */
static int run_finish(const run_opts *o, run_ctx *c, const run_result *r) {
  int rounds = c->tuner ? sl_autotune_rounds(c->tuner) : 0;
  sl_autotune_stop(c->tuner);
  c->tuner = NULL;
  char *tlog = NULL, *tjson = NULL; /* the change log as printed, and as JSON for --json and --record */
  if (c->stuner) {
    rounds = sl_tuner_solves(c->stuner);
    if (sl_tuner_log(&tlog, c->stuner, o->json)) tlog = NULL;
    if (o->record && !o->json && sl_tuner_log(&tjson, c->stuner, true)) {
      fprintf(stderr, "sluice: warning: the tuner's changes will not be recorded: %s\n", cli_safe(sl_error_last()));
      tjson = NULL;
    }
    sl_tuner_stop(c->stuner);
    c->stuner = NULL;
  }
  if (o->autotune || o->stune) cli_record_tuner(o->autotune ? "autotune" : "sluice", rounds, o->json ? tlog : tjson);
  sl_iter_free(c->it);
  c->it = NULL;
  cli_run_guard_stop();
  if (o->json) run_print_json(o, c, r, rounds, tlog);
  else if (!o->quiet || r->rc >= 0) run_print_text(o, c, r, rounds, tlog);
  if (r->sig) cli_record_canceled();
  double rate = r->wall > 0 ? (double)r->n / r->wall : 0;
  int rec = cli_record(o->record, "sluice.Run", o->spec, c->p, NULL, 0, rate, r->cpu, r->wall,
                       r->rc < 0 ? r->errmsg : NULL);
  sl_free(tlog);
  sl_free(tjson);
  run_free(c);
  if (r->rc < 0) return cli_fail(false, "%s", r->errmsg);
  if (rec && !r->sig) return CLI_FAIL; /* said by cli_record */
  if (r->sig) {
    fprintf(stderr, "sluice: %s after %lld elements\n", r->sig == SIGTERM ? "terminated" : "interrupted",
            (long long)r->n);
    return 128 + r->sig;
  }
  return CLI_OK;
}

int cmd_run(int argc, char **argv) {
  run_opts o;
  int parsed = run_parse(&o, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  o.record = cli_record_target(o.record);
  run_ctx c = {0};
  char msg[1024];
  if (run_dist_start((int)o.workers, msg, sizeof msg)) {
    if (o.json) cli_json_error(msg);
    return cli_fail(false, "%s", msg);
  }
  if (cli_open_spec(&c.p, o.spec, msg, sizeof msg)) {
    if (o.json) cli_json_error(msg);
    cli_record(o.record, "sluice.Run", o.spec, NULL, NULL, 0, 0, 0, 0, msg);
    return cli_fail(false, "%s", msg);
  }
  if (run_dist_is_worker()) return run_dist_serve(c.p, o.spec, o.json, o.quiet);
  int rc = run_start(&o, &c);
  if (rc != CLI_OK) return rc;
  run_result r = {0};
  run_loop(&r, &o, &c);
  return run_finish(&o, &c, &r);
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
  const cli_opt opts[] = {
      {.name = "--print", .type = CLI_FLAG, .dst = &print},
      {.name = "--print-spec", .type = CLI_FLAG, .dst = &print_spec},
      {.name = NULL},
  };
  const cli_args args = {.cmd = "validate", .opts = opts, .help = validate_help, .pos = &spec, .npos = 1, .noun = "spec"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
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
