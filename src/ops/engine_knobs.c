/* ops/engine_knobs.c: an op's knobs are read from its spec object through the one family of arg getters
 * (core/args_int.h) over the op's knob table, which alone states their defaults, ranges and tunability. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/op_int.h"

sl_args sl__op_knobs(const sl__op *op, json_t *obj) {
  return (sl_args){obj, op->path, op->vt && op->vt->schema ? op->vt->schema->knobs : NULL, NULL};
}

int64_t sl__autotune_parallelism(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? n : 1;
}

