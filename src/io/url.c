/* io/url.c: the text side of remote paths: a URL as messages may show it, s3:// URLs split, brace ranges expanded
 * (WebDataset's "shard-{000000..000127}.tar", for local paths and URLs alike), SigV4's percent-encoding. No
 * network here; tests/fuzz/fuzz_url.c feeds it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/stream_int.h"

char *sl__url_shown(const char *url) {
  sl__str s = {0};
  const char *scheme = strstr(url, "://");
  if (scheme && scheme > url + strcspn(url, "?#")) scheme = NULL; /* a "://" inside the query is no scheme's */
  const char *auth = scheme ? scheme + 3 : url;
  const char *end = auth + strcspn(auth, "/?#");
  const char *at = NULL;
  for (const char *p = auth; p < end; p++)
    if (*p == '@') at = p;
  if (sl__str_append(&s, url, (size_t)(auth - url))) return NULL;
  if (at) { /* user:password@ goes: a user name alone is no secret, but it is rarely worth showing */
    if (sl__str_append(&s, "***@", 4)) goto oom;
    auth = at + 1;
  }
  size_t rest = strcspn(auth, "?#");
  if (sl__str_append(&s, auth, rest)) goto oom;
  if (auth[rest] == '?' && sl__str_append(&s, "?...", 4)) goto oom;
  if (!s.s && sl__str_append(&s, "", 0)) return NULL;
  return s.s;
oom:
  sl__str_dispose(&s);
  return NULL;
}

int sl__s3_split(char **bucket, char **key, const char *url) {
  *bucket = *key = NULL;
  if (strncasecmp(url, "s3://", 5)) return sl__err(SL_EINVAL, "'%s' is not an s3:// URL", url);
  const char *b = url + 5, *slash = strchr(b, '/');
  size_t bl = slash ? (size_t)(slash - b) : strlen(b);
  if (bl == 0 || bl > 255) return sl__err(SL_EINVAL, "'%s': no bucket name after s3://", url);
  for (size_t i = 0; i < bl; i++)
    if (!(isalnum((unsigned char)b[i]) || b[i] == '-' || b[i] == '.' || b[i] == '_'))
      return sl__err(SL_EINVAL, "'%s': the bucket name holds '%c' (letters, digits, '-', '.', '_' only)", url, b[i]);
  *bucket = sl__strndup(b, bl);
  *key = sl__strdup(slash ? slash + 1 : "");
  if (!*bucket || !*key) {
    sl__free(*bucket);
    sl__free(*key);
    *bucket = *key = NULL;
    return sl__oom("an s3 URL");
  }
  return 0;
}

char *sl__uri_encode(const char *s, bool keep_slash) {
  sl__str o = {0};
  static const char hex[] = "0123456789ABCDEF";
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    int rc;
    if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || (keep_slash && *p == '/'))
      rc = sl__str_append(&o, (const char *)p, 1);
    else {
      char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
      rc = sl__str_append(&o, e, 3);
    }
    if (rc) {
      sl__str_dispose(&o);
      return NULL;
    }
  }
  if (!o.s && sl__str_append(&o, "", 0)) return NULL;
  return o.s;
}

/* ---- brace expansion ---- */
typedef struct {
  char ***out;
  size_t *n, max, cap;
  const char *pattern;
} bx;

static int bx_add(bx *x, const char *s, size_t len) {
  if (*x->n >= x->max)
    return sl__err(SL_EINVAL, "'%s': the braces name more than %zu paths", x->pattern, x->max);
  if (*x->n + 2 > x->cap) {
    size_t cap = x->cap ? x->cap * 2 : 16;
    char **a = sl__realloc(*x->out, cap * sizeof *a);
    if (!a) return sl__oom("a brace expansion");
    *x->out = a;
    x->cap = cap;
  }
  char *c = sl__strndup(s, len);
  if (!c) return sl__oom("a brace expansion");
  (*x->out)[(*x->n)++] = c;
  (*x->out)[*x->n] = NULL;
  return 0;
}

/* Parses "A..B" (decimal, no sign) into its bounds and the width to pad to; false when s[0..len) is not one. */
static bool parse_range(const char *s, size_t len, unsigned long long *a, unsigned long long *b, int *width) {
  const char *dots = NULL;
  for (size_t i = 0; i + 1 < len; i++)
    if (s[i] == '.' && s[i + 1] == '.') {
      dots = s + i;
      break;
    }
  if (!dots) return false;
  size_t la = (size_t)(dots - s), lb = len - la - 2;
  if (la == 0 || lb == 0 || la > 12 || lb > 12) return false;
  for (size_t i = 0; i < la; i++)
    if (!isdigit((unsigned char)s[i])) return false;
  for (size_t i = 0; i < lb; i++)
    if (!isdigit((unsigned char)dots[2 + i])) return false;
  *a = strtoull(s, NULL, 10);
  *b = strtoull(dots + 2, NULL, 10);
  bool padded = (la > 1 && s[0] == '0') || (lb > 1 && dots[2] == '0');
  *width = padded ? (int)(la > lb ? la : lb) : 0;
  return true;
}

/* Expands `pre` (already expanded) + s[0..len). */
static int bx_run(bx *x, sl__str *pre, const char *s, size_t len, int depth) {
  if (depth > 32) return sl__err(SL_EINVAL, "'%s': braces nested more than 32 deep", x->pattern);
  size_t open = 0;
  while (open < len && s[open] != '{') open++;
  if (open == len) {
    size_t keep = pre->len;
    int rc = sl__str_append(pre, s, len);
    if (!rc) rc = bx_add(x, pre->s ? pre->s : "", pre->len);
    pre->len = keep;
    if (pre->s) pre->s[keep] = 0;
    return rc;
  }
  /* the matching close, and the top-level commas between */
  int d = 0;
  size_t close = open, commas = 0;
  for (size_t i = open; i < len; i++) {
    if (s[i] == '{') d++;
    else if (s[i] == '}' && --d == 0) {
      close = i;
      break;
    } else if (s[i] == ',' && d == 1) commas++;
  }
  if (d != 0) return sl__err(SL_EINVAL, "'%s': a '{' without its '}'", x->pattern);
  const char *in = s + open + 1, *rest = s + close + 1;
  size_t inlen = close - open - 1, restlen = len - close - 1;
  size_t keep = pre->len;
  int rc = sl__str_append(pre, s, open);
  unsigned long long a, b;
  int width;
  if (rc) return rc;
  if (!commas && parse_range(in, inlen, &a, &b, &width)) {
    unsigned long long span = a <= b ? b - a : a - b;
    if (span >= x->max) rc = sl__err(SL_EINVAL, "'%s': the range {%.*s} names more than %zu paths", x->pattern,
                                     (int)inlen, in, x->max);
    for (unsigned long long k = 0; !rc && k <= span; k++) {
      char num[32];
      int nl = snprintf(num, sizeof num, "%0*llu", width, a <= b ? a + k : a - k);
      size_t keep2 = pre->len;
      rc = sl__str_append(pre, num, (size_t)nl);
      if (!rc) rc = bx_run(x, pre, rest, restlen, depth + 1);
      pre->len = keep2;
    }
  } else if (!commas) { /* "{x}": no alternatives, the braces are text (as in the shells) */
    rc = sl__str_append(pre, s + open, 1);
    if (!rc) rc = bx_run(x, pre, s + open + 1, len - open - 1, depth + 1);
  } else {
    size_t start = 0;
    d = 0;
    for (size_t i = 0; !rc && i <= inlen; i++) {
      if (i < inlen && in[i] == '{') d++;
      else if (i < inlen && in[i] == '}') d--;
      if (i == inlen || (in[i] == ',' && d == 0)) {
        /* an alternative may hold braces of its own: expand alternative + rest as one text */
        sl__str alt = {0};
        rc = sl__str_append(&alt, in + start, i - start);
        if (!rc) rc = sl__str_append(&alt, rest, restlen);
        if (!rc) rc = bx_run(x, pre, alt.s ? alt.s : "", alt.len, depth + 1);
        sl__str_dispose(&alt);
        start = i + 1;
      }
    }
  }
  pre->len = keep;
  if (pre->s) pre->s[keep] = 0;
  return rc;
}

int sl__brace_expand(char ***out, size_t *n, const char *pattern, size_t max) {
  bx x = {out, n, max, 0, pattern};
  if (*out) { /* appending: the array's capacity is at least its length + 1 */
    x.cap = *n + 1;
  }
  sl__str pre = {0};
  int rc = bx_run(&x, &pre, pattern, strlen(pattern), 0);
  sl__str_dispose(&pre);
  return rc;
}
