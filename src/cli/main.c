/* cli/main.c: `sluice`, the command-line tool: dispatches to one subcommand per file in src/cli/. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_int.h"

static const cli_cmd CMDS[] = {
    {"run", "run a pipeline spec and report its throughput", cmd_run},
    {"validate", "check a pipeline spec without running it", cmd_validate},
    {"gen", "generate a synthetic dataset (imagenet, ssd, text, tabular)", cmd_gen},
    {"trace", "run a spec with per-op counters and write a trace", cmd_trace},
    {"analyze", "explain a trace: bottleneck, throughput bound, what-ifs", cmd_analyze},
    {"optimize", "trace, plan and rewrite a spec; run it and compare", cmd_optimize},
    {"report", "a trace as one HTML page: op graph, rates, bound, what-ifs, changes", cmd_report},
#if SL_HAVE_PROV /* built with -DSL_WITH_PROV=ON (the default) */
    {"prov", "provenance store (ML Metadata) and production-pipeline analytics", cmd_prov},
#endif
};
#define NCMDS (sizeof CMDS / sizeof CMDS[0])

static void usage(FILE *f) {
  fprintf(f, "usage: sluice <command> [options]\n\nsluice %s: fast ML input pipelines that find their own "
             "bottlenecks, and ML provenance analytics.\n\ncommands:\n", sl_version());
  for (size_t i = 0; i < NCMDS; i++) fprintf(f, "  %-12s %s\n", CMDS[i].name, CMDS[i].summary);
  fprintf(f, "\nRun 'sluice <command> --help' for a command's options.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_USAGE;
  }
  if (cli_is_help(argv[1])) {
    usage(stdout);
    return CLI_OK;
  }
  if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
    printf("sluice %s\n", sl_version());
    return CLI_OK;
  }
  for (size_t i = 0; i < NCMDS; i++)
    if (!strcmp(argv[1], CMDS[i].name)) return CMDS[i].run(argc - 1, argv + 1);
  fprintf(stderr, "sluice: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return CLI_USAGE;
}

int cli_fail(bool lib, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "sluice: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (lib && sl_error_last()[0]) fprintf(stderr, ": %s", sl_error_last());
  fputc('\n', stderr);
  return CLI_FAIL;
}

int cli_usage(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "sluice %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nRun 'sluice %s --help' for usage.\n", cmd);
  return CLI_USAGE;
}

bool cli_is_help(const char *a) { return !strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "help"); }

bool cli_parse_i64(const char *cmd, const char *opt, const char *val, int64_t *out) {
  char *end;
  if (!val) {
    cli_usage(cmd, "%s needs a value", opt);
    return false;
  }
  long long v = strtoll(val, &end, 10);
  if (end == val || *end) {
    cli_usage(cmd, "%s: '%s' is not an integer", opt, val);
    return false;
  }
  *out = v;
  return true;
}

bool cli_parse_f64(const char *cmd, const char *opt, const char *val, double *out) {
  char *end;
  if (!val) {
    cli_usage(cmd, "%s needs a value", opt);
    return false;
  }
  double v = strtod(val, &end);
  if (end == val || *end) {
    cli_usage(cmd, "%s: '%s' is not a number", opt, val);
    return false;
  }
  *out = v;
  return true;
}

double cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_start(cli_progress *p, const char *what, int64_t total) {
  p->tty = isatty(STDERR_FILENO);
  p->start = p->last = cli_now();
  p->what = what;
  p->total = total;
}

void cli_progress_update(cli_progress *p, int64_t done, const char *extra) {
  if (!p->tty) return;
  double now = cli_now();
  if (now - p->last < 0.1) return;
  p->last = now;
  double el = now - p->start;
  if (p->total > 0) {
    int w = 30, fill = (int)((double)w * (double)done / (double)p->total);
    if (fill > w) fill = w;
    fprintf(stderr, "\r%s [%.*s%*s] %lld/%lld %.1fs %s\033[K", p->what, fill, "##############################",
            w - fill, "", (long long)done, (long long)p->total, el, extra ? extra : "");
  } else {
    fprintf(stderr, "\r%s %lld %.1fs %s\033[K", p->what, (long long)done, el, extra ? extra : "");
  }
  fflush(stderr);
}

void cli_progress_end(cli_progress *p) {
  if (p->tty) fprintf(stderr, "\r\033[K");
}

static volatile sig_atomic_t g_sigint;
static void on_sigint(int s) {
  (void)s;
  g_sigint = 1;
}
void cli_sigint_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigaction(SIGINT, &sa, NULL);
}
bool cli_sigint_seen(void) { return g_sigint != 0; }
