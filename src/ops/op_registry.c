/* ops/op_registry.c: the table of operators a spec may name. One line per op; the implementations and their schemas
 * live in op_*.c; every list of op names (messages, docs) is made from this table. */
#include <pthread.h>
#include <string.h>

#include "ops/pipeline_int.h"

extern const sl__op_vt sl__op_range, sl__op_files, sl__op_tfrecord, sl__op_lines, sl__op_interleave, sl__op_map,
    sl__op_filter, sl__op_shuffle, sl__op_batch, sl__op_padded_batch, sl__op_take, sl__op_skip, sl__op_repeat,
    sl__op_shard, sl__op_cache, sl__op_prefetch, sl__op_bucket_by_sequence_length, sl__op_offload,
    sl__op_image_folder, sl__op_tar;

static const sl__op_vt *const OPS[] = {
    &sl__op_range,  &sl__op_files, &sl__op_image_folder, &sl__op_tfrecord, &sl__op_tar, &sl__op_lines,  &sl__op_interleave, &sl__op_map,
    &sl__op_filter, &sl__op_shuffle, &sl__op_batch,  &sl__op_padded_batch, &sl__op_take, &sl__op_skip,
    &sl__op_repeat, &sl__op_shard, &sl__op_cache,    &sl__op_prefetch, &sl__op_bucket_by_sequence_length, &sl__op_offload,
};
#define NOPS (sizeof OPS / sizeof OPS[0])

const sl__op_vt *sl__op_lookup(const char *kind) {
  for (size_t i = 0; i < NOPS; i++)
    if (!strcmp(OPS[i]->kind, kind)) return OPS[i];
  return NULL;
}

const sl__op_vt *sl__op_at(size_t i) { return i < NOPS ? OPS[i] : NULL; }

static char g_names[1024];
static pthread_once_t g_names_once = PTHREAD_ONCE_INIT;
static void fill_names(void) {
  for (size_t i = 0; i < NOPS; i++) {
    if (i) strncat(g_names, ", ", sizeof g_names - strlen(g_names) - 1);
    strncat(g_names, OPS[i]->kind, sizeof g_names - strlen(g_names) - 1);
  }
}

const char *sl__op_names(void) {
  pthread_once(&g_names_once, fill_names);
  return g_names;
}
