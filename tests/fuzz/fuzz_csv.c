/* fuzz_csv.c: libFuzzer target for `parse_csv` (quoted fields, every dtype, defaults, vectors): any line gives typed
 * components or a clean error naming the line; then `hash_bucket` and `log1p` on what was parsed. */
#include <stdint.h>
#include <string.h>

#include "fuzz_feed.h"

static sl_pipeline *g_p;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_p) {
    const char *spec =
        "{\"ops\": [{\"op\": \"range\", \"stop\": 1}, {\"op\": \"map\", \"fn\": \"fuzz_feed\"}, {\"op\": \"map\", "
        "\"fn\": \"parse_csv\", \"args\": {\"columns\": [{\"name\": \"label\", \"dtype\": \"int64\", \"default\": 0}, "
        "{\"name\": \"i\", \"dtype\": \"int32\", \"count\": 2}, {\"name\": \"u\", \"dtype\": \"uint8\", \"default\": 7}, "
        "{\"name\": \"f\", \"dtype\": \"float32\", \"count\": 3, \"default\": 0}, {\"name\": \"d\", \"dtype\": "
        "\"float64\"}, {\"name\": \"s\", \"dtype\": \"bytes\", \"count\": 2, \"default\": \"\"}]}}, "
        "{\"op\": \"map\", \"fn\": \"hash_bucket\", \"args\": {\"component\": \"s\", \"buckets\": 1000}}, "
        "{\"op\": \"map\", \"fn\": \"log1p\", \"args\": {\"component\": \"f\"}}]}";
    g_p = fuzz_feed_pipeline("line", spec);
  }
  fuzz_feed_run(g_p, data, size);
  return 0;
}
