/* core/args_int.h: sl_args, the read-only view of an op's "args" object that functions see. It lives in core
 * because ops build it and fns read it; the function registry is in fns (fns/fns_int.h). */
#ifndef SL_CORE_ARGS_H
#define SL_CORE_ARGS_H

#include <jansson.h>

#include "core/core_int.h"
#include "core/schema_int.h"
#include "sluice/fn.h"

struct sl_args {
  json_t *obj;      /* the args object (borrowed; may be NULL for none) */
  const char *path; /* "ops[3].args" */
  const sl__arg *schema; /* the function's arg table (NULL: none): an absent arg takes its default from there */
  struct sl__args_asked *asked; /* while init() of a function without a table runs: what it asks for, else NULL */
};

/* A function registered through sl_fn_register has no arg table: the keys its init() asks for (present or not)
 * are its vocabulary, and a key of the spec's args outside it is an error (a misspelt name would else be
 * ignored). Recorded by the sl_args getters on init()'s thread only. */
typedef struct sl__args_asked {
  json_t *keys; /* an object whose keys are the names asked for */
  bool lost;    /* out of memory while recording: no check */
} sl__args_asked;
/* Every key of a->obj that init() asked for, or an SL_EINVAL naming the first other one (`what`: "function
 * 'name'") with the nearest asked-for name. */
int sl__args_check_asked(const sl_args *a, const char *what);

/* Error message pointing at a JSON path with the JSON type found. */
const char *sl__json_type_name(const json_t *v);

#endif
