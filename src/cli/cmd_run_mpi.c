/* cli/cmd_run_mpi.c: `sluice run` in a distributed job: the rank it prints, --workers (worker ranks serve the part
 * of the spec above its `offload` to the trainer ranks), and MPI's start and end around the run. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_int.h"
#include "run_dist_int.h"

static sl_dist_info g_info;

void run_dist_help(FILE *f) {
  if (sl_dist_has_mpi())
    fprintf(f, "  --workers K   under mpirun: the last K ranks run the part of the spec above its offload op and\n"
               "                stream its elements to the other ranks (docs/distributed.md)\n");
}

static void dist_end(void) { sl_dist_finalize(); }

int run_dist_start(int workers, char *msg, size_t cap) {
  if (sl_dist_init(&g_info, workers)) {
    snprintf(msg, cap, "%s", sl_error_last());
    return -1;
  }
  if (g_info.mpi) {
    fflush(stdout);
    atexit(dist_end); /* after every return path of the run: trainers have stopped their streams by then */
  }
  return 0;
}

bool run_dist_is_worker(void) { return g_info.worker; }

void run_dist_json(FILE *f) {
  if (g_info.launched) fprintf(f, ", \"rank\": %d, \"ranks\": %d", g_info.rank, g_info.size);
  if (g_info.workers > 0) fprintf(f, ", \"role\": \"%s\"", g_info.worker ? "worker" : "trainer");
}

static double process_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int run_dist_serve(sl_pipeline *p, const char *spec, bool json, bool quiet) {
  double t0 = cli_now(), c0 = process_cpu();
  uint64_t sent = 0;
  int rc = sl_dist_serve(&sent, p);
  double wall = cli_now() - t0, cpu = process_cpu() - c0;
  char err[1024] = "";
  if (rc < 0) snprintf(err, sizeof err, "%s", sl_error_last());
  if (json) {
    printf("{\"spec\": ");
    cli_json_string(stdout, spec);
    /* cpu_seconds: the whole serve (its pipeline's start and its drain included), all threads */
    printf(", \"elements\": %llu, \"wall_seconds\": %.6f, \"cpu_seconds\": %.6f, \"status\": \"%s\"",
           (unsigned long long)sent, wall, cpu, rc < 0 ? "error" : "ok");
    run_dist_json(stdout);
    if (rc < 0) {
      printf(", \"error\": ");
      cli_json_string(stdout, err);
    }
    printf("}\n");
  } else if (!quiet) {
    printf("%s: worker rank %d sent %llu elements in %.3f s\n", sl_pipeline_name(p), g_info.rank,
           (unsigned long long)sent, wall);
  }
  fflush(stdout);
  sl_pipeline_free(p);
  if (rc < 0) return cli_fail(false, "rank %d (worker): %s", g_info.rank, err);
  return CLI_OK;
}
