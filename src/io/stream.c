/* io/stream.c: the local file behind sl__stream (read(2) with a sequential hint) and the dispatch between it and
 * the remote stream of io/stream_http.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/stream_int.h"

bool sl__is_url(const char *path) {
  return path && (!strncasecmp(path, "http://", 7) || !strncasecmp(path, "https://", 8) ||
                  !strncasecmp(path, "s3://", 5));
}

typedef struct {
  sl__stream s;
  int fd;
  uint64_t size, pos, read;
} file_stream;

static int file_read(sl__stream *st, void *dst, size_t n, size_t *got, bool some) {
  (void)some; /* a local file's bytes are there: whole reads, fewer calls */
  file_stream *f = (file_stream *)st;
  *got = 0;
  while (*got < n) {
    ssize_t k = read(f->fd, (char *)dst + *got, n - *got);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return sl__err(SL_EIO, "%s: read error at byte %llu: %s", st->name, (unsigned long long)f->pos,
                              strerror(errno));
    if (k == 0) break;
    *got += (size_t)k;
    f->pos += (uint64_t)k;
    f->read += (uint64_t)k;
  }
  return 0;
}
static int file_seek(sl__stream *st, uint64_t off) {
  file_stream *f = (file_stream *)st;
  if (lseek(f->fd, (off_t)off, SEEK_SET) < 0)
    return sl__err(SL_EIO, "%s: cannot seek to byte %llu: %s", st->name, (unsigned long long)off, strerror(errno));
  f->pos = off;
  return 0;
}
static uint64_t file_size(const sl__stream *st) { return ((const file_stream *)st)->size; }
static uint64_t file_tell(const sl__stream *st) { return ((const file_stream *)st)->pos; }
static uint64_t file_bytes(const sl__stream *st) { return ((const file_stream *)st)->read; }
static bool file_net(const sl__stream *st, sl__net_stats *ns) {
  (void)st;
  *ns = (sl__net_stats){0};
  return false;
}
static const char *file_identity(const sl__stream *st) {
  (void)st;
  return "";
}
static void file_free(sl__stream *st) {
  file_stream *f = (file_stream *)st;
  if (f->fd >= 0) close(f->fd);
}
static const sl__stream_vt FILE_VT = {file_read, file_seek, file_size, file_tell, file_bytes, file_net,
                                      file_identity, file_free};

int sl__stream_open(sl__stream **out, const char *path, const sl__stream_opts *opts) {
  *out = NULL;
  if (sl__is_url(path)) return sl__stream_http_open(out, path, opts);
  file_stream *f = sl__calloc(1, sizeof *f);
  if (!f || !(f->s.name = sl__strdup(path))) {
    sl__free(f);
    return sl__oom("a file stream");
  }
  f->s.vt = &FILE_VT;
  int rc = sl__open_regular(&f->fd, path); /* a FIFO or a device is refused, never waited on */
  if (rc) {
    sl__stream_free(&f->s);
    return rc;
  }
  struct stat st;
  if (fstat(f->fd, &st) == 0) f->size = (uint64_t)st.st_size;
  posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  *out = &f->s;
  return 0;
}

int sl__stream_read(sl__stream *s, void *dst, size_t n, size_t *got) { return s->vt->read(s, dst, n, got, false); }
int sl__stream_read_some(sl__stream *s, void *dst, size_t n, size_t *got) {
  return s->vt->read(s, dst, n, got, true);
}
int sl__stream_seek(sl__stream *s, uint64_t off) {
  if (off > s->vt->size(s))
    return sl__err(SL_EINVAL, "%s: cannot move to byte %llu: it has %llu bytes", s->name, (unsigned long long)off,
                   (unsigned long long)s->vt->size(s));
  return s->vt->seek(s, off);
}
uint64_t sl__stream_size(const sl__stream *s) { return s->vt->size(s); }
uint64_t sl__stream_tell(const sl__stream *s) { return s->vt->tell(s); }
uint64_t sl__stream_source_bytes(const sl__stream *s) { return s->vt->source_bytes(s); }
bool sl__stream_net(const sl__stream *s, sl__net_stats *st) { return s->vt->net(s, st); }
bool sl__stream_remote(const sl__stream *s) {
  sl__net_stats st;
  return s && s->vt->net(s, &st);
}
const char *sl__stream_name(const sl__stream *s) { return s->name; }
const char *sl__stream_identity(const sl__stream *s) { return s->vt->identity(s); }
void sl__stream_free(sl__stream *s) {
  if (!s) return;
  s->vt->free(s);
  sl__free(s->name);
  sl__free(s);
}
