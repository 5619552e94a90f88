/* io/stream.c: the local file behind sl__stream (read(2) with a sequential hint) and the dispatch between it and
 * the remote stream of io/stream_http.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <pthread.h>
#include <unistd.h>
#include <xxhash.h>

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

/* ---------------- the keep: remote objects in memory ---------------- */
enum { K_PENDING, K_KEPT, K_REFUSED };
typedef struct {
  char *url, *ident;
  unsigned char *data;
  uint64_t size, hash;
  int state;
} kept;

struct sl__keep {
  pthread_mutex_t mu;
  uint64_t budget, used; /* used: bytes kept and reserved */
  kept **tab;            /* open addressing by the URL's hash; cap a power of two, at most half full */
  size_t cap, n;
  int pending;           /* objects being read into it */
  bool again;            /* an object was opened a second time */
};

int sl__keep_create(sl__keep **out, uint64_t budget) {
  *out = NULL;
  sl__keep *k = sl__calloc(1, sizeof *k);
  if (!k || !(k->tab = sl__calloc(64, sizeof *k->tab))) {
    sl__free(k);
    return sl__oom("a keep of remote objects");
  }
  k->cap = 64;
  k->budget = budget;
  pthread_mutex_init(&k->mu, NULL);
  *out = k;
  return 0;
}

void sl__keep_free(sl__keep *k) {
  if (!k) return;
  for (size_t i = 0; i < k->cap; i++)
    if (k->tab[i]) {
      sl__free(k->tab[i]->url);
      sl__free(k->tab[i]->ident);
      sl__free(k->tab[i]->data);
      sl__free(k->tab[i]);
    }
  sl__free(k->tab);
  pthread_mutex_destroy(&k->mu);
  sl__free(k);
}

bool sl__keep_complete(sl__keep *k) {
  pthread_mutex_lock(&k->mu);
  bool c = k->again && !k->pending;
  pthread_mutex_unlock(&k->mu);
  return c;
}

/* The slot of url (under the lock): its entry, or the empty slot it would take. */
static kept **keep_slot(sl__keep *k, const char *url, uint64_t h) {
  size_t i = (size_t)h & (k->cap - 1);
  while (k->tab[i] && (k->tab[i]->hash != h || strcmp(k->tab[i]->url, url))) i = (i + 1) & (k->cap - 1);
  return &k->tab[i];
}

/* Makes room for one more entry (under the lock): false when out of memory. */
static bool keep_grow(sl__keep *k) {
  if (2 * (k->n + 1) <= k->cap) return true;
  size_t cap = k->cap * 2;
  kept **old = k->tab, **t = sl__calloc(cap, sizeof *t);
  if (!t) return false;
  size_t oc = k->cap;
  k->tab = t;
  k->cap = cap;
  for (size_t i = 0; i < oc; i++)
    if (old[i]) *keep_slot(k, old[i]->url, old[i]->hash) = old[i];
  sl__free(old);
  return true;
}

/* The kept copy of url, or NULL (also notes an object opened again). */
static const kept *keep_find(sl__keep *k, const char *url) {
  uint64_t h = XXH3_64bits(url, strlen(url));
  pthread_mutex_lock(&k->mu);
  kept *e = *keep_slot(k, url, h);
  if (e) k->again = true;
  pthread_mutex_unlock(&k->mu);
  return e && e->state == K_KEPT ? e : NULL; /* a kept entry never changes again */
}

void *sl__keep_reserve(sl__keep *k, const char *url, uint64_t size, const char *ident, unsigned char **buf) {
  *buf = NULL;
  uint64_t h = XXH3_64bits(url, strlen(url));
  pthread_mutex_lock(&k->mu);
  kept *e = NULL, **at = keep_slot(k, url, h);
  if (!*at && keep_grow(k)) {
    at = keep_slot(k, url, h);
    if ((e = sl__calloc(1, sizeof *e)) && (e->url = sl__strdup(url)) && (e->ident = sl__strdup(ident))) {
      e->hash = h;
      e->size = size;
      e->state = K_REFUSED;
      *at = e;
      k->n++;
      /* room for the whole object now, or it is never kept (the next epoch reads it from the link again) */
      if (size > 0 && size <= k->budget - k->used && size <= SIZE_MAX && (*buf = sl__malloc((size_t)size))) {
        e->data = *buf; /* the keep's from now on: freed by sl__keep_done when the object was not read in full */
        e->state = K_PENDING;
        k->used += size;
        k->pending++;
      }
    } else if (e) {
      sl__free(e->url);
      sl__free(e->ident);
      sl__free(e);
      e = NULL;
    }
  }
  pthread_mutex_unlock(&k->mu);
  return e && e->state == K_PENDING ? e : NULL;
}

void sl__keep_done(sl__keep *k, void *slot, bool full) {
  kept *e = slot;
  if (!e) return;
  pthread_mutex_lock(&k->mu);
  if (full) {
    e->state = K_KEPT;
  } else {
    e->state = K_REFUSED;
    k->used -= e->size;
    sl__free(e->data);
    e->data = NULL;
  }
  k->pending--;
  pthread_mutex_unlock(&k->mu);
}

/* A kept object read from memory. */
typedef struct {
  sl__stream s;
  const kept *e;
  uint64_t pos;
} mem_stream;

static int mem_read(sl__stream *st, void *dst, size_t n, size_t *got, bool some) {
  (void)some;
  mem_stream *m = (mem_stream *)st;
  uint64_t left = m->e->size - m->pos;
  *got = left < n ? (size_t)left : n;
  if (*got) memcpy(dst, m->e->data + m->pos, *got);
  m->pos += *got;
  return 0;
}
static int mem_seek(sl__stream *st, uint64_t off) {
  ((mem_stream *)st)->pos = off;
  return 0;
}
static uint64_t mem_size(const sl__stream *st) { return ((const mem_stream *)st)->e->size; }
static uint64_t mem_tell(const sl__stream *st) { return ((const mem_stream *)st)->pos; }
static uint64_t mem_bytes(const sl__stream *st) {
  (void)st;
  return 0; /* neither the disk nor the network */
}
static const char *mem_identity(const sl__stream *st) { return ((const mem_stream *)st)->e->ident; }
static void mem_free(sl__stream *st) { (void)st; }
static const sl__stream_vt MEM_VT = {mem_read, mem_seek, mem_size, mem_tell, mem_bytes, file_net, mem_identity,
                                     mem_free};

bool sl__stream_kept(const sl__stream *s) { return s && s->vt == &MEM_VT; }

int sl__stream_open(sl__stream **out, const char *path, const sl__stream_opts *opts) {
  *out = NULL;
  if (sl__is_url(path) && opts && opts->keep) {
    const kept *e = keep_find(opts->keep, path);
    if (e) {
      mem_stream *m = sl__calloc(1, sizeof *m);
      if (!m || !(m->s.name = sl__url_shown(path))) {
        sl__free(m);
        return sl__oom("a kept object's stream");
      }
      m->s.vt = &MEM_VT;
      m->e = e;
      *out = &m->s;
      return 0;
    }
  }
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
