/* fuzz_tar.c: libFuzzer target for the `tar` reader: the input is written to a file and read as a WebDataset shard
 * (libarchive sniffs plain, gzip, zstd or xz), failing on corruption and skipping it, with decode_image on each
 * sample's "jpg": any bytes give samples or a clean error with a message, never a crash or a leak. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_feed.h"

static sl_pipeline *g_p[2];
static char g_path[4096];

static void remove_file(void) { unlink(g_path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_path[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_path, sizeof g_path, "%s/sluice-fuzz-tar-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(g_path);
    if (fd < 0) __builtin_trap();
    close(fd);
    atexit(remove_file);
  }
  FILE *f = fopen(g_path, "wb");
  if (!f || fwrite(data, 1, size, f) != size) __builtin_trap();
  fclose(f);
  for (int k = 0; k < 2; k++) {
    if (!g_p[k]) {
      char spec[8192];
      snprintf(spec, sizeof spec,
               "{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"tar\", \"on_corrupt\": \"%s\", "
               "\"max_member_bytes\": 16000000}, {\"op\": \"map\", \"fn\": \"decode_image\", \"on_error\": \"skip\", "
               "\"args\": {\"component\": \"jpg\", \"max_pixels\": 4000000}}]}",
               g_path, k ? "skip" : "error");
      if (sl_pipeline_from_json(&g_p[k], spec, strlen(spec), "fuzz")) __builtin_trap();
    }
    fuzz_drain(g_p[k]);
  }
  return 0;
}
