/* prov/store/pq_dlopen.c: libpq loaded when the first PostgreSQL store opens (SL_POSTGRES_DLOPEN, the Python wheel's
 * build): the pointers pq_dlopen.h names, filled once from libpq.so.5 (its ABI has been stable since PostgreSQL 8.3).
 * The system's libpq is used rather than a copy in the wheel, with the OpenSSL, Kerberos and LDAP it was built with. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "core/core_int.h"
#define SL__PQ_NO_RENAME
#include "prov/store/pq_dlopen.h"

#define SL__PQ_DEF(f) __typeof__(f) *sl__pq_##f;
SL__PQ_FNS(SL__PQ_DEF)
#undef SL__PQ_DEF

#define PQ_SONAME "libpq.so.5"

static pthread_once_t pq_once = PTHREAD_ONCE_INIT;
static char pq_why[512]; /* empty: loaded */

static void pq_load_once(void) {
  void *h = dlopen(PQ_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(pq_why, sizeof pq_why, "%s", e ? e : PQ_SONAME ": not found");
    return;
  }
  /* dlsym's void * to a function pointer: POSIX requires it to work (dlsym's own rationale) */
#define SL__PQ_SYM(f)                                                                                                 \
  if (!pq_why[0] && !(*(void **)&sl__pq_##f = dlsym(h, #f)))                                                         \
    snprintf(pq_why, sizeof pq_why, "%s has no %s (libpq of PostgreSQL 14 or later is needed)", PQ_SONAME, #f);
  SL__PQ_FNS(SL__PQ_SYM)
#undef SL__PQ_SYM
  if (pq_why[0]) dlclose(h); /* kept open for the life of the process otherwise */
}

int sl__pq_load(const char *where) {
  pthread_once(&pq_once, pq_load_once);
  if (!pq_why[0]) return 0;
  return sl__err(SL_ENOTFOUND,
                 "%s: PostgreSQL stores need libpq, which this build of sluice loads when one is opened and could not "
                 "load (%s); install it (Debian, Ubuntu: apt-get install libpq5; Fedora: dnf install libpq)",
                 where, pq_why);
}
