/* fuzz_jpeg.c: libFuzzer target for JPEG decoding: `decode_jpeg` (RGB and as-stored channels), and
 * `decode_and_crop_jpeg` with a random window and a DCT-scaled output, a centred window and a whole-image resize
 * (the planner's fused center_crop and resize): any bytes give an image or a clean error,
 * never a crash, a leak or an exit() from libjpeg. */
#include <stdint.h>
#include <string.h>

#include "fuzz_feed.h"

static sl_pipeline *g_p;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_p) {
    /* Small max_pixels: a header may claim 65535 x 65535, and the fuzzer has a memory limit. */
    const char *spec =
        "{\"seed\": 1, \"ops\": [{\"op\": \"range\", \"stop\": 1}, {\"op\": \"map\", \"fn\": \"fuzz_feed\"}, "
        "{\"op\": \"map\", \"fn\": \"decode_jpeg\", \"args\": {\"component\": \"jpeg\", \"keep\": true, "
        "\"max_pixels\": 4000000}}, "
        "{\"op\": \"map\", \"fn\": \"decode_jpeg\", \"args\": {\"component\": \"jpeg\", \"output\": \"raw\", \"keep\": true, "
        "\"channels\": 0, \"strict\": false, \"max_pixels\": 4000000}}, "
        "{\"op\": \"map\", \"fn\": \"decode_and_crop_jpeg\", \"args\": {\"component\": \"jpeg\", \"output\": \"ctr\", "
        "\"keep\": true, \"center_fraction\": 0.5, \"strict\": false, \"max_pixels\": 4000000}}, "
        "{\"op\": \"map\", \"fn\": \"decode_and_crop_jpeg\", \"args\": {\"component\": \"jpeg\", \"output\": \"full\", "
        "\"keep\": true, \"full\": true, \"shorter_side\": 9, \"strict\": false, \"max_pixels\": 4000000}}, "
        "{\"op\": \"map\", \"fn\": \"decode_and_crop_jpeg\", \"args\": {\"component\": \"jpeg\", \"output\": \"crop\", "
        "\"random\": true, \"size\": [17, 23], \"max_pixels\": 4000000}}]}";
    g_p = fuzz_feed_pipeline("jpeg", spec);
  }
  fuzz_feed_run(g_p, data, size);
  return 0;
}
