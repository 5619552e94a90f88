/* fuzz_image.c: libFuzzer target for `decode_image`: the format sniffed from the bytes (JPEG, PNG through libspng,
 * WebP through libwebp), decoded to RGB, as stored (EXIF orientation applied), to one channel, and through the fused
 * decode_and_crop_jpeg with "any_format" (a random window, flipped and normalised): any bytes give an image or a
 * clean error, never a crash or a leak. */
#include <stdint.h>
#include <string.h>

#include "fuzz_feed.h"

static sl_pipeline *g_p;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_p) {
    /* Small max_pixels: a header may claim a huge image, and the fuzzer has a memory limit. */
    const char *spec =
        "{\"seed\": 1, \"ops\": [{\"op\": \"range\", \"stop\": 1}, {\"op\": \"map\", \"fn\": \"fuzz_feed\"}, "
        "{\"op\": \"map\", \"fn\": \"decode_image\", \"args\": {\"component\": \"data\", \"keep\": true, "
        "\"max_pixels\": 4000000}}, "
        "{\"op\": \"map\", \"fn\": \"decode_image\", \"args\": {\"component\": \"data\", \"output\": \"raw\", "
        "\"keep\": true, \"channels\": 0, \"strict\": false, \"orient\": true, \"max_pixels\": 4000000}}, "
        "{\"op\": \"map\", \"fn\": \"decode_and_crop_jpeg\", \"args\": {\"component\": \"data\", \"output\": \"c\", "
        "\"keep\": true, \"any_format\": true, \"random\": true, \"size\": [17, 23], \"flip_prob\": 0.5, "
        "\"normalize\": true, \"max_pixels\": 4000000}}, "
        "{\"op\": \"map\", \"fn\": \"decode_image\", \"args\": {\"component\": \"data\", \"output\": \"g\", "
        "\"channels\": 1, \"max_pixels\": 4000000}}]}";
    g_p = fuzz_feed_pipeline("data", spec);
  }
  fuzz_feed_run(g_p, data, size);
  return 0;
}
