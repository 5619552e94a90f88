/* fuzz_mlmd.c: libFuzzer target for opening an MLMD database that may be corrupt: the input is a SQLite file's
 * bytes (seeded with real small stores); opening either fails with a message or gives a store that exports. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sluice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[] = "/tmp/sluice-fuzz-mlmd-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return 0;
  if (write(fd, data, size) != (ssize_t)size) {
    close(fd);
    unlink(path);
    return 0;
  }
  close(fd);
  sl_prov *p = NULL;
  if (sl_prov_open(&p, path, 0) == 0) {
    char *js = NULL;
    if (sl_prov_export_json(&js, p) == 0) sl_free(js);
    sl_prov_close(p);
  } else if (!sl_error_last()[0]) {
    __builtin_trap();
  }
  unlink(path);
  char side[64];
  snprintf(side, sizeof side, "%s-wal", path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", path);
  unlink(side);
  return 0;
}
