/* cli/cli_int.h: what the sluice subcommands share: the command table entry, option helpers, progress display.
 * The CLI uses only the public API (include/). */
#ifndef SL_CLI_H
#define SL_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "sluice.h"

typedef struct cli_cmd {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
} cli_cmd;

/* Exit codes. 128 + a signal's number after SIGINT (130) or SIGTERM (143). */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2, CLI_INTERRUPTED = 130, CLI_TERMINATED = 143 };

/* Prints "sluice: <msg>" to stderr, with the library's last error appended when `lib` is true. Returns CLI_FAIL. */
int cli_fail(bool lib, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message of the last cli_fail (without "sluice: "), for the --json error document. */
const char *cli_last_error(void);
/* `s` with connection strings' passwords as *** (sl_redact) and control characters escaped (\x1b), in one of a few
 * static buffers reused in turn: for a store URI or a name in a message the CLI prints on stderr itself. */
const char *cli_safe(const char *s);
/* Usage error: prints the message and a hint to use --help. Returns CLI_USAGE. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when argv[i] is -h or --help. */
bool cli_is_help(const char *arg);
/* Parses an integer / a double option value; prints a usage error naming the option when malformed. */
bool cli_parse_i64(const char *cmd, const char *opt, const char *val, int64_t *out);
bool cli_parse_f64(const char *cmd, const char *opt, const char *val, double *out);

/* A progress line on a terminal (stderr), redrawn at most 10 times a second; silent when not a tty. */
typedef struct cli_progress {
  bool tty;
  double start, last;
  const char *what;
  int64_t total; /* -1 when unknown */
} cli_progress;
void cli_progress_start(cli_progress *p, const char *what, int64_t total);
void cli_progress_update(cli_progress *p, int64_t done, const char *extra);
void cli_progress_end(cli_progress *p);
double cli_now(void);

/* SIGINT and SIGTERM for loops the CLI drives: the handler sets a flag; cli_signal_seen() returns the signal's
 * number (0: none) for the loop to stop cleanly and exit with 128 + it. */
void cli_signals_install(void);
int cli_signal_seen(void);
/* The flag itself, for a library call that polls it (sl_gen_opts.cancel). */
const volatile sig_atomic_t *cli_signal_flag(void);
/* For commands inside one long library call: SIGINT or SIGTERM prints "sluice CMD: interrupted; WHAT" and exits
 * with 128 + the signal's number at once. cmd NULL restores the default handlers. */
void cli_stop_on_signal(const char *cmd, const char *what);

/* JSON output: `s` as a JSON string (escaped); the error document {"status": "error", "error": MSG} on stdout. */
void cli_json_string(FILE *f, const char *s);
void cli_json_error(const char *msg);
/* Loads the spec at `path`: 0, or -1 with the message in msg (a directory and a YAML file named as such). */
int cli_open_spec(sl_pipeline **out, const char *path, char *msg, size_t cap);
/* `validate --print`: one line per op with the element structure after it (cmd_validate.c). */
int cli_validate_print(const sl_pipeline *p);
/* Checks before a long run that `path` can be written (creating and removing it when absent): 0, or -1 with the
 * message in msg. */
int cli_check_writable(const char *path, char *msg, size_t cap);

/* --record DB / SLUICE_PROV: the store to record into (NULL: none), and the recording. cli_record_begin (before
 * a run) records the execution RUNNING, which cli_record then finishes; it fails (CLI_FAIL, said) when the store
 * cannot take it, unless `optional` (then a warning, and the run goes on). cli_record returns CLI_FAIL when the
 * recording fails and the begin call asked for it, else 0 (a warning; trace and optimize keep their result).
 * `error` non-NULL records a FAILED execution. */
const char *cli_record_target(const char *opt);
int cli_record_begin(const char *db, const char *kind, const char *spec_path, sl_pipeline *p, bool optional);
/* The run cli_record records next was stopped by Ctrl-C / SIGTERM: its execution is CANCELED (marked incomplete). */
void cli_record_canceled(void);
/* The run cli_record records next was tuned online by `tuner` ("sluice", "autotune") with `solves` solves and the
 * changes in `changes_json` (a JSON array, or NULL); both strings are borrowed until cli_record returns. */
void cli_record_tuner(const char *tuner, int solves, const char *changes_json);
int cli_record(const char *db, const char *kind, const char *spec_path, sl_pipeline *p, const sl_prov_output *outs,
               size_t nout, double throughput, double cpu, double elapsed, const char *error);

/* The subcommands (one file each). */
int cmd_run(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_head(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_prov(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_optimize(int argc, char **argv);
int cmd_report(int argc, char **argv);

/* Writes `text` to the file `path`, or to stdout when path is NULL or "-"; a failure is reported naming the file
 * and returns CLI_FAIL. */
int cli_write_text(const char *cmd, const char *path, const char *text);

/* Planner options shared by analyze and optimize (cmd_analyze.c). cli_plan_option returns 1 when argv[*i] was a
 * planner option (consuming its value), 0 when it was not, -1 after printing a usage error. */
bool cli_parse_bytes(const char *cmd, const char *opt, const char *val, int64_t *out);
int cli_plan_option(const char *cmd, int argc, char **argv, int *i, sl_plan_opts *o);
const char *cli_plan_options_help(void);
/* Loads the trace at `path` (analyze, report) and, when `spec` is not NULL, checks that it is a trace of that spec;
 * prints what was wrong and returns CLI_FAIL, else CLI_OK. *out is set when the trace loaded (free it either way). */
int cli_load_trace(const char *path, const char *spec, sl_trace **out);

#endif
