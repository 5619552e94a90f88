#define _GNU_SOURCE
/* fuzz_tokenize.c: libFuzzer target for `tokenize` (whitespace/punctuation split, vocabulary hash lookup): any line
 * gives token ids or a clean error; then the `length` predicate on the result. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_feed.h"

static sl_pipeline *g_p;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_p) {
    char vocab[] = "/tmp/sluice-fuzz-vocab-XXXXXX";
    int fd = mkstemp(vocab);
    if (fd < 0) __builtin_trap();
    const char words[] = "<pad>\n<unk>\n<s>\n</s>\nthe\nof\nand\na\nto\nin\nis\nfor\n,\n.\nhello\nworld\n";
    if (write(fd, words, sizeof words - 1) < 0) __builtin_trap();
    close(fd);
    char spec[1024];
    snprintf(spec, sizeof spec,
             "{\"ops\": [{\"op\": \"range\", \"stop\": 1}, {\"op\": \"map\", \"fn\": \"fuzz_feed\"}, {\"op\": \"map\", "
             "\"fn\": \"tokenize\", \"args\": {\"vocab\": \"%s\", \"bos_id\": 2, \"eos_id\": 3}}, {\"op\": \"filter\", "
             "\"fn\": \"length\", \"args\": {\"component\": \"tokens\", \"max\": 256}}]}", vocab);
    g_p = fuzz_feed_pipeline("line", spec);
    unlink(vocab); /* read at build time */
  }
  fuzz_feed_run(g_p, data, size);
  return 0;
}
