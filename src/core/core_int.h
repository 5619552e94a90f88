/* core/core_int.h: helpers shared by sluice's own files (sl__ prefix), not part of the public API:
 * allocation through the installed allocator, checked size arithmetic, error setting, small utilities. */
#ifndef SL_CORE_INTERNAL_H
#define SL_CORE_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sluice/common.h"
#include "sluice/element.h"

/* Installs the allocator (NULL: the C library's); sl_set_allocator drains the buffer pool first. */
void sl__allocator_install(const sl_allocator *a);
void *sl__malloc(size_t n);
void *sl__calloc(size_t n, size_t size);
void *sl__realloc(void *p, size_t n);
void sl__free(void *p);
char *sl__strdup(const char *s);
char *sl__strndup(const char *s, size_t n);
/* Like sl__malloc but of n * size with overflow check. */
void *sl__mallocarray(size_t n, size_t size);
/* The pool of large buffers (element.c): frees every idle buffer it holds (sl_set_allocator calls it, the blocks
 * came from the old allocator), and the bytes it holds idle. Safe from any thread. */
void sl__bufpool_drain(void);
size_t sl__bufpool_idle(void);

/* Sets the thread's error and returns code. */
int sl__err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int sl__verr(int code, const char *fmt, va_list ap);
/* Prefixes the current message with "prefix: " (keeps the code); returns the code. */
int sl__err_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True (once) when a jansson allocation failed on this thread since the last call. */
bool sl__json_oom_take(void);
/* sl_redact into a new string (sl__free it); NULL when out of memory. */
char *sl__redact_dup(const char *src);
/* Notes the passwords a connection string holds (a URI's userinfo, `password=` of its query or of libpq conninfo),
 * raw and decoded, so that every later sl_redact in the process replaces their text wherever it appears (libpq
 * echoes fragments of a URI in its own messages). Call it before the string can reach any message. */
void sl__redact_note(const char *conn);
/* A postgresql:// URI split into the URI without its password (userinfo password and `password=` query
 * parameter removed) and the password, percent-decoded (NULL when it has none), both sl__free'd by the caller: the
 * password goes to libpq as a keyword of its own, so no message of libpq about the URI can hold it. A password's
 * extent is read by the same rules as sl_redact's (the last '@' of the authority ends it). Notes the password
 * (sl__redact_note). SL_ENOMEM. */
int sl__uri_take_password(const char *uri, char **rest, char **password);
/* SL_ENOMEM with a message naming what was being allocated. */
int sl__oom(const char *what);

/* The readers' opens (infile.c): only a regular file is read. A FIFO, socket, device or directory is refused with
 * SL_EINVAL ("'PATH' is a FIFO (a named pipe), not a regular file..."), a missing file with SL_ENOTFOUND, and an
 * open never waits (a FIFO is refused by stat first, and opened O_NONBLOCK in case one replaced the file since).
 * check: stat only (for readers that open by name, libarchive's). */
int sl__check_regular(const char *path);
int sl__open_regular(int *fd, const char *path);
int sl__fopen_regular(FILE **f, const char *path);
/* "a FIFO (a named pipe)", "a socket", "a character device", ... for a st_mode. */
const char *sl__file_kind(unsigned mode);

/* The index of `name` among names[0..n), or -1 (also for NULL): the parsers of enum names (gen's kinds, formats). */
static inline int sl__name_index(const char *const *names, int n, const char *name) {
  for (int i = 0; name && i < n; i++)
    if (!strcmp(name, names[i])) return i;
  return -1;
}

/* Checked arithmetic: false on overflow. */
static inline bool sl__add_ok(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline bool sl__mul_ok(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }

/* Monotonic wall clock and this thread's CPU clock, in nanoseconds. */
static inline uint64_t sl__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static inline uint64_t sl__cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* 64-bit mixing (splitmix64 finaliser): seeds per element from (seed, op, epoch, index). */
static inline uint64_t sl__mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
/* A standard normal variate from `r` (sluice/fn.h's generator; core/args.c). */
struct sl_rng;
double sl__rng_normal(struct sl_rng *r);
static inline uint64_t sl__seed_of(uint64_t seed, uint64_t op, uint64_t epoch, uint64_t index) {
  return sl__mix64(sl__mix64(sl__mix64(seed ^ sl__mix64(op)) ^ epoch) ^ index);
}

/* A growable byte string. */
/* Text provenance: a buffer of `size` bytes that remembers the file and 1-based line its bytes came from (the
 * `lines` source makes these), so that an error on the element can name them; NULL with the error set on failure.
 * sl__buf_origin / sl__comp_origin / sl__elem_origin find it again (false when the buffer, the component, or
 * every component, has none). */
sl_buf *sl__buf_alloc_origin(size_t size, const char *file, uint64_t line);
bool sl__buf_origin(const char **file, uint64_t *line, const sl_buf *b);
bool sl__comp_origin(const char **file, uint64_t *line, const sl_comp *c);
bool sl__elem_origin(const char **file, uint64_t *line, const sl_elem *e);

typedef struct sl__str {
  char *s;
  size_t len, cap;
} sl__str;
int sl__str_append(sl__str *b, const char *data, size_t n);
int sl__str_printf(sl__str *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sl__str_dispose(sl__str *b);

/* The reports' number formats (numfmt.c), written into b (n bytes, 16 are enough) and returned: a rate or count
 * with a k/M/G suffix ("823", "44.2k", "inf" from 1e11 up), seconds as "133ns" / "11.2us" / "102us" / "150ms",
 * and bytes as "512 B" / "1.8 kB" / "12.39 GB". */
const char *sl__fmt_si(char *b, size_t n, double v);
const char *sl__fmt_usec(char *b, size_t n, double seconds);
const char *sl__fmt_bytes(char *b, size_t n, double v);
/* A span of time given in days, in the unit that reads best: "45 seconds", "12.3 minutes", "5.2 hours", "3.4 days". */
const char *sl__fmt_days(char *b, size_t n, double days);

#endif
