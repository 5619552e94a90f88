/* core/redact.c: the one routine that keeps passwords of connection strings out of text sluice shows (error
 * messages, report pages, JSON fields, log lines, Python reprs): the password of `scheme://user:PASSWORD@host`
 * and the value of `password=...` (URI query strings and libpq key=value conninfo) become `***`. */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "core/core_int.h"

typedef struct {
  char *dst;
  size_t cap, n;
} out_t;

static void put(out_t *o, const char *s, size_t len) {
  for (size_t k = 0; k < len; k++, o->n++)
    if (o->n + 1 < o->cap) o->dst[o->n] = s[k];
}

/* Where a URI ends in running text: it holds no blank and no quote. */
static bool uri_end(char c) { return !c || isspace((unsigned char)c) || c == '\'' || c == '"' || c == '<' || c == '>'; }

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

/* The end of a conninfo or query value at v: a quoted one ('...' with backslash escapes) past its closing quote,
 * then (quoted or not) to a blank, '&' or the end of the text. */
static const char *value_end(const char *v) {
  if (*v == '\'') {
    for (v++; *v && *v != '\''; v++)
      if (*v == '\\' && v[1]) v++;
    if (*v) v++;
  }
  while (*v && *v != '&' && !isspace((unsigned char)*v)) v++;
  return v;
}

size_t sl_redact(char *dst, size_t cap, const char *src) {
  out_t o = {dst, cap, 0};
  const char *s = src ? src : "";
  const char *i = s;
  const char *colon = NULL, *at = NULL; /* a URI's password lies between them (pending until reached) */
  while (*i) {
    if (colon && i > colon) { /* at or past the password's start (a password= value may have jumped in) */
      if (i < at) put(&o, "***", 3), i = at;
      colon = at = NULL;
      continue;
    }
    if (i[0] == ':' && i[1] == '/' && i[2] == '/' && !colon) {
      /* userinfo is what precedes the authority's last '@'; a password is what follows its first ':'. Taking the
       * last '@' before the URI's end over-redacts a query holding '@' rather than leak a password holding '/'.
       * The text before the password is scanned as any other (it may hold a password= of its own). */
      const char *a = i + 3, *e = a, *last = NULL;
      for (; !uri_end(*e); e++)
        if (*e == '@') last = e;
      const char *c = last ? memchr(a, ':', (size_t)(last - a)) : NULL;
      if (c) colon = c, at = last;
      put(&o, i, 3);
      i = a;
      continue;
    }
    if (colon && i == colon) {
      put(&o, ":***", 4);
      i = at;
      colon = at = NULL;
      continue;
    }
    const char *v = password_value(i, s);
    if (v) {
      put(&o, i, (size_t)(v - i));
      put(&o, "***", 3);
      i = value_end(v);
      continue;
    }
    put(&o, i, 1);
    i++;
  }
  if (cap) dst[o.n < cap ? o.n : cap - 1] = 0;
  return o.n;
}
