/* cli/cli_prov_int.h: what the `sluice prov` subcommand files share (cmd_prov.c dispatches; cmd_prov_an.c and
 * cmd_prov_rq.c implement the analytics): their option parser, the store loader and the JSON helpers, defined in
 * cmd_prov_an.c. */
#ifndef SL_CLI_PROV_INT_H
#define SL_CLI_PROV_INT_H

#include <jansson.h>

#include "cli_int.h"

/* The options of every analytics subcommand: DB positional, --json, and those named in the parser's `allowed`. */
typedef struct cli_prov_opts {
  const char *db, *pipeline, *model, *out;
  bool json;
  int64_t top, pipelines, days, seed, seeds, trees, depth;
  double threshold, share;
  int64_t at;
  bool top_given; /* --top was on the command line (not the table's default) */
  bool append;    /* prov gen --append */
} cli_prov_opts;

/* Parses argv[1..] into o (top defaults to 20, threshold to -1 meaning unset); options not in the space-separated
 * `allowed` are refused. Returns 0, -1 after printing `usage` for --help, or CLI_USAGE after a usage message. */
int cli_prov_parse(const char *cmd, int argc, char **argv, cli_prov_opts *o, const char *usage, const char *allowed);
/* Opens the store at db and loads its graphlets (of one pipeline when not NULL); prints the failure naming cmd and
 * returns CLI_FAIL, else 0 with *p and *g to free. */
int cli_prov_load(const char *cmd, const char *db, const char *pipeline, sl_prov **p, sl_prov_graphlets **g);
/* Prints j indented on stdout and releases it. */
void cli_prov_dump(json_t *j);
/* A JSON number, or null for NaN and infinities (which JSON cannot hold). */
json_t *cli_prov_num(double v);

int cmd_prov_gen(int argc, char **argv);
int cmd_prov_graphlets(int argc, char **argv);
int cmd_prov_stats(int argc, char **argv);
int cmd_prov_waste(int argc, char **argv);
int cmd_prov_train(int argc, char **argv);
int cmd_prov_simulate(int argc, char **argv);
int cmd_prov_should_train(int argc, char **argv);
int cmd_prov_report(int argc, char **argv);
int cmd_prov_overlap(int argc, char **argv);
int cmd_prov_ablation(int argc, char **argv);
int cmd_prov_fleet(int argc, char **argv);

#endif
