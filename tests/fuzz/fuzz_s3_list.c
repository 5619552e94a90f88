/* fuzz_s3_list.c: libFuzzer target for one page of an S3 ListObjectsV2 answer (io/s3_list.c): whatever the XML, a
 * parse gives keys with sizes and a token, or an error; never a read outside the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/stream_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *xml = malloc(size ? size : 1); /* not NUL-terminated: the parser is given a length */
  if (!xml) __builtin_trap();
  memcpy(xml, data, size);
  char **keys = NULL, *next = NULL;
  uint64_t *sizes = NULL;
  size_t n = 0;
  int rc = sl__s3_list_parse(&keys, &sizes, &n, &next, xml, size, "fuzz");
  if (rc == 0 && next && !*next) __builtin_trap();
  for (size_t i = 0; i < n; i++) {
    if (!keys[i]) __builtin_trap();
    sl__free(keys[i]);
  }
  sl__free(keys);
  sl__free(sizes);
  sl__free(next);
  free(xml);
  return 0;
}
