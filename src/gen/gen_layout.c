/* gen/gen_layout.c: writes generated records in their layout: TFRecord, text or CSV shards, WebDataset tar shards
 * (<index>.jpg + <index>.cls), or an image folder (<label>/<index>.jpg); record i is the same image and label in
 * every layout, so that the formats can be compared on identical data. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "gen/gen_int.h"
#include "io/io_int.h"

static int digits(int64_t v) {
  int d = 1;
  while (v >= 10) v /= 10, d++;
  return d;
}

int sl__gen_sink_open(sl__gen_sink *s, const sl_gen_opts *o) {
  memset(s, 0, sizeof *s);
  s->o = o;
  s->shard = -1;
  bool images = o->kind == SL_GEN_IMAGENET || o->kind == SL_GEN_SSD;
  s->ext = !images ? (o->kind == SL_GEN_TEXT ? "txt" : "csv") : o->format == SL_GEN_TAR ? "tar" : "tfrecord";
  s->iwidth = digits(o->n - 1);
  s->cwidth = digits(o->classes - 1);
  if (images && !(s->seen = sl__calloc((size_t)o->classes, 1))) return sl__oom("generator's class table");
  return 0;
}

/* Ends the shard being written: its writer, then the rename into place. */
static int end_file(sl__gen_sink *s) {
  int rc = 0;
  if (s->tw) rc = sl_tfrecord_writer_close(s->tw);
  if (s->tar) {
    int c = sl__tarw_close(s->tar);
    if (!rc) rc = c;
  }
  s->tw = NULL;
  s->tar = NULL;
  if (s->of.f && !rc) rc = sl__outfile_commit(&s->of);
  sl__outfile_abort(&s->of); /* after a failed close: nothing half-written stays */
  return rc;
}

/* An image folder's file: out_dir/<label>/<index>.jpg, the class folder made (and swept of dead writers'
 * temporaries) on its first image. */
static int put_folder_file(sl__gen_sink *s, int64_t i, const sl__gen_rec *r) {
  const sl_gen_opts *o = s->o;
  s->path.len = 0;
  int rc = sl__str_printf(&s->path, "%s/%0*lld", o->out_dir, s->cwidth, (long long)r->label);
  if (rc) return rc;
  if (s->seen[r->label] < 2) {
    if (mkdir(s->path.s, 0777) && errno != EEXIST)
      return sl__err(SL_EIO, "cannot create '%s': %s", s->path.s, strerror(errno));
    static const char *const ours[] = {"[0-9]*.jpg", NULL}; /* the folder's images, nothing else */
    sl__outfile_sweep_dir(s->path.s, ours);
    s->seen[r->label] = 2;
  }
  if ((rc = sl__str_printf(&s->path, "/%0*lld.jpg", s->iwidth, (long long)i)) ||
      (rc = sl__outfile_open(&s->of, s->path.s, 0)))
    return rc;
  size_t len = sl_buf_size(r->jpeg);
  if (fwrite(sl_buf_data(r->jpeg), 1, len, s->of.f) != len) {
    rc = sl__err(SL_EIO, "write error on '%s': %s", s->path.s, strerror(errno));
    sl__outfile_abort(&s->of);
    return rc;
  }
  s->bytes += len;
  s->files++;
  return sl__outfile_commit(&s->of);
}

/* A WebDataset sample: <index>.jpg and <index>.cls (the label in decimal, as webdataset's writers put it). */
static int put_tar_sample(sl__gen_sink *s, int64_t i, const sl__gen_rec *r) {
  char cls[32];
  int n = snprintf(cls, sizeof cls, "%lld", (long long)r->label);
  s->member.len = 0;
  int rc = sl__str_printf(&s->member, "%0*lld.jpg", s->iwidth, (long long)i);
  if (!rc) rc = sl__tarw_add(s->tar, s->member.s, sl_buf_data(r->jpeg), sl_buf_size(r->jpeg));
  s->member.len -= 3;
  if (!rc) rc = sl__str_printf(&s->member, "cls");
  if (!rc) rc = sl__tarw_add(s->tar, s->member.s, cls, (size_t)n);
  s->bytes += sl_buf_size(r->jpeg) + (size_t)n + 1024; /* two headers of 512 */
  return rc;
}

int sl__gen_sink_put(sl__gen_sink *s, int64_t i, const sl__gen_rec *r) {
  const sl_gen_opts *o = s->o;
  int rc = 0;
  if (s->seen && !s->seen[r->label]) {
    s->seen[r->label] = 1;
    s->classes_present++;
  }
  if (s->seen && o->format == SL_GEN_FOLDER) return put_folder_file(s, i, r);
  int shard = (int)(i * o->shards / o->n);
  if (shard != s->shard) {
    if ((rc = end_file(s)) != 0) return rc;
    s->shard = shard;
    s->path.len = 0;
    if ((rc = sl__str_printf(&s->path, "%s/train-%05d-of-%05d.%s", o->out_dir, shard, o->shards, s->ext)) ||
        (rc = sl__outfile_open(&s->of, s->path.s, 0)))
      return rc;
    if (s->seen && o->format == SL_GEN_TAR) rc = sl__tarw_on(&s->tar, s->of.f, s->path.s);
    else if (s->seen) rc = sl__tfrecord_writer_on(&s->tw, s->of.f, s->path.s, SL_COMPRESSION_NONE);
    if (rc) return rc;
    s->files++;
  }
  if (s->tar) return put_tar_sample(s, i, r);
  if (s->tw) {
    s->bytes += r->data.len + 16; /* the record and its framing */
    return sl_tfrecord_write(s->tw, r->data.s, r->data.len);
  }
  s->bytes += r->data.len;
  if (fwrite(r->data.s, 1, r->data.len, s->of.f) != r->data.len)
    return sl__err(SL_EIO, "write error on '%s': %s", s->path.s, strerror(errno));
  return 0;
}

int sl__gen_sink_close(sl__gen_sink *s, bool keep) {
  int rc = 0;
  if (keep) rc = end_file(s);
  if (s->tw) sl_tfrecord_writer_close(s->tw); /* not kept: the stream goes with the temporary below */
  sl__tarw_close(s->tar);
  sl__outfile_abort(&s->of);
  sl__str_dispose(&s->path);
  sl__str_dispose(&s->member);
  sl__free(s->seen);
  s->seen = NULL;
  s->tw = NULL;
  s->tar = NULL;
  return rc;
}
