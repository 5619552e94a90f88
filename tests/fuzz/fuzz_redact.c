/* fuzz_redact.c: libFuzzer target for sl_redact, which reads any text a message may hold (store URIs, libpq
 * conninfo, a user's file names): its length is what it writes, a short buffer gets a prefix of the whole, and a
 * password put before the input never survives whatever follows it (it may over-redact; it must never leak). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"

static char *redacted(const char *s, size_t *n) {
  *n = sl_redact(NULL, 0, s);
  char *r = malloc(*n + 1);
  if (!r) __builtin_trap();
  if (sl_redact(r, *n + 1, s) != *n || strlen(r) != *n) __builtin_trap();
  return r;
}

static void no_secret_after(const char *prefix, const char *s) {
  static const char SECRET[] = "ZQXJ7secret";
  if (strstr(s, SECRET)) return;
  size_t pl = strlen(prefix), sl = strlen(s);
  char *t = malloc(pl + sl + 1);
  if (!t) __builtin_trap();
  memcpy(t, prefix, pl);
  memcpy(t + pl, s, sl + 1);
  size_t n;
  char *r = redacted(t, &n);
  if (strstr(r, SECRET)) __builtin_trap();
  free(r);
  free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) __builtin_trap();
  memcpy(s, data, size);
  s[size] = 0; /* text up to the first NUL, as messages are */
  size_t n;
  char *r = redacted(s, &n);
  size_t cap = n / 2 + 1;
  char *p = malloc(cap);
  if (!p) __builtin_trap();
  if (sl_redact(p, cap, s) != n || strncmp(p, r, cap - 1) || p[cap - 1]) __builtin_trap(); /* a prefix */
  no_secret_after("postgresql://u:ZQXJ7secret@h/db ", s);
  no_secret_after("postgresql://u@h/db?password=ZQXJ7secret&", s);
  no_secret_after("host=h password='ZQXJ7secret' ", s);
  free(p);
  free(r);
  free(s);
  return 0;
}
