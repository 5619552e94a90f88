/* io/s3_list.c: one page of S3's ListObjectsV2 answer (XML) read for its keys, sizes and continuation token; the
 * elements S3 writes are found by name, entities decoded. Outside input: tests/fuzz/fuzz_s3_list.c feeds it. */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/stream_int.h"

/* The text between <tag> and </tag> within [p, end), entities decoded, in a new string; *after points past the
 * closing tag. NULL in *out when the tag is absent; an error only when out of memory or unterminated. */
static int element(char **out, const char **after, const char *p, const char *end, const char *tag,
                   const char *where) {
  *out = NULL;
  char open[64], close[64];
  int ol = snprintf(open, sizeof open, "<%s>", tag), cl = snprintf(close, sizeof close, "</%s>", tag);
  const char *a = memmem(p, (size_t)(end - p), open, (size_t)ol);
  if (!a) return 0;
  a += ol;
  const char *b = memmem(a, (size_t)(end - a), close, (size_t)cl);
  if (!b) return sl__err(SL_ECORRUPT, "%s: the listing's <%s> is not closed", where, tag);
  if (after) *after = b + cl;
  sl__str s = {0};
  for (const char *q = a; q < b;) {
    int rc;
    if (*q != '&') {
      const char *amp = memchr(q, '&', (size_t)(b - q));
      size_t k = amp ? (size_t)(amp - q) : (size_t)(b - q);
      rc = sl__str_append(&s, q, k);
      q += k;
    } else {
      const char *semi = memchr(q, ';', (size_t)(b - q) < 12 ? (size_t)(b - q) : 12);
      if (!semi) {
        sl__str_dispose(&s);
        return sl__err(SL_ECORRUPT, "%s: the listing's <%s> holds a bare '&'", where, tag);
      }
      size_t el = (size_t)(semi - q - 1);
      const char *ent = q + 1;
      char c[4];
      size_t cn = 1;
      if (el == 3 && !memcmp(ent, "amp", 3)) c[0] = '&';
      else if (el == 2 && !memcmp(ent, "lt", 2)) c[0] = '<';
      else if (el == 2 && !memcmp(ent, "gt", 2)) c[0] = '>';
      else if (el == 4 && !memcmp(ent, "quot", 4)) c[0] = '"';
      else if (el == 4 && !memcmp(ent, "apos", 4)) c[0] = '\'';
      else if (el >= 2 && ent[0] == '#') {
        char num[16];
        memcpy(num, ent + 1, el - 1);
        num[el - 1] = 0;
        char *e;
        unsigned long v = num[0] == 'x' ? strtoul(num + 1, &e, 16) : strtoul(num, &e, 10);
        if (*e || v == 0 || v > 0x10ffff || (num[0] == 'x' && !num[1])) {
          sl__str_dispose(&s);
          return sl__err(SL_ECORRUPT, "%s: the listing's <%s> holds a bad character reference", where, tag);
        }
        if (v < 0x80) c[0] = (char)v;
        else if (v < 0x800) c[0] = (char)(0xc0 | (v >> 6)), c[1] = (char)(0x80 | (v & 63)), cn = 2;
        else if (v < 0x10000)
          c[0] = (char)(0xe0 | (v >> 12)), c[1] = (char)(0x80 | ((v >> 6) & 63)), c[2] = (char)(0x80 | (v & 63)), cn = 3;
        else
          c[0] = (char)(0xf0 | (v >> 18)), c[1] = (char)(0x80 | ((v >> 12) & 63)),
          c[2] = (char)(0x80 | ((v >> 6) & 63)), c[3] = (char)(0x80 | (v & 63)), cn = 4;
      } else {
        sl__str_dispose(&s);
        return sl__err(SL_ECORRUPT, "%s: the listing's <%s> holds an unknown entity", where, tag);
      }
      rc = sl__str_append(&s, c, cn);
      q = semi + 1;
    }
    if (rc) {
      sl__str_dispose(&s);
      return rc;
    }
  }
  if (!s.s && sl__str_append(&s, "", 0)) return SL_ENOMEM;
  *out = s.s;
  return 0;
}

int sl__s3_list_parse(char ***keys, uint64_t **sizes, size_t *n, char **next, const char *xml, size_t len,
                      const char *where) {
  *next = NULL;
  const char *p = xml, *end = xml + len;
  if (memmem(xml, len, "<Error>", 7)) {
    char *code = NULL, *msg = NULL;
    element(&code, NULL, p, end, "Code", where);
    element(&msg, NULL, p, end, "Message", where);
    int rc = sl__err(SL_EIO, "%s: S3 answered %s%s%s", where, code ? code : "an error", msg ? ": " : "",
                     msg ? msg : "");
    sl__free(code);
    sl__free(msg);
    return rc;
  }
  if (!memmem(xml, len, "<ListBucketResult", 17))
    return sl__err(SL_ECORRUPT, "%s: the answer is no ListObjectsV2 result (no <ListBucketResult>)", where);
  int rc = 0;
  size_t cap = *n;
  for (;;) {
    const char *c = memmem(p, (size_t)(end - p), "<Contents>", 10);
    if (!c) break;
    const char *ce = memmem(c, (size_t)(end - c), "</Contents>", 11);
    if (!ce) return sl__err(SL_ECORRUPT, "%s: the listing's <Contents> is not closed", where);
    char *key = NULL, *size = NULL;
    if ((rc = element(&key, NULL, c, ce, "Key", where)) || (rc = element(&size, NULL, c, ce, "Size", where))) {
      sl__free(key);
      return rc;
    }
    char *e = NULL;
    unsigned long long sz = size ? strtoull(size, &e, 10) : 0;
    bool bad = !key || !size || !*size || *e;
    sl__free(size);
    if (bad) {
      sl__free(key);
      return sl__err(SL_ECORRUPT, "%s: a listing's <Contents> without a <Key> or a numeric <Size>", where);
    }
    if (*n + 1 >= cap) {
      cap = cap ? cap * 2 : 64;
      char **k2 = sl__realloc(*keys, cap * sizeof *k2);
      if (k2) *keys = k2;
      uint64_t *s2 = k2 ? sl__realloc(*sizes, cap * sizeof *s2) : NULL;
      if (s2) *sizes = s2;
      if (!k2 || !s2) {
        sl__free(key);
        return sl__oom("an S3 listing");
      }
    }
    (*keys)[*n] = key;
    (*sizes)[(*n)++] = sz;
    p = ce + 11;
  }
  char *trunc = NULL;
  if ((rc = element(&trunc, NULL, xml, end, "IsTruncated", where))) return rc;
  bool more = trunc && !strcmp(trunc, "true");
  sl__free(trunc);
  if (more) {
    if ((rc = element(next, NULL, xml, end, "NextContinuationToken", where))) return rc;
    if (!*next || !**next) {
      sl__free(*next);
      *next = NULL;
      return sl__err(SL_ECORRUPT, "%s: a truncated listing without a <NextContinuationToken>", where);
    }
  }
  return 0;
}
