/* fuzz_csv.c: libFuzzer target for `parse_csv` (quoted fields, every dtype, defaults, vectors): any line gives typed
 * components or a clean error naming the line; then `hash_bucket` and `log1p` on what was parsed. */
#include <stdint.h>
#include <string.h>

#include "sluice.h"

static sl_pipeline *g_p;
static const uint8_t *g_data;
static size_t g_size;
static int feed_call(void *st, sl_elem *e, sl_fn_call *call) {
  return sl_elem_set_bytes(e, "line", NULL, 0, g_data, g_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_p) {
    sl_fn_def feed = {SL_FN_DEF_VERSION, 0, NULL, feed_call, NULL};
    sl_fn_register("fuzz_feed", &feed, NULL);
    const char *spec =
        "{\"ops\": [{\"op\": \"range\", \"stop\": 1}, {\"op\": \"map\", \"fn\": \"fuzz_feed\"}, {\"op\": \"map\", "
        "\"fn\": \"parse_csv\", \"args\": {\"columns\": [{\"name\": \"label\", \"dtype\": \"int64\", \"default\": 0}, "
        "{\"name\": \"i\", \"dtype\": \"int32\", \"count\": 2}, {\"name\": \"u\", \"dtype\": \"uint8\", \"default\": 7}, "
        "{\"name\": \"f\", \"dtype\": \"float32\", \"count\": 3, \"default\": 0}, {\"name\": \"d\", \"dtype\": "
        "\"float64\"}, {\"name\": \"s\", \"dtype\": \"bytes\", \"count\": 2, \"default\": \"\"}]}}, "
        "{\"op\": \"map\", \"fn\": \"hash_bucket\", \"args\": {\"component\": \"s\", \"buckets\": 1000}}, "
        "{\"op\": \"map\", \"fn\": \"log1p\", \"args\": {\"component\": \"f\"}}]}";
    if (sl_pipeline_from_json(&g_p, spec, strlen(spec), "fuzz")) __builtin_trap();
  }
  g_data = data;
  g_size = size;
  sl_iter *it;
  if (sl_pipeline_iter(&it, g_p)) __builtin_trap();
  sl_elem e;
  sl_elem_init(&e);
  int rc;
  while ((rc = sl_iter_next(it, &e)) == 0) sl_elem_clear(&e);
  if (rc != SL_END && !sl_error_last()[0]) __builtin_trap();
  sl_iter_free(it);
  return 0;
}
