/* ops/op_cache.c: `cache`: the first complete pass over the input is kept, in memory (elements share buffers, no
 * copies) or in a file; later epochs read the cache instead of running the upstream ops.
 * A cache file carries a fingerprint of the upstream spec and a CRC-32C per record; it is written to a temporary
 * name and renamed only when the pass completes, so a partial cache is never taken for a whole one. A file whose
 * fingerprint differs (stale) or that fails verification (corrupt) is rebuilt. A pass abandoned before its end
 * (take, cancel, error) leaves the cache empty. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/outfile_int.h"
#include "ops/op_int.h"
#include "sluice/tfrecord.h"

enum { C_EMPTY = 0, C_FILLING = 1, C_COMPLETE = 2 };
#define MAGIC "SLCACHE1"
#define END_MAGIC "SLCEND01"

typedef struct {
  pthread_mutex_t mu;
  int state;
  char *file; /* NULL: memory */
  uint64_t fingerprint;
  sl_elem *els;
  size_t n, cap;
  uint64_t bytes;
  bool file_checked;
} cache_cfg;

static uint64_t upstream_fingerprint(const sl__op *op) {
  XXH64_state_t *st = XXH64_createState();
  if (!st) return 0;
  XXH64_reset(st, 0x51u);
  for (const sl__op *u = op->input; u; u = u->input) {
    char *s = json_dumps(u->json, JSON_COMPACT | JSON_SORT_KEYS);
    if (s) {
      XXH64_update(st, s, strlen(s));
      sl__free(s);
    }
  }
  uint64_t seed = sl_pipeline_seed(op->pl);
  XXH64_update(st, &seed, sizeof seed);
  uint64_t h = XXH64_digest(st);
  XXH64_freeState(st);
  return h;
}

static int cache_parse(sl__op *op, json_t *o) {
  sl_args k = sl__op_knobs(op, o);
  cache_cfg *c = sl__calloc(1, sizeof *c);
  if (!c) return sl__oom("cache");
  pthread_mutex_init(&c->mu, NULL);
  op->impl = c;
  const char *file;
  int rc;
  if ((rc = sl__get_str(&file, &k, "file"))) return rc;
  if (file && *file) {
    c->file = sl__resolve_path(op->pl, file);
    if (!c->file) return sl__oom("cache");
    struct stat st; /* a FIFO or a device would be read as a cache, or written in place: neither is one */
    if (stat(c->file, &st) == 0 && !S_ISREG(st.st_mode))
      return sl__err(SL_EINVAL, "%s.file: '%s' is %s; a cache file is a regular file (or absent)", op->path, c->file,
                     sl__file_kind(st.st_mode));
  }
  c->fingerprint = upstream_fingerprint(op);
  op->cardinality = op->input ? op->input->cardinality : -1;
  return 0;
}

extern const sl__op_vt sl__op_cache;
const char *sl__cache_file(const sl__op *op) {
  return op->vt == &sl__op_cache && op->impl ? ((const cache_cfg *)op->impl)->file : NULL;
}

static void cache_drop(sl__op *op, cache_cfg *c) {
  for (size_t i = 0; i < c->n; i++) sl_elem_clear(&c->els[i]);
  sl__free(c->els);
  c->els = NULL;
  c->n = c->cap = 0;
  sl__stats_held(op, -(int64_t)c->bytes);
  c->bytes = 0;
}

static void cache_free_op(sl__op *op) {
  cache_cfg *c = op->impl;
  if (!c) return;
  cache_drop(op, c);
  pthread_mutex_destroy(&c->mu);
  sl__free(c->file);
  sl__free(c);
}

/* ---- element (de)serialisation for cache files ---- */
static int put(sl__str *b, const void *p, size_t n) { return sl__str_append(b, p, n); }

static int serialize(const sl_elem *e, sl__str *b) {
  b->len = 0;
  uint16_t n = (uint16_t)e->n;
  int rc = put(b, &n, 2);
  for (int i = 0; i < e->n && !rc; i++) {
    const sl_comp *c = &e->c[i];
    uint16_t nl = (uint16_t)strlen(c->name);
    uint8_t dt = (uint8_t)c->dtype, rk = (uint8_t)c->rank;
    uint64_t sz = c->size;
    if ((rc = put(b, &nl, 2)) || (rc = put(b, c->name, nl)) || (rc = put(b, &dt, 1)) || (rc = put(b, &rk, 1)) ||
        (rc = put(b, c->shape, (size_t)c->rank * 8)) || (rc = put(b, &sz, 8)))
      return rc;
    if (c->dtype == SL_BYTES && c->rank >= 1) {
      int64_t cnt = sl_comp_count(c);
      if ((rc = put(b, sl_buf_data(c->offs), (size_t)(cnt + 1) * 8))) return rc;
    }
    rc = put(b, sl_comp_data(c), c->size);
  }
  return rc;
}

/* Rebuilds an element from a verified record; components view `buf` (zero copy). */
static int deserialize(sl__op *op, sl_buf *buf, sl_elem *out) {
  const unsigned char *p = sl_buf_data(buf), *end = p + sl_buf_size(buf);
#define NEED(k) \
  if ((size_t)(end - p) < (size_t)(k)) goto bad
  uint16_t n;
  NEED(2);
  memcpy(&n, p, 2);
  p += 2;
  if (n > SL_MAX_COMPONENTS) goto bad;
  for (int i = 0; i < n; i++) {
    uint16_t nl;
    NEED(2);
    memcpy(&nl, p, 2);
    p += 2;
    NEED(nl + 2);
    const char *name = sl__op_intern(op, (const char *)p, nl);
    if (!name) return sl__oom("a component name");
    p += nl;
    uint8_t dt = p[0], rk = p[1];
    p += 2;
    if (dt > SL_BYTES || rk > SL_MAX_RANK) goto bad;
    sl_comp *c = &out->c[out->n];
    memset(c, 0, sizeof *c);
    c->name = name;
    c->dtype = (sl_dtype)dt;
    c->rank = rk;
    NEED((size_t)rk * 8 + 8);
    memcpy(c->shape, p, (size_t)rk * 8);
    p += (size_t)rk * 8;
    uint64_t sz;
    memcpy(&sz, p, 8);
    p += 8;
    int64_t cnt;
    if (sl_shape_count(&cnt, rk, c->shape)) goto bad;
    if (dt == SL_BYTES && rk >= 1) {
      size_t ob;
      if (!sl__mul_ok((size_t)cnt + 1, 8, &ob)) goto bad;
      NEED(ob);
      c->offs = sl_buf_alloc(ob);
      if (!c->offs) return sl__oom("a cached component's offsets");
      memcpy(sl_buf_data(c->offs), p, ob);
      p += ob;
    } else if (dt != SL_BYTES && sz != (uint64_t)cnt * sl_dtype_size((sl_dtype)dt)) {
      goto bad;
    }
    NEED(sz);
    c->size = (size_t)sz;
    c->off = (size_t)(p - (const unsigned char *)sl_buf_data(buf));
    c->buf = sl_buf_ref(buf);
    out->n++;
    p += sz;
  }
  return 0;
bad:
  sl_elem_clear(out);
  return sl__op_err(op, SL_ECORRUPT, "cache record does not decode as an element");
#undef NEED
}

/* ---- file format: MAGIC, u64 fingerprint, records {u32 len, u32 masked crc, payload}, END_MAGIC, u64 count ---- */
static int read_full(int fd, void *buf, size_t n, size_t *got) {
  *got = 0;
  while (*got < n) {
    ssize_t r = read(fd, (char *)buf + *got, n - *got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    *got += (size_t)r;
  }
  return 0;
}

/* Verifies a cache file end to end. Returns true only for a complete file of this fingerprint. */
static bool file_valid(const cache_cfg *c, uint64_t *count_out) {
  int fd;
  if (sl__open_regular(&fd, c->file)) return false;
  bool ok = false;
  unsigned char hdr[16];
  size_t got;
  unsigned char *buf = NULL;
  size_t cap = 0;
  uint64_t count = 0;
  if (read_full(fd, hdr, 16, &got) || got != 16 || memcmp(hdr, MAGIC, 8)) goto out;
  uint64_t fp;
  memcpy(&fp, hdr + 8, 8);
  if (fp != c->fingerprint) goto out;
  for (;;) {
    unsigned char rh[8];
    if (read_full(fd, rh, 8, &got) || got != 8) goto out;
    if (!memcmp(rh, END_MAGIC, 8)) {
      uint64_t n;
      if (read_full(fd, &n, 8, &got) || got != 8 || n != count) goto out;
      char extra;
      if (read_full(fd, &extra, 1, &got) || got != 0) goto out;
      ok = true;
      break;
    }
    uint32_t len, crc;
    memcpy(&len, rh, 4);
    memcpy(&crc, rh + 4, 4);
    if (len > cap) {
      unsigned char *nb = sl__realloc(buf, len);
      if (!nb) goto out;
      buf = nb;
      cap = len;
    }
    if (read_full(fd, buf, len, &got) || got != len) goto out;
    if (sl_crc32c_mask(sl_crc32c(buf, len)) != crc) goto out;
    count++;
  }
out:
  sl__free(buf);
  close(fd);
  *count_out = count;
  return ok;
}

typedef struct {
  sl__it it;
  int mode; /* 0 pass-through, 1 filling memory, 2 reading memory, 3 filling file, 4 reading file */
  size_t pos;
  FILE *f;          /* mode 3: out.f; mode 4: the cache file */
  sl__outfile out;  /* mode 3: the cache file in the making */
  sl__str ser;
  uint64_t written;
  bool finished;
} cache_it;

static int fill_file_write(cache_it *ci, const sl_elem *e) {
  cache_cfg *c = ci->it.op->impl;
  int rc = serialize(e, &ci->ser);
  if (rc) return rc;
  if (ci->ser.len > UINT32_MAX) return sl__op_err(ci->it.op, SL_EINVAL, "element too large to cache (%zu bytes)", ci->ser.len);
  uint32_t len = (uint32_t)ci->ser.len, crc = sl_crc32c_mask(sl_crc32c(ci->ser.s, ci->ser.len));
  if (fwrite(&len, 4, 1, ci->f) != 1 || fwrite(&crc, 4, 1, ci->f) != 1 ||
      (len && fwrite(ci->ser.s, len, 1, ci->f) != 1))
    return sl__op_err(ci->it.op, SL_EIO, "%s: cannot write the cache: %s", c->file, strerror(errno));
  ci->written++;
  (void)c;
  return 0;
}

static int finish_file(cache_it *ci) {
  cache_cfg *c = ci->it.op->impl;
  uint64_t n = ci->written;
  bool ok = fwrite(END_MAGIC, 8, 1, ci->f) == 1 && fwrite(&n, 8, 1, ci->f) == 1;
  int err = errno;
  ci->f = NULL;
  if (!ok) {
    sl__outfile_abort(&ci->out);
    return sl__op_err(ci->it.op, SL_EIO, "%s: cannot finish the cache file: %s", c->file, strerror(err));
  }
  int rc = sl__outfile_commit(&ci->out); /* synced, then renamed into place */
  return rc ? sl__op_wrap(ci->it.op, rc) : 0;
}

static int cache_next(sl__it *it, sl_elem *out) {
  cache_it *ci = (cache_it *)it;
  cache_cfg *c = it->op->impl;
  if (ci->mode == 2) {
    if (ci->pos >= c->n) return SL_END;
    sl_elem_copy(out, &c->els[ci->pos++]);
    return 0;
  }
  if (ci->mode == 4) {
    unsigned char rh[8];
    size_t got;
    if (read_full(fileno(ci->f), rh, 8, &got) || got != 8)
      return sl__op_err(it->op, SL_ECORRUPT, "%s: cache file ends early", c->file);
    if (!memcmp(rh, END_MAGIC, 8)) return SL_END;
    uint32_t len, crc;
    memcpy(&len, rh, 4);
    memcpy(&crc, rh + 4, 4);
    sl_buf *b = sl_buf_alloc(len);
    if (!b)
      return sl__op_err(it->op, SL_ENOMEM, "%s: out of memory reading cache record %zu (%u bytes)", c->file, ci->pos,
                        len);
    if (read_full(fileno(ci->f), sl_buf_data(b), len, &got) || got != len ||
        sl_crc32c_mask(sl_crc32c(sl_buf_data(b), len)) != crc) {
      sl_buf_unref(b);
      return sl__op_err(it->op, SL_ECORRUPT, "%s: cache record %zu changed since it was verified", c->file, ci->pos);
    }
    sl__stat_add(&it->op->st.disk_bytes, (uint64_t)len + 8);
    int rc = deserialize(it->op, b, out);
    sl_buf_unref(b);
    ci->pos++;
    return rc;
  }
  int rc = sl__it_pull(it, out);
  if (ci->mode == 0) return rc;
  if (rc < 0) return rc;
  if (rc == SL_END) {
    if (ci->mode == 3) {
      rc = finish_file(ci);
      pthread_mutex_lock(&c->mu);
      c->state = rc ? C_EMPTY : C_COMPLETE;
      pthread_mutex_unlock(&c->mu);
      ci->finished = true;
      return rc ? rc : SL_END;
    }
    pthread_mutex_lock(&c->mu);
    c->state = C_COMPLETE;
    pthread_mutex_unlock(&c->mu);
    ci->finished = true;
    return SL_END;
  }
  if (ci->mode == 3) {
    rc = fill_file_write(ci, out);
    if (rc) sl_elem_clear(out);
    return rc;
  }
  /* memory */
  if (c->n == c->cap) {
    size_t ncap = c->cap ? c->cap * 2 : 256;
    sl_elem *ne = sl__realloc(c->els, ncap * sizeof *ne);
    if (!ne) {
      sl_elem_clear(out);
      return sl__op_err(it->op, SL_ENOMEM, "out of memory caching element %zu", c->n);
    }
    c->els = ne;
    c->cap = ncap;
  }
  sl_elem_copy(&c->els[c->n++], out);
  size_t b = sl_elem_bytes(out);
  c->bytes += b;
  sl__stats_held(it->op, (int64_t)b);
  return 0;
}

static void cache_it_free(sl__it *it) {
  cache_it *ci = (cache_it *)it;
  cache_cfg *c = it->op->impl;
  if (ci->mode == 1 || ci->mode == 3) {
    sl__outfile_abort(&ci->out); /* an unfinished cache file leaves nothing behind */
    if (!ci->finished) {
      pthread_mutex_lock(&c->mu);
      if (ci->mode == 1) cache_drop(it->op, c);
      c->state = C_EMPTY;
      pthread_mutex_unlock(&c->mu);
    }
  } else if (ci->f) {
    fclose(ci->f);
  }
  sl__str_dispose(&ci->ser);
  sl__free(ci);
}
static const sl__it_vt CACHE_IT = {cache_next, cache_it_free};

/* ---- saved state: whether this pass reads the cache, and the elements it has handed out. A resumed pass reads a
 * complete cache at that position; where the cache is not there (a memory cache in a new process) or was being
 * filled, the pass goes on through its input without filling it (skipping the elements handed out when the state
 * came from a read), and the next epoch fills it. */
static uint64_t cache_delivered(const cache_it *ci) {
  const cache_cfg *c = ci->it.op->impl;
  return ci->mode == 2 || ci->mode == 4 ? ci->pos : ci->mode == 1 ? c->n : ci->mode == 3 ? ci->written : ci->pos;
}
static int cache_save(sl__it *it, sl__sw *w) {
  cache_it *ci = (cache_it *)it;
  sl__sw_u64(w, ci->mode == 2 || ci->mode == 4);
  sl__sw_u64(w, cache_delivered(ci));
  return 0;
}
/* Mode 0 from here on: the pass goes on through the input; a cache this iterator was to fill stays empty. */
static void cache_pass_through(cache_it *ci) {
  cache_cfg *c = ci->it.op->impl;
  if (ci->mode == 1 || ci->mode == 3) {
    if (ci->mode == 3) sl__outfile_abort(&ci->out);
    ci->f = NULL;
    pthread_mutex_lock(&c->mu);
    if (ci->mode == 1) cache_drop(ci->it.op, c);
    c->state = C_EMPTY;
    pthread_mutex_unlock(&c->mu);
  }
  ci->mode = 0;
}
static int cache_load(sl__it *it, sl__sr *r) {
  cache_it *ci = (cache_it *)it;
  uint64_t reading, pos;
  int rc;
  if ((rc = sl__sr_u64(r, &reading, "a cache's state")) || (rc = sl__sr_u64(r, &pos, "a cache's position"))) return rc;
  if (ci->mode == 2 || ci->mode == 4) { /* the cache is complete here: read it from that position */
    sl_elem e;
    sl_elem_init(&e);
    while (ci->pos < pos && !(rc = cache_next(it, &e))) sl_elem_clear(&e);
    if (rc == SL_END) rc = sl__op_err(it->op, SL_ECORRUPT, "the cache has fewer than the %llu elements the state "
                                                           "had read", (unsigned long long)pos);
    if (rc < 0) return rc;
    if (ci->mode == 2) ci->pos = (size_t)pos;
    return 0;
  }
  cache_pass_through(ci);
  if (!reading) return 0; /* its input was restored from the record */
  sl_elem e;
  sl_elem_init(&e);
  for (uint64_t k = 0; k < pos; k++) { /* the input afresh, to the position the read was at */
    if ((rc = sl__it_pull(it, &e))) return rc == SL_END ? sl__op_err(it->op, SL_ECORRUPT, "the input ended before "
                                                                   "the cache's position %llu", (unsigned long long)pos)
                                                        : rc;
    sl_elem_clear(&e);
  }
  return 0;
}
static const sl__op_state CACHE_STATE = {cache_save, cache_load, NULL, NULL, SL__STF_PASS};

static int cache_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  cache_cfg *c = op->impl;
  pthread_mutex_lock(&c->mu);
  int mode;
  if (c->state == C_COMPLETE) mode = c->file ? 4 : 2;
  else if (c->state == C_FILLING) mode = 0;
  else {
    mode = c->file ? 3 : 1;
    if (c->file && !c->file_checked) {
      uint64_t n;
      if (file_valid(c, &n)) mode = 4; /* a complete cache from an earlier process */
      c->file_checked = true;
    }
    c->state = mode == 4 ? C_COMPLETE : C_FILLING;
  }
  pthread_mutex_unlock(&c->mu);
  /* Reading a cache needs no upstream: do not open it (that is the point of caching). */
  bool reading = mode == 2 || mode == 4;
  int rc = sl__it_new_ex(out, sizeof(cache_it), &CACHE_IT, op, run, seed, !reading);
  if (rc) {
    if (mode == 1 || mode == 3) {
      pthread_mutex_lock(&c->mu);
      c->state = C_EMPTY;
      pthread_mutex_unlock(&c->mu);
    }
    return rc;
  }
  cache_it *ci = (cache_it *)*out;
  ci->mode = mode;
  if (mode == 3 || mode == 4) {
    if (mode == 3) {
      /* a hidden temporary beside the file, never through a link planted there; renamed when complete */
      rc = sl__outfile_open(&ci->out, c->file, SL__OUTFILE_SWEEP);
      ci->f = ci->out.f;
      if (rc) rc = sl__op_wrap(op, rc);
      else if (fwrite(MAGIC, 8, 1, ci->f) != 1 || fwrite(&c->fingerprint, 8, 1, ci->f) != 1)
        rc = sl__op_err(op, SL_EIO, "%s: cannot write the cache file", c->file);
    } else {
      ci->f = fopen(c->file, "rb");
      unsigned char hdr[16];
      size_t got;
      if (!ci->f || read_full(fileno(ci->f), hdr, 16, &got) || got != 16)
        rc = sl__op_err(op, SL_EIO, "%s: cannot read the cache file", c->file);
    }
    if (rc) {
      sl__it_free(*out);
      *out = NULL;
      return rc;
    }
  }
  return 0;
}

bool sl_pipeline_caches_complete(const sl_pipeline *p) {
  for (int i = 0; i < sl_pipeline_op_count(p); i++) {
    sl__op *op = sl__pipeline_op(p, i);
    if (op->keep && !sl__keep_complete(op->keep)) return false; /* a reader's keep of remote objects */
    if (op->vt != &sl__op_cache) continue;
    cache_cfg *c = op->impl;
    pthread_mutex_lock(&c->mu);
    bool done = c->state == C_COMPLETE;
    pthread_mutex_unlock(&c->mu);
    if (!done) return false;
  }
  return true;
}

static const sl__arg CACHE_KNOBS[] = {
    {"file", SL__ARG_STR, NULL, 0, 0, 0, NULL, "a file to cache into (absent: memory)"},
    {NULL}};
static const sl__op_schema CACHE_SCHEMA = {SL__MK_CACHE, SL__OPS_NO_IDENTITY,
                                           "holds its input's first pass (in memory or a file) and replays it",
                                           CACHE_KNOBS, NULL};
const sl__op_vt sl__op_cache = {"cache", cache_parse, cache_open, cache_free_op, SL__OPF_NEEDS_INPUT, &CACHE_SCHEMA,
                                &CACHE_STATE};
