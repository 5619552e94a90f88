/* fuzz_example.c: libFuzzer target for tf.Example decoding through `parse_example` (declared scalar, fixed-shape,
 * variable-length and defaulted features of every kind): any bytes give an element or a clean error. */
#include <stdint.h>
#include <string.h>

#include "sluice.h"

static sl_pipeline *g_p;
static sl_iter *g_it;

/* A pipeline whose source is one element per fuzz input, fed through a registered function. */
static const uint8_t *g_data;
static size_t g_size;
static int feed_call(void *st, sl_elem *e, sl_fn_call *call) {
  return sl_elem_set_bytes(e, "record", NULL, 0, g_data, g_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_p) {
    sl_fn_def feed = {SL_FN_DEF_VERSION, 0, NULL, feed_call, NULL};
    sl_fn_register("fuzz_feed", &feed, NULL);
    const char *spec =
        "{\"ops\": [{\"op\": \"range\", \"stop\": 1}, {\"op\": \"map\", \"fn\": \"fuzz_feed\"}, {\"op\": \"map\", "
        "\"fn\": \"parse_example\", \"args\": {\"features\": {\"a\": {\"dtype\": \"int64\", \"default\": 0}, "
        "\"b\": {\"dtype\": \"bytes\", \"default\": \"\"}, \"c\": {\"dtype\": \"float32\", \"shape\": [2], "
        "\"default\": 1.5}, \"d\": {\"dtype\": \"bytes\", \"shape\": [-1], \"default\": \"x\"}, \"e\": {\"dtype\": "
        "\"int32\", \"shape\": [-1], \"default\": 0}, \"f\": {\"dtype\": \"uint8\", \"shape\": [2, 2], \"default\": 0}}}}]}";
    if (sl_pipeline_from_json(&g_p, spec, strlen(spec), "fuzz")) __builtin_trap();
  }
  g_data = data;
  g_size = size;
  if (sl_pipeline_iter(&g_it, g_p)) __builtin_trap();
  sl_elem e;
  sl_elem_init(&e);
  int rc;
  while ((rc = sl_iter_next(g_it, &e)) == 0) sl_elem_clear(&e);
  if (rc != SL_END && !sl_error_last()[0]) __builtin_trap();
  sl_iter_free(g_it);
  return 0;
}
