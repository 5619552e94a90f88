/* fuzz_url.c: libFuzzer target for the text side of remote paths (io/url.c): brace ranges expand to at most the
 * bound they are given, each name without a brace pair left; a URL as shown keeps no "user:password@" nor query;
 * an s3:// split and SigV4's encoding take anything. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/stream_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *s = malloc(size + 1);
  if (!s) __builtin_trap();
  memcpy(s, data, size);
  s[size] = 0;
  char **names = NULL;
  size_t n = 0;
  if (sl__brace_expand(&names, &n, s, 1000) == 0 && n > 1000) __builtin_trap();
  if (n && names[n]) __builtin_trap(); /* NULL-terminated */
  for (size_t i = 0; i < n; i++) sl__free(names[i]);
  sl__free(names);
  char *shown = sl__url_shown(s);
  if (shown) {
    const char *scheme = strstr(s, "://");
    if (scheme && strchr(shown, '?') && strcmp(strchr(shown, '?'), "?...")) __builtin_trap();
    sl__free(shown);
  }
  char *b, *k;
  if (sl__s3_split(&b, &k, s) == 0) {
    sl__free(b);
    sl__free(k);
  }
  char *e = sl__uri_encode(s, true);
  if (e && strlen(e) < strlen(s)) __builtin_trap();
  sl__free(e);
  free(s);
  return 0;
}
