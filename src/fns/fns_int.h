/* fns/fns_int.h: the function registry's lookup (what map/filter call) and what the built-in function files
 * share: the table type and helpers. */
#ifndef SL_FNS_H
#define SL_FNS_H

#include "core/args_int.h"
#include "core/core_int.h"

typedef struct sl__fn_entry {
  const char *name;
  sl_fn_def def;
} sl__fn_entry;

/* A function as the registry hands it out: a copy of the definition and the payload (name is NULL for a
 * built-in). */
typedef struct sl__fn {
  char *name;
  sl_fn_def def;
  void *payload;
} sl__fn;

/* Looks a function up by name (run-time registrations first, then the built-ins) and copies it into out;
 * SL_ENOTFOUND when there is none. */
int sl__fn_lookup(const char *name, sl__fn *out);

/* Each fn_*.c exports one NULL-name-terminated table. */
extern const sl__fn_entry sl__fns_basic[];
extern const sl__fn_entry sl__fns_example[];
extern const sl__fn_entry sl__fns_jpeg[];
extern const sl__fn_entry sl__fns_image[];
extern const sl__fn_entry sl__fns_text[];
extern const sl__fn_entry sl__fns_tabular[];

/* Reads the component named by args[key] (default `def`) from e; names the op and element on failure. */
int sl__fn_component(sl_elem *e, const sl_fn_call *call, const char *name, sl_comp **out);

#endif
