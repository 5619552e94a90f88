/* cli/run_dist_int.h: what `sluice run` adds for distributed jobs (cmd_run_mpi.c): --workers, the rank in the JSON
 * line, and the worker ranks' serving loop; and `sluice optimize --workers` (cmd_optimize_dist.c). */
#ifndef SL_CLI_RUN_DIST_H
#define SL_CLI_RUN_DIST_H

#include <stdbool.h>
#include <stdio.h>

#include "sluice.h"

/* The --workers line of `sluice run --help` (nothing when libsluice has no MPI). */
void run_dist_help(FILE *f);
/* Finds this rank (initialising MPI under mpirun) before the spec is built; finalises at exit. 0, or -1 with the
 * message in msg. */
int run_dist_start(int workers, char *msg, size_t cap);
/* True on a worker rank: the caller hands its pipeline to run_dist_serve instead of consuming it. */
bool run_dist_is_worker(void);
/* Serves the trainers (the part of p above its offload) and prints this rank's summary; frees p. Exit code. */
int run_dist_serve(sl_pipeline *p, const char *spec, bool json, bool quiet);
/* `sluice optimize SPEC --workers K` (cmd_optimize_dist.c): plans the offload cut. */
int cmd_optimize_workers(int argc, char **argv);
/* `, "rank": R, "ranks": N` in a launched job (nothing otherwise), for the JSON summary line. */
void run_dist_json(FILE *f);

#endif
