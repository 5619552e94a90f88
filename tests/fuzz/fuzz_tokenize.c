#define _GNU_SOURCE
/* fuzz_tokenize.c: libFuzzer target for `tokenize` (whitespace/punctuation split, vocabulary hash lookup): any line
 * gives token ids or a clean error; then the `length` predicate on the result. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    char vocab[] = "/tmp/sluice-fuzz-vocab-XXXXXX";
    int fd = mkstemp(vocab);
    if (fd < 0) __builtin_trap();
    const char words[] = "<pad>\n<unk>\n<s>\n</s>\nthe\nof\nand\na\nto\nin\nis\nfor\n,\n.\nhello\nworld\n";
    if (write(fd, words, sizeof words - 1) < 0) __builtin_trap();
    close(fd);
    sl_fn_def feed = {SL_FN_DEF_VERSION, 0, NULL, feed_call, NULL};
    sl_fn_register("fuzz_feed", &feed, NULL);
    char spec[1024];
    snprintf(spec, sizeof spec,
             "{\"ops\": [{\"op\": \"range\", \"stop\": 1}, {\"op\": \"map\", \"fn\": \"fuzz_feed\"}, {\"op\": \"map\", "
             "\"fn\": \"tokenize\", \"args\": {\"vocab\": \"%s\", \"bos_id\": 2, \"eos_id\": 3}}, {\"op\": \"filter\", "
             "\"fn\": \"length\", \"args\": {\"component\": \"tokens\", \"max\": 256}}]}", vocab);
    if (sl_pipeline_from_json(&g_p, spec, strlen(spec), "fuzz")) __builtin_trap();
    unlink(vocab); /* read at build time */
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
