/* bench/prov_bench.c: the provenance store's recording rate (issue 6), through the public API alone. Each
 * execution is one transaction: the execution, two artifacts, an INPUT and an OUTPUT event (two-step paths),
 * three custom properties and the association with a context: what test_prov_faults.c records, timed here.
 * For each writer count P (default 1 and 8), P forked processes each record N executions at once; rounds
 * alternate the writer counts and the median rate is reported. Prints one JSON line (bench/prov_bench.sh).
 * Usage: prov_bench URI [--n N] [--procs 1,8] [--rounds R]
 * URI is an SQLite path (created when missing) or an existing PostgreSQL database; the schema is created when
 * the store is empty. Runs add to the store: give it a fresh one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"

#define MAX_PROCS 64
#define MAX_CONFIGS 8
#define MAX_ROUNDS 32
#define STEP_TYPE "ProvBenchStep"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
  fprintf(stderr, "prov_bench: %s: %s\n", what, sl_error_last());
  exit(1);
}

typedef struct ids {
  int64_t artifact_type, execution_type, context;
} ids;

/* Records n executions on an open handle, one transaction each. Returns 0, or 1 after printing the error. */
static int record(sl_prov *p, const ids *t, int w, int n) {
  static const sl_prov_step path[2] = {{"examples", 0}, {NULL, 0}};
  for (int i = 0; i < n; i++) {
    int64_t a1, a2, e, ms = 1700000000000 + i;
    int rc = sl_prov_begin(p);
    if (!rc) rc = sl_prov_put_execution(&e, p, t->execution_type, NULL, SL_PROV_E_COMPLETE, ms, ms + 1000);
    if (!rc) rc = sl_prov_put_artifact(&a1, p, t->artifact_type, "bench://in", NULL, SL_PROV_A_LIVE, ms);
    if (!rc) rc = sl_prov_put_artifact(&a2, p, t->artifact_type, "bench://out", NULL, SL_PROV_A_LIVE, ms + 1000);
    if (!rc) rc = sl_prov_put_event(NULL, p, a1, e, SL_PROV_EV_INPUT, ms, path, 2);
    if (!rc) rc = sl_prov_put_event(NULL, p, a2, e, SL_PROV_EV_OUTPUT, ms + 1000, path, 2);
    sl_prov_value v1 = sl_prov_double(1.5 * i), v2 = sl_prov_int(w), v3 = sl_prov_string("prov_bench");
    if (!rc) rc = sl_prov_set_property(p, SL_PROV_EXECUTION, e, "cpu_seconds", true, &v1);
    if (!rc) rc = sl_prov_set_property(p, SL_PROV_EXECUTION, e, "worker", true, &v2);
    if (!rc) rc = sl_prov_set_property(p, SL_PROV_EXECUTION, e, "who", true, &v3);
    if (!rc) rc = sl_prov_associate(p, t->context, e);
    if (!rc) rc = sl_prov_commit(p);
    if (rc) {
      fprintf(stderr, "prov_bench: writer %d at execution %d: %s\n", w, i, sl_error_last());
      sl_prov_rollback(p);
      return 1;
    }
  }
  return 0;
}

/* One writer process: opens its own handle (never inherited across fork), says it is ready, waits for the
 * start (EOF on `go`), records. */
static int writer(const char *uri, const ids *t, int w, int n, int ready, int go) {
  sl_prov *p;
  if (sl_prov_open(&p, uri, 0)) {
    fprintf(stderr, "prov_bench: writer %d: open: %s\n", w, sl_error_last());
    return 1;
  }
  char c = 'r';
  if (write(ready, &c, 1) != 1) return 1;
  while (read(go, &c, 1) < 0 && errno == EINTR) {
  }
  int rc = record(p, t, w, n);
  sl_prov_close(p);
  return rc;
}

/* P processes recording n executions each, started together; returns the wall seconds from the start signal to
 * the last exit, or -1 when a writer failed. */
static double run_writers(const char *uri, const ids *t, int procs, int n) {
  int ready[2], go[2];
  if (pipe(ready) || pipe(go)) {
    perror("prov_bench: pipe");
    exit(1);
  }
  pid_t kids[MAX_PROCS];
  for (int w = 0; w < procs; w++) {
    fflush(NULL);
    kids[w] = fork();
    if (kids[w] < 0) {
      perror("prov_bench: fork");
      exit(1);
    }
    if (kids[w] == 0) {
      close(ready[0]);
      close(go[1]);
      _exit(writer(uri, t, w, n, ready[1], go[0]));
    }
  }
  close(ready[1]);
  close(go[0]);
  int seen = 0;
  char c;
  while (seen < procs) {
    ssize_t r = read(ready[0], &c, 1);
    if (r == 1)
      seen++;
    else if (r == 0 || errno != EINTR)
      break; /* a writer died before it was ready: its exit status says so below */
  }
  close(ready[0]);
  double t0 = now_s();
  close(go[1]);
  int failed = 0;
  for (int w = 0; w < procs; w++) {
    int st;
    while (waitpid(kids[w], &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed++;
  }
  double el = now_s() - t0;
  return failed ? -1 : el;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *v, int n) {
  double s[MAX_ROUNDS];
  memcpy(s, v, (size_t)n * sizeof *v);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static void usage(void) {
  fprintf(stderr, "usage: prov_bench URI [--n N] [--procs 1,8] [--rounds R]\n"
                  "  N executions per writer process (default 1000); rounds alternate the writer counts.\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *uri = NULL, *procs_arg = "1,8";
  int n = 1000, rounds = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--n") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--procs") && i + 1 < argc)
      procs_arg = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (argv[i][0] == '-' || uri)
      usage();
    else
      uri = argv[i];
  }
  if (!uri || n < 1 || rounds < 1 || rounds > MAX_ROUNDS) usage();
  int procs[MAX_CONFIGS], nconf = 0;
  for (const char *s = procs_arg; *s;) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 1 || v > MAX_PROCS || nconf == MAX_CONFIGS) usage();
    procs[nconf++] = (int)v;
    s = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') usage();
  }

  /* The types and the context, created by the parent, which then closes its handle before forking. */
  sl_prov *p;
  ids t;
  int64_t ctx_type;
  if (sl_prov_open(&p, uri, SL_PROV_CREATE)) die(uri);
  const char *backend = sl_prov_backend(p);
  if (sl_prov_put_type(&t.artifact_type, p, SL_PROV_ARTIFACT, "ProvBenchData", NULL, 0, NULL) ||
      sl_prov_put_type(&t.execution_type, p, SL_PROV_EXECUTION, STEP_TYPE, NULL, 0, NULL) ||
      sl_prov_put_type(&ctx_type, p, SL_PROV_CONTEXT, "pipeline", NULL, 0, NULL) ||
      sl_prov_put_context(&t.context, p, ctx_type, "prov_bench", 0))
    die("creating the types");
  sl_prov_query q = {STEP_TYPE, 0, 0, NULL, 0};
  sl_prov_list *l;
  if (sl_prov_find(&l, p, SL_PROV_EXECUTION, &q)) die("counting executions");
  size_t before = l->n;
  sl_prov_list_free(l);
  char backend_name[32];
  snprintf(backend_name, sizeof backend_name, "%s", backend);
  sl_prov_close(p);

  double rate[MAX_CONFIGS][MAX_ROUNDS];
  size_t expected = before;
  for (int r = 0; r < rounds; r++)
    for (int c = 0; c < nconf; c++) {
      double el = run_writers(uri, &t, procs[c], n);
      if (el < 0) {
        fprintf(stderr, "prov_bench: a writer failed (%d processes, round %d)\n", procs[c], r + 1);
        return 1;
      }
      rate[c][r] = (double)procs[c] * n / el;
      expected += (size_t)procs[c] * (size_t)n;
      fprintf(stderr, "prov_bench: %s, %d process(es) x %d executions: %.2f s, %.0f executions/s\n", backend_name,
              procs[c], n, el, rate[c][r]);
    }

  /* A rate is only worth reporting if every execution, with its three properties, is in the store. */
  if (sl_prov_open(&p, uri, 0)) die(uri);
  if (sl_prov_find(&l, p, SL_PROV_EXECUTION, &q)) die("counting executions");
  size_t bad = 0;
  for (size_t i = 0; i < l->n; i++) bad += l->nodes[i].nprops != 3;
  size_t found = l->n;
  sl_prov_list_free(l);
  sl_prov_close(p);
  if (found != expected || bad) {
    fprintf(stderr, "prov_bench: the store holds %zu executions (expected %zu), %zu without their 3 properties\n",
            found, expected, bad);
    return 1;
  }

  printf("{\"backend\": \"%s\", \"executions_per_process\": %d, \"rounds\": %d, \"writers\": [", backend_name, n,
         rounds);
  for (int c = 0; c < nconf; c++) {
    printf("%s{\"processes\": %d, \"executions_per_second\": %.1f, \"runs\": [", c ? ", " : "", procs[c],
           median(rate[c], rounds));
    for (int r = 0; r < rounds; r++) printf("%s%.1f", r ? ", " : "", rate[c][r]);
    printf("]}");
  }
  printf("]}\n");
  return 0;
}
