/* ops/op_registry.c: the table of operators a spec may name. One line per op; the implementations live in op_*.c. */
#include <string.h>

#include "ops/engine_int.h"

extern const sl__op_vt sl__op_range, sl__op_files, sl__op_tfrecord, sl__op_lines, sl__op_interleave, sl__op_map,
    sl__op_filter, sl__op_shuffle, sl__op_batch, sl__op_padded_batch, sl__op_take, sl__op_skip, sl__op_repeat,
    sl__op_shard, sl__op_cache, sl__op_prefetch, sl__op_bucket_by_sequence_length, sl__op_offload;

static const sl__op_vt *const OPS[] = {
    &sl__op_range,  &sl__op_files, &sl__op_tfrecord, &sl__op_lines,  &sl__op_interleave, &sl__op_map,
    &sl__op_filter, &sl__op_shuffle, &sl__op_batch,  &sl__op_padded_batch, &sl__op_take, &sl__op_skip,
    &sl__op_repeat, &sl__op_shard, &sl__op_cache,    &sl__op_prefetch, &sl__op_bucket_by_sequence_length, &sl__op_offload,
};

const sl__op_vt *sl__op_lookup(const char *kind) {
  for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
    if (!strcmp(OPS[i]->kind, kind)) return OPS[i];
  return NULL;
}

const char *sl__op_names(void) {
  return "range, files, tfrecord, lines, interleave, map, filter, shuffle, batch, padded_batch, take, skip, "
         "repeat, shard, cache, prefetch, bucket_by_sequence_length, offload";
}
