/* io/tfrecord.c: TFRecord framing over plain, GZIP or ZLIB files, with both masked CRC-32Cs checked.
 * CRC-32C comes from ISA-L (crc32_iscsi, SSE4.2/PCLMUL accelerated). A record's length is never trusted for an
 * allocation: uncompressed files bound it by the bytes left; compressed streams grow the buffer as data arrives. */
#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/outfile_int.h"
#include "io/io_int.h"

uint32_t sl_crc32c_extend(uint32_t crc, const void *data, size_t len) {
  /* ISA-L's crc32_iscsi takes and returns the raw (pre/post-inverted) register. */
  uint32_t c = ~crc;
  const unsigned char *p = data;
  while (len > 0) {
    int chunk = len > (1u << 30) ? (1 << 30) : (int)len;
    c = crc32_iscsi((unsigned char *)p, chunk, c);
    p += chunk;
    len -= (size_t)chunk;
  }
  return ~c;
}
uint32_t sl_crc32c(const void *data, size_t len) { return sl_crc32c_extend(0, data, len); }
uint32_t sl_crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

int sl_compression_parse(sl_compression *out, const char *name) {
  if (!name || !*name || !strcasecmp(name, "none")) *out = SL_COMPRESSION_NONE;
  else if (!strcasecmp(name, "gzip")) *out = SL_COMPRESSION_GZIP;
  else if (!strcasecmp(name, "zlib")) *out = SL_COMPRESSION_ZLIB;
  else return sl__err(SL_EINVAL, "unknown compression '%s' (expected NONE, GZIP or ZLIB)", name);
  return 0;
}

#define RBUF (256 * 1024)

struct sl_tfrecord_reader {
  sl__stream *st; /* a local file or a remote object (io/stream_int.h) */
  char *path;
  sl_compression comp;
  unsigned char *raw; /* file bytes */
  size_t raw_pos, raw_len;
  bool raw_eof;
  z_stream z;
  bool z_init, z_end;
  unsigned char *plain; /* decompressed bytes (compressed files only) */
  size_t plain_pos, plain_len;
  uint64_t file_size, disk_bytes, offset, index;
  bool broken;
};

static int fill_raw(sl_tfrecord_reader *r) {
  if (r->raw_pos < r->raw_len || r->raw_eof) return 0;
  size_t n;
  int rc = sl__stream_read_some(r->st, r->raw, RBUF, &n);
  if (rc) return rc;
  if (n == 0) r->raw_eof = true;
  r->raw_pos = 0;
  r->raw_len = (size_t)n;
  r->disk_bytes += (uint64_t)n;
  return 0;
}

/* Reads up to n decoded bytes into dst; *got tells how many (less only at end of stream). */
static int read_bytes(sl_tfrecord_reader *r, unsigned char *dst, size_t n, size_t *got) {
  *got = 0;
  while (*got < n) {
    if (r->comp == SL_COMPRESSION_NONE) {
      int rc = fill_raw(r);
      if (rc) return rc;
      if (r->raw_pos == r->raw_len) return 0;
      size_t k = r->raw_len - r->raw_pos;
      if (k > n - *got) k = n - *got;
      memcpy(dst + *got, r->raw + r->raw_pos, k);
      r->raw_pos += k;
      *got += k;
      continue;
    }
    if (r->plain_pos < r->plain_len) {
      size_t k = r->plain_len - r->plain_pos;
      if (k > n - *got) k = n - *got;
      memcpy(dst + *got, r->plain + r->plain_pos, k);
      r->plain_pos += k;
      *got += k;
      continue;
    }
    if (r->z_end) return 0;
    int rc = fill_raw(r);
    if (rc) return rc;
    r->z.next_in = r->raw + r->raw_pos;
    r->z.avail_in = (uInt)(r->raw_len - r->raw_pos);
    r->z.next_out = r->plain;
    r->z.avail_out = RBUF;
    int zr = inflate(&r->z, Z_NO_FLUSH);
    r->raw_pos = r->raw_len - r->z.avail_in;
    r->plain_pos = 0;
    r->plain_len = RBUF - r->z.avail_out;
    if (zr == Z_STREAM_END) {
      /* Concatenated gzip members (as written by several writers) continue the stream. */
      if (r->comp == SL_COMPRESSION_GZIP && (r->raw_pos < r->raw_len || (!r->raw_eof && !fill_raw(r) && r->raw_len > 0))) {
        inflateReset(&r->z);
      } else {
        r->z_end = true;
      }
    } else if (zr == Z_BUF_ERROR && r->raw_eof && r->plain_len == 0) {
      return sl__err(SL_ECORRUPT, "%s: compressed stream truncated", r->path);
    } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
      return sl__err(SL_ECORRUPT, "%s: %s stream is corrupt: %s", r->path,
                     r->comp == SL_COMPRESSION_GZIP ? "GZIP" : "ZLIB", r->z.msg ? r->z.msg : "inflate error");
    } else if (r->plain_len == 0 && r->raw_eof && r->z.avail_in == 0) {
      return sl__err(SL_ECORRUPT, "%s: compressed stream truncated", r->path);
    }
  }
  return 0;
}

int sl_tfrecord_reader_open(sl_tfrecord_reader **out, const char *path, sl_compression comp) {
  return sl__tfrecord_reader_open_ex(out, path, comp, NULL);
}

int sl__tfrecord_reader_open_ex(sl_tfrecord_reader **out, const char *path, sl_compression comp,
                                const sl__stream_opts *opts) {
  *out = NULL;
  sl_tfrecord_reader *r = sl__calloc(1, sizeof *r);
  if (!r) return sl__oom("a TFRecord reader");
  r->comp = comp;
  r->raw = sl__malloc(RBUF);
  if (!r->raw) goto oom;
  if (comp != SL_COMPRESSION_NONE) {
    r->plain = sl__malloc(RBUF);
    if (!r->plain) goto oom;
    if (inflateInit2(&r->z, comp == SL_COMPRESSION_GZIP ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK) goto oom;
    r->z_init = true;
  }
  int rc = sl__stream_open(&r->st, path, opts);
  if (rc) {
    sl_tfrecord_reader_free(r);
    return rc;
  }
  r->path = sl__strdup(sl__stream_name(r->st)); /* a URL without its credentials */
  if (!r->path) goto oom;
  r->file_size = sl__stream_size(r->st);
  *out = r;
  return 0;
oom:
  sl_tfrecord_reader_free(r);
  return sl__oom("a TFRecord reader");
}

static int corrupt(sl_tfrecord_reader *r, bool fatal, const char *what) {
  if (fatal) r->broken = true;
  return sl__err(SL_ECORRUPT, "%s: record %llu at byte %llu: %s", r->path, (unsigned long long)r->index,
                 (unsigned long long)r->offset, what);
}

uint64_t sl_tfrecord_reader_offset(const sl_tfrecord_reader *r) { return r->offset; }

int sl_tfrecord_reader_seek(sl_tfrecord_reader *r, uint64_t offset, uint64_t index) {
  if (r->comp == SL_COMPRESSION_NONE) {
    if (offset > r->file_size)
      return sl__err(SL_EINVAL, "%s: cannot resume at byte %llu: the file has %llu bytes", r->path,
                     (unsigned long long)offset, (unsigned long long)r->file_size);
    int rc = sl__stream_seek(r->st, offset);
    if (rc) return rc;
    r->raw_pos = r->raw_len = 0;
    r->raw_eof = false;
    r->offset = offset;
    r->index = index;
    r->broken = false;
    return 0;
  }
  while (r->offset < offset) { /* a compressed stream: read forward */
    sl_buf *b;
    size_t n;
    int rc = sl_tfrecord_reader_next(&b, &n, r);
    sl_buf_unref(b);
    if (rc == SL_END) break;
    if (rc && rc != SL_ECORRUPT) return rc;
  }
  if (r->offset != offset)
    return sl__err(SL_EINVAL, "%s: cannot resume at byte %llu of the uncompressed stream (the reader is at %llu)",
                   r->path, (unsigned long long)offset, (unsigned long long)r->offset);
  r->index = index;
  return 0;
}

int sl_tfrecord_reader_next(sl_buf **rec, size_t *len, sl_tfrecord_reader *r) {
  *rec = NULL;
  *len = 0;
  if (r->broken) return SL_END;
  unsigned char hdr[12];
  size_t got;
  int rc = read_bytes(r, hdr, 12, &got);
  if (rc) {
    r->broken = true;
    return sl__err_wrap(rc, "%s: record %llu", r->path, (unsigned long long)r->index);
  }
  if (got == 0) return SL_END;
  if (got < 12) return corrupt(r, true, "truncated header (file ends inside the length field)");
  uint64_t n;
  uint32_t lcrc;
  memcpy(&n, hdr, 8); /* little-endian on every platform we build for */
  memcpy(&lcrc, hdr + 8, 4);
  if (sl_crc32c_mask(sl_crc32c(hdr, 8)) != lcrc) return corrupt(r, true, "length CRC mismatch (corrupt framing)");
  if (r->comp == SL_COMPRESSION_NONE && r->file_size && n + 16 > r->file_size - r->offset) {
    char msg[160];
    snprintf(msg, sizeof msg, "truncated or corrupt: length %llu goes past the end of the file (%llu bytes left)", (unsigned long long)n,
             (unsigned long long)(r->file_size - r->offset - 12));
    return corrupt(r, true, msg);
  }
  if (n > (uint64_t)1 << 40) return corrupt(r, true, "implausible record length");
  /* Uncompressed: the length is bounded by the file. Compressed: grow as bytes arrive. */
  size_t cap = r->comp == SL_COMPRESSION_NONE ? (size_t)n : (n < (1u << 20) ? (size_t)n : (1u << 20));
  sl_buf *b = sl_buf_alloc(cap);
  if (!b) return sl__oom("a record");
  size_t have = 0;
  while (have < n) {
    if (have == cap) {
      size_t ncap = cap * 2 > n ? (size_t)n : cap * 2;
      sl_buf *nb = sl_buf_alloc(ncap);
      if (!nb) {
        sl_buf_unref(b);
        return sl__oom("a record");
      }
      memcpy(sl_buf_data(nb), sl_buf_data(b), have);
      sl_buf_unref(b);
      b = nb;
      cap = ncap;
    }
    rc = read_bytes(r, (unsigned char *)sl_buf_data(b) + have, cap - have, &got);
    if (rc) {
      sl_buf_unref(b);
      r->broken = true;
      return sl__err_wrap(rc, "%s: record %llu", r->path, (unsigned long long)r->index);
    }
    if (got == 0) {
      sl_buf_unref(b);
      return corrupt(r, true, "truncated data (file ends inside the record)");
    }
    have += got;
  }
  unsigned char ftr[4];
  rc = read_bytes(r, ftr, 4, &got);
  if (rc || got < 4) {
    sl_buf_unref(b);
    return rc ? rc : corrupt(r, true, "truncated data CRC");
  }
  uint32_t dcrc;
  memcpy(&dcrc, ftr, 4);
  uint64_t at = r->offset;
  r->offset += 16 + n;
  r->index++;
  if (sl_crc32c_mask(sl_crc32c(sl_buf_data(b), (size_t)n)) != dcrc) {
    sl_buf_unref(b);
    r->index--;
    r->offset = at;
    int e = corrupt(r, false, "data CRC mismatch");
    r->index++;
    r->offset = at + 16 + n;
    return e;
  }
  *rec = b;
  *len = (size_t)n;
  return 0;
}

uint64_t sl_tfrecord_reader_index(const sl_tfrecord_reader *r) { return r->index; }
uint64_t sl_tfrecord_reader_disk_bytes(const sl_tfrecord_reader *r) { return r->disk_bytes; }
const sl__stream *sl__tfrecord_reader_stream(const sl_tfrecord_reader *r) { return r->st; }

void sl_tfrecord_reader_free(sl_tfrecord_reader *r) {
  if (!r) return;
  sl__stream_free(r->st);
  if (r->z_init) inflateEnd(&r->z);
  sl__free(r->raw);
  sl__free(r->plain);
  sl__free(r->path);
  sl__free(r);
}

/* ---- writer ---- */
struct sl_tfrecord_writer {
  FILE *f;
  bool borrowed;   /* f is the caller's: close flushes it and leaves it open */
  sl__outfile out; /* else: the file in the making (core/outfile_int.h), f its stream */
  char *path;
  sl_compression comp;
  z_stream z;
  bool z_init;
  unsigned char *zbuf;
  int err;
};

static void writer_free(sl_tfrecord_writer *w) {
  if (w->z_init) deflateEnd(&w->z);
  sl__free(w->zbuf);
  sl__free(w->path);
  sl__free(w);
}

/* A writer without its stream yet; `path` names it in messages. */
static int writer_new(sl_tfrecord_writer **out, const char *path, sl_compression comp) {
  *out = NULL;
  sl_tfrecord_writer *w = sl__calloc(1, sizeof *w);
  if (!w) return sl__oom("a TFRecord writer");
  w->comp = comp;
  w->path = sl__strdup(path);
  if (!w->path) goto oom;
  if (comp != SL_COMPRESSION_NONE) {
    w->zbuf = sl__malloc(RBUF);
    if (!w->zbuf) goto oom;
    if (deflateInit2(&w->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, comp == SL_COMPRESSION_GZIP ? 16 + MAX_WBITS : MAX_WBITS,
                     8, Z_DEFAULT_STRATEGY) != Z_OK)
      goto oom;
    w->z_init = true;
  }
  *out = w;
  return 0;
oom:
  writer_free(w);
  return sl__oom("a TFRecord writer");
}

int sl_tfrecord_writer_open(sl_tfrecord_writer **out, const char *path, sl_compression comp) {
  sl_tfrecord_writer *w;
  int rc = writer_new(&w, path, comp);
  if (rc) return rc;
  /* beside the name and renamed at close: never through a planted link, and no partial file under the name */
  if ((rc = sl__outfile_open(&w->out, path, 0))) { /* a writer of many shards: no sweep per file */
    writer_free(w);
    return rc;
  }
  w->f = w->out.f;
  *out = w;
  return 0;
}

int sl__tfrecord_writer_on(sl_tfrecord_writer **out, FILE *f, const char *name, sl_compression comp) {
  int rc = writer_new(out, name, comp);
  if (rc) return rc;
  (*out)->f = f;
  (*out)->borrowed = true;
  return 0;
}

static int wr(sl_tfrecord_writer *w, const void *data, size_t n, int flush) {
  if (w->err) return w->err;
  if (w->comp == SL_COMPRESSION_NONE) {
    if (n && fwrite(data, 1, n, w->f) != n) return w->err = sl__err(SL_EIO, "%s: write error: %s", w->path, strerror(errno));
    return 0;
  }
  w->z.next_in = (unsigned char *)data;
  w->z.avail_in = (uInt)n;
  do {
    w->z.next_out = w->zbuf;
    w->z.avail_out = RBUF;
    int zr = deflate(&w->z, flush);
    if (zr == Z_STREAM_ERROR) return w->err = sl__err(SL_EIO, "%s: compression error", w->path);
    size_t k = RBUF - w->z.avail_out;
    if (k && fwrite(w->zbuf, 1, k, w->f) != k)
      return w->err = sl__err(SL_EIO, "%s: write error: %s", w->path, strerror(errno));
  } while (w->z.avail_out == 0 || (flush == Z_FINISH && w->z.avail_in > 0));
  return 0;
}

int sl_tfrecord_write(sl_tfrecord_writer *w, const void *data, size_t len) {
  unsigned char hdr[12], ftr[4];
  uint64_t n = len;
  memcpy(hdr, &n, 8);
  uint32_t c = sl_crc32c_mask(sl_crc32c(hdr, 8));
  memcpy(hdr + 8, &c, 4);
  uint32_t d = sl_crc32c_mask(sl_crc32c(data, len));
  memcpy(ftr, &d, 4);
  int rc;
  if ((rc = wr(w, hdr, 12, Z_NO_FLUSH)) || (rc = wr(w, data, len, Z_NO_FLUSH)) || (rc = wr(w, ftr, 4, Z_NO_FLUSH)))
    return rc;
  return 0;
}

int sl_tfrecord_writer_close(sl_tfrecord_writer *w) {
  if (!w) return 0;
  int rc = 0;
  if (w->z_init) {
    rc = wr(w, NULL, 0, Z_FINISH);
    deflateEnd(&w->z);
  }
  if (w->err && !rc) rc = w->err;
  if (w->borrowed) {
    if (fflush(w->f) != 0 && !rc) rc = sl__err(SL_EIO, "%s: close error: %s", w->path, strerror(errno));
  } else if (rc) {
    sl__outfile_abort(&w->out); /* the error already said what failed; nothing half-written stays */
  } else {
    rc = sl__outfile_commit(&w->out);
  }
  w->z_init = false; /* ended above */
  writer_free(w);
  return rc;
}
