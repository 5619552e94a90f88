/* fns/fn_common.c: what the function implementations (fn_*.c) share: reading a component an arg names, with the
 * error naming the op and the element. Declared in fns_int.h. */
#include "fns/fns_int.h"

int sl__fn_component(sl_elem *e, const sl_fn_call *call, const char *name, sl_comp **out) {
  *out = sl_elem_get(e, name);
  if (!*out)
    return sl__err(SL_EINVAL, "%s: element %llu has no component '%s'", call->op_path,
                   (unsigned long long)call->index, name);
  return 0;
}
