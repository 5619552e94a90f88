/* dist/dist.c: the public face of src/dist/: which rank this process is, from MPI when libsluice has it and an MPI
 * launcher started the process, else from the launcher's environment (torchrun, Slurm). The MPI work (init, the
 * offload transport) is in dist_mpi.c, left out of a build without MPI. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_int.h"
#include "dist/dist_int.h"
#include "ops/dist_hook_int.h" /* sl__launcher_env */

#ifdef SL_HAVE_MPI
static bool g_mpi; /* sl_dist_init initialised MPI */
#endif

bool sl_dist_has_mpi(void) {
#ifdef SL_HAVE_MPI
  return true;
#else
  return false;
#endif
}

static bool env_int(const char *name, int *out) {
  const char *s = getenv(name);
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  long x = strtol(s, &end, 10);
  if (errno || *end || x < 0 || x > 1 << 30) return false;
  *out = (int)x;
  return true;
}

int sl_dist_init(sl_dist_info *out, int workers) {
  memset(out, 0, sizeof *out);
  out->size = 1;
  if (workers < 0) return sl__err(SL_EINVAL, "--workers: %d is negative", workers);
#ifdef SL_HAVE_MPI
  if (sl__mpi_launched()) {
    int rc = sl__mpi_init(out, workers);
    g_mpi = rc == 0;
    return rc;
  }
#endif
  for (size_t i = 0; i < SL__LAUNCHER_NENV; i++)
    if (env_int(sl__launcher_env[i][0], &out->size) && env_int(sl__launcher_env[i][1], &out->rank)) {
      out->launched = true;
      break;
    }
  if (workers > 0)
    return sl__err(SL_EINVAL, "--workers %d: offloading to worker ranks needs MPI (%s)", workers,
                   sl_dist_has_mpi() ? "start the job with mpirun" : "this libsluice was built without it");
  return 0;
}

int sl_dist_serve(uint64_t *sent, const sl_pipeline *p) {
  *sent = 0;
#ifdef SL_HAVE_MPI
  if (g_mpi) return sl__mpi_serve(sent, p);
#endif
  return sl__err(SL_EINVAL, "sl_dist_serve: this process is not an MPI worker rank (sl_dist_init with workers)");
}

int sl_dist_finalize(void) {
#ifdef SL_HAVE_MPI
  if (g_mpi) {
    g_mpi = false;
    return sl__mpi_finalize();
  }
#endif
  return 0;
}
