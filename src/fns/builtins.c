/* fns/builtins.c: the built-in element functions. Each family lives in its own fn_*.c and exports a table; this
 * file is the one list of them, searched by name (static data: nothing to register, nothing to fail). */
#include <pthread.h>
#include <string.h>

#include "fns/fns_int.h"

static const sl__fn_entry *const TABLES[] = {sl__fns_basic, sl__fns_example, sl__fns_jpeg,
                                              sl__fns_image, sl__fns_text,    sl__fns_tabular};
#define NTABLES (sizeof TABLES / sizeof TABLES[0])

const sl_fn_def *sl__fn_builtin(const char *name) {
  for (size_t t = 0; t < NTABLES; t++)
    for (const sl__fn_entry *e = TABLES[t]; e->name; e++)
      if (!strcmp(e->name, name)) return &e->def;
  return NULL;
}

#define MAX_BUILTINS 256
static const char *g_names[MAX_BUILTINS + 1];
static pthread_once_t g_names_once = PTHREAD_ONCE_INIT;
static void fill_names(void) {
  size_t k = 0;
  for (size_t t = 0; t < NTABLES; t++)
    for (const sl__fn_entry *e = TABLES[t]; e->name && k < MAX_BUILTINS; e++) g_names[k++] = e->name;
  g_names[k] = NULL;
}

const char *const *sl__fn_builtin_names(void) {
  pthread_once(&g_names_once, fill_names);
  return g_names;
}
