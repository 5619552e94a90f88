/* ops/op_tar.c: `tar`, the reader of WebDataset shards (plain or compressed tar, through libarchive) named by its
 * input's `filename`: consecutive members whose paths share the part before the basename's first dot form one
 * sample, one bytes component per (lower-cased) extension ("jpg", "cls", "seg.png") plus `__key__` and `__url__`
 * (the shard), as webdataset's group_by_keys makes them. Errors name the shard and the member. A gzip shard is
 * inflated by zlib, not by libarchive's gzip filter, which checks neither a member's CRC-32 nor its length (and the
 * tar reader stops at the end-of-archive blocks, before the trailer): every member's CRC and length are checked,
 * to the end of the file. */
#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "io/stream_int.h"
#include "ops/op_int.h"

enum { MAX_NAMES = 256, MAX_KEY = 4096, RBUF = 1 << 18 };

typedef struct {
  const char *component;
  bool skip_corrupt, skip_unreadable;
  sl__stream_opts net; /* a remote shard's read-ahead (readahead) */
  int64_t max_member;
  /* Component names made from extensions: elements borrow names, so they live as long as the op (interned). */
  pthread_mutex_t mu;
  char *names[MAX_NAMES];
  int nnames;
} tar_cfg;

typedef struct {
  const char *name; /* interned */
  sl_buf *buf;
  size_t len;
} tar_member;

/* A gzip shard's bytes inflated for libarchive: concatenated members, each one's CRC-32 and length checked by zlib;
 * zero bytes after a member are padding (as Python's gzip reads them). Its compressed bytes come from the shard's
 * stream through the tar reader's buffer. */
typedef struct {
  z_stream z;
  bool member_end, eof;
  char err[1100];
  unsigned char out[1 << 16];
} gz_src;

static void gz_free(gz_src *g) {
  if (!g) return;
  inflateEnd(&g->z);
  sl__free(g);
}

typedef struct {
  sl__it it;
  struct archive *a;
  sl__stream *st;      /* the shard, a local file or a remote object, that libarchive reads through read_cb */
  unsigned char *rbuf; /* read_cb's buffer (gz_pull's input) */
  size_t first;        /* bytes of rbuf read to tell gzip from the rest, not yet handed to libarchive */
  gz_src *gz;          /* a gzip shard's inflater (NULL: libarchive reads the stream itself) */
  int io_rc;           /* the stream's error, when reading it failed (not the tar: reported as such) */
  char io_msg[1024];
  char path[4096];
  int64_t disk_seen;
  sl__net_stats net_seen;
  char last[MAX_KEY + 256]; /* the last member's path (the pending one's, when pending) */
  /* the member whose header was read: its key's length in `last`, size and lower-cased extension */
  bool pending;
  size_t pkl;
  int64_t psize;
  char pext[256];
  /* the sample being gathered */
  char key[MAX_KEY];
  tar_member m[SL_MAX_COMPONENTS];
  int nm;
  /* For saved states: the shard's element's ref, and the samples of the shard handed out so far (a sample's
   * position: a shard is a stream, so a restore reads its way back to it, skipping members' data). */
  sl_eref in_ref;
  uint64_t nsample;
} tar_it;

static int tar_parse(sl__op *op, json_t *o) {
  sl_args k = sl__op_knobs(op, o);
  tar_cfg *c = sl__calloc(1, sizeof *c);
  if (!c) return sl__oom("tar");
  pthread_mutex_init(&c->mu, NULL);
  op->impl = c;
  const char *oc;
  int rc;
  const char *oe;
  if ((rc = sl__get_str(&c->component, &k, "component")) || (rc = sl__get_str(&oc, &k, "on_corrupt")) ||
      (rc = sl__get_str(&oe, &k, "on_error")) || (rc = sl__get_int(&c->max_member, &k, "max_member_bytes")) ||
      (rc = sl__op_net_knobs(op, &c->net, &k)))
    return rc;
  c->skip_corrupt = !strcmp(oc, "skip");
  c->skip_unreadable = !strcmp(oe, "skip");
  op->cardinality = -1;
  return 0;
}

static void tar_free_op(sl__op *op) {
  tar_cfg *c = op->impl;
  if (!c) return;
  for (int i = 0; i < c->nnames; i++) sl__free(c->names[i]);
  pthread_mutex_destroy(&c->mu);
  sl__free(c);
}

/* The op's lasting copy of component name `s` (n bytes) in *out, or an error naming the shard and member. */
static int intern(const char **out, const sl__op *op, const char *s, size_t n, const char *shard, const char *member) {
  tar_cfg *c = op->impl;
  const char *r = NULL;
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < c->nnames && !r; i++)
    if (strlen(c->names[i]) == n && !memcmp(c->names[i], s, n)) r = c->names[i];
  if (!r && c->nnames < MAX_NAMES && (c->names[c->nnames] = sl__strndup(s, n))) r = c->names[c->nnames++];
  bool full = c->nnames >= MAX_NAMES;
  pthread_mutex_unlock(&c->mu);
  *out = r;
  if (!r && full)
    return sl__op_err(op, SL_EINVAL, "shard '%s': member '%s': more than %d distinct extensions in the shards", shard,
                      member, MAX_NAMES);
  return r ? 0 : sl__oom("a component name");
}

static void drop_sample(tar_it *t) {
  for (int i = 0; i < t->nm; i++) sl_buf_unref(t->m[i].buf);
  t->nm = 0;
  t->key[0] = 0;
}

static void close_shard(tar_it *t) {
  if (t->a) archive_read_free(t->a);
  t->a = NULL;
  sl__stream_free(t->st);
  t->st = NULL;
  gz_free(t->gz);
  t->gz = NULL;
  t->first = 0;
  t->pending = false;
}

/* libarchive's view of the stream: a failure is kept (io_rc) so that it is reported as the I/O error it is. */
/* The stream's next bytes into t->rbuf: 0, or its error kept in io_rc/io_msg. */
static int raw_read(tar_it *t, size_t *got) {
  int rc = sl__stream_read_some(t->st, t->rbuf, RBUF, got);
  if (rc) {
    t->io_rc = rc;
    snprintf(t->io_msg, sizeof t->io_msg, "%s", sl_error_last());
  }
  return rc;
}

static la_ssize_t read_cb(struct archive *a, void *ud, const void **buf) {
  tar_it *t = ud;
  size_t got = t->first;
  *buf = t->rbuf;
  if (t->first) { /* the bytes read to tell the format */
    t->first = 0;
    return (la_ssize_t)got;
  }
  if (raw_read(t, &got)) {
    archive_set_error(a, EIO, "%s", t->io_msg);
    return -1;
  }
  return (la_ssize_t)got;
}

/* The next inflated bytes into gz->out: their count, 0 at the end of the last member, -1 (gz->err, or io_rc for the
 * stream's own failure) on a corrupt or truncated gzip stream or a read error. */
static ssize_t gz_pull(tar_it *t) {
  gz_src *g = t->gz;
  g->z.next_out = g->out;
  g->z.avail_out = sizeof g->out;
  while (g->z.avail_out == sizeof g->out) {
    if (!g->z.avail_in && !g->eof) {
      size_t n;
      if (raw_read(t, &n)) {
        snprintf(g->err, sizeof g->err, "%s", t->io_msg);
        return -1;
      }
      g->eof = n == 0;
      g->z.next_in = t->rbuf;
      g->z.avail_in = (uInt)n;
    }
    if (g->member_end) {
      while (g->z.avail_in && !*g->z.next_in) g->z.next_in++, g->z.avail_in--;
      if (!g->z.avail_in) {
        if (g->eof) break;
        continue;
      }
      inflateReset(&g->z); /* another member */
      g->member_end = false;
    }
    if (!g->z.avail_in && g->eof) {
      snprintf(g->err, sizeof g->err, "gzip: truncated (the file ends inside a gzip member)");
      return -1;
    }
    int zr = inflate(&g->z, Z_NO_FLUSH);
    if (zr == Z_STREAM_END) g->member_end = true;
    else if (zr != Z_OK && zr != Z_BUF_ERROR) {
      /* "incorrect data check": the CRC-32; "incorrect length check": ISIZE */
      snprintf(g->err, sizeof g->err, "gzip: %s", g->z.msg ? g->z.msg : "corrupt deflate data");
      return -1;
    }
  }
  return (ssize_t)(sizeof g->out - g->z.avail_out);
}

static la_ssize_t gz_read(struct archive *a, void *ud, const void **buf) {
  tar_it *t = ud;
  ssize_t n = gz_pull(t);
  *buf = t->gz->out;
  if (n < 0) archive_set_error(a, t->io_rc ? EIO : EILSEQ, "%s", t->gz->err);
  return n < 0 ? ARCHIVE_FATAL : n;
}
/* Member data skipped by moving the stream (a remote one then fetches from there, not what lies between). */
static la_int64_t skip_cb(struct archive *a, void *ud, la_int64_t n) {
  (void)a;
  tar_it *t = ud;
  uint64_t at = sl__stream_tell(t->st), size = sl__stream_size(t->st);
  uint64_t to = n > 0 && (uint64_t)n < size - at ? at + (uint64_t)n : size;
  if (n <= 0 || sl__stream_seek(t->st, to)) return 0;
  return (la_int64_t)(to - at);
}

static void account(tar_it *t) {
  if (!t->a || !t->st) return; /* closed (a skipped rest): counted before */
  /* bytes read from the file, before decompression; a remote stream's (its read-ahead included) are net_bytes */
  int64_t d = (int64_t)sl__stream_source_bytes(t->st);
  if (d > t->disk_seen && !sl__stream_remote(t->st)) sl__stat_add(&t->it.op->st.disk_bytes, (uint64_t)(d - t->disk_seen));
  t->disk_seen = d;
  sl__op_net_account(t->it.op, t->st, &t->net_seen);
}

static int corrupt(tar_it *t, const char *where, const char *what);
static int open_path(tar_it *t);

/* A shard that cannot be opened or read (missing, unreachable after the retries): the error, or (on_error "skip")
 * the rest of the shard dropped with the sample being gathered, and counted. Returns 2 when skipped. */
static int unreadable(tar_it *t, int rc) {
  const tar_cfg *c = t->it.op->impl;
  if (!c->skip_unreadable) {
    rc = t->io_rc ? sl__op_err(t->it.op, rc, "%s", t->io_msg) : sl__op_wrap(t->it.op, rc);
    close_shard(t);
    return rc;
  }
  sl__op_skip_note(t->it.op, t->io_rc ? t->io_msg : sl_error_last(), NULL, 0);
  sl__stat_add(&t->it.op->st.skipped, 1);
  drop_sample(t);
  account(t);
  close_shard(t);
  return 2;
}

/* Opens the shard the next input element names. 0, 2 when it was skipped as corrupt (on_corrupt), or an error. */
static int open_shard(tar_it *t) {
  t->last[0] = 0;
  const tar_cfg *c = t->it.op->impl;
  sl_elem in;
  sl_elem_init(&in);
  int rc = sl__it_pull(&t->it, &in);
  if (rc) return rc;
  sl_comp *f = sl_elem_get(&in, c->component);
  if (!f || f->dtype != SL_BYTES || f->rank != 0 || f->size >= sizeof t->path) {
    sl_elem_clear(&in);
    return sl__op_err(t->it.op, SL_EINVAL, "input element has no byte-string component '%s' (a shard's name)",
                      c->component);
  }
  memcpy(t->path, sl_comp_data(f), f->size);
  t->path[f->size] = 0;
  t->in_ref = in.ref;
  t->in_ref.members = NULL;
  sl_elem_clear(&in);
  return open_path(t);
}

/* Opens the shard at t->path (t->in_ref and the input already taken). */
static int open_path(tar_it *t) {
  int rc;
  t->nsample = 0;
  if (!(t->a = archive_read_new())) return sl__oom("a tar reader");
  archive_read_support_format_tar(t->a);
  archive_read_support_filter_zstd(t->a);
  archive_read_support_filter_xz(t->a);
  t->disk_seen = 0;
  t->net_seen = (sl__net_stats){0};
  t->io_rc = 0;
  if (!t->rbuf && !(t->rbuf = sl__malloc(RBUF))) return sl__oom("a tar reader");
  /* a local shard must be a regular file (libarchive's open of a FIFO would wait for a writer) */
  sl__stream_opts so = sl__op_stream_opts(t->it.op, ((const tar_cfg *)t->it.op->impl)->net);
  if ((rc = sl__stream_open(&t->st, t->path, &so))) return unreadable(t, rc);
  sl__op_net_opened(t->it.op, t->st);
  /* Its first bytes tell a gzip shard, which zlib inflates (libarchive's gzip filter checks no CRC). */
  size_t got = 0;
  t->first = 0;
  do {
    if ((rc = sl__stream_read_some(t->st, t->rbuf + t->first, RBUF - t->first, &got))) {
      t->io_rc = rc;
      snprintf(t->io_msg, sizeof t->io_msg, "%s", sl_error_last());
      return unreadable(t, rc);
    }
    t->first += got;
  } while (got && t->first < 2);
  archive_read_set_callback_data(t->a, t);
  if (t->first >= 2 && t->rbuf[0] == 0x1f && t->rbuf[1] == 0x8b) {
    if (!(t->gz = sl__calloc(1, sizeof *t->gz))) return sl__oom("a gzip reader");
    if (inflateInit2(&t->gz->z, 16 + MAX_WBITS) != Z_OK) {
      sl__free(t->gz);
      t->gz = NULL;
      return sl__oom("a gzip reader");
    }
    t->gz->z.next_in = t->rbuf;
    t->gz->z.avail_in = (uInt)t->first;
    t->first = 0;
    archive_read_set_read_callback(t->a, gz_read);
  } else {
    archive_read_set_read_callback(t->a, read_cb);
    archive_read_set_skip_callback(t->a, skip_cb);
  }
  if (archive_read_open1(t->a) != ARCHIVE_OK) {
    /* libarchive reads the first block to tell the format: not a tar (its file-format errno, EILSEQ, or its
     * "misc" -1) is a corrupt shard, a system errno a file that failed */
    int e = archive_errno(t->a);
    if (t->io_rc) return unreadable(t, t->io_rc);
    if (e == EILSEQ || e <= 0)
      return corrupt(t, "the first header", archive_error_string(t->a)) ? SL_ECORRUPT : 2;
    rc = sl__op_err(t->it.op, e == ENOENT ? SL_ENOTFOUND : SL_EIO, "shard '%s': %s", t->path,
                    archive_error_string(t->a));
    close_shard(t);
    return rc;
  }
  return 0;
}

/* The sample gathered so far into out (its buffers move there). */
static int emit(tar_it *t, sl_elem *out) {
  int rc = 0;
  sl__ref_set(out, t->it.op, &t->in_ref, t->nsample++, 0);
  for (int i = 0; i < t->nm && !rc; i++) rc = sl_elem_set_bytes(out, t->m[i].name, t->m[i].buf, 0, NULL, t->m[i].len);
  if (!rc) rc = sl_elem_set_bytes(out, "__key__", NULL, 0, t->key, strlen(t->key));
  if (!rc) rc = sl_elem_set_bytes(out, "__url__", NULL, 0, t->path, strlen(t->path));
  drop_sample(t);
  return rc;
}

/* A corrupt shard: an error naming it and the member, or (on_corrupt "skip") the rest of the shard dropped, the
 * sample being gathered with it, and counted. Returns 0 when skipped. */
static int corrupt(tar_it *t, const char *where, const char *what) {
  const tar_cfg *c = t->it.op->impl;
  if (t->io_rc) return unreadable(t, t->io_rc) == 2 ? 0 : t->io_rc; /* the stream failed, not the tar */
  if (!c->skip_corrupt) return sl__op_err(t->it.op, SL_ECORRUPT, "shard '%s': %s: %s", t->path, where, what);
  char msg[sizeof t->path + MAX_KEY + 600];
  snprintf(msg, sizeof msg, "%s (tar): shard '%s': %s: %s (the rest of the shard skipped)", t->it.op->path, t->path,
           where, what);
  sl__op_skip_note(t->it.op, msg, NULL, 0);
  sl__stat_add(&t->it.op->st.skipped, 1);
  drop_sample(t);
  account(t);
  close_shard(t);
  return 0;
}

/* Reads the current member's data (size bytes) into a new buffer. */
static int read_member(tar_it *t, int64_t size, const char *name, sl_buf **out) {
  *out = sl_buf_alloc(size ? (size_t)size : 1);
  if (!*out) return sl__oom("a tar member");
  uint8_t *d = sl_buf_data(*out);
  int64_t got = 0;
  while (got < size) {
    la_ssize_t r = archive_read_data(t->a, d + got, (size_t)(size - got));
    if (r <= 0) {
      sl_buf_unref(*out);
      *out = NULL;
      char where[MAX_KEY + 300];
      snprintf(where, sizeof where, "member '%s'", name);
      return corrupt(t, where, r < 0 ? archive_error_string(t->a) : "truncated (the shard ends inside it)") ? -1 : 1;
    }
    got += r;
  }
  return 0;
}

/* Reads the next header that names a sample's member into t's pending member (t->last, the key's length, the
 * extension, the size). 1: one is pending; 0: the shard ended or was skipped (closed); < 0: an error. */
static int next_member(tar_it *t) {
  const tar_cfg *c = t->it.op->impl;
  for (;;) {
    struct archive_entry *en;
    int r = archive_read_next_header(t->a, &en);
    account(t);
    if (r == ARCHIVE_EOF && t->gz) { /* the tar's end: the gzip stream is read to its end, its trailers checked */
      ssize_t n;
      while ((n = gz_pull(t)) > 0) {
      }
      account(t);
      if (n < 0) return corrupt(t, "the gzip stream after the tar's end", t->gz->err) ? SL_ECORRUPT : 0;
    }
    if (r == ARCHIVE_EOF) return 0;
    const char *name = r == ARCHIVE_FATAL ? NULL : archive_entry_pathname(en);
    if (r < ARCHIVE_WARN || !name) {
      char where[MAX_KEY + 300];
      if (t->last[0]) snprintf(where, sizeof where, "the header after member '%s'", t->last);
      else snprintf(where, sizeof where, "the first header");
      return corrupt(t, where, archive_error_string(t->a) ? archive_error_string(t->a) : "unreadable header");
    }
    snprintf(t->last, sizeof t->last, "%s", name);
    if (archive_entry_filetype(en) != AE_IFREG) continue; /* directories, links */
    /* webdataset's base_plus_ext (a regex: the key is an optional "dirs/" then dotless text, then a dot, then the
     * extension without a slash): key = dirname + basename up to its first dot, extension = the rest; a basename without a dot is no member of a sample; top-level __x__ names are
     * metadata. A basename starting with a dot takes the directory (with its slash) as key when the last
     * directory is dotless ("y/.a.jpg": key "y/", extension "a.jpg"), else is none. (An empty extension, "a.",
     * which webdataset keeps as "", is skipped here: no component may be named "".) */
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strchr(base, '.');
    size_t bl = strlen(base);
    if (!dot || dot[1] == 0 || (base == name && bl >= 4 && !strncmp(base, "__", 2) && !strcmp(base + bl - 2, "__")))
      continue;
    if (dot == base) {
      if (base == name) continue;
      const char *d = base - 1; /* the last slash; the last directory runs back to the slash before it */
      while (d > name && d[-1] != '/' && d[-1] != '.') d--;
      if (d > name && d[-1] == '.') continue;
    }
    t->pkl = (size_t)(dot - name);
    if (t->pkl >= MAX_KEY)
      return sl__op_err(t->it.op, SL_EINVAL, "shard '%s': member '%.200s...': key longer than %d bytes", t->path,
                        name, MAX_KEY - 1);
    t->psize = archive_entry_size(en);
    if (t->psize < 0 || t->psize > c->max_member)
      return sl__op_err(t->it.op, SL_EINVAL, "shard '%s': member '%s': %lld bytes, more than max_member_bytes %lld",
                        t->path, name, (long long)t->psize, (long long)c->max_member);
    size_t el = strlen(dot + 1);
    if (el >= sizeof t->pext)
      return sl__op_err(t->it.op, SL_EINVAL, "shard '%s': member '%s': extension longer than %zu bytes", t->path,
                        name, sizeof t->pext - 1);
    for (size_t i = 0; i <= el; i++) t->pext[i] = (char)tolower((unsigned char)dot[1 + i]);
    return 1;
  }
}

/* Adds the pending member (its data read now) to the sample. 0, 1 when the shard was skipped, or an error. */
static int take_member(tar_it *t) {
  t->pending = false;
  sl_buf *b;
  int rc = read_member(t, t->psize, t->last, &b);
  account(t);
  if (rc < 0) return t->io_rc ? t->io_rc : SL_ECORRUPT;
  if (rc > 0) return 1;
  const char *cname;
  if ((rc = intern(&cname, t->it.op, t->pext, strlen(t->pext), t->path, t->last))) {
    sl_buf_unref(b);
    return rc;
  }
  for (int i = 0; i < t->nm; i++)
    if (t->m[i].name == cname) {
      sl_buf_unref(b);
      return sl__op_err(t->it.op, SL_EINVAL, "shard '%s': member '%s': a second '%s' in sample '%s'", t->path,
                        t->last, cname, t->key);
    }
  if (t->nm + 2 >= SL_MAX_COMPONENTS) {
    sl_buf_unref(b);
    return sl__op_err(t->it.op, SL_EINVAL, "shard '%s': member '%s': sample '%s' has more than %d members", t->path,
                      t->last, t->key, SL_MAX_COMPONENTS - 2);
  }
  if (!t->nm) {
    memcpy(t->key, t->last, t->pkl);
    t->key[t->pkl] = 0;
  }
  t->m[t->nm++] = (tar_member){cname, b, (size_t)t->psize};
  return 0;
}

static int tar_next(sl__it *it, sl_elem *out) {
  tar_it *t = (tar_it *)it;
  for (;;) {
    if (!t->a) {
      int rc = open_shard(t);
      if (rc == 2) continue;
      if (rc) return rc;
    }
    int rc = t->pending ? 1 : next_member(t);
    if (rc < 0) return rc;
    if (rc == 0) { /* the shard ended (or its rest was skipped): its last sample goes out */
      close_shard(t);
      if (t->nm) return emit(t, out);
      continue;
    }
    /* A member of another key ends the sample gathered so far: it goes out, and the member waits (its data is
     * read on the next call, so that a corrupt member does not take the finished sample with it). */
    if (t->nm && !(strlen(t->key) == t->pkl && !memcmp(t->key, t->last, t->pkl))) {
      t->pending = true;
      return emit(t, out);
    }
    rc = take_member(t);
    if (rc < 0) return rc;
  }
}

static void tar_free(sl__it *it) {
  tar_it *t = (tar_it *)it;
  drop_sample(t);
  close_shard(t);
  sl__free(t->rbuf);
  sl__free(t);
}
static const sl__it_vt TAR_IT = {tar_next, tar_free};

/* Reads the open shard forward past its first k samples (their members' data skipped, not read). */
static int tar_skip_to(tar_it *t, uint64_t k) {
  while (t->nsample < k) {
    int rc = t->pending ? 1 : next_member(t);
    if (rc < 0) return rc;
    if (rc == 0) break;
    bool same = t->nm && strlen(t->key) == t->pkl && !memcmp(t->key, t->last, t->pkl);
    if (t->nm && !same) { /* a sample ends: counted, not made */
      drop_sample(t);
      t->nsample++;
      t->pending = true;
      continue;
    }
    t->pending = false;
    if (!t->nm) {
      memcpy(t->key, t->last, t->pkl);
      t->key[t->pkl] = 0;
    }
    t->nm = 1; /* a member of the current key: its data is not needed */
    t->m[0] = (tar_member){0};
    archive_read_data_skip(t->a);
  }
  if (t->nsample != k)
    return sl__op_err(t->it.op, SL_ECORRUPT, "shard '%s': no sample %llu to resume at (it has %llu)", t->path,
                      (unsigned long long)k, (unsigned long long)t->nsample);
  return 0;
}
/* Its part: the shard being read ("" when none), its element's ref, and the samples of it handed out. */
static int tar_save(sl__it *it, sl__sw *w) {
  tar_it *t = (tar_it *)it;
  sl__sw_str(w, t->a ? t->path : "");
  if (!t->a) return 0;
  sl__sw_u64(w, t->in_ref.op);
  sl__sw_u64(w, t->in_ref.pos);
  sl__sw_u64(w, t->nsample);
  return 0;
}
static int tar_load(sl__it *it, sl__sr *r) {
  tar_it *t = (tar_it *)it;
  uint64_t op, up, k;
  int rc = sl__sr_str(r, t->path, sizeof t->path, "a tar op's shard");
  if (rc || !t->path[0]) return rc;
  if ((rc = sl__sr_u64(r, &op, "a tar op's shard ref")) || (rc = sl__sr_u64(r, &up, "a tar op's shard ref")) ||
      (rc = sl__sr_u64(r, &k, "a tar op's sample")))
    return rc;
  t->in_ref = (sl_eref){.op = (uint16_t)op, .pos = up};
  if ((rc = open_path(t))) return rc == 2 ? sl__op_err(it->op, SL_ECORRUPT, "shard '%s' cannot be read", t->path) : rc;
  return tar_skip_to(t, k);
}
static int tar_remake(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  const tar_cfg *c = op->impl;
  sl_elem in;
  sl_elem_init(&in);
  int rc = sl__remake_input(op, run, r->up_op, r->up, &in);
  sl_comp *f = rc ? NULL : sl_elem_get(&in, c->component);
  tar_it *t = NULL;
  if (!rc && (!f || f->dtype != SL_BYTES || f->rank != 0 || f->size >= sizeof t->path))
    rc = sl__op_err(op, SL_EINVAL, "input element has no byte-string component '%s' (a shard's name)", c->component);
  if (!rc) rc = sl__it_new_ex((sl__it **)&t, sizeof(tar_it), &TAR_IT, op, run, NULL, false);
  if (!rc) {
    memcpy(t->path, sl_comp_data(f), f->size);
    t->path[f->size] = 0;
    t->in_ref = (sl_eref){.op = r->up_op, .pos = r->up};
    if ((rc = open_path(t)) == 2) rc = sl__op_err(op, SL_ECORRUPT, "shard '%s' cannot be read", t->path);
    if (!rc) rc = tar_skip_to(t, r->pos);
    if (!rc) rc = tar_next(&t->it, out);
    if (rc == SL_END) rc = sl__op_err(op, SL_ECORRUPT, "shard '%s': no sample %llu to make again", t->path,
                                      (unsigned long long)r->pos);
  }
  sl_elem_clear(&in);
  sl__it_free(&t->it);
  return rc;
}
static const sl__op_state TAR_STATE = {tar_save, tar_load, NULL, tar_remake, 0};
static int tar_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  return sl__it_new(out, sizeof(tar_it), &TAR_IT, op, run, seed);
}

static const sl__arg TAR_KNOBS[] = {
    {"component", SL__ARG_COMP, "filename", 0, 0, 0, NULL, "the input component naming the shard"},
    {"on_corrupt", SL__ARG_ENUM, "error", 0, 0, 0, "error|skip",
     "a truncated or corrupt shard fails the run, or the rest of the shard is skipped and counted"},
    {"on_error", SL__ARG_ENUM, "error", 0, 0, 0, "error|skip",
     "a shard that cannot be opened or read (missing, or a remote one unreachable after the retries) fails the run, "
     "or the rest of it is skipped and counted"},
    SL__NET_KNOBS,
    {"max_member_bytes", SL__ARG_INT, "1073741824", SL__ARGF_LO, 0, 0, NULL, "refuse members larger than this"},
    {NULL}};
/* The extensions are known only from the data: the structure is open, with the two names every sample has. */
static int tar_infer(sl__op *op, sl__struct *s, const sl__struct *src) {
  (void)src;
  int rc = sl__op_need(op, s, ((const tar_cfg *)op->impl)->component, "component");
  if (rc) return rc;
  *s = (sl__struct){0};
  s->open = true;
  if (!(rc = sl__struct_put(s, "__key__", SL_BYTES, 0, op->path, NULL)))
    rc = sl__struct_put(s, "__url__", SL_BYTES, 0, op->path, NULL);
  return rc;
}
static const sl__op_schema TAR_SCHEMA = {
    SL__MK_READER, 0,
    "the samples of each input WebDataset tar shard (plain, gzip, zstd or xz): one bytes component per member "
    "extension (\"jpg\", \"cls\", ...) of each key, plus `__key__` and `__url__`",
    TAR_KNOBS, tar_infer};
const sl__op_vt sl__op_tar = {"tar", tar_parse, tar_open, tar_free_op, SL__OPF_NEEDS_INPUT, &TAR_SCHEMA, &TAR_STATE};
