/* core/infile.c: the readers' opens (issue 47). Only a regular file is read: a FIFO's open would wait for a writer
 * forever and a device (/dev/zero) never ends, so each is refused with its path, before (stat) and after (fstat)
 * an open that cannot block (O_NONBLOCK, cleared once the file is known to be regular). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core_int.h"

const char *sl__file_kind(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (a named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISREG(mode)) return "a regular file";
  return "not a regular file";
}

static int not_regular(const char *path, unsigned mode) {
  return sl__err(SL_EINVAL, "'%s' is %s, not a regular file: sluice reads regular files only", path,
                 sl__file_kind(mode));
}

int sl__check_regular(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0)
    return sl__err(errno == ENOENT ? SL_ENOTFOUND : SL_EIO, "'%s': %s", path, strerror(errno));
  return S_ISREG(st.st_mode) ? 0 : not_regular(path, st.st_mode);
}

int sl__open_regular(int *fd, const char *path) {
  *fd = -1;
  int rc = sl__check_regular(path);
  if (rc) return rc;
  int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC); /* a FIFO put there since: no wait */
  if (f < 0) return sl__err(errno == ENOENT ? SL_ENOTFOUND : SL_EIO, "'%s': cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(f, &st) != 0) rc = sl__err(SL_EIO, "'%s': %s", path, strerror(errno));
  else if (!S_ISREG(st.st_mode)) rc = not_regular(path, st.st_mode);
  if (rc) {
    close(f);
    return rc;
  }
  int fl = fcntl(f, F_GETFL);
  if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    rc = sl__err(SL_EIO, "'%s': %s", path, strerror(errno));
    close(f);
    return rc;
  }
  *fd = f;
  return 0;
}

int sl__fopen_regular(FILE **f, const char *path) {
  *f = NULL;
  int fd;
  int rc = sl__open_regular(&fd, path);
  if (rc) return rc;
  if (!(*f = fdopen(fd, "rb"))) {
    rc = sl__err(SL_EIO, "'%s': %s", path, strerror(errno));
    close(fd);
  }
  return rc;
}
