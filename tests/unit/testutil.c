/* testutil.c: helpers shared by the unit tests. */
#define _GNU_SOURCE
#include "testutil.h"

#include <ftw.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *tu_tmpdir(const char *tag) {
  const char *base = getenv("TMPDIR");
  char tmpl[4096];
  snprintf(tmpl, sizeof tmpl, "%s/sluice-%s-XXXXXX", base && *base ? base : "/tmp", tag);
  char *d = mkdtemp(tmpl);
  assert_non_null(d);
  return strdup(d);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
  return remove(p);
}
void tu_rmtree(const char *path) {
  if (path) nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

char *tu_write_file(const char *dir, const char *name, const void *data, size_t len) {
  char *p = NULL;
  assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  if (len) assert_int_equal(fwrite(data, 1, len, f), len);
  fclose(f);
  return p;
}


