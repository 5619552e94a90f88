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

/* The one family of getters for an op's knobs and a function's args (an op reads its spec object through an
 * sl_args view over its knob table, sl__op_knobs). The table's entry for `key` is the only place its type, default,
 * range and tunability are written: an absent key takes the entry's default, a present one is checked against the
 * entry's type and range, and a key the table does not list is an error. The `_or` forms are for an entry whose
 * default is computed (the table gives none and its doc says how): `computed` is used only when the key is absent.
 * sl__get_str gives NULL for an absent key without a default. Errors name the JSON path. */
int sl__get_int(int64_t *out, const sl_args *a, const char *key);
int sl__get_int_or(int64_t *out, const sl_args *a, const char *key, int64_t computed);
int sl__get_num(double *out, const sl_args *a, const char *key);
int sl__get_num_or(double *out, const sl_args *a, const char *key, double computed);
int sl__get_bool(bool *out, const sl_args *a, const char *key);
int sl__get_bool_or(bool *out, const sl_args *a, const char *key, bool computed);
int sl__get_str(const char **out, const sl_args *a, const char *key);
int sl__get_str_or(const char **out, const sl_args *a, const char *key, const char *computed);
/* An SL__ARG_COMP_ALT arg: the component name or its alternatives, in order. */
int sl__get_alts(sl__alts *out, const sl_args *a, const char *key);
/* An array of at most `max` numbers (*n of them; 0 when absent without a default). */
int sl__get_nums(double *out, int *n, const sl_args *a, const char *key, int max);
/* An integer knob that also accepts "autotune" (sets *autotune; *out is then the default). An absent tunable knob is
 * written back into the spec object, so that the normalised spec shows the value in force. */
int sl__get_tunable(int64_t *out, bool *autotune, const sl_args *a, const char *key);
int sl__get_tunable_or(int64_t *out, bool *autotune, const sl_args *a, const char *key, int64_t computed);
/* Tests: called by every getter above with the JSON path, the key, the value in force (NULL: none) and whether the
 * spec gave it; per thread (NULL: none). */
typedef void (*sl__args_read_fn)(const char *path, const char *key, json_t *value, bool given, void *payload);
void sl__args_read_hook(sl__args_read_fn fn, void *payload);

/* Error message pointing at a JSON path with the JSON type found. */
const char *sl__json_type_name(const json_t *v);

#endif
