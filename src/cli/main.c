/* cli/main.c: `sluice`, the command-line tool: dispatches to one subcommand per file in src/cli/. */
#define _GNU_SOURCE /* fopencookie: stdout through escape_ctl */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_int.h"

static const cli_cmd CMDS[] = {
    {"run", "run a pipeline spec and report its throughput", cmd_run},
    {"validate", "check a pipeline spec without running it", cmd_validate},
    {"head", "print the first elements a pipeline spec yields", cmd_head},
    {"gen", "generate a synthetic dataset (imagenet, ssd, text, tabular)", cmd_gen},
    {"convert", "write the elements of a spec (an image folder, tar shards) as TFRecord shards", cmd_convert},
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

static bool write_all(const char *p, size_t n) {
  while (n) {
    ssize_t r = write(STDOUT_FILENO, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r, n -= (size_t)r;
  }
  return true;
}

static unsigned char g_out_carry;
static ssize_t out_write(void *cookie, const char *buf, size_t n) {
  bool plain = !g_out_carry;
  for (size_t i = 0; i < n && plain; i++) {
    unsigned char c = (unsigned char)buf[i];
    plain = !((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f || c == 0xc2);
  }
  if (plain) return write_all(buf, n) ? (ssize_t)n : -1; /* the common case: as written, in one write */
  char esc[6 * 1024];
  for (size_t done = 0; done < n;) {
    size_t k = n - done < 1024 ? n - done : 1024;
    if (!write_all(esc, cli_escape_ctl(esc, (const unsigned char *)buf + done, k, &g_out_carry)))
      return done ? (ssize_t)done : -1;
    done += k;
  }
  return (ssize_t)n;
}
static int out_close(void *cookie) {
  if (g_out_carry && write(STDOUT_FILENO, "\xc2", 1) != 1) return EOF;
  return 0;
}


/* Every byte the CLI prints on stdout passes escape_ctl: tables, names, HTML and JSON alike (JSON and the specs
 * hold no raw control characters of their own; '\n' and '\t' pass). */
static void stdout_escaped(void) {
  FILE *f = fopencookie(NULL, "w", (cookie_io_functions_t){NULL, out_write, NULL, out_close});
  if (!f) return; /* unfiltered rather than silent */
  setvbuf(f, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, 0);
  stdout = f;
}

int main(int argc, char **argv) {
  stdout_escaped();
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
  for (size_t i = 0; i < NCMDS; i++) {
    if (strcmp(argv[1], CMDS[i].name)) continue;
    /* `sluice SUBCOMMAND --version` answers as `sluice --version` does, before any option parsing */
    for (int a = 2; a < argc && strcmp(argv[a], "--"); a++)
      if (!strcmp(argv[a], "--version")) {
        printf("sluice %s\n", sl_version());
        return CLI_OK;
      }
    return CMDS[i].run(argc - 1, argv + 1);
  }
  fprintf(stderr, "sluice: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return CLI_USAGE;
}

static char g_last_error[2048];

int cli_fail(bool lib, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
  va_end(ap);
  if (lib && sl_error_last()[0] && n >= 0 && (size_t)n < sizeof g_last_error)
    snprintf(g_last_error + n, sizeof g_last_error - (size_t)n, ": %s", sl_error_last());
  /* no store URI's password and no raw control character reaches stderr or --json */
  snprintf(g_last_error, sizeof g_last_error, "%s", cli_safe(g_last_error));
  fprintf(stderr, "sluice: %s\n", g_last_error);
  return CLI_FAIL;
}

const char *cli_last_error(void) { return g_last_error; }

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

static volatile sig_atomic_t g_signal;
static void on_signal(int s) { g_signal = s; }
void cli_signals_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART; /* a read in a worker resumes; the loop polls the flag */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}
int cli_signal_seen(void) { return g_signal; }
const volatile sig_atomic_t *cli_signal_flag(void) { return &g_signal; }

/* The run's guard: a normal thread, since sl_iter_cancel is not for signal handlers. It polls the flag the handler
 * sets every 20 ms. */
static pthread_t g_guard;
static atomic_bool g_guard_stop, g_guard_on;
static sl_iter *g_guard_it;
static void *guard_main(void *arg) {
  (void)arg;
  struct timespec tick = {0, 20 * 1000 * 1000};
  int waited = 0; /* ticks since the signal */
  while (!atomic_load(&g_guard_stop)) {
    if (g_signal) {
      if (!waited) sl_iter_cancel(g_guard_it);
      if (++waited > CLI_STOP_GRACE * 50) {
        char msg[160];
        int n = snprintf(msg, sizeof msg, "sluice: %s; a thread of the run did not stop within %d s: exiting now\n",
                         g_signal == SIGTERM ? "terminated" : "interrupted", CLI_STOP_GRACE);
        ssize_t w = write(STDERR_FILENO, msg, n > 0 ? (size_t)n : 0);
        (void)w;
        _exit(128 + g_signal);
      }
    }
    nanosleep(&tick, NULL);
  }
  return NULL;
}
int cli_run_guard_start(sl_iter *it) {
  g_guard_it = it;
  atomic_store(&g_guard_stop, false);
  if (pthread_create(&g_guard, NULL, guard_main, NULL)) return -1;
  atomic_store(&g_guard_on, true);
  return 0;
}
void cli_run_guard_stop(void) {
  if (!atomic_exchange(&g_guard_on, false)) return;
  atomic_store(&g_guard_stop, true);
  pthread_join(g_guard, NULL);
  g_guard_it = NULL;
}

/* For commands whose work is one library call that cannot be cancelled (trace, optimize): the handler says so in
 * one line and ends the process. Nothing the command writes exists yet at that point. */
static char g_stop_msg[2][256]; /* [0] after SIGINT, [1] after SIGTERM, formatted before the handler runs */
static size_t g_stop_len[2];
static void on_stop_signal(int s) {
  int k = s == SIGTERM;
  ssize_t w = write(STDERR_FILENO, g_stop_msg[k], g_stop_len[k]);
  (void)w;
  _exit(128 + s);
}
void cli_stop_on_signal(const char *cmd, const char *what) {
  if (!cmd) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    return;
  }
  for (int k = 0; k < 2; k++) {
    int n = snprintf(g_stop_msg[k], sizeof g_stop_msg[k], "sluice %s: %s; %s\n", cmd, k ? "terminated" : "interrupted",
                     what);
    g_stop_len[k] = n < 0 ? 0 : (size_t)n < sizeof g_stop_msg[k] ? (size_t)n : sizeof g_stop_msg[k] - 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

void cli_json_string(FILE *f, const char *s) {
  json_t *j = json_string(s ? s : "");
  char *t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
  if (t) fputs(t, f);
  else fputs("\"\"", f); /* not valid UTF-8 (or out of memory): an empty string keeps the document valid */
  free(t);
  json_decref(j);
}

void cli_json_error(const char *msg) {
  fputs("{\"status\": \"error\", \"error\": ", stdout);
  cli_json_string(stdout, cli_safe(msg));
  fputs("}\n", stdout);
  fflush(stdout);
}

/* A spec that is a directory or YAML gets a message saying so, instead of the JSON parser's "malformed JSON at
 * 1:0". The suffix decides before reading; after a parse error, a first character that cannot start JSON does. */
int cli_open_spec(sl_pipeline **out, const char *path, char *msg, size_t cap) {
  *out = NULL;
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(msg, cap, "%s: is a directory (a SPEC is a JSON file)", path);
    return -1;
  }
  const char *dot = strrchr(path, '.');
  if (dot && (!strcmp(dot, ".yaml") || !strcmp(dot, ".yml"))) {
    snprintf(msg, cap, "%s: specs are JSON, not YAML (see docs/spec.md)", path);
    return -1;
  }
  if (sl_pipeline_from_file(out, path) == 0) return 0;
  snprintf(msg, cap, "%s", sl_error_last());
  FILE *f = fopen(path, "rb");
  if (f) {
    int c;
    while ((c = fgetc(f)) != EOF && (c == ' ' || c == '\t' || c == '\r' || c == '\n')) {
    }
    fclose(f);
    if (c != EOF && c != '{' && c != '[')
      snprintf(msg, cap, "%s: specs are JSON (an object starting with '{'); this file starts with '%c'", path,
               c >= 32 && c < 127 ? c : '?');
  }
  return -1;
}

static const char *file_kind(mode_t m) {
  return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO (a named pipe)" : S_ISSOCK(m) ? "a socket"
       : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" : "not a regular file";
}

FILE *cli_open_regular(const char *path, char *msg, size_t cap) {
  struct stat st;
  if (stat(path, &st) != 0) {
    snprintf(msg, cap, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(msg, cap, "%s: is %s, not a regular file", path, file_kind(st.st_mode));
    return NULL;
  }
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC); /* a FIFO put there since: no wait */
  FILE *f = NULL;
  if (fd < 0) snprintf(msg, cap, "%s: cannot open: %s", path, strerror(errno));
  else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    snprintf(msg, cap, "%s: is %s, not a regular file", path, file_kind(st.st_mode));
  else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 || !(f = fdopen(fd, "rb")))
    snprintf(msg, cap, "%s: cannot open: %s", path, strerror(errno));
  if (!f && fd >= 0) close(fd);
  return f;
}

int cli_check_writable(const sl_pipeline *p, const char *path, char *msg, size_t cap) {
  if (p && sl_pipeline_check_output(p, path)) { /* an output that is an input of the spec would destroy it */
    snprintf(msg, cap, "%s", sl_error_last());
    return -1;
  }
  struct stat st;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      snprintf(msg, cap, "%s: is a directory", path);
      return -1;
    }
    if (!S_ISREG(st.st_mode)) { /* a device or a FIFO (written in place): opening a FIFO would wait for a reader */
      if (access(path, W_OK) == 0) return 0;
      snprintf(msg, cap, "%s: cannot write: %s", path, strerror(errno));
      return -1;
    }
    int fd = open(path, O_WRONLY | O_CLOEXEC); /* no O_TRUNC: the file stays as it is until written */
    if (fd < 0) {
      snprintf(msg, cap, "%s: cannot write: %s", path, strerror(errno));
      return -1;
    }
    close(fd);
    return 0;
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    snprintf(msg, cap, "%s: cannot write: %s", path, strerror(errno));
    return -1;
  }
  close(fd);
  unlink(path); /* only a probe: nothing is left behind if the command fails later */
  return 0;
}
