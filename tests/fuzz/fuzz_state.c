/* fuzz_state.c: libFuzzer target for the saved-state reader (sl_pipeline_iter_at): any bytes either restore a run
 * of a fixed pipeline (interleave, shuffle, parallel map, batch, repeat, shard, prefetch over generated ranges),
 * which then runs to its end, or fail with an error and a message; no crash, no hang, no leak. An even-sized input
 * gets its checksum set (the last 8 bytes) so that the reader behind it is reached; an odd-sized one is read as is. */
#define XXH_STATIC_LINKING_ONLY
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "sluice.h"

/* The pipeline the corpus's states were saved from (`sluice run` of this spec with --take N --save-state). */
static const char SPEC[] =
    "{\"name\": \"fuzz-state\", \"seed\": 9, \"ops\": [{\"op\": \"range\", \"stop\": 6},"
    " {\"op\": \"interleave\", \"cycle_length\": 2, \"parallelism\": 2, \"source\": [{\"op\": \"range\", \"stop\": 5}]},"
    " {\"op\": \"repeat\", \"count\": 2}, {\"op\": \"shuffle\", \"buffer\": 7},"
    " {\"op\": \"shard\", \"num_shards\": 2, \"index\": 0, \"remainder\": \"pad\"},"
    " {\"op\": \"map\", \"fn\": \"select\", \"args\": {\"keep\": [\"value\"]}, \"parallelism\": 2},"
    " {\"op\": \"batch\", \"size\": 3}, {\"op\": \"prefetch\", \"buffer\": 2}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static sl_pipeline *p;
  if (!p && sl_pipeline_from_json(&p, SPEC, strlen(SPEC), "fuzz")) __builtin_trap();
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) __builtin_trap();
  memcpy(buf, data, size);
  if (size >= 16 && size % 2 == 0) {
    uint64_t h = XXH3_64bits(buf, size - 8);
    for (int i = 0; i < 8; i++) buf[size - 8 + i] = (uint8_t)(h >> (8 * i));
  }
  sl_iter *it = NULL;
  if (sl_pipeline_iter_at(&it, p, buf, size)) {
    if (!sl_error_last()[0]) __builtin_trap();
  } else {
    sl_elem e;
    sl_elem_init(&e);
    int rc, n = 0;
    while ((rc = sl_iter_next(&e, it)) == 0 && n++ < 1000) sl_elem_clear(&e);
    if (rc == 0) sl_elem_clear(&e);
    if (rc < 0 && !sl_error_last()[0]) __builtin_trap();
    sl_iter_free(it);
  }
  free(buf);
  return 0;
}
