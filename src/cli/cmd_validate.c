/* cli/cmd_validate.c: what `sluice validate --print` shows: the element structure after each op (components,
 * dtypes, shapes), as the ops' and functions' schemas follow it through the pipeline. The command's option handling
 * is in cmd_run.c beside `run`. */
#include <stdio.h>
#include <string.h>

#include "cli_int.h"

int cli_validate_print(const sl_pipeline *p) {
  int n = sl_pipeline_op_count(p);
  for (int i = 0; i < n; i++) {
    sl_op_stats st;
    char *desc = NULL;
    if (sl_pipeline_op_stats(&st, p, i) || sl_pipeline_structure(&desc, p, i))
      return cli_fail(true, "%s", sl_error_last());
    char what[256];
    if (strcmp(st.label, st.op)) snprintf(what, sizeof what, "%s %s", st.op, st.label);
    else snprintf(what, sizeof what, "%s", st.op);
    /* Nested ops (an interleave's source chain) indented under their interleave. */
    printf("%s%-14s %-28s %s\n", st.nested ? "  " : "", st.path, what, desc);
    sl_free(desc);
  }
  return CLI_OK;
}
