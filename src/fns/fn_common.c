/* fns/fn_common.c: what the function implementations (fn_*.c) share: reading a component an arg names, with the
 * error naming the op and the element. Declared in fns_int.h. */
#include "fns/fns_int.h"

int sl__fn_component(sl_elem *e, const sl_fn_call *call, const char *name, sl_comp **out) {
  *out = sl_elem_get(e, name);
  /* The build checks the names an element carries except after a function registered at run time (its output
   * is not known then); a name missing here is a spec mistake, SL_ENOTFOUND, which on_error "skip" does not drop. */
  if (!*out)
    return sl__err(SL_ENOTFOUND, "%s: element %llu has no component '%s' (a spec error: no earlier op makes it)",
                   call->op_path, (unsigned long long)call->index, name);
  return 0;
}
