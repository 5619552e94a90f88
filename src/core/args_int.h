/* core/args_int.h: sl_args (the read-only view of an op's "args" object that functions see) and the function
 * registry. Both live in core so that ops and fns depend on core only. */
#ifndef SL_CORE_ARGS_H
#define SL_CORE_ARGS_H

#include <jansson.h>

#include "core/core_int.h"

struct sl_args {
  json_t *obj;      /* the args object (borrowed; may be NULL for none) */
  const char *path; /* "ops[3].args" */
};

/* A registered function (copied definition + payload). */
typedef struct sl__fn {
  char *name;
  sl_fn_def def;
  void *payload;
} sl__fn;

/* Looks a function up by name; the pointer stays valid until the function is replaced. Returns a copy. */
int sl__fn_lookup(const char *name, sl__fn *out);
/* The built-in functions (static tables in src/fns): a definition by name, and the NULL-terminated names. */
const sl_fn_def *sl__fn_builtin(const char *name);
const char *const *sl__fn_builtin_names(void);

/* Error message pointing at a JSON path with the JSON type found. */
const char *sl__json_type_name(const json_t *v);

#endif
