/* io/tar_write.c: the tar writer behind WebDataset shards (`sluice gen --format tar`, `sluice convert --to tar`),
 * through libarchive (which the `tar` reader uses too), onto a stream that core/outfile_int.h makes and renames. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <string.h>

#include "io/io_int.h"

struct sl__tarw {
  struct archive *a;
  struct archive_entry *e; /* reused for every member */
  FILE *f;
  char *name;
  int err;
};

static int tar_err(sl__tarw *w, const char *member, const char *what) {
  const char *why = w->a ? archive_error_string(w->a) : NULL;
  return w->err = sl__err(SL_EIO, "%s: %s%s%s: %s", w->name, what, member ? " " : "", member ? member : "",
                          why ? why : strerror(errno));
}

int sl__tarw_on(sl__tarw **out, FILE *f, const char *name) {
  *out = NULL;
  sl__tarw *w = sl__calloc(1, sizeof *w);
  if (!w || !(w->name = sl__strdup(name))) {
    sl__free(w);
    return sl__oom("a tar writer");
  }
  w->f = f;
  w->a = archive_write_new();
  w->e = archive_entry_new();
  int rc = 0;
  if (!w->a || !w->e) rc = sl__oom("a tar writer");
  /* pax only where ustar cannot say it (a long name, a member over 8 GiB): what tar, Python's tarfile and
   * webdataset all read */
  else if (archive_write_set_format_pax_restricted(w->a) != ARCHIVE_OK || archive_write_open_FILE(w->a, f) != ARCHIVE_OK)
    rc = tar_err(w, NULL, "cannot start the archive");
  if (rc) {
    w->err = rc;
    sl__tarw_close(w);
    return rc;
  }
  *out = w;
  return 0;
}

int sl__tarw_add(sl__tarw *w, const char *member, const void *data, size_t len) {
  if (w->err) return w->err;
  archive_entry_clear(w->e);
  archive_entry_set_pathname(w->e, member);
  archive_entry_set_filetype(w->e, AE_IFREG);
  archive_entry_set_perm(w->e, 0644);
  archive_entry_set_size(w->e, (la_int64_t)len);
  archive_entry_set_mtime(w->e, 0, 0);
  if (archive_write_header(w->a, w->e) != ARCHIVE_OK) return tar_err(w, member, "cannot write the header of");
  const char *p = data;
  while (len > 0) {
    la_ssize_t n = archive_write_data(w->a, p, len);
    if (n <= 0) return tar_err(w, member, "write error in");
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int sl__tarw_close(sl__tarw *w) {
  if (!w) return 0;
  int rc = w->err;
  if (w->a && !rc && archive_write_close(w->a) != ARCHIVE_OK) rc = tar_err(w, NULL, "cannot end the archive");
  if (!rc && fflush(w->f) != 0) rc = sl__err(SL_EIO, "%s: write error: %s", w->name, strerror(errno));
  if (w->a) archive_write_free(w->a);
  archive_entry_free(w->e);
  sl__free(w->name);
  sl__free(w);
  return rc;
}
