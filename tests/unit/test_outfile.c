/* test_outfile.c: core/outfile.c, the one way sluice writes a file: a hidden temporary beside the name, never
 * through a link, renamed when complete; a failed write keeps the previous file; temporaries of dead writers swept. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/outfile_int.h"
#include "testutil.h"

static char dir[64];

static int setup(void **s) {
  snprintf(dir, sizeof dir, "/tmp/sl-outfile-XXXXXX");
  assert_non_null(mkdtemp(dir));
  return 0;
}
static int teardown(void **s) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
  return 0;
}

static void put(const char *name, const char *text) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}
static char *get(const char *name) {
  static char buf[256];
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "rb");
  if (!f) return NULL;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}
static int entries(void) { /* names in dir, . and .. left out */
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static void test_written_hidden_beside_then_renamed(void **s) {
  char p[256];
  snprintf(p, sizeof p, "%s/out.bin", dir);
  sl__outfile o;
  assert_int_equal(sl__outfile_open(&o, p, 0), 0);
  const char *base = strrchr(o.tmp, '/') + 1;
  assert_int_equal(strncmp(o.tmp, dir, strlen(dir)), 0); /* same directory: the rename is atomic */
  assert_int_equal(base[0], '.'); /* hidden: a glob of the directory does not match it */
  long pid;
  assert_true(sl__outfile_is_tmp(base, "out.bin", &pid));
  assert_int_equal(pid, (long)getpid());
  fputs("hello", o.f);
  assert_null(get("out.bin")); /* nothing under the name until complete */
  assert_int_equal(sl__outfile_commit(&o), 0);
  assert_string_equal(get("out.bin"), "hello");
  assert_int_equal(entries(), 1);
}

static void test_link_at_the_name_is_replaced_not_followed(void **s) {
  put("victim", "VICTIM");
  char p[256], v[256];
  snprintf(p, sizeof p, "%s/out.json", dir);
  snprintf(v, sizeof v, "%s/victim", dir);
  assert_int_equal(symlink(v, p), 0);
  assert_int_equal(sl_file_write(p, "new", 3), 0);
  struct stat st;
  assert_int_equal(lstat(p, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_string_equal(get("out.json"), "new");
  assert_string_equal(get("victim"), "VICTIM");
}

/* A file written over keeps its permissions: a private (0600) output stays private, an executable stays one. */
static void test_written_over_keeps_its_mode(void **s) {
  char p[256];
  snprintf(p, sizeof p, "%s/private.json", dir);
  for (int k = 0; k < 2; k++) {
    mode_t want = k ? 0750 : 0600;
    put("private.json", "OLD");
    assert_int_equal(chmod(p, want), 0);
    assert_int_equal(sl_file_write(p, "new", 3), 0);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, want);
    assert_string_equal(get("private.json"), "new");
  }
}

static void test_abort_keeps_the_previous_file(void **s) {
  put("keep.txt", "OLD");
  char p[256];
  snprintf(p, sizeof p, "%s/keep.txt", dir);
  sl__outfile o;
  assert_int_equal(sl__outfile_open(&o, p, 0), 0);
  fputs("partial", o.f);
  sl__outfile_abort(&o);
  sl__outfile_abort(&o); /* twice, and on a released handle: nothing */
  assert_string_equal(get("keep.txt"), "OLD");
  assert_int_equal(entries(), 1);
}

static void test_failed_write_keeps_the_previous_file_and_says_why(void **s) {
  put("big.bin", "OLD");
  char p[256];
  snprintf(p, sizeof p, "%s/big.bin", dir);
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = 4096; /* EFBIG past 4 KiB, as a full disk gives ENOSPC */
  void (*h)(int) = signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  static char data[1 << 20];
  memset(data, 'x', sizeof data);
  int rc = sl_file_write(p, data, sizeof data);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, h);
  assert_int_equal(rc, SL_EIO);
  assert_non_null(strstr(sl_error_last(), p));
  assert_non_null(strstr(sl_error_last(), "File too large"));
  assert_non_null(strstr(sl_error_last(), "previous file"));
  assert_string_equal(get("big.bin"), "OLD");
  assert_int_equal(entries(), 1);
}

static void test_missing_directory_names_the_file(void **s) {
  char p[256];
  snprintf(p, sizeof p, "%s/no/such/x.json", dir);
  assert_int_equal(sl_file_write(p, "x", 1), SL_EIO);
  assert_non_null(strstr(sl_error_last(), p));
  assert_non_null(strstr(sl_error_last(), "No such file or directory"));
}

static void test_sweep_removes_only_dead_writers_temporaries(void **s) {
  /* 999999999 is above any pid_max: no such process; pid 1 always exists */
  put(".c.bin.tmp-999999999-00ab", "");
  put(".c.bin.tmp-999999998", "");
  put("c.bin.tmp.999999997", "");   /* a cache's temporary before 0.2 */
  put(".c.bin.tmp-1-00ab", "");     /* live */
  put(".c.bin.tmp-999999996-xyz", ""); /* not ours: not hex */
  put(".d.bin.tmp-999999995-00", ""); /* another file's */
  put("c.bin", "KEEP");
  char p[256];
  snprintf(p, sizeof p, "%s/.c.bin.tmp-999999994-01", dir);
  assert_int_equal(mkdir(p, 0700), 0); /* a directory of that name is not a temporary we made */
  snprintf(p, sizeof p, "%s/c.bin", dir);
  assert_int_equal(sl__outfile_sweep(p), 3);
  assert_null(get(".c.bin.tmp-999999999-00ab"));
  assert_null(get(".c.bin.tmp-999999998"));
  assert_null(get("c.bin.tmp.999999997"));
  assert_non_null(get(".c.bin.tmp-1-00ab"));
  assert_non_null(get(".c.bin.tmp-999999996-xyz"));
  assert_non_null(get(".d.bin.tmp-999999995-00"));
  assert_string_equal(get("c.bin"), "KEEP");
}

static void test_tmp_names_parsed_strictly(void **s) {
  long pid = 0;
  assert_true(sl__outfile_is_tmp(".a.tmp-12-ff", "a", &pid) && pid == 12);
  assert_true(sl__outfile_is_tmp(".a.tmp-12", "a", &pid) && pid == 12);
  assert_true(sl__outfile_is_tmp("a.tmp.7", "a", &pid) && pid == 7);
  assert_false(sl__outfile_is_tmp(".a.tmp-", "a", &pid));
  assert_false(sl__outfile_is_tmp(".a.tmp-12-", "a", &pid));
  assert_false(sl__outfile_is_tmp(".a.tmp-x", "a", &pid));
  assert_false(sl__outfile_is_tmp(".ab.tmp-12", "a", &pid));
  assert_false(sl__outfile_is_tmp(".a.tmp-0", "a", &pid));
  assert_false(sl__outfile_is_tmp("a.tmp.7x", "a", &pid));
  assert_false(sl__outfile_is_tmp("a", "a", &pid));
  /* of any file (a directory's sweep) */
  assert_true(sl__outfile_is_tmp(".train-00001-of-00004.csv.tmp-42-0a", NULL, &pid) && pid == 42);
  assert_true(sl__outfile_is_tmp("cache.bin.tmp.9", NULL, &pid) && pid == 9);
  assert_false(sl__outfile_is_tmp(".tmp-42", NULL, &pid));
  assert_false(sl__outfile_is_tmp("x.tmp-42", NULL, &pid)); /* the hidden form starts with a dot */
  assert_false(sl__outfile_is_tmp(".x.tmp-42-zz", NULL, &pid));
  assert_false(sl__outfile_is_tmp("notes.tmp.txt", NULL, &pid));
}

static void test_sweep_dir_removes_dead_writers_temporaries_of_its_names(void **s) {
  put(".train-00000-of-00008.csv.tmp-999999999-0a", "");
  put(".train-00003-of-00004.csv.tmp-999999998", "");
  put(".vocab.txt.tmp-1-0b", ""); /* live */
  put("train-00000-of-00004.csv", "KEEP");
  put(".vimrc.tmp-999999997", "KEEP"); /* someone else's (issue 47 row 3) */
  put("results.tmp.999999996", "KEEP");
  put(".train-00000-of-00001.tar.tmp-999999995-0a", "KEEP"); /* a name no pattern matches */
  static const char *const ours[] = {"train-[0-9]*-of-[0-9]*.csv", "vocab.txt", NULL};
  assert_int_equal(sl__outfile_sweep_dir(dir, ours), 2);
  assert_int_equal(entries(), 5);
  assert_non_null(get(".vocab.txt.tmp-1-0b"));
  assert_non_null(get(".vimrc.tmp-999999997"));
  assert_non_null(get("results.tmp.999999996"));
  long pid;
  assert_true(sl__outfile_tmp_of(".vocab.txt.tmp-12-0a", ours, &pid) && pid == 12);
  assert_false(sl__outfile_tmp_of(".vimrc.tmp-12", ours, &pid));
  assert_false(sl__outfile_tmp_of("vocab.txt.tmp.12", ours, &pid));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_written_hidden_beside_then_renamed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_link_at_the_name_is_replaced_not_followed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_written_over_keeps_its_mode, setup, teardown),
      cmocka_unit_test_setup_teardown(test_abort_keeps_the_previous_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failed_write_keeps_the_previous_file_and_says_why, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_directory_names_the_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sweep_removes_only_dead_writers_temporaries, setup, teardown),
      cmocka_unit_test(test_tmp_names_parsed_strictly),
      cmocka_unit_test_setup_teardown(test_sweep_dir_removes_dead_writers_temporaries_of_its_names, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
