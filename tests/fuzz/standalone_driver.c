/* standalone_driver.c: replays fuzz inputs without libFuzzer (any C compiler, any sanitizer): main() calls the
 * target's LLVMFuzzerTestOneInput once per file, for each file or directory (not recursive) named on the command line.
 * ctest runs each target over tests/fuzz/corpus/<name>, so seeds and past crashers are regression tests. A crash or a
 * sanitizer report fails the run; a missing or empty corpus is an error, so a renamed folder does not pass silently. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Reads the whole file and runs the target on it. Returns 0, or -1 when the file cannot be read. */
static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "standalone_driver: cannot open %s\n", path);
    return -1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) break;
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    uint8_t *nb = realloc(buf, cap * 2);
    if (!nb) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nb;
    cap *= 2;
  }
  int bad = ferror(f) || !buf;
  fclose(f);
  if (bad) {
    fprintf(stderr, "standalone_driver: cannot read %s\n", path);
    free(buf);
    return -1;
  }
  fprintf(stderr, "standalone_driver: %s (%zu bytes)\n", path, n);
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Runs every regular file of dir, in name order (the same order on every machine). Returns the count, or -1. */
static int run_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "standalone_driver: cannot open directory %s\n", dir);
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    size_t len = strlen(dir) + strlen(de->d_name) + 2;
    char *p = malloc(len);
    if (!p) {
      rc = -1;
      break;
    }
    snprintf(p, len, "%s/%s", dir, de->d_name);
    struct stat st;
    if (stat(p, &st) || !S_ISREG(st.st_mode)) {
      free(p);
      continue;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      char **nn = realloc(names, cap * sizeof *nn);
      if (!nn) {
        free(p);
        rc = -1;
        break;
      }
      names = nn;
    }
    names[n++] = p;
  }
  closedir(d);
  if (names) qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    if (!rc && run_file(names[i])) rc = -1;
    free(names[i]);
  }
  free(names);
  return rc ? -1 : (int)n;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE_OR_DIR...\nRuns the fuzz target once on each file.\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int total = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st)) {
      fprintf(stderr, "standalone_driver: %s does not exist\n", argv[i]);
      return 1;
    }
    int k = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : (run_file(argv[i]) ? -1 : 1);
    if (k < 0) return 1;
    total += k;
  }
  if (total == 0) {
    fprintf(stderr, "standalone_driver: no input files\n");
    return 1;
  }
  fprintf(stderr, "standalone_driver: %d inputs ran\n", total);
  return 0;
}
