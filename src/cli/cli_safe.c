/* cli/cli_safe.c: what the CLI prints of text it did not write (store names, URIs, error messages): passwords
 * redacted and control characters escaped, so that nothing reaches a terminal as a command or a secret. */
#include <stdio.h>
#include <string.h>

#include "cli_int.h"

/* Control characters, as a store's or a spec's names may hold them (ESC, BEL, CR: title changes, line rewrites),
 * reach the terminal as text: C0 but '\n' and '\t' as \xHH, DEL as \x7f, C1 (UTF-8 C2 80..9F) as \u00HH. `*carry`
 * holds a C2 byte that ended the previous chunk (0: none). Returns the bytes written to dst (at most 6 per input). */
size_t cli_escape_ctl(char *dst, const unsigned char *src, size_t n, unsigned char *carry) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned c = src[i];
    if (*carry) {
      *carry = 0;
      if (c >= 0x80 && c <= 0x9f) {
        o += (size_t)sprintf(dst + o, "\\u%04x", c);
        continue;
      }
      dst[o++] = (char)0xc2;
    }
    if (c == 0xc2) *carry = 1;
    else if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) o += (size_t)sprintf(dst + o, "\\x%02x", c);
    else dst[o++] = (char)c;
  }
  return o;
}

const char *cli_safe(const char *s) {
  static char ring[4][6 * 2048]; /* a few per message; the CLI prints from one thread */
  static int next;
  char red[2048];
  sl_redact(red, sizeof red, s);
  unsigned char carry = 0;
  char *b = ring[next++ % 4];
  size_t n = cli_escape_ctl(b, (const unsigned char *)red, strlen(red), &carry);
  if (carry) b[n++] = (char)0xc2;
  b[n] = 0;
  return b;
}
