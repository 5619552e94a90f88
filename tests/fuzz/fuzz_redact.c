/* fuzz_redact.c: libFuzzer target for sl_redact, which reads any text a message may hold (store URIs, libpq
 * conninfo, a user's file names): its length is what it writes, a short buffer gets a prefix of the whole, and a
 * password put before the input never survives whatever follows it (it may over-redact; it must never leak), and
 * the input's first bytes as a URI's password, whatever characters they are, are redacted by the URI's structure
 * (issue 47: a quote, blank or '<' ended the URI early and printed them). */
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

/* The first bytes of s (up to 24, a line's end or a NUL) as the password of a URI in a message; the rest of s on
 * the next line. */
static void any_password(const char *s) {
  static const char HEAD[] = "cannot open 'postgresql://u:", TAIL[] = "@h/db': refused\n", WANT[] =
      "cannot open 'postgresql://u:***@h/db': refused\n";
  size_t pl = strcspn(s, "\r\n");
  if (pl > 24) pl = 24;
  if (!pl) return;
  char pw[25];
  memcpy(pw, s, pl);
  pw[pl] = 0;
  /* a second URI in the password, or one that the user's ':' makes one ("u://..."): another structure, which the
   * net of known passwords (sl__redact_note) covers, not this one */
  if (strstr(pw, "://") || !strncmp(pw, "//", 2)) return;
  size_t rl = strlen(s + pl);
  char *t = malloc(sizeof HEAD + pl + sizeof TAIL + rl);
  if (!t) __builtin_trap();
  memcpy(t, HEAD, sizeof HEAD - 1);
  memcpy(t + sizeof HEAD - 1, pw, pl);
  memcpy(t + sizeof HEAD - 1 + pl, TAIL, sizeof TAIL - 1);
  memcpy(t + sizeof HEAD - 1 + pl + sizeof TAIL - 1, s + pl, rl + 1);
  size_t n;
  char *r = redacted(t, &n);
  if (strncmp(r, WANT, sizeof WANT - 1)) __builtin_trap();
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
  any_password(s);
  free(p);
  free(r);
  free(s);
  return 0;
}
