/* cli/cli_record.c: `--record DB` (or SLUICE_PROV in the environment) on run, trace and optimize: the run goes into
 * an ML Metadata store as an execution with its data files, outputs and figures (include/sluice/prov.h). `run`
 * records it RUNNING when it starts (cli_record_begin) and finishes that execution at its end, so that a run killed
 * midway stays visible. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_int.h"

const char *cli_record_target(const char *opt) {
  if (opt && *opt) return opt;
  const char *env = getenv("SLUICE_PROV");
  return env && *env ? env : NULL;
}

/* The execution cli_record_begin recorded (0: none), and whether a recording that fails is only a warning. */
static int64_t g_running_id;
static bool g_optional = true;
static bool g_given_up; /* the start could not be recorded (and was optional): said once, not tried again */
static bool g_canceled; /* the run was stopped by a signal: recorded CANCELED */

void cli_record_canceled(void) { g_canceled = true; }

/* The online tuner of the run cli_record records next (none by default); the strings are borrowed until then. */
static const char *g_tuner, *g_tuner_changes;
static int g_tuner_solves;

void cli_record_tuner(const char *tuner, int solves, const char *changes_json) {
  g_tuner = tuner;
  g_tuner_solves = solves;
  g_tuner_changes = changes_json;
}

#if SL_HAVE_PROV
/* The op with the largest CPU per core available to it: what a reader of the record wants named first. */
static void busiest_op(sl_pipeline *p, char *buf, size_t n, double *load_out) {
  buf[0] = 0;
  double best = 0;
  for (int i = 0; i < sl_pipeline_op_count(p); i++) {
    sl_op_stats s;
    if (sl_pipeline_op_stats(&s, p, i)) continue;
    double par = s.parallelism > 0 ? (double)s.parallelism : 1;
    double load = s.cpu_seconds / par;
    if (load > best) {
      best = load;
      snprintf(buf, n, "%s (%s)", s.path, s.label);
    }
  }
  *load_out = best;
}

int cli_record_begin(const char *db, const char *kind, const char *spec_path, sl_pipeline *p, bool optional) {
  g_optional = optional;
  if (!db) return 0;
  const char **files = NULL;
  size_t nfiles = 0;
  if (sl_pipeline_input_files(&files, &nfiles, p)) files = NULL;
  sl_prov_run r = SL_PROV_RUN_INIT;
  r.kind = kind;
  r.pipeline = sl_pipeline_name(p);
  r.spec_path = spec_path;
  r.inputs = files;
  r.ninputs = nfiles;
  r.running = true;
  int rc = sl_prov_record_run(&g_running_id, db, &r);
  sl_free(files);
  if (!rc) return 0;
  g_running_id = 0;
  if (optional) {
    fprintf(stderr, "sluice: warning: the run will not be recorded in %s: %s\n", cli_safe(db), cli_safe(sl_error_last()));
    g_given_up = true;
    return 0;
  }
  return cli_fail(false, "cannot record the run in %s: %s (--record-optional runs anyway)", cli_safe(db),
                  sl_error_last());
}

int cli_record(const char *db, const char *kind, const char *spec_path, sl_pipeline *p, const sl_prov_output *outs,
               size_t nout, double throughput, double cpu, double elapsed, const char *error) {
  if (!db || g_given_up) return 0;
  const char **files = NULL;
  size_t nfiles = 0;
  if (p && sl_pipeline_input_files(&files, &nfiles, p)) files = NULL;
  char bottleneck[256] = "";
  double busiest = 0; /* CPU seconds per core the op may use */
  if (p && !error) busiest_op(p, bottleneck, sizeof bottleneck, &busiest);
  sl_prov_run r = SL_PROV_RUN_INIT;
  r.kind = kind;
  r.pipeline = p ? sl_pipeline_name(p) : spec_path;
  r.spec_path = spec_path;
  r.inputs = files;
  r.ninputs = nfiles;
  r.outputs = outs;
  r.noutputs = nout;
  r.throughput = throughput;
  r.bottleneck = bottleneck[0] ? bottleneck : NULL;
  r.cpu_seconds = cpu;
  r.elapsed = elapsed;
  r.busiest_load = elapsed > 0 ? busiest / elapsed : 0; /* for `prov fleet`: 1 = the op kept its cores busy */
  r.failed = error != NULL;
  r.error = error;
  r.execution_id = g_running_id; /* finish the execution recorded RUNNING at the start, if any */
  r.canceled = g_canceled;
  r.tuner = g_tuner;
  r.tuner_solves = g_tuner_solves;
  r.tuner_changes = g_tuner_changes;
  int64_t id = 0;
  int rc = sl_prov_record_run(&id, db, &r);
  sl_free(files);
  if (!rc) {
    fprintf(stderr, "recorded as execution %lld in %s\n", (long long)id, cli_safe(db));
    return 0;
  }
  /* the execution recorded at the start stays in the store, RUNNING: say so rather than "not recorded" */
  char what[96] = "the run was not recorded";
  if (g_running_id > 0)
    snprintf(what, sizeof what, "the end of the run was not recorded (execution %lld stays RUNNING)",
             (long long)g_running_id);
  if (g_optional) {
    fprintf(stderr, "sluice: warning: %s in %s: %s\n", what, cli_safe(db), cli_safe(sl_error_last()));
    return 0;
  }
  return cli_fail(false, "%s in %s: %s", what, cli_safe(db), sl_error_last());
}
#else
/* Built with -DSL_WITH_PROV=OFF: the library has no store to record into. */
int cli_record_begin(const char *db, const char *kind, const char *spec_path, sl_pipeline *p, bool optional) {
  g_optional = optional;
  (void)g_running_id, (void)g_given_up, (void)g_canceled;
  if (!db || optional) return 0;
  return cli_fail(false, "cannot record the run in %s: this sluice was built without provenance (SL_WITH_PROV=OFF; "
                         "--record-optional runs anyway)", cli_safe(db));
}
int cli_record(const char *db, const char *kind, const char *spec_path, sl_pipeline *p, const sl_prov_output *outs,
               size_t nout, double throughput, double cpu, double elapsed, const char *error) {
  if (db) fprintf(stderr, "sluice: warning: the run was not recorded in %s: this sluice was built without provenance "
                          "(SL_WITH_PROV=OFF)\n", cli_safe(db));
  return 0;
}
#endif
