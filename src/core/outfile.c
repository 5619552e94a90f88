/* core/outfile.c: files written beside their final name and renamed into place (see outfile_int.h). A reader never
 * sees a partial file, a failed write (a full disk) leaves the previous file as it was, and a symlink or file
 * planted at a temporary name is never opened; temporaries of killed writers are swept when the name is next written. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core_int.h"
#include "core/outfile_int.h"

#define TMP_TRIES 64

static atomic_uint_fast64_t g_tmp_seq;

/* The directory part of `path` ("." when none) and where its base name starts. */
static int split_path(sl__str *dir, const char **base, const char *path) {
  const char *slash = strrchr(path, '/');
  *base = slash ? slash + 1 : path;
  dir->len = 0;
  if (!slash) return sl__str_append(dir, ".", 1);
  return sl__str_append(dir, path, slash == path ? 1 : (size_t)(slash - path));
}

static bool all_digits(const char *s, const char *end) {
  if (s >= end) return false;
  for (; s < end; s++)
    if (*s < '0' || *s > '9') return false;
  return true;
}

/* The pid of a temporary's name after its base: "tmp-PID" or "tmp-PID-HEX" (hidden form), "tmp.PID" (old form). */
static bool tmp_suffix(const char *p, bool hidden, long *pid) {
  p += 4; /* "tmp-" or "tmp." */
  const char *dash = hidden ? strchr(p, '-') : NULL, *end = dash ? dash : p + strlen(p);
  if (!all_digits(p, end)) return false;
  if (dash) {
    if (!dash[1]) return false;
    for (const char *h = dash + 1; *h; h++)
      if (!((*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f'))) return false;
  }
  *pid = strtol(p, NULL, 10);
  return *pid > 0;
}

bool sl__outfile_is_tmp(const char *name, const char *base, long *pid) {
  if (base) {
    size_t bl = strlen(base);
    if (name[0] == '.' && !strncmp(name + 1, base, bl) && !strncmp(name + 1 + bl, ".tmp-", 5))
      return tmp_suffix(name + 1 + bl + 1, true, pid);
    if (!strncmp(name, base, bl) && !strncmp(name + bl, ".tmp.", 5)) /* NAME.tmp.PID: caches before 0.2 */
      return tmp_suffix(name + bl + 1, false, pid);
    return false;
  }
  /* any base: the last ".tmp-" of a hidden name, or the last ".tmp." */
  const char *h = NULL, *o = NULL;
  for (const char *c = strstr(name, ".tmp"); c; c = strstr(c + 1, ".tmp")) {
    if (c[4] == '-') h = c;
    if (c[4] == '.') o = c;
  }
  if (name[0] == '.' && h && h > name + 1 && tmp_suffix(h + 1, true, pid)) return true;
  return o && o > name && tmp_suffix(o + 1, false, pid);
}

bool sl__outfile_tmp_of(const char *name, const char *const *patterns, long *pid) {
  if (name[0] != '.' || !sl__outfile_is_tmp(name, NULL, pid)) return false;
  const char *h = NULL; /* the last ".tmp-", which is_tmp parsed */
  for (const char *c = strstr(name, ".tmp-"); c; c = strstr(c + 1, ".tmp-")) h = c;
  char base[1024];
  size_t bl = h ? (size_t)(h - name - 1) : 0;
  if (!h || bl == 0 || bl >= sizeof base) return false;
  memcpy(base, name + 1, bl);
  base[bl] = 0;
  for (; *patterns; patterns++)
    if (fnmatch(*patterns, base, FNM_PERIOD) == 0) return true;
  return false;
}

/* Removes the temporaries in `dir` whose writer is dead: those of `base`, or (base NULL) the hidden ones of a name
 * `patterns` match. */
static int sweep(const char *dir, const char *base, const char *const *patterns) {
  int removed = 0;
  DIR *d = opendir(dir);
  if (!d) return 0;
  sl__str f = {0};
  struct dirent *de;
  while ((de = readdir(d))) {
    long pid;
    if (base ? !sl__outfile_is_tmp(de->d_name, base, &pid) : !sl__outfile_tmp_of(de->d_name, patterns, &pid)) continue;
    /* ESRCH: no such process. EPERM means it exists (another user's): its file stays. */
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    f.len = 0;
    if (sl__str_printf(&f, "%s/%s", dir, de->d_name)) break;
    struct stat st;
    /* unlink removes a link, never its target; a directory of that name is not ours */
    if (lstat(f.s, &st) == 0 && !S_ISDIR(st.st_mode) && unlink(f.s) == 0) removed++;
  }
  closedir(d);
  sl__free(f.s);
  return removed;
}

int sl__outfile_sweep(const char *path) {
  sl__str dir = {0};
  const char *base;
  int removed = split_path(&dir, &base, path) || !*base ? 0 : sweep(dir.s, base, NULL);
  sl__free(dir.s);
  return removed;
}

int sl__outfile_sweep_dir(const char *dir, const char *const *patterns) { return sweep(dir, NULL, patterns); }

/* True when `dir` resolves into /dev or /proc: its links (/dev/stdout, /dev/fd/N, /proc/self/fd/N) are the
 * system's, made to be written through, not links a user planted. */
static bool system_dir(const char *dir) {
  char *r = realpath(dir, NULL);
  bool sys = r && (!strcmp(r, "/dev") || !strncmp(r, "/dev/", 5) || !strcmp(r, "/proc") || !strncmp(r, "/proc/", 6));
  free(r); /* realpath's buffer comes from the C library */
  return sys;
}

/* An existing `path` that is not a regular file: a directory is refused; a device, FIFO or socket, and whatever a
 * system link points at (a terminal, a pipe, a file the shell redirected to), is opened and written in place, as
 * compilers and `sort -o` do. Replacing it would delete a device node (`-o /dev/null` as root) or a FIFO a reader
 * waits on. Returns 1 when `o` was opened in place, 0 when `path` takes the temporary and rename, or an error. */
static int open_in_place(sl__outfile *o, const char *path, const char *dir) {
  struct stat lst, st;
  if (lstat(path, &lst) != 0) return 0;
  if (S_ISDIR(lst.st_mode)) return sl__err(SL_EIO, "%s: is a directory (an output is a file)", path);
  if (S_ISREG(lst.st_mode)) return 0;
  bool regular_target = false;
  if (S_ISLNK(lst.st_mode)) { /* a user's link is replaced, never followed (a planted link writes nothing) */
    if (!system_dir(dir) || stat(path, &st) != 0) return 0;
    if (S_ISDIR(st.st_mode)) return sl__err(SL_EIO, "%s: is a directory (an output is a file)", path);
    regular_target = S_ISREG(st.st_mode);
  }
  /* a file reached through /dev/stdout is appended to, after what was written there already (>> or >) */
  int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | (regular_target ? O_APPEND : 0));
  if (fd < 0) return sl__err(SL_EIO, "%s: cannot open it for writing: %s", path, strerror(errno));
  o->f = fdopen(fd, "wb");
  o->path = sl__strdup(path);
  if (!o->f || !o->path) {
    if (o->f) fclose(o->f);
    else close(fd);
    sl__free(o->path);
    memset(o, 0, sizeof *o);
    return sl__oom("an output file");
  }
  o->in_place = true;
  return 1;
}

int sl__outfile_open(sl__outfile *o, const char *path, unsigned flags) {
  memset(o, 0, sizeof *o);
  sl__str dir = {0}, tmp = {0};
  const char *base;
  int rc = split_path(&dir, &base, path);
  if (rc) return rc;
  if (!*base) {
    sl__free(dir.s);
    return sl__err(SL_EIO, "%s: not a file name", path);
  }
  if ((rc = open_in_place(o, path, dir.s))) {
    sl__free(dir.s);
    return rc < 0 ? rc : 0;
  }
  if (flags & SL__OUTFILE_SWEEP) sl__outfile_sweep(path);
  o->path = sl__strdup(path);
  if (!o->path) {
    sl__free(dir.s);
    return sl__oom("an output file name");
  }
  int fd = -1, err = 0;
  for (int t = 0; t < TMP_TRIES && fd < 0; t++) {
    /* unpredictable, so a link cannot be planted ahead; O_EXCL|O_NOFOLLOW refuses one anyway */
    uint64_t r = sl__mix64(sl__now_ns() ^ ((uint64_t)getpid() << 32) ^ atomic_fetch_add(&g_tmp_seq, 1) ^
                           (uint64_t)(uintptr_t)o);
    tmp.len = 0;
    if ((rc = sl__str_printf(&tmp, "%s/.%s.tmp-%ld-%08x", dir.s, base, (long)getpid(), (unsigned)r))) break;
    fd = open(tmp.s, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    err = errno;
    if (fd < 0 && err != EEXIST) break;
  }
  sl__free(dir.s);
  if (rc || fd < 0) {
    sl__free(tmp.s);
    sl__free(o->path);
    o->path = NULL;
    return rc ? rc : sl__err(SL_EIO, "%s: cannot create a temporary beside it: %s", path, strerror(err));
  }
  o->tmp = tmp.s;
  /* A file written over keeps its permissions (a 0600 file stays private); a new one gets 0666 less the umask. */
  struct stat st;
  if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) (void)fchmod(fd, st.st_mode & 07777);
  o->f = fdopen(fd, "wb");
  if (!o->f) {
    err = errno;
    close(fd);
    sl__outfile_abort(o);
    return sl__err(SL_EIO, "%s: cannot open a stream: %s", path, strerror(err));
  }
  return 0;
}

static void release(sl__outfile *o) {
  sl__free(o->tmp);
  sl__free(o->path);
  memset(o, 0, sizeof *o);
}

void sl__outfile_abort(sl__outfile *o) {
  if (o->f) fclose(o->f);
  if (o->tmp) unlink(o->tmp);
  release(o);
}

int sl__outfile_commit(sl__outfile *o) {
  int rc = 0, err = 0;
  const char *step = NULL;
  if (o->in_place) { /* a device or a pipe: nothing to sync or rename */
    if (fflush(o->f) != 0) step = "write", err = errno;
    if (fclose(o->f) != 0 && !step) step = "write", err = errno;
    o->f = NULL;
    if (step) rc = sl__err(SL_EIO, "%s: cannot write the file: %s", o->path, strerror(err));
    release(o);
    return rc;
  }
  if (fflush(o->f) != 0) step = "write", err = errno;
  else if (fsync(fileno(o->f)) != 0) step = "sync", err = errno;
  int cl = fclose(o->f);
  o->f = NULL;
  if (!step && cl != 0) step = "write", err = errno;
  if (!step && rename(o->tmp, o->path) != 0) step = "rename the temporary onto", err = errno;
  if (step) {
    rc = sl__err(SL_EIO, "%s: cannot %s the file: %s (the previous file, if any, is unchanged)", o->path, step,
                 strerror(err));
    unlink(o->tmp);
  } else {
    /* the rename itself is durable once the directory is synced; best effort (some filesystems refuse it) */
    sl__str dir = {0};
    const char *base;
    if (!split_path(&dir, &base, o->path)) {
      int dfd = open(dir.s, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
      }
    }
    sl__free(dir.s);
  }
  release(o);
  return rc;
}

int sl__outfile_write(const char *path, const void *data, size_t len) {
  sl__outfile o;
  int rc = sl__outfile_open(&o, path, SL__OUTFILE_SWEEP);
  if (rc) return rc;
  if (len && fwrite(data, 1, len, o.f) != len) {
    int err = errno;
    sl__outfile_abort(&o);
    return sl__err(SL_EIO, "%s: cannot write the file: %s (the previous file, if any, is unchanged)", path,
                   strerror(err));
  }
  return sl__outfile_commit(&o);
}

int sl_file_write(const char *path, const void *data, size_t len) {
  if (!path || (!data && len)) return sl__err(SL_EINVAL, "sl_file_write: no path or no data");
  return sl__outfile_write(path, data, len);
}
