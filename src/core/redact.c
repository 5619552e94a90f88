/* core/redact.c: the one routine that keeps passwords of connection strings out of text sluice shows (error
 * messages, report pages, JSON fields, log lines, Python reprs). Two nets, both always on:
 *  - structure: the password of `scheme://user:PASSWORD@host` and the value of `password=...` (URI query strings
 *    and libpq key=value conninfo) become `***`, whatever characters the password holds;
 *  - known text: every password of a connection string sluice was given (sl__redact_note: each store URI before
 *    it is opened), raw and decoded, becomes `***` wherever it appears, so a fragment of a URI that libpq echoes
 *    in its own words ("could not translate host name", "invalid percent-encoded token") carries none of it. */
#include <ctype.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core_int.h"

/* ------------------------------------------------------------------ known passwords */

/* Process-wide, insert-only: a password noted once is redacted until the process ends (readers walk the list
 * without a lock; nodes are never freed). Texts shorter than SECRET_MIN are not noted: redacting every "ab" of
 * every message would garble them all, and the structure still hides such a password where it is written. */
#define SECRET_MIN 3
typedef struct secret {
  struct secret *next;
  size_t len;
  char text[];
} secret;
static _Atomic(secret *) g_secrets;

static void note_text(const char *s, size_t n) {
  if (n < SECRET_MIN) return;
  secret *head = atomic_load(&g_secrets);
  for (secret *k = head; k; k = k->next)
    if (k->len == n && !memcmp(k->text, s, n)) return;
  /* malloc, not the installed allocator: the node outlives any allocator sl_set_allocator may install later. */
  secret *k = malloc(sizeof *k + n + 1);
  if (!k) return; /* out of memory: the structural net still holds */
  k->len = n;
  memcpy(k->text, s, n);
  k->text[n] = 0;
  k->next = head;
  while (!atomic_compare_exchange_weak(&g_secrets, &k->next, k)) {
  }
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* s[0..n) percent-decoded into d (n + 1 bytes); a '%' not followed by two hex digits stays as it is. Returns the
 * decoded length. */
static size_t pct_decode(char *d, const char *s, size_t n) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    int h, l;
    if (s[i] == '%' && i + 2 < n && (h = hexval(s[i + 1])) >= 0 && (l = hexval(s[i + 2])) >= 0) {
      d[o++] = (char)(h * 16 + l);
      i += 2;
    } else
      d[o++] = s[i];
  }
  d[o] = 0;
  return o;
}

/* Notes s[0..n) and its percent-decoded form. */
static void note_pct(const char *s, size_t n) {
  note_text(s, n);
  char *d = malloc(n + 1);
  if (!d) return;
  note_text(d, pct_decode(d, s, n));
  free(d);
}

/* ------------------------------------------------------------------ structure */

static bool is_scheme_sep(const char *c) { return c[0] == ':' && c[1] == '/' && c[2] == '/'; }
static bool line_end(char c) { return !c || c == '\n' || c == '\r'; }

/* The userinfo password of the URI whose authority starts at a: [*pw, *at) with *at its '@', true when there is
 * one. A password runs from the first ':' of the userinfo to the last '@' before the end of the line or the next
 * `://` (a raw '@', '/', '?', quote or blank in a password is taken as part of it: over-redacting a later '@' on
 * the line is the price of never leaking). The user name before that ':' holds no '/', blank or quote; without
 * an '@' that ':' is a port's. */
static bool userinfo(const char *a, const char **pw, const char **at) {
  const char *first = NULL, *last = NULL, *e = a;
  for (; !line_end(*e) && !is_scheme_sep(e); e++)
    if (*e == '@') {
      if (!first) first = e;
      last = e;
    }
  if (!first) return false;
  for (const char *c = a; c < first; c++) {
    if (*c == ':') {
      *pw = c + 1;
      *at = last;
      return true;
    }
    if (*c == '/' || isspace((unsigned char)*c) || *c == '\'' || *c == '"' || *c == '<' || *c == '>') return false;
  }
  return false;
}

/* `password` key at s (after a separator), with optional blanks around '=' (libpq allows them): the value's start. */
static const char *password_value(const char *s, const char *start) {
  if (s > start) {
    char p = s[-1];
    if (!(isspace((unsigned char)p) || p == '?' || p == '&' || p == ';' || p == ',' || p == '\'' || p == '"' ||
          p == '(' || p == '{'))
      return NULL;
  }
  if (strncasecmp(s, "password", 8)) return NULL;
  const char *v = s + 8;
  while (*v == ' ' || *v == '\t') v++;
  if (*v != '=') return NULL;
  v++;
  while (*v == ' ' || *v == '\t') v++;
  return v;
}

/* The end of a conninfo or query value at v: a quoted one ('...' with backslash escapes) past its closing quote;
 * then (quoted or not) to a blank, '&' or the end of the text, a backslash escaping the character after it (libpq
 * reads unquoted values so). */
static const char *value_end(const char *v) {
  if (*v == '\'') {
    for (v++; *v && *v != '\''; v++)
      if (*v == '\\' && v[1]) v++;
    if (*v) v++;
  }
  for (; *v && *v != '&' && !isspace((unsigned char)*v); v++)
    if (*v == '\\' && v[1]) v++;
  return v;
}

/* A known password at s: its length, else 0 (the longest wins). */
static size_t known_at(const char *s) {
  size_t best = 0;
  for (secret *k = atomic_load(&g_secrets); k; k = k->next)
    if (k->len > best && s[0] == k->text[0] && !strncmp(s, k->text, k->len)) best = k->len;
  return best;
}

typedef struct {
  char *dst;
  size_t cap, n;
} out_t;

static void put(out_t *o, const char *s, size_t len) {
  for (size_t k = 0; k < len; k++, o->n++)
    if (o->n + 1 < o->cap) o->dst[o->n] = s[k];
}

size_t sl_redact(char *dst, size_t cap, const char *src) {
  out_t o = {dst, cap, 0};
  const char *s = src ? src : "";
  const char *i = s;
  const char *pw = NULL, *at = NULL; /* a URI's password lies between them (pending until reached) */
  while (*i) {
    if (pw && i >= pw) { /* at or past the password's start (a known text or password= may have jumped in) */
      if (i < at) put(&o, "***", 3), i = at;
      pw = at = NULL;
      continue;
    }
    size_t k = known_at(i);
    if (k) {
      put(&o, "***", 3);
      i += k;
      continue;
    }
    if (is_scheme_sep(i) && !pw) {
      /* The text before the password is scanned as any other (it may hold a password= of its own). */
      if (userinfo(i + 3, &pw, &at) && pw == at) pw = at = NULL; /* "u:@h": an empty password, nothing to hide */
      put(&o, i, 3);
      i += 3;
      continue;
    }
    const char *v = password_value(i, s);
    if (v) {
      put(&o, i, (size_t)(v - i));
      put(&o, "***", 3);
      i = value_end(v);
      size_t kv = known_at(v); /* a known password with a blank or '&' in it: all of it */
      if (v + kv > i) i = v + kv;
      continue;
    }
    put(&o, i, 1);
    i++;
  }
  if (cap) dst[o.n < cap ? o.n : cap - 1] = 0;
  return o.n;
}

/* ------------------------------------------------------------------ noting a connection string's passwords */

/* libpq's reading of a URI's userinfo (the first '@' before any '/'), where it differs from userinfo()'s: a '?'
 * or '#' in the password. [*pw, *at). */
static bool userinfo_libpq(const char *a, const char **pw, const char **at) {
  const char *e = a;
  while (*e && *e != '@' && *e != '/') e++;
  if (*e != '@') return false;
  const char *c = memchr(a, ':', (size_t)(e - a));
  if (!c) return false;
  *pw = c + 1;
  *at = e;
  return true;
}

/* A query's password value at v: to the next `&key=` or the end (a raw '&' in a password stays in it). */
static const char *query_value_end(const char *v) {
  for (; *v; v++) {
    if (*v != '&') continue;
    const char *k = v + 1;
    while (isalnum((unsigned char)*k) || *k == '_') k++;
    if (k > v + 1 && *k == '=') break;
  }
  return v;
}

/* A conninfo value at v (quoted or not, backslash escapes) unescaped into d (strlen(v) + 1 bytes); returns its
 * length and sets *end past it. */
static size_t conninfo_value(char *d, const char *v, const char **end) {
  size_t o = 0;
  if (*v == '\'') {
    for (v++; *v && *v != '\''; v++) {
      if (*v == '\\' && v[1]) v++;
      d[o++] = *v;
    }
    if (*v) v++;
  } else {
    for (; *v && !isspace((unsigned char)*v); v++) {
      if (*v == '\\' && v[1]) v++;
      d[o++] = *v;
    }
  }
  d[o] = 0;
  *end = v;
  return o;
}

void sl__redact_note(const char *conn) {
  if (!conn) return;
  const char *sep = strstr(conn, "://");
  if (sep) {
    const char *pw, *at;
    if (userinfo(sep + 3, &pw, &at)) note_pct(pw, (size_t)(at - pw));
    if (userinfo_libpq(sep + 3, &pw, &at)) note_pct(pw, (size_t)(at - pw));
  }
  char *d = malloc(strlen(conn) + 1);
  if (!d) return;
  for (const char *c = conn; *c; c++) { /* every password= (query or conninfo), in each reading */
    const char *v = password_value(c, conn);
    if (!v) continue;
    const char *e = query_value_end(v);
    note_pct(v, (size_t)(e - v));
    e = value_end(v);
    note_pct(v, (size_t)(e - v));
    note_text(d, conninfo_value(d, v, &e));
  }
  free(d);
}

int sl__uri_take_password(const char *uri, char **rest, char **password) {
  *rest = *password = NULL;
  sl__redact_note(uri);
  const char *sep = strstr(uri, "://");
  size_t n = strlen(uri);
  char *r = sl__malloc(n + 1), *p = sl__malloc(n + 1);
  if (!r || !p) {
    sl__free(r);
    sl__free(p);
    return sl__oom("store URI");
  }
  const char *pw = NULL, *at = NULL;
  const char *a = sep ? sep + 3 : NULL;
  if (a) {
    /* A '?' before the first '@': libpq's reading (the '?' is in the password); else the last '@' before it. */
    const char *q = strpbrk(a, "?");
    const char *f = strchr(a, '@');
    if (f && q && q < f) {
      if (!userinfo_libpq(a, &pw, &at)) pw = at = NULL;
    } else if (f) {
      const char *last = f;
      for (const char *c = f; *c && c != q; c++)
        if (*c == '@') last = c;
      const char *c = a;
      while (c < f && *c != ':' && *c != '/') c++;
      if (c < f && *c == ':') pw = c + 1, at = last;
    }
  }
  size_t o = 0;
  bool have = false;
  if (pw) {
    memcpy(r, uri, (size_t)(pw - 1 - uri)); /* up to the ':' */
    o = (size_t)(pw - 1 - uri);
    pct_decode(p, pw, (size_t)(at - pw));
    have = true;
  }
  /* The rest, without a password= parameter of the query. */
  const char *c = pw ? at : uri;
  const char *q = a ? strchr(pw ? at : a, '?') : NULL;
  if (!q) {
    memcpy(r + o, c, strlen(c) + 1);
  } else {
    memcpy(r + o, c, (size_t)(q - c));
    o += (size_t)(q - c);
    char lead = '?';
    for (const char *k = q + 1; *k;) {
      const char *e = strchr(k, '&');
      if (!e) e = k + strlen(k);
      if (!strncmp(k, "password=", 9)) {
        e = query_value_end(k + 9);
        pct_decode(p, k + 9, (size_t)(e - k - 9));
        have = true;
      } else if (e > k) {
        r[o++] = lead;
        lead = '&';
        memcpy(r + o, k, (size_t)(e - k));
        o += (size_t)(e - k);
      }
      k = *e ? e + 1 : e;
    }
    r[o] = 0;
  }
  *rest = r;
  if (have) *password = p;
  else sl__free(p);
  return 0;
}
