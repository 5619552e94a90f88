/* fuzz_dist_wire.c: libFuzzer target for the offload wire format (what a trainer rank unpacks from a worker's
 * message): any bytes give an element, which packs again, or a clean SL_ECORRUPT. */
#include <stdint.h>
#include <string.h>

#include "core/core_int.h"
#include "dist/dist_int.h"

static const char *intern(void *ctx, const char *name, size_t len) {
  static char names[64][64]; /* the names seen, for the element's lifetime (the process's) */
  static int n;
  if (len >= 64 || memchr(name, 0, len)) return n ? names[0] : ""; /* before names[i][len] is read */
  for (int i = 0; i < n; i++)
    if (!memcmp(names[i], name, len) && names[i][len] == 0) return names[i];
  if (n == 64) return names[0];
  memcpy(names[n], name, len);
  names[n][len] = 0;
  return names[n++];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sl_buf *b = sl_buf_alloc(size ? size : 1);
  if (!b) return 0;
  memcpy(sl_buf_data(b), data, size);
  sl_elem e;
  if (size && sl__dist_unpack(&e, b, intern, NULL, 1) == 0) {
    uint64_t d;
    sl_elem_digest(&d, &e); /* reads every payload */
    void *msg = NULL;
    size_t len = 0;
    if (sl__dist_pack(&msg, &len, &e) == 0) sl__free(msg);
    sl_elem_clear(&e);
  }
  sl_buf_unref(b);
  return 0;
}
