/* fuzz_cli_opt.c: libFuzzer target for the CLI's option parser (src/cli/cli_opt.c): the input, split at NUL bytes,
 * is an argv read against a table of every option type; any argv gives values inside their ranges or a usage
 * error, never a crash or a value the table bounds out. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_int.h"

static void help(FILE *f) { fputs("usage: fuzz\n", f); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool quiet;
  if (!quiet) { /* the usage messages would flood the log */
    quiet = true;
    if (!freopen("/dev/null", "w", stderr)) __builtin_trap();
  }
  char *buf = malloc(size + 1);
  char **argv = malloc((size + 2) * sizeof *argv);
  if (!buf || !argv) __builtin_trap();
  memcpy(buf, data, size);
  buf[size] = 0;
  int argc = 0;
  argv[argc++] = "fuzz";
  for (size_t i = 0; i <= size; i += strlen(buf + i) + 1) argv[argc++] = buf + i;
  bool flag = false;
  int set = 0;
  const char *str = NULL, *pos[2] = {NULL, NULL};
  int64_t n = 7, any = 0, sz = 0;
  double x = 1, y = 0;
  const cli_opt more[] = {{.name = "--size", .type = CLI_SIZE, .dst = &sz, .lo = 1, .hi = 1e12, .must = "1..1T"},
                          {.name = NULL}};
  const cli_opt opts[] = {
      {.name = "--flag", .type = CLI_FLAG, .dst = &flag},
      {.name = "--up", .type = CLI_SET, .dst = &set, .set = 1},
      {.name = "-s", .alias = "--str", .type = CLI_STR, .dst = &str},
      {.name = "-n", .type = CLI_INT, .dst = &n, .lo = -3, .hi = 1000, .must = "in -3..1000"},
      {.name = "--any", .type = CLI_INT, .dst = &any},
      {.name = "--x", .type = CLI_NUM, .dst = &x, .lo = 0, .lo_open = true, .hi = 2, .hi_open = true, .must = "in (0, 2)"},
      {.name = "--y", .type = CLI_NUM, .dst = &y},
      {.name = NULL},
  };
  const cli_args a = {.cmd = "fuzz", .opts = opts, .more = more, .help = help, .pos = pos, .npos = 2, .hint = " (hint)"};
  int rc = cli_parse(&a, argc, argv);
  if (rc != 0 && rc != -1 && rc != CLI_USAGE) __builtin_trap();
  /* what the table bounds stays inside, whatever else the argv held */
  if (n < -3 || n > 1000 || !(x > 0 && x < 2) || isnan(y) || sz < 0 || sz > (int64_t)1e12) __builtin_trap();
  if (set != 0 && set != 1) __builtin_trap();
  for (int i = 0; i < 2; i++)
    if (pos[i] && (pos[i] < buf || pos[i] > buf + size)) __builtin_trap();
  (void)cli_has_option(argc, argv, "--up");
  free(argv);
  free(buf);
  return 0;
}
