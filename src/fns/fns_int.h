/* fns/fns_int.h: what the built-in function files share: the registration table type and helpers. */
#ifndef SL_FNS_H
#define SL_FNS_H

#include "core/args_int.h"
#include "core/core_int.h"

typedef struct sl__fn_entry {
  const char *name;
  sl_fn_def def;
} sl__fn_entry;

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
