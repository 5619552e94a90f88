/* core/numfmt.c: the number formats of sluice's reports (the analyzer's table and sentences, the HTML reports):
 * rates with k/M/G suffixes, durations in ns/us/ms, byte counts. One place, so every report prints a figure the
 * same way. */
#include <math.h>
#include <stdio.h>

#include "core/core_int.h"

const char *sl__fmt_si(char *b, size_t n, double v) {
  if (!isfinite(v) || v >= 1e11) snprintf(b, n, "inf");
  else if (v >= 1e9) snprintf(b, n, "%.1fG", v / 1e9);
  else if (v >= 1e6) snprintf(b, n, "%.1fM", v / 1e6);
  else if (v >= 1e4) snprintf(b, n, "%.1fk", v / 1e3);
  else if (v >= 100) snprintf(b, n, "%.0f", v);
  else snprintf(b, n, "%.1f", v);
  return b;
}

const char *sl__fmt_days(char *b, size_t n, double days) {
  double s = days * 86400.0;
  if (!isfinite(s) || s < 0) snprintf(b, n, "?");
  else if (s < 120) snprintf(b, n, "%.0f seconds", s);
  else if (days < 2.0 / 24) snprintf(b, n, "%.1f minutes", s / 60);
  else if (days < 2) snprintf(b, n, "%.1f hours", s / 3600);
  else snprintf(b, n, "%.1f days", days);
  return b;
}

const char *sl__fmt_usec(char *b, size_t n, double s) {
  double us = s * 1e6;
  if (us >= 1e5) snprintf(b, n, "%.0fms", us / 1e3);
  else if (us >= 100) snprintf(b, n, "%.0fus", us);
  else if (us >= 1) snprintf(b, n, "%.1fus", us);
  else snprintf(b, n, "%.0fns", us * 1e3);
  return b;
}

const char *sl__fmt_bytes(char *b, size_t n, double v) {
  if (v >= 1e9) snprintf(b, n, "%.2f GB", v / 1e9);
  else if (v >= 1e6) snprintf(b, n, "%.1f MB", v / 1e6);
  else if (v >= 1e3) snprintf(b, n, "%.1f kB", v / 1e3);
  else snprintf(b, n, "%.0f B", v);
  return b;
}
