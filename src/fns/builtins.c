/* fns/builtins.c: registers the built-in element functions. Each family lives in its own fn_*.c and exports its
 * definitions through a table; this file is the one list of them. */
#include "fns/fns.h"

static const sl__fn_entry *const TABLES[] = {sl__fns_basic,  sl__fns_example, sl__fns_jpeg,
                                                  sl__fns_image, sl__fns_text,    sl__fns_tabular};

void sl__fns_register_builtins(void) {
  for (size_t t = 0; t < sizeof TABLES / sizeof TABLES[0]; t++)
    for (const sl__fn_entry *e = TABLES[t]; e->name; e++) sl__fn_register_builtin(e->name, &e->def);
}
