/* fuzz_example.c: libFuzzer target for tf.Example decoding through `parse_example` (declared scalar, fixed-shape,
 * variable-length and defaulted features of every kind): any bytes give an element or a clean error. */
#include <stdint.h>
#include <string.h>

#include "fuzz_feed.h"

static sl_pipeline *g_p;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_p) {
    const char *spec =
        "{\"ops\": [{\"op\": \"range\", \"stop\": 1}, {\"op\": \"map\", \"fn\": \"fuzz_feed\"}, {\"op\": \"map\", "
        "\"fn\": \"parse_example\", \"args\": {\"features\": {\"a\": {\"dtype\": \"int64\", \"default\": 0}, "
        "\"b\": {\"dtype\": \"bytes\", \"default\": \"\"}, \"c\": {\"dtype\": \"float32\", \"shape\": [2], "
        "\"default\": 1.5}, \"d\": {\"dtype\": \"bytes\", \"shape\": [-1], \"default\": \"x\"}, \"e\": {\"dtype\": "
        "\"int32\", \"shape\": [-1], \"default\": 0}, \"f\": {\"dtype\": \"uint8\", \"shape\": [2, 2], \"default\": 0}}}}]}";
    g_p = fuzz_feed_pipeline("record", spec);
  }
  fuzz_feed_run(g_p, data, size);
  return 0;
}
