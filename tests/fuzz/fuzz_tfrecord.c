/* fuzz_tfrecord.c: libFuzzer target for the TFRecord reader: the input is a file's bytes, read plain and as GZIP;
 * every record is returned or refused with SL_ECORRUPT/SL_EIO, never a crash or a huge allocation. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sluice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("fuzz", 0);
  if (fd < 0) return 0;
  if (write(fd, data, size) != (ssize_t)size) {
    close(fd);
    return 0;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  for (int comp = 0; comp < 2; comp++) {
    sl_tfrecord_reader *r;
    if (sl_tfrecord_reader_open(&r, path, comp ? SL_COMPRESSION_GZIP : SL_COMPRESSION_NONE)) continue;
    for (int i = 0; i < 10000; i++) {
      sl_buf *b;
      size_t len;
      int rc = sl_tfrecord_reader_next(&b, &len, r);
      if (rc == 0) {
        if (len != sl_buf_size(b)) __builtin_trap();
        sl_buf_unref(b);
        continue;
      }
      if (rc == SL_END) break;
      if (rc != SL_ECORRUPT && rc != SL_EIO && rc != SL_ENOMEM) __builtin_trap();
    }
    sl_tfrecord_reader_free(r);
  }
  close(fd);
  return 0;
}
