/* fns/fn_registry.c: the function registry that map/filter look functions up in. The built-ins are the one list
 * of the fn_*.c tables (static data: nothing to register, nothing to fail); functions registered at run time
 * (sl_fn_register) live in a mutex-protected table and take precedence. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fns/fns_int.h"

static const sl__fn_entry *const TABLES[] = {sl__fns_basic, sl__fns_example, sl__fns_jpeg,   sl__fns_codec,
                                              sl__fns_image, sl__fns_text,    sl__fns_tabular};
#define NTABLES (sizeof TABLES / sizeof TABLES[0])

static const sl__fn_entry *fn_builtin(const char *name) {
  for (size_t t = 0; t < NTABLES; t++)
    for (const sl__fn_entry *e = TABLES[t]; e->name; e++)
      if (!strcmp(e->name, name)) return e;
  return NULL;
}

size_t sl__fn_builtin_count(void) {
  size_t n = 0;
  for (size_t t = 0; t < NTABLES; t++)
    for (const sl__fn_entry *e = TABLES[t]; e->name; e++) n++;
  return n;
}

const sl__fn_entry *sl__fn_builtin(size_t i) {
  for (size_t t = 0; t < NTABLES; t++)
    for (const sl__fn_entry *e = TABLES[t]; e->name; e++)
      if (i-- == 0) return e;
  return NULL;
}

/* ---- registry ----
 * Built-in functions live in static tables (no allocation, so they cannot go missing under memory pressure);
 * functions registered at run time live in a mutex-protected array and take precedence over built-ins. */
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static sl__fn *g_fns;
static size_t g_nfns, g_capfns;

static int reg_locked(const char *name, const sl_fn_def *def, void *payload) {
  for (size_t i = 0; i < g_nfns; i++)
    if (!strcmp(g_fns[i].name, name)) {
      g_fns[i].def = *def;
      g_fns[i].payload = payload;
      return 0;
    }
  if (g_nfns == g_capfns) {
    size_t cap = g_capfns ? g_capfns * 2 : 16;
    sl__fn *n = sl__realloc(g_fns, cap * sizeof *n);
    if (!n) return sl__oom("the function registry");
    g_fns = n;
    g_capfns = cap;
  }
  char *nm = sl__strdup(name);
  if (!nm) return sl__oom("a function name");
  g_fns[g_nfns++] = (sl__fn){nm, *def, payload, NULL};
  return 0;
}

int sl_fn_register(const char *name, const sl_fn_def *def, void *payload) {
  if (!name || !*name || !def || !def->call) return sl__err(SL_EINVAL, "sl_fn_register: a name and a call are required");
  if (def->version != SL_FN_DEF_VERSION)
    return sl__err(SL_EVERSION, "sl_fn_register(%s): sl_fn_def version %u, this library speaks %d", name, def->version,
                   SL_FN_DEF_VERSION);
  pthread_mutex_lock(&g_reg_mu);
  int rc = reg_locked(name, def, payload);
  pthread_mutex_unlock(&g_reg_mu);
  return rc;
}

int sl__fn_lookup(const char *name, sl__fn *out) {
  pthread_mutex_lock(&g_reg_mu);
  int rc = SL_ENOTFOUND;
  for (size_t i = 0; i < g_nfns; i++)
    if (!strcmp(g_fns[i].name, name)) {
      *out = g_fns[i];
      rc = 0;
      break;
    }
  pthread_mutex_unlock(&g_reg_mu);
  if (rc) {
    const sl__fn_entry *d = fn_builtin(name);
    if (d) {
      *out = (sl__fn){NULL, d->def, NULL, d->schema};
      rc = 0;
    }
  }
  return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

int sl_fn_list(const char ***names) {
  size_t nb = sl__fn_builtin_count();
  pthread_mutex_lock(&g_reg_mu);
  size_t n = g_nfns + nb, total = (n + 1) * sizeof(char *);
  for (size_t i = 0; i < g_nfns; i++) total += strlen(g_fns[i].name) + 1;
  const char **arr = sl__malloc(total);
  if (!arr) {
    pthread_mutex_unlock(&g_reg_mu);
    return sl__oom("the function list");
  }
  char *p = (char *)(arr + n + 1);
  size_t k = 0;
  for (size_t i = 0; i < g_nfns; i++) {
    size_t l = strlen(g_fns[i].name) + 1;
    memcpy(p, g_fns[i].name, l);
    arr[k++] = p;
    p += l;
  }
  pthread_mutex_unlock(&g_reg_mu);
  for (size_t t = 0; t < NTABLES; t++) /* the built-ins a registered function of the same name does not hide */
    for (const sl__fn_entry *e = TABLES[t]; e->name; e++) {
      bool dup = false;
      for (size_t j = 0; j < g_nfns && !dup; j++) dup = !strcmp(arr[j], e->name);
      if (!dup) arr[k++] = e->name;
    }
  arr[k] = NULL;
  qsort(arr, k, sizeof *arr, cmp_str);
  *names = arr;
  return 0;
}
