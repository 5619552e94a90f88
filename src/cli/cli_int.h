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
/* Writes src[0..n) to dst with control characters escaped (C0 but newline and tab as \xHH, DEL as \x7f, C1 as
 * \u00HH); *carry holds a 0xC2 byte that ended the previous chunk. Returns the bytes written (at most 6 per byte). */
size_t cli_escape_ctl(char *dst, const unsigned char *src, size_t n, unsigned char *carry);
/* Usage error: prints the message and a hint to use --help. Returns CLI_USAGE. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when arg is -h, --help or help. */
bool cli_is_help(const char *arg);

/* The option parser of every command (cli_opt.c). A command lists its options in a table; cli_parse reads argv[1..]
 * against it. Values follow the option (`--take 5`) or join it (`--take=5`); a value option takes the next argument
 * whatever it looks like (`--depth -3`); an option given twice keeps its last value; after `--` every argument is
 * positional, and so is `-` alone. -h, --help or help anywhere prints the help. */
typedef enum {
  CLI_FLAG, /* dst: bool *, set true */
  CLI_SET,  /* dst: int *, set to .set (--up / --down choose one value) */
  CLI_STR,  /* dst: const char **, the argument itself */
  CLI_INT,  /* dst: int64_t *, a decimal integer (never wrapped: beyond int64 is refused) */
  CLI_NUM,  /* dst: double *, a number (NaN refused) */
  CLI_SIZE, /* dst: int64_t *, bytes: 512M, 2G, 64kB, 1000000 */
} cli_opt_type;

typedef struct cli_opt {
  const char *name;  /* "--take"; NULL ends the table */
  const char *alias; /* another spelling ("-n", "--output"), or NULL */
  cli_opt_type type;
  void *dst;
  int set;           /* CLI_SET: the value stored */
  /* INT, NUM and SIZE: the range, checked when `must` is set; the refusal reads "--take must be <must>, not 0" */
  double lo, hi;
  bool lo_open, hi_open; /* the bound itself is outside the range */
  const char *must;
  const char *needs; /* what the value is, for "--record needs <needs>" (default "a value") */
  bool *given;       /* set true when the option is on the command line (optional) */
} cli_opt;

typedef struct cli_args {
  const char *cmd;       /* "run", "prov ls": the command named in messages */
  const cli_opt *opts;   /* the command's options */
  const cli_opt *more;   /* a second table (the planner options), or NULL */
  void (*help)(FILE *f); /* prints the --help text (or NULL, and `usage` is the text) */
  const char *usage;
  const char **pos;      /* the positional arguments, in order: at most npos (the unset keep their value) */
  int npos;
  const char *noun;      /* with npos 1: "spec" says "more than one spec given ('a', 'b')" */
  const char *hint;      /* said after "unknown option 'X'" (or NULL) */
} cli_args;

/* 0; -1 after printing the help (the command returns CLI_OK); CLI_USAGE after a usage message naming the option
 * and the value (an unknown option, a missing or malformed value, a value out of the option's range). */
int cli_parse(const cli_args *a, int argc, char **argv);
/* True when `name` (or `name=...`) is among argv[1..] before any `--`. */
bool cli_has_option(int argc, char **argv, const char *name);

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
/* A run's guard (run, head): a thread that, once SIGINT or SIGTERM has been seen, cancels `it` (every blocking
 * point of the engine polls that flag) and, if the run has still not stopped and been freed CLI_STOP_GRACE seconds
 * later (a thread inside a function that does not return), ends the process with 128 + the signal's number. Start it
 * after cli_signals_install(); stop it once the iterator is freed. Returns 0, or -1 if the thread cannot start (the
 * run then stops at the signal only between elements). */
#define CLI_STOP_GRACE 5
int cli_run_guard_start(sl_iter *it);
void cli_run_guard_stop(void);

/* JSON output: `s` as a JSON string (escaped); the error document {"status": "error", "error": MSG} on stdout. */
void cli_json_string(FILE *f, const char *s);
void cli_json_error(const char *msg);
/* Loads the spec at `path`: 0, or -1 with the message in msg (a directory and a YAML file named as such). */
int cli_open_spec(sl_pipeline **out, const char *path, char *msg, size_t cap);
/* `validate --print`: one line per op with the element structure after it (cmd_validate.c). */
int cli_validate_print(const sl_pipeline *p);
/* Opens a file the CLI reads itself (a --resume state, a --tuned spec): a regular file only, never waiting on a FIFO
 * (stat first, then O_NONBLOCK, cleared). NULL with the message ("PATH: is a directory, not a regular file") in msg. */
FILE *cli_open_regular(const char *path, char *msg, size_t cap);
/* Checks before a long run that `path` can be written (creating and removing it when absent) and, with a pipeline,
 * is none of its input files: 0, or -1 with the message in msg. */
int cli_check_writable(const sl_pipeline *p, const char *path, char *msg, size_t cap);

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
int cmd_convert(int argc, char **argv);
int cmd_prov(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_optimize(int argc, char **argv);
int cmd_report(int argc, char **argv);

/* Writes `text` to the file `path`, or to stdout when path is NULL or "-"; a failure is reported naming the file
 * and returns CLI_FAIL. */
int cli_write_text(const char *cmd, const char *path, const char *text);

/* The planner options shared by analyze, optimize and report (cmd_analyze.c): cli_plan_table fills `t` (ended by
 * a NULL name) with options that write into `pa`; cli_plan_apply then sets what they say in pa->o. */
typedef struct cli_plan_args {
  sl_plan_opts *o;
  int64_t disk_bw;
  int knobs; /* -1: as o has it */
} cli_plan_args;
enum { CLI_PLAN_NOPTS = 8 };
void cli_plan_table(cli_opt t[CLI_PLAN_NOPTS], cli_plan_args *pa, sl_plan_opts *o);
void cli_plan_apply(cli_plan_args *pa);
/* analyze and report: a trace taken while other processes kept a quarter core or more busy is planned for the
 * cores they left (at least 0.05), unless --cores was given; optimize measures the load itself. */
void cli_plan_cores_left(sl_plan_opts *o, const sl_trace *t);
const char *cli_plan_options_help(void);
/* Loads the trace at `path` (analyze, report) and, when `spec` is not NULL, checks that it is a trace of that spec;
 * prints what was wrong and returns CLI_FAIL, else CLI_OK. *out is set when the trace loaded (free it either way). */
int cli_load_trace(const char *path, const char *spec, sl_trace **out);

#endif
