/* ops/dist_hook_int.h: what a distributed runtime (src/dist/, above ops) registers with the engine: the group a
 * shard "auto" splits over, and the transport an `offload` op receives its elements from. The engine never calls
 * up into dist; dist registers these at startup (sl_dist_init) and removes them at sl_dist_finalize. */
#ifndef SL_OPS_DIST_HOOK_H
#define SL_OPS_DIST_HOOK_H

#include <jansson.h>

#include "ops/pipeline_int.h"

typedef struct sl__dist_hooks {
  /* shard "auto": the number of shards and this process's index (0, or an error code with the message set). NULL:
   * the launcher's environment variables decide. */
  int (*shard_auto)(int64_t *num, int64_t *index, void *payload);
  /* The offload transport on a consumer (trainer) process. NULL: offload is a pass-through. recv_open starts one
   * stream for the offload op `op` (one per iterator); recv_next yields the next element (0), SL_END when every
   * producer has ended, or an error naming the producer; recv_close stops the stream (the producers are told). */
  int (*recv_open)(void **stream, sl__op *op, void *payload);
  int (*recv_next)(void *stream, sl_elem *out);
  void (*recv_close)(void *stream);
  void *payload;
} sl__dist_hooks;

/* The launchers' environment variables naming the group's size and this process's rank, in the order they are
 * read: torchrun's WORLD_SIZE/RANK, Open MPI's OMPI_COMM_WORLD_SIZE/_RANK, MPICH's and Slurm's PMI_SIZE/PMI_RANK
 * (shard "auto" without a registered runtime, and sl_dist_init outside MPI). */
enum { SL__LAUNCHER_NENV = 3 };
extern const char *const sl__launcher_env[SL__LAUNCHER_NENV][2];

/* Registers the hooks (copied; NULL removes them). Not thread-safe: call before building pipelines. */
void sl__dist_register(const sl__dist_hooks *h);
/* The registered hooks, or NULL. */
const sl__dist_hooks *sl__dist_hooks_get(void);

/* The part of a spec that producer (worker) `index` of `num` runs: the top chain's ops before its first `offload`,
 * with a shard {num, index} after the first op unless that part already has a shard (whose "auto" then takes
 * the workers' group from the shard_auto hook). *out is a new spec object; SL_EINVAL when the spec has no offload. */
int sl__offload_worker_spec(json_t **out, json_t *spec, int64_t num, int64_t index);

#endif
