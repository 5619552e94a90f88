/* cli/cli_opt.c: the one option parser of every sluice command. A command states its options once, as a table
 * (cli_opt in cli_int.h: flags, string values, range-checked numbers and sizes); cli_parse reads argv against it and
 * refuses what does not fit with a message naming the command, the option and the value. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_int.h"

int cli_usage(const char *cmd, const char *fmt, ...) {
  va_list ap;
  char msg[2048];
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "sluice %s: %s\nRun 'sluice %s --help' for usage.\n", cmd, cli_safe(msg), cmd);
  return CLI_USAGE;
}

bool cli_is_help(const char *a) { return !strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "help"); }

bool cli_has_option(int argc, char **argv, const char *name) {
  size_t n = strlen(name);
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (!strncmp(argv[i], name, n) && (argv[i][n] == 0 || argv[i][n] == '=')) return true;
  return false;
}

/* "512M", "2G", "1000000", "64kB": bytes, or -1 when `val` is not a size. */
static double parse_size(const char *val) {
  char *end;
  double v = strtod(val, &end), mul = 1;
  if (end == val) return -1;
  if (*end == 'k' || *end == 'K') mul = 1e3, end++;
  else if (*end == 'm' || *end == 'M') mul = 1e6, end++;
  else if (*end == 'g' || *end == 'G') mul = 1e9, end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end || !(v >= 0)) return -1;
  return v * mul;
}

static bool in_range(const cli_opt *o, double v) {
  if (!o->must) return true; /* no bound stated: any value the type holds */
  if (o->lo_open ? !(v > o->lo) : !(v >= o->lo)) return false;
  return o->hi_open ? v < o->hi : v <= o->hi;
}

/* Stores `val` for the value option `o`: 0, or CLI_USAGE after the message. */
static int set_value(const char *cmd, const cli_opt *o, const char *name, const char *val) {
  char *end;
  switch (o->type) {
  case CLI_STR: *(const char **)o->dst = val; return 0;
  case CLI_INT: {
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (end == val || *end) return cli_usage(cmd, "%s: not an integer: '%s'", name, val);
    /* beyond int64 is out of range (never wrapped); so is what the table bounds */
    if (errno == ERANGE || !in_range(o, (double)v)) {
      if (o->must) return cli_usage(cmd, "%s must be %s, not %s", name, o->must, val);
      return cli_usage(cmd, "%s: out of range: '%s'", name, val);
    }
    *(int64_t *)o->dst = v;
    return 0;
  }
  case CLI_NUM: {
    double v = strtod(val, &end);
    if (end == val || *end || isnan(v)) return cli_usage(cmd, "%s: not a number: '%s'", name, val);
    if (!in_range(o, v)) return cli_usage(cmd, "%s must be %s, not %s", name, o->must, val);
    *(double *)o->dst = v;
    return 0;
  }
  case CLI_SIZE: {
    double v = parse_size(val);
    if (v < 0) return cli_usage(cmd, "%s: not a size (e.g. 512M, 2G, 1000000): '%s'", name, val);
    if (v >= 9.2e18 || !in_range(o, v)) {
      if (o->must) return cli_usage(cmd, "%s must be %s, not %s", name, o->must, val);
      return cli_usage(cmd, "%s: out of range: '%s'", name, val);
    }
    *(int64_t *)o->dst = (int64_t)v;
    return 0;
  }
  default: return 0;
  }
}

static const cli_opt *find(const cli_args *a, const char *arg, size_t len) {
  for (const cli_opt *t = a->opts; t; t = t == a->opts ? a->more : NULL)
    for (const cli_opt *o = t; o->name; o++)
      if ((strlen(o->name) == len && !strncmp(arg, o->name, len)) ||
          (o->alias && strlen(o->alias) == len && !strncmp(arg, o->alias, len)))
        return o;
  return NULL;
}

int cli_parse(const cli_args *a, int argc, char **argv) {
  int npos = 0;
  bool options = true; /* false after "--": the rest are positional */
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (options && cli_is_help(arg)) {
      if (a->help) a->help(stdout);
      else fputs(a->usage, stdout);
      return -1;
    }
    if (options && !strcmp(arg, "--")) {
      options = false;
      continue;
    }
    if (!options || arg[0] != '-' || !arg[1]) { /* "-" alone names stdin or stdout: a positional */
      if (npos < a->npos) {
        a->pos[npos++] = arg;
      } else if (a->npos == 1) {
        return cli_usage(a->cmd, "more than one %s given ('%s', '%s')", a->noun, a->pos[0], arg);
      } else {
        return cli_usage(a->cmd, "unexpected argument '%s'", arg);
      }
      continue;
    }
    const char *eq = !strncmp(arg, "--", 2) ? strchr(arg, '=') : NULL; /* --opt=value */
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    const cli_opt *o = find(a, arg, len);
    if (!o) return cli_usage(a->cmd, "unknown option '%.*s'%s", (int)len, arg, a->hint ? a->hint : "");
    const char *name = o->name;
    if (o->alias && !strncmp(arg, o->alias, len) && strlen(o->alias) == len) name = o->alias;
    if (o->given) *o->given = true;
    if (o->type == CLI_FLAG || o->type == CLI_SET) {
      if (eq) return cli_usage(a->cmd, "%s takes no value", name);
      if (o->type == CLI_FLAG) *(bool *)o->dst = true;
      else *(int *)o->dst = o->set;
      continue;
    }
    const char *val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
    if (!val) return cli_usage(a->cmd, "%s needs %s", name, o->needs ? o->needs : "a value");
    int rc = set_value(a->cmd, o, name, val);
    if (rc) return rc;
  }
  return 0;
}
