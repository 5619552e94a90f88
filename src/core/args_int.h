/* core/args_int.h: sl_args, the read-only view of an op's "args" object that functions see. It lives in core
 * because ops build it and fns read it; the function registry is in fns (fns/fns_int.h). */
#ifndef SL_CORE_ARGS_H
#define SL_CORE_ARGS_H

#include <jansson.h>

#include "core/core_int.h"
#include "core/schema_int.h"

struct sl_args {
  json_t *obj;      /* the args object (borrowed; may be NULL for none) */
  const char *path; /* "ops[3].args" */
  const sl__arg *schema; /* the function's arg table (NULL: none): an absent arg takes its default from there */
};

/* Error message pointing at a JSON path with the JSON type found. */
const char *sl__json_type_name(const json_t *v);

#endif
