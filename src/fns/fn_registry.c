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
static sl__fn_decl *g_decls; /* every declaration (sl_fn_declare), never freed */

static int reg_locked(const char *name, const sl_fn_def *def, void *payload) {
  for (size_t i = 0; i < g_nfns; i++)
    if (!strcmp(g_fns[i].name, name)) {
      g_fns[i].def = *def;
      g_fns[i].payload = payload;
      g_fns[i].decl = NULL; /* a new function: its old declaration is not its */
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
  g_fns[g_nfns++] = (sl__fn){nm, *def, payload, NULL, NULL};
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

/* Checks one declared component (entry `i` of `what`) at `fn`'s declaration. */
static int io_check(const sl_fn_io *io, const char *fn, const char *what, int i, bool make) {
  if (!io->name || !*io->name)
    return sl__err(SL_EINVAL, "sl_fn_declare(%s): %s[%d]: a component name is required", fn, what, i);
  if (io->dtype < -1 || io->dtype > SL_BYTES)
    return sl__err(SL_EINVAL, "sl_fn_declare(%s): %s[%d] ('%s'): dtype %d is no sl_dtype", fn, what, i, io->name,
                   io->dtype);
  if (io->rank < -1 || io->rank > SL_MAX_RANK)
    return sl__err(SL_EINVAL, "sl_fn_declare(%s): %s[%d] ('%s'): rank %d outside -1..%d", fn, what, i, io->name,
                   io->rank, SL_MAX_RANK);
  for (int d = 0; make && d < io->rank; d++)
    if (io->dims[d] < -1)
      return sl__err(SL_EINVAL, "sl_fn_declare(%s): %s[%d] ('%s'): dim %d is %lld (>= 0, or -1: not known)", fn, what,
                     i, io->name, d, (long long)io->dims[d]);
  return 0;
}

/* Copies n entries and their names into `dst` and the name area at *names. */
static void io_copy(sl_fn_io *dst, const sl_fn_io *src, int n, char **names) {
  for (int i = 0; i < n; i++) {
    dst[i] = src[i];
    size_t l = strlen(src[i].name) + 1;
    memcpy(*names, src[i].name, l);
    dst[i].name = *names;
    *names += l;
  }
}

int sl_fn_declare(const char *name, const sl_fn_io *reads, int nreads, const sl_fn_io *makes, int nmakes) {
  if (!name || nreads < 0 || nmakes < 0 || (nreads && !reads) || (nmakes && !makes))
    return sl__err(SL_EINVAL, "sl_fn_declare: a name, and arrays for the counts given, are required");
  if (nreads > SL_MAX_COMPONENTS || nmakes > SL_MAX_COMPONENTS)
    return sl__err(SL_EINVAL, "sl_fn_declare(%s): at most %d components read and %d made", name, SL_MAX_COMPONENTS,
                   SL_MAX_COMPONENTS);
  size_t bytes = sizeof(sl__fn_decl) + (size_t)(nreads + nmakes) * sizeof(sl_fn_io);
  int rc = 0;
  for (int i = 0; i < nreads && !rc; i++)
    if (!(rc = io_check(&reads[i], name, "reads", i, false))) bytes += strlen(reads[i].name) + 1;
  for (int i = 0; i < nmakes && !rc; i++)
    if (!(rc = io_check(&makes[i], name, "makes", i, true))) bytes += strlen(makes[i].name) + 1;
  if (rc) return rc;
  sl__fn_decl *d = sl__calloc(1, bytes);
  if (!d) return sl__oom("a function's declaration");
  d->nreads = nreads;
  d->nmakes = nmakes;
  d->reads = (sl_fn_io *)(d + 1);
  d->makes = d->reads + nreads;
  char *names = (char *)(d->makes + nmakes);
  io_copy(d->reads, reads, nreads, &names);
  io_copy(d->makes, makes, nmakes, &names);
  pthread_mutex_lock(&g_reg_mu);
  rc = SL_ENOTFOUND;
  for (size_t i = 0; i < g_nfns; i++)
    if (!strcmp(g_fns[i].name, name)) {
      g_fns[i].decl = d;
      rc = 0;
    }
  if (!rc) {
    d->next = g_decls;
    g_decls = d;
  }
  pthread_mutex_unlock(&g_reg_mu);
  if (rc) {
    sl__free(d);
    return sl__err(SL_ENOTFOUND, "sl_fn_declare: no function '%s' was registered (sl_fn_register first)", name);
  }
  return 0;
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
      *out = (sl__fn){NULL, d->def, NULL, d->schema, NULL};
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
