/* fuzz_mlmd_value.c: libFuzzer target for the decoders of property values as the ml-metadata library stores them
 * (a google.protobuf.Struct behind "mlmd-struct::" + base64, a PROTO's base64 Any): the input is the Struct's bytes;
 * decoding either gives JSON that encodes again, or says the value is not in that form. */
#include <stdint.h>
#include <string.h>

#include "core/core_int.h"
#include "prov/store/store_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *b64 = NULL;
  if (sl__mlmd_proto_encode(&b64, NULL, data, size)) return 0;
  size_t n = strlen(b64);
  char *s = sl__malloc(n + 14);
  if (!s) {
    sl__free(b64);
    return 0;
  }
  memcpy(s, "mlmd-struct::", 13);
  memcpy(s + 13, b64, n + 1);
  char *json = NULL;
  int rc = sl__mlmd_struct_decode(&json, s);
  if (rc == 0) {
    char *again = NULL;
    if (sl__mlmd_struct_encode(&again, json, "fuzz") != 0 && !sl_error_last()[0]) __builtin_trap();
    sl__free(again);
  }
  sl__free(json);
  /* the same bytes read as the text of a string_value, and as a PROTO's base64 */
  char *t = sl__strndup((const char *)data, size);
  if (t) {
    json = NULL;
    if (sl__mlmd_struct_decode(&json, t) == 0) sl__free(json);
    void *raw = NULL;
    size_t rl;
    if (sl__mlmd_proto_decode(&raw, &rl, t, strlen(t)) == 0) sl__free(raw);
    sl__free(t);
  }
  sl_prov_value v = {SL_PROV_T_PROTO, 0, 0, NULL, data, size};
  sl_prov_value enc;
  char *tmp = NULL;
  (void)sl__mlmd_value_store(&enc, &tmp, &v, "fuzz", true);
  sl__free(tmp);
  sl__free(s);
  sl__free(b64);
  return 0;
}
