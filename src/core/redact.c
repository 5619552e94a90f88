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

/* The end of a conninfo or query value at v: a quoted one ('...' with backslash escapes) to its closing quote,
 * else to a blank, '&' or the end of the text. */
static const char *value_end(const char *v) {
  if (*v == '\'') {
    for (v++; *v && *v != '\''; v++)
      if (*v == '\\' && v[1]) v++;
    return *v ? v + 1 : v;
  }
  while (*v && *v != '&' && !isspace((unsigned char)*v)) v++;
  return v;
}

size_t sl_redact(char *dst, size_t cap, const char *src) {
  out_t o = {dst, cap, 0};
  const char *s = src ? src : "";
  const char *i = s;
  while (*i) {
    if (i[0] == ':' && i[1] == '/' && i[2] == '/') {
      /* userinfo is what precedes the authority's last '@'; a password is what follows its first ':'. Taking the
       * last '@' before the URI's end over-redacts a query holding '@' rather than leak a password holding '/'. */
      const char *a = i + 3, *e = a, *at = NULL;
      for (; !uri_end(*e); e++)
        if (*e == '@') at = e;
      const char *colon = at ? memchr(a, ':', (size_t)(at - a)) : NULL;
      if (colon) {
        put(&o, i, (size_t)(colon + 1 - i));
        put(&o, "***", 3);
        i = at;
      } else {
        put(&o, i, 3);
        i = a;
      }
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

char *sl__redact_dup(const char *src) {
  size_t n = sl_redact(NULL, 0, src);
  char *r = sl__malloc(n + 1);
  if (r) sl_redact(r, n + 1, src);
  return r;
}
