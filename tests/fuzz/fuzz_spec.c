/* fuzz_spec.c: libFuzzer target for the JSON spec parser and pipeline builder: any input must either build or
 * fail with an error code and message; a built pipeline must describe each op's element structure and write itself
 * back as JSON that builds again. */
#include <stdint.h>
#include <string.h>

#include "sluice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sl_pipeline *p = NULL;
  int rc = sl_pipeline_from_json(&p, (const char *)data, size, "fuzz");
  if (rc) {
    if (!sl_error_last()[0]) __builtin_trap(); /* every error has a message */
    return 0;
  }
  /* Every op's element structure can be described. */
  for (int i = 0; i < sl_pipeline_op_count(p); i++) {
    char *d = NULL;
    if (sl_pipeline_structure(&d, p, i) != 0 || !d) __builtin_trap();
    sl_free(d);
  }
  char *js = NULL;
  if (sl_pipeline_to_json(&js, p) == 0) {
    sl_pipeline *q = NULL;
    if (sl_pipeline_from_json(&q, js, strlen(js), "fuzz-roundtrip") != 0) __builtin_trap();
    sl_pipeline_free(q);
    sl_free(js);
  }
  sl_pipeline_free(p);
  return 0;
}
