/* fuzz_trace.c: libFuzzer target for the trace reader (sl_trace_from_json): any bytes load as a trace that writes
 * itself back, or fail with an error and a message. */
#include <stdint.h>
#include <string.h>

#include "sluice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sl_trace *t = NULL;
  if (sl_trace_from_json(&t, (const char *)data, size, "fuzz")) {
    if (!sl_error_last()[0]) __builtin_trap();
    return 0;
  }
  char *js = NULL;
  if (sl_trace_to_json(&js, t) == 0) sl_free(js);
  sl_trace_free(t);
  return 0;
}
