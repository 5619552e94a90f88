/* fuzz_jpeg.c: libFuzzer target for JPEG decoding: `decode_jpeg` (RGB and as-stored channels), and
 * `decode_and_crop_jpeg` with a random window and a DCT-scaled output: any bytes give an image or a clean error,
 * never a crash, a leak or an exit() from libjpeg. */
#include <stdint.h>
#include <string.h>

#include "sluice.h"

static sl_pipeline *g_p;
static const uint8_t *g_data;
static size_t g_size;
static int feed_call(void *st, sl_elem *e, sl_fn_call *call) {
  return sl_elem_set_bytes(e, "jpeg", NULL, 0, g_data, g_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_p) {
    sl_fn_def feed = {SL_FN_DEF_VERSION, 0, NULL, feed_call, NULL};
    sl_fn_register("fuzz_feed", &feed, NULL);
    /* Small max_pixels: a header may claim 65535 x 65535, and the fuzzer has a memory limit. */
    const char *spec =
        "{\"seed\": 1, \"ops\": [{\"op\": \"range\", \"stop\": 1}, {\"op\": \"map\", \"fn\": \"fuzz_feed\"}, "
        "{\"op\": \"map\", \"fn\": \"decode_jpeg\", \"args\": {\"component\": \"jpeg\", \"keep\": true, "
        "\"max_pixels\": 4000000}}, "
        "{\"op\": \"map\", \"fn\": \"decode_jpeg\", \"args\": {\"component\": \"jpeg\", \"output\": \"raw\", \"keep\": true, "
        "\"channels\": 0, \"strict\": false, \"max_pixels\": 4000000}}, "
        "{\"op\": \"map\", \"fn\": \"decode_and_crop_jpeg\", \"args\": {\"component\": \"jpeg\", \"output\": \"crop\", "
        "\"random\": true, \"size\": [17, 23], \"max_pixels\": 4000000}}]}";
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
