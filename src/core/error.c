/* core/error.c: the per-thread error (code + message), allocator hooks and small string utilities. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/core_int.h"
#include "sluice/fn.h" /* sl_error_set */

#define SL_ERRMSG_MAX 1024
static _Thread_local int tl_code;
static _Thread_local char tl_msg[SL_ERRMSG_MAX];

const char *sl_error_last(void) { return tl_msg; }
int sl_error_code(void) { return tl_code; }
void sl_error_clear(void) {
  tl_code = 0;
  tl_msg[0] = 0;
}

const char *sl_strerror(int code) {
  switch (code) {
  case SL_OK: return "SL_OK";
  case SL_END: return "SL_END";
  case SL_EINVAL: return "SL_EINVAL";
  case SL_ENOMEM: return "SL_ENOMEM";
  case SL_EIO: return "SL_EIO";
  case SL_ECORRUPT: return "SL_ECORRUPT";
  case SL_ENOTFOUND: return "SL_ENOTFOUND";
  case SL_ECANCELED: return "SL_ECANCELED";
  case SL_EVERSION: return "SL_EVERSION";
  default: return "SL_ERROR";
  }
}

const char *sl_version(void) { return SL_VERSION; }

/* No message leaves the library with a connection string's password in it, whoever formatted it (sl_redact). */
static void redact_msg(void) {
  char raw[SL_ERRMSG_MAX];
  memcpy(raw, tl_msg, sizeof raw);
  sl_redact(tl_msg, sizeof tl_msg, raw);
}

/* Back to the start of a UTF-8 character. */
static size_t char_start(const char *s, size_t i) {
  while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80) i--;
  return i;
}

/* The message from the whole formatted text, redacted; too long for the buffer, its middle is elided: a long path
 * or value near the front must not push out the reason, which comes last. */
static void set_msg(const char *full) {
  size_t n = sl_redact(NULL, 0, full);
  if (n < sizeof tl_msg) {
    sl_redact(tl_msg, sizeof tl_msg, full);
    return;
  }
  char *r = sl__malloc(n + 1);
  if (!r) { /* out of memory: the front of it */
    sl_redact(tl_msg, sizeof tl_msg, full);
    return;
  }
  sl_redact(r, n + 1, full);
  static const char GAP[] = " [...] ";
  size_t head = char_start(r, 256), tail_from = n - (sizeof tl_msg - 1 - 256 - (sizeof GAP - 1));
  while (tail_from < n && ((unsigned char)r[tail_from] & 0xc0) == 0x80) tail_from++; /* forward: it still fits */
  size_t tail = n - tail_from;
  memcpy(tl_msg, r, head);
  memcpy(tl_msg + head, GAP, sizeof GAP - 1);
  memcpy(tl_msg + head + sizeof GAP - 1, r + tail_from, tail);
  tl_msg[head + sizeof GAP - 1 + tail] = 0;
  sl__free(r);
}

int sl__verr(int code, const char *fmt, va_list ap) {
  tl_code = code;
  char raw[4 * SL_ERRMSG_MAX];
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(raw, sizeof raw, fmt, ap);
  char *big = n >= (int)sizeof raw ? sl__malloc((size_t)n + 1) : NULL; /* formatted whole: the reason comes last */
  if (big) vsnprintf(big, (size_t)n + 1, fmt, again);
  va_end(again);
  set_msg(big ? big : raw);
  sl__free(big);
  return code;
}

int sl__err(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sl__verr(code, fmt, ap);
  va_end(ap);
  return code;
}

int sl_error_set(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sl__verr(code, fmt, ap);
  va_end(ap);
  return code;
}

int sl__err_wrap(int code, const char *fmt, ...) {
  char prefix[512], old[SL_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, tl_msg, sizeof old);
  const char *rest = old[0] ? old : sl_strerror(code);
  size_t pl = strlen(prefix), rl = strlen(rest);
  if (pl > SL_ERRMSG_MAX - 3) pl = SL_ERRMSG_MAX - 3;
  if (rl > SL_ERRMSG_MAX - 3 - pl) rl = SL_ERRMSG_MAX - 3 - pl;
  memcpy(tl_msg, prefix, pl);
  memcpy(tl_msg + pl, ": ", 2);
  memcpy(tl_msg + pl + 2, rest, rl);
  tl_msg[pl + 2 + rl] = 0;
  redact_msg();
  tl_code = code;
  return code;
}

int sl__oom(const char *what) { return sl__err(SL_ENOMEM, "out of memory allocating %s", what); }

static void *def_malloc(size_t n, void *p) { (void)p; return malloc(n); }
static void *def_realloc(void *q, size_t n, void *p) { (void)p; return realloc(q, n); }
static void def_free(void *q, void *p) { (void)p; free(q); }
static sl_allocator g_alloc = {def_malloc, def_realloc, def_free, NULL};

/* jansson reports some allocation failures as syntax errors; this flag tells the two apart. */
static _Thread_local bool tl_json_oom;
static void *js_malloc(size_t n) {
  void *p = g_alloc.malloc_fn(n ? n : 1, g_alloc.payload);
  if (!p) tl_json_oom = true;
  return p;
}
bool sl__json_oom_take(void) {
  bool r = tl_json_oom;
  tl_json_oom = false;
  return r;
}
static void js_free(void *p) {
  if (p) g_alloc.free_fn(p, g_alloc.payload);
}

void sl__allocator_install(const sl_allocator *a) {
  if (a)
    g_alloc = *a;
  else
    g_alloc = (sl_allocator){def_malloc, def_realloc, def_free, NULL};
  /* Specs are JSON: jansson's allocations go through the same hooks, so fault injection reaches them too. */
  json_set_alloc_funcs(js_malloc, js_free);
}

void *sl__malloc(size_t n) { return g_alloc.malloc_fn(n ? n : 1, g_alloc.payload); }
void *sl__realloc(void *p, size_t n) { return g_alloc.realloc_fn(p, n ? n : 1, g_alloc.payload); }
void sl__free(void *p) {
  if (p) g_alloc.free_fn(p, g_alloc.payload);
}
void sl_free(void *p) { sl__free(p); }
void *sl__mallocarray(size_t n, size_t size) {
  size_t t;
  if (!sl__mul_ok(n, size, &t)) return NULL;
  return sl__malloc(t);
}
void *sl__calloc(size_t n, size_t size) {
  void *p = sl__mallocarray(n, size);
  if (p) memset(p, 0, n * size);
  return p;
}
char *sl__strndup(const char *s, size_t n) {
  char *d = sl__malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}
char *sl__strdup(const char *s) { return sl__strndup(s, strlen(s)); }

int sl__str_append(sl__str *b, const char *data, size_t n) {
  size_t need;
  if (!sl__add_ok(b->len, n + 1, &need)) return sl__oom("string");
  if (need > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *s = sl__realloc(b->s, cap);
    if (!s) return sl__oom("string");
    b->s = s;
    b->cap = cap;
  }
  memcpy(b->s + b->len, data, n);
  b->len += n;
  b->s[b->len] = 0;
  return 0;
}

int sl__str_printf(sl__str *b, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return sl__err(SL_EINVAL, "format error");
  if ((size_t)n < sizeof tmp) return sl__str_append(b, tmp, (size_t)n);
  char *big = sl__malloc((size_t)n + 1);
  if (!big) return sl__oom("string");
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  int rc = sl__str_append(b, big, (size_t)n);
  sl__free(big);
  return rc;
}

void sl__str_dispose(sl__str *b) {
  sl__free(b->s);
  b->s = NULL;
  b->len = b->cap = 0;
}

/* Here, beside the allocator, so that redact.c calls nothing of ours. */
char *sl__redact_dup(const char *src) {
  size_t n = sl_redact(NULL, 0, src);
  char *r = sl__malloc(n + 1);
  if (r) sl_redact(r, n + 1, src);
  return r;
}
