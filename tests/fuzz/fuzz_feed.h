/* fuzz_feed.h: the harness the function fuzz targets share. The fuzzer's input becomes one byte-string component
 * of one element, fed by the `fuzz_feed` function at the head of a pipeline whose spec starts with
 * range(stop 1) -> map(fuzz_feed); running it must give elements or an error with a message, never a crash. */
#ifndef SL_FUZZ_FEED_H
#define SL_FUZZ_FEED_H
#include <stdint.h>
#include <string.h>

#include "sluice.h"

static const uint8_t *g_feed_data;
static size_t g_feed_size;
static const char *g_feed_comp;

static inline int fuzz_feed_call(void *st, sl_elem *e, sl_fn_call *call) {
  (void)st;
  (void)call;
  return sl_elem_set_bytes(e, g_feed_comp, NULL, 0, g_feed_data, g_feed_size);
}

/* Registers `fuzz_feed` (writing component `comp`) and builds `spec`; traps when the spec does not build. */
static inline sl_pipeline *fuzz_feed_pipeline(const char *comp, const char *spec) {
  g_feed_comp = comp;
  sl_fn_def feed = {SL_FN_DEF_VERSION, 0, NULL, fuzz_feed_call, NULL};
  sl_fn_register("fuzz_feed", &feed, NULL);
  sl_pipeline *p = NULL;
  if (sl_pipeline_from_json(&p, spec, strlen(spec), "fuzz")) __builtin_trap();
  return p;
}

/* Runs the pipeline to its end: elements or an error with a message (targets reading files use it alone). */
static inline void fuzz_drain(sl_pipeline *p) {
  sl_iter *it;
  if (sl_pipeline_iter(&it, p)) __builtin_trap();
  sl_elem e;
  sl_elem_init(&e);
  int rc;
  while ((rc = sl_iter_next(&e, it)) == 0) sl_elem_clear(&e);
  if (rc != SL_END && !sl_error_last()[0]) __builtin_trap(); /* every error has a message */
  sl_iter_free(it);
}

/* Runs the pipeline once over this input. */
static inline void fuzz_feed_run(sl_pipeline *p, const uint8_t *data, size_t size) {
  g_feed_data = data;
  g_feed_size = size;
  fuzz_drain(p);
}
#endif
