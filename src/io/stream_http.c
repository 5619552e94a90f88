/* io/stream_http.c: the remote stream behind sl__stream, on libcurl's multi interface. An object is read as blocks
 * (ranged GETs) kept in flight ahead of the reader by one I/O thread per stream; the reader copies from a block as
 * its bytes arrive. A request that fails (timeout, reset, 429/5xx) is retried with capped exponential backoff and
 * jitter; a body cut short resumes with a Range from the byte it reached, into the same block, so no byte is read
 * twice or lost. s3:// URLs become HTTPS (or S3_ENDPOINT_URL) requests signed with SigV4 by libcurl. */
#define _GNU_SOURCE /* memmem */
#include <curl/curl.h>
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <xxhash.h>

#include "io/stream_int.h"

/* ---------------- the environment: defaults, credentials ---------------- */
typedef struct {
  uint64_t block;
  int inflight, attempts;
  uint64_t backoff_ms, backoff_cap_ms, stall_s, connect_ms;
} net_cfg;

static uint64_t env_u64(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || *end || x < lo || x > hi) return dflt;
  return x;
}

static net_cfg cfg_read(const sl__stream_opts *o) {
  net_cfg c;
  c.block = o && o->block ? o->block : env_u64("SLUICE_REMOTE_BLOCK", 8u << 20, 4096, 1ull << 30);
  c.inflight = o && o->inflight ? o->inflight : (int)env_u64("SLUICE_REMOTE_INFLIGHT", 4, 1, 256);
  c.attempts = (int)env_u64("SLUICE_REMOTE_RETRIES", 6, 0, 100) + 1;
  c.backoff_ms = env_u64("SLUICE_REMOTE_BACKOFF_MS", 100, 1, 600000);
  c.backoff_cap_ms = env_u64("SLUICE_REMOTE_BACKOFF_CAP_MS", 5000, 1, 3600000);
  c.stall_s = env_u64("SLUICE_REMOTE_STALL_S", 30, 1, 3600);
  c.connect_ms = env_u64("SLUICE_REMOTE_CONNECT_MS", 10000, 100, 600000);
  return c;
}

static const char *env_first(const char *a, const char *b) {
  const char *v = getenv(a);
  if ((!v || !*v) && b) v = getenv(b);
  return v && *v ? v : NULL;
}

/* What a request to an object needs besides its URL: SigV4 (s3:// with credentials) and headers. */
typedef struct {
  char *url;   /* the http(s) URL requested */
  char *sigv4; /* "aws:amz:REGION:s3", or NULL (anonymous) */
  char *user, *secret;
  struct curl_slist *hdrs;
  char *ca;    /* a CA bundle from the environment, or NULL */
} req_cfg;

static void req_dispose(req_cfg *r) {
  sl__free(r->url);
  sl__free(r->sigv4);
  sl__free(r->user);
  if (r->secret) memset(r->secret, 0, strlen(r->secret));
  sl__free(r->secret);
  curl_slist_free_all(r->hdrs);
  sl__free(r->ca);
  *r = (req_cfg){0};
}

static const char *s3_region(void) {
  const char *r = env_first("AWS_REGION", "AWS_DEFAULT_REGION");
  return r ? r : "us-east-1";
}

/* The http(s) URL of s3://bucket/key (path style on an endpoint from the environment, virtual-hosted on AWS);
 * `query` (already canonical: sorted, encoded) is appended. */
static int s3_url(char **out, const char *bucket, const char *key, const char *query) {
  *out = NULL;
  char *ek = sl__uri_encode(key, true);
  if (!ek) return sl__oom("an S3 URL");
  sl__str s = {0};
  const char *ep = env_first("S3_ENDPOINT_URL", "AWS_ENDPOINT_URL");
  int rc;
  if (ep) {
    size_t el = strlen(ep);
    while (el && ep[el - 1] == '/') el--;
    rc = sl__str_printf(&s, "%.*s/%s/%s", (int)el, ep, bucket, ek);
  } else {
    rc = sl__str_printf(&s, "https://%s.s3.%s.amazonaws.com/%s", bucket, s3_region(), ek);
  }
  if (!rc && query) rc = sl__str_printf(&s, "?%s", query);
  sl__free(ek);
  if (rc) {
    sl__str_dispose(&s);
    return rc;
  }
  *out = s.s;
  return 0;
}

static int req_make(req_cfg *r, const char *url, const char *s3query) {
  *r = (req_cfg){0};
  int rc = 0;
  const char *ca = getenv("SLUICE_CA_BUNDLE");
  if (!ca || !*ca) ca = env_first("AWS_CA_BUNDLE", "CURL_CA_BUNDLE");
  if (ca && !(r->ca = sl__strdup(ca))) return sl__oom("a request");
  if (strncasecmp(url, "s3://", 5)) {
    if (!(r->url = sl__strdup(url))) rc = sl__oom("a request");
    return rc;
  }
  char *bucket, *key;
  if ((rc = sl__s3_split(&bucket, &key, url))) return rc;
  rc = s3_url(&r->url, bucket, key, s3query);
  sl__free(bucket);
  sl__free(key);
  if (rc) return rc;
  const char *id = getenv("AWS_ACCESS_KEY_ID"), *sec = getenv("AWS_SECRET_ACCESS_KEY");
  if (id && *id && sec && *sec) {
    sl__str s = {0};
    if ((rc = sl__str_printf(&s, "aws:amz:%s:s3", s3_region()))) return rc;
    r->sigv4 = s.s;
    r->user = sl__strdup(id);
    r->secret = sl__strdup(sec);
    if (!r->user || !r->secret) return sl__oom("a request");
    /* S3 wants the payload's hash signed; a GET has none to send (libcurl 7.87+ adds this when it is missing). */
    r->hdrs = curl_slist_append(r->hdrs, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    const char *tok = getenv("AWS_SESSION_TOKEN");
    if (tok && *tok) {
      sl__str h = {0};
      if ((rc = sl__str_printf(&h, "x-amz-security-token: %s", tok))) return rc;
      struct curl_slist *n = curl_slist_append(r->hdrs, h.s);
      memset(h.s, 0, h.len);
      sl__str_dispose(&h);
      if (!n) return sl__oom("a request");
      r->hdrs = n;
    }
    if (!r->hdrs) return sl__oom("a request");
  }
  return 0;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CURLcode g_init_rc;
static void global_init(void) { g_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static void easy_setup(CURL *e, const req_cfg *r, const net_cfg *c) {
  curl_easy_setopt(e, CURLOPT_URL, r->url);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_ms);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L); /* no byte for stall_s seconds: a timeout, retried */
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)c->stall_s);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "sluice/" SL_VERSION);
  if (r->ca) curl_easy_setopt(e, CURLOPT_CAINFO, r->ca);
  if (r->hdrs) curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
  if (r->sigv4) {
    curl_easy_setopt(e, CURLOPT_AWS_SIGV4, r->sigv4);
    curl_easy_setopt(e, CURLOPT_USERNAME, r->user);
    curl_easy_setopt(e, CURLOPT_PASSWORD, r->secret);
  }
}

/* Transport errors worth another attempt (timeouts, resets, a body cut short); the rest fail at once. */
static bool curl_retryable(CURLcode rc) {
  switch (rc) {
  case CURLE_COULDNT_CONNECT: case CURLE_OPERATION_TIMEDOUT: case CURLE_RECV_ERROR: case CURLE_SEND_ERROR:
  case CURLE_PARTIAL_FILE: case CURLE_GOT_NOTHING: case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
  case CURLE_SSL_CONNECT_ERROR: case CURLE_COULDNT_RESOLVE_HOST:
    return true;
  default:
    return false;
  }
}
static bool status_retryable(long st) { return st == 408 || st == 429 || st == 500 || st == 502 || st == 503 || st == 504; }

/* Capped exponential backoff with jitter: uniform in [d/2, d], d = min(cap, base * 2^(attempt-1)), in ns. */
static uint64_t backoff_ns(const net_cfg *c, int attempt, uint64_t *rng) {
  uint64_t d = c->backoff_ms;
  for (int i = 1; i < attempt && d < c->backoff_cap_ms; i++) d *= 2;
  if (d > c->backoff_cap_ms) d = c->backoff_cap_ms;
  *rng = sl__mix64(*rng);
  uint64_t half = d * 500000ull;
  return half + (half ? *rng % (half + 1) : 0);
}

/* The text of an error body's S3 <Code> (or its first bytes) for messages. */
static void body_hint(char *dst, size_t n, const char *body, size_t len) {
  dst[0] = 0;
  if (!len) return;
  const char *c = memmem(body, len, "<Code>", 6);
  if (c) {
    const char *e = memmem(c, len - (size_t)(c - body), "</Code>", 7);
    if (e) {
      snprintf(dst, n, " (%.*s)", (int)(e - c - 6 > 80 ? 80 : e - c - 6), c + 6);
      return;
    }
  }
}

/* ---------------- the stream ---------------- */
enum { B_FREE, B_RUN, B_WAIT, B_DONE, B_FAIL };

typedef struct http_stream http_stream;
typedef struct {
  http_stream *hs;
  CURL *e;
  int state;
  uint64_t k, off, len, got; /* block k: bytes [off, off + len) of the object, got of them in data */
  unsigned char *data;
  uint64_t skip;             /* bytes of a 200 answer before the range asked for, to drop */
  bool checked, enough;      /* the answer's headers checked; the block filled (the rest of a 200 cut off) */
  bool xfering;              /* asked and not ended: counted in the stream's xfering */
  int attempts;
  uint64_t retry_at, t_start, t_first, t_last; /* asked, first byte, last bytes (ns) */
  long status;
  /* the answer's headers */
  char etag[256], modified[128], crange[128];
  long long clen;
  char ebody[1024];          /* the first bytes of an error answer's body */
  size_t ebody_len;
  char errbuf[CURL_ERROR_SIZE];
  char range[64];
} blk;

struct http_stream {
  sl__stream s;
  req_cfg req;
  net_cfg cfg;
  CURLM *m;
  pthread_t th;
  bool th_started, stop;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  blk *b;
  int n;
  uint64_t pos, size;
  bool size_known, failed, kick; /* kick: the I/O thread has blocks to start before it sleeps */
  int fail_rc;
  char fail_msg[1024];
  char etag[256], modified[128], ident[512];
  sl__net_stats st;
  int xfering;        /* requests asked and not ended: the others a request's bytes share the link with (a request
                       * waiting for its first byte may already hold a share: a server sends headers first) */
  uint64_t busy_last; /* the end of the last interval counted in st.overlap_ns (ns) */
  /* Since when one request alone, or two or more, have been asked and not ended (UINT64_MAX: not so now): bytes
   * count as alone or shared by the stretch they arrive in, and their time only within it (a request's bytes arrive
   * in turns with the others', so the gap before its last bytes spans their ends: the others' time, not its own). */
  uint64_t alone_since, shared_since;
  uint64_t rng;
  /* The first blocks of an object ramp up: RAMP_FIRST-sized, doubling up to cfg.block over `ramp` blocks. Every
   * block of an object is asked for at once and they share the link, so the reader's first bytes would otherwise
   * arrive at the pace of inflight x block bytes; the first records wait on ramp_first bytes instead. */
  int ramp;
  uint64_t ramp_first;
  uint64_t from;    /* where the reader started (its open or last jump): the window grows with what it took since */
  uint64_t wake_at; /* the read position at which the window lets the next block go (the reader wakes the I/O
                     * thread there; UINT64_MAX: none waits on the window) */
  /* A keep (opts.keep): the object's bytes are copied there as its blocks complete; kept at the end when every
   * block was (kgot == size). kbuf belongs to the keep; kdone marks the blocks copied. */
  sl__keep *keep;
  char *key;    /* the URL as given: the keep's key */
  void *kslot;
  unsigned char *kbuf, *kdone;
  uint64_t kgot;
};

enum { RAMP_MAX = 3 };                   /* at most 3 smaller blocks: block/8, /4, /2 */
static const uint64_t RAMP_FIRST = 256u << 10; /* no block smaller (a request costs a round trip) */

static void ramp_init(http_stream *h) {
  uint64_t B = h->cfg.block;
  h->ramp = 0;
  while (h->ramp < RAMP_MAX && (B >> (h->ramp + 1)) >= RAMP_FIRST && (B >> (h->ramp + 1)) << (h->ramp + 1) == B)
    h->ramp++;
  h->ramp_first = B >> h->ramp;
}
/* Block k's first byte and its length (before the object's end cuts it). */
static uint64_t blk_off(const http_stream *h, uint64_t k) {
  uint64_t F = h->ramp_first, R = (uint64_t)h->ramp;
  return k < R ? F * ((1ull << k) - 1) : h->cfg.block - F + (k - R) * h->cfg.block;
}
static uint64_t blk_len(const http_stream *h, uint64_t k) {
  return k < (uint64_t)h->ramp ? h->ramp_first << k : h->cfg.block;
}
/* The block holding byte pos. */
static uint64_t blk_at(const http_stream *h, uint64_t pos) {
  uint64_t F = h->ramp_first, B = h->cfg.block;
  if (pos >= B - F) return (uint64_t)h->ramp + (pos - (B - F)) / B;
  uint64_t k = 0;
  while (F * ((2ull << k) - 1) <= pos) k++;
  return k;
}

static void fail_locked(http_stream *h, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail_locked(http_stream *h, int rc, const char *fmt, ...) {
  if (h->failed) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->fail_msg, sizeof h->fail_msg, fmt, ap);
  va_end(ap);
  h->failed = true;
  h->fail_rc = rc;
  pthread_cond_broadcast(&h->cv);
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud) {
  blk *x = ud;
  size_t n = size * nmemb;
  if (n >= 5 && !strncasecmp(p, "HTTP/", 5)) { /* a new answer (after a redirect or a 100): forget the last's */
    x->etag[0] = x->modified[0] = x->crange[0] = 0;
    x->clen = -1;
    return n;
  }
  const char *colon = memchr(p, ':', n);
  if (!colon) return n;
  size_t kl = (size_t)(colon - p);
  const char *v = colon + 1, *end = p + n;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
  int vl = (int)(end - v);
  if (kl == 4 && !strncasecmp(p, "etag", 4)) snprintf(x->etag, sizeof x->etag, "%.*s", vl, v);
  else if (kl == 13 && !strncasecmp(p, "last-modified", 13)) snprintf(x->modified, sizeof x->modified, "%.*s", vl, v);
  else if (kl == 13 && !strncasecmp(p, "content-range", 13)) snprintf(x->crange, sizeof x->crange, "%.*s", vl, v);
  else if (kl == 14 && !strncasecmp(p, "content-length", 14)) x->clen = strtoll(v, NULL, 10);
  return n;
}

/* Checks an answer with a body for the block (under the lock): the range it holds, the object's size and identity.
 * false when the block (and the stream) failed. */
static bool check_answer(http_stream *h, blk *x) {
  const char *shown = h->s.name;
  uint64_t want = x->off + x->got, total;
  if (x->status == 206) {
    unsigned long long a, b, t;
    if (sscanf(x->crange, "bytes %llu-%llu/%llu", &a, &b, &t) != 3 || a != want || b < a) {
      fail_locked(h, SL_EIO, "GET %s: asked for bytes from %llu, the answer holds '%s'", shown,
                  (unsigned long long)want, x->crange);
      return false;
    }
    total = t;
    x->skip = 0;
  } else {
    if (x->clen < 0) {
      fail_locked(h, SL_EIO, "GET %s: the server ignores Range and sends no Content-Length", shown);
      return false;
    }
    total = (uint64_t)x->clen;
    x->skip = want; /* a whole object when a range was asked: the bytes before it are dropped */
  }
  if (!h->size_known) {
    h->size = total;
    h->size_known = true;
    snprintf(h->etag, sizeof h->etag, "%s", x->etag);
    snprintf(h->modified, sizeof h->modified, "%s", x->modified);
    if (h->etag[0]) snprintf(h->ident, sizeof h->ident, "etag:%s;size:%llu", h->etag, (unsigned long long)total);
    else snprintf(h->ident, sizeof h->ident, "modified:%s;size:%llu", h->modified, (unsigned long long)total);
    if (x->off + x->len > total) x->len = total > x->off ? total - x->off : 0;
    if (h->keep && total) {
      h->kslot = sl__keep_reserve(h->keep, h->key, total, h->ident, &h->kbuf);
      if (h->kslot && !(h->kdone = sl__calloc((size_t)(blk_at(h, total - 1) + 1), 1))) {
        sl__keep_done(h->keep, h->kslot, false); /* no memory to track it: not kept */
        h->kslot = NULL;
        h->kbuf = NULL;
      }
    }
    h->kick = true;
    pthread_cond_broadcast(&h->cv);
  } else if (total != h->size || strcmp(x->etag, h->etag) || (!h->etag[0] && strcmp(x->modified, h->modified))) {
    fail_locked(h, SL_EIO, "GET %s: the object changed while it was read (size %llu, ETag %s; now %llu, %s)", shown,
                (unsigned long long)h->size, h->etag[0] ? h->etag : "none", (unsigned long long)total,
                x->etag[0] ? x->etag : "none");
    return false;
  }
  return true;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud) {
  blk *x = ud;
  http_stream *h = x->hs;
  size_t n = size * nmemb, taken = n;
  pthread_mutex_lock(&h->mu);
  uint64_t now = sl__now_ns();
  bool first = !x->checked;
  if (first) { /* the first bytes: the time to first byte is counted now (the reader may be done first) */
    x->checked = true;
    x->t_first = x->t_last = now;
    h->st.ttfb_ns += now - x->t_start;
    curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &x->status);
    if ((x->status == 200 || x->status == 206) && !check_answer(h, x)) {
      pthread_mutex_unlock(&h->mu);
      return 0; /* the transfer ends with CURLE_WRITE_ERROR; the stream has failed */
    }
  }
  h->st.bytes += n;
  h->st.xfer_ns += now - x->t_last;
  /* A request's first bytes have no interval of their own (they arrived during its time to first byte): not in
   * the rate alone, which they would inflate; in the shared one, whose time the others' transfers cover. */
  if (!first && h->alone_since != UINT64_MAX) { /* alone: this request's own rate */
    uint64_t from = x->t_last > h->alone_since ? x->t_last : h->alone_since;
    h->st.solo_bytes += n;
    if (now > from) h->st.solo_ns += now - from;
  } else if (h->shared_since != UINT64_MAX) {
    /* with others: their union's rate (the callbacks come in time order: a running end suffices) */
    uint64_t from = x->t_last > h->busy_last ? x->t_last : h->busy_last;
    if (h->shared_since > from) from = h->shared_since;
    h->st.overlap_bytes += n;
    if (!first && now > from) { /* first bytes: no interval, and the union's end must not pass the others' */
      h->st.overlap_ns += now - from;
      h->busy_last = now;
    }
  }
  x->t_last = now;
  if (x->status != 200 && x->status != 206) { /* an error answer: keep its start for the message */
    size_t k = sizeof x->ebody - 1 - x->ebody_len;
    if (k > n) k = n;
    memcpy(x->ebody + x->ebody_len, p, k);
    x->ebody_len += k;
    x->ebody[x->ebody_len] = 0;
  } else {
    if (x->skip) {
      size_t d = x->skip < n ? (size_t)x->skip : n;
      x->skip -= d;
      p += d;
      n -= d;
    }
    size_t room = (size_t)(x->len - x->got);
    size_t k = n < room ? n : room;
    memcpy(x->data + x->got, p, k);
    x->got += k;
    if (x->got == x->len && n > k) { /* more than the block (a 200 answer): the rest is not wanted */
      x->enough = true;
      taken = 0;
    }
    if (k) pthread_cond_broadcast(&h->cv);
  }
  pthread_mutex_unlock(&h->mu);
  return taken;
}

/* One request more (+1) or fewer (-1) asked and not ended: the alone and shared stretches (under the lock). */
static void running_add(http_stream *h, blk *x, int d) {
  uint64_t now = sl__now_ns();
  x->xfering = d > 0;
  h->xfering += d;
  if (h->xfering != 1) h->alone_since = UINT64_MAX;
  else if (h->alone_since == UINT64_MAX) h->alone_since = now;
  if (h->xfering < 2) h->shared_since = UINT64_MAX;
  else if (h->shared_since == UINT64_MAX) h->shared_since = now;
}

/* Starts (or resumes) block x's request from byte off + got (the I/O thread, under the lock). */
static void launch(http_stream *h, blk *x) {
  x->checked = x->enough = false;
  x->status = 0;
  x->skip = 0;
  x->ebody_len = 0;
  x->ebody[0] = x->errbuf[0] = 0;
  x->clen = -1;
  x->etag[0] = x->modified[0] = x->crange[0] = 0;
  snprintf(x->range, sizeof x->range, "%llu-%llu", (unsigned long long)(x->off + x->got),
           (unsigned long long)(x->off + x->len - 1));
  curl_easy_setopt(x->e, CURLOPT_RANGE, x->range);
  x->t_start = sl__now_ns();
  x->t_first = 0;
  x->attempts++;
  if (!x->xfering) running_add(h, x, 1);
  h->st.requests++;
  if (x->attempts > 1) h->st.retries++;
  x->state = B_RUN;
  curl_multi_add_handle(h->m, x->e);
}

/* Block x stopped transferring (ended, failed or cancelled). */
static void xfer_end(http_stream *h, blk *x) {
  if (x->xfering) running_add(h, x, -1);
}

static void cancel(http_stream *h, blk *x) {
  xfer_end(h, x);
  if (x->state == B_RUN) curl_multi_remove_handle(h->m, x->e);
  x->state = B_FREE;
}

/* A request ended (the I/O thread, under the lock): the block is done, waits to be retried, or fails the stream. */
static void finished(http_stream *h, blk *x, CURLcode res) {
  uint64_t now = sl__now_ns();
  curl_multi_remove_handle(h->m, x->e);
  xfer_end(h, x);
  if (h->failed) {
    x->state = B_FAIL;
    return;
  }
  if (!x->checked) curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &x->status);
  const char *shown = h->s.name;
  bool ok_status = x->status == 200 || x->status == 206;
  char why[CURL_ERROR_SIZE + 128];
  why[0] = 0;
  if (res == CURLE_OK || (res == CURLE_WRITE_ERROR && x->enough)) {
    if (ok_status) {
      if (!x->checked && !check_answer(h, x)) { /* an empty body: the headers were not checked yet */
        x->state = B_FAIL;
        return;
      }
      if (x->got >= x->len) {
        x->state = B_DONE;
        if (h->kbuf && !h->kdone[x->k]) { /* into the keep, once per block */
          memcpy(h->kbuf + x->off, x->data, (size_t)x->len);
          h->kdone[x->k] = 1;
          h->kgot += x->len;
        }
        pthread_cond_broadcast(&h->cv);
        return;
      }
      snprintf(why, sizeof why, "the body ended at byte %llu of %llu", (unsigned long long)(x->off + x->got),
               (unsigned long long)(x->off + x->len));
    } else if (x->status == 416 && x->off == 0 && x->got == 0) { /* an empty object: no byte to give */
      unsigned long long t;
      if (!h->size_known && sscanf(x->crange, "bytes */%llu", &t) == 1 && t == 0) {
        h->size_known = true;
        h->size = 0;
        snprintf(h->etag, sizeof h->etag, "%s", x->etag);
        snprintf(h->ident, sizeof h->ident, "etag:%s;size:0", x->etag);
        x->len = 0;
        x->state = B_DONE;
        pthread_cond_broadcast(&h->cv);
        return;
      }
      fail_locked(h, SL_EIO, "GET %s: HTTP 416 for bytes %s", shown, x->range);
      x->state = B_FAIL;
      return;
    } else if (status_retryable(x->status)) {
      snprintf(why, sizeof why, "HTTP %ld", x->status);
    } else {
      char hint[128];
      body_hint(hint, sizeof hint, x->ebody, x->ebody_len);
      fail_locked(h, x->status == 404 ? SL_ENOTFOUND : SL_EIO, "GET %s: HTTP %ld%s", shown, x->status, hint);
      x->state = B_FAIL;
      return;
    }
  } else if (curl_retryable(res)) {
    snprintf(why, sizeof why, "%s%s%s", curl_easy_strerror(res), x->errbuf[0] ? ": " : "", x->errbuf);
  } else {
    fail_locked(h, SL_EIO, "GET %s: %s%s%s", shown, curl_easy_strerror(res), x->errbuf[0] ? ": " : "", x->errbuf);
    x->state = B_FAIL;
    return;
  }
  if (x->attempts >= h->cfg.attempts) {
    fail_locked(h, SL_EIO, "GET %s: bytes %s: gave up after %d attempts (the last: %s)", shown, x->range,
                x->attempts, why);
    x->state = B_FAIL;
    return;
  }
  x->state = B_WAIT;
  x->retry_at = now + backoff_ns(&h->cfg, x->attempts, &h->rng);
}

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *io_main(void *arg) {
  http_stream *h = arg;
  uint64_t cpu0 = thread_cpu_ns();
  pthread_mutex_lock(&h->mu);
  while (!h->stop) {
    uint64_t now = sl__now_ns();
    h->st.cpu_ns = thread_cpu_ns() - cpu0;
    if (!h->failed) {
      uint64_t cb = blk_at(h, h->pos), n = (uint64_t)h->n;
      uint64_t nb = h->size_known ? (h->size ? blk_at(h, h->size - 1) + 1 : 0) : 1;
      /* slow start: no block past twice what the reader has taken (at least the first block's worth) */
      uint64_t F = h->ramp_first, took = h->pos - h->from, win = took * 2 > F ? took * 2 : F;
      h->wake_at = UINT64_MAX;
      for (int i = 0; i < h->n; i++) {
        blk *x = &h->b[i];
        uint64_t k = cb + (((uint64_t)i + n - cb % n) % n); /* the block of [cb, cb + n) this slot holds */
        uint64_t off = blk_off(h, k);
        bool want = k < nb && (k == cb || off < h->pos + win);
        if (k < nb && !want) { /* the position past which pos + max(F, 2 (pos - from)) > off */
          uint64_t at = off - F < (off + 2 * h->from) / 3 ? off - F : (off + 2 * h->from) / 3;
          if (at + 1 < h->wake_at) h->wake_at = at + 1;
        }
        if (x->state != B_FREE && (!want || x->k != k)) cancel(h, x);
        if (want && x->state == B_FREE) {
          x->k = k;
          x->off = blk_off(h, k);
          uint64_t L = blk_len(h, k);
          x->len = h->size_known ? (h->size - x->off < L ? h->size - x->off : L) : L;
          x->got = 0;
          x->attempts = 0;
          launch(h, x);
        } else if (x->state == B_WAIT && x->retry_at <= now) {
          launch(h, x);
        }
      }
    }
    pthread_mutex_unlock(&h->mu);
    int running;
    curl_multi_perform(h->m, &running);
    CURLMsg *msg;
    int left;
    pthread_mutex_lock(&h->mu);
    while ((msg = curl_multi_info_read(h->m, &left)))
      if (msg->msg == CURLMSG_DONE) {
        blk *x = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        CURLcode res = msg->data.result;
        if (x && x->state == B_RUN) finished(h, x, res);
      }
    /* sleep until a socket is ready, a retry is due or the reader wakes us; not at all when the size just became
     * known (the other blocks are to be started) */
    uint64_t wake = sl__now_ns() + 1000000000ull;
    for (int i = 0; i < h->n; i++)
      if (h->b[i].state == B_WAIT && h->b[i].retry_at < wake) wake = h->b[i].retry_at;
    bool kick = h->kick;
    h->kick = false;
    pthread_mutex_unlock(&h->mu);
    if (!kick) {
      uint64_t now2 = sl__now_ns();
      int ms = wake > now2 ? (int)((wake - now2) / 1000000 + 1) : 0;
      curl_multi_poll(h->m, NULL, 0, ms, NULL);
    }
    pthread_mutex_lock(&h->mu);
  }
  for (int i = 0; i < h->n; i++) cancel(h, &h->b[i]);
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

static void wake_io(http_stream *h) { curl_multi_wakeup(h->m); }

static int http_read(sl__stream *st, void *dst, size_t n, size_t *got, bool some) {
  http_stream *h = (http_stream *)st;
  *got = 0;
  pthread_mutex_lock(&h->mu);
  while (*got < n) {
    if (h->failed) {
      int rc = h->fail_rc;
      pthread_mutex_unlock(&h->mu);
      return sl__err(rc, "%s", h->fail_msg);
    }
    if (h->size_known && h->pos >= h->size) break;
    uint64_t k = blk_at(h, h->pos);
    blk *x = &h->b[k % (uint64_t)h->n];
    if (x->state != B_FREE && x->k == k && h->pos < x->off + x->got) {
      uint64_t avail = x->off + x->got - h->pos;
      size_t c = avail < n - *got ? (size_t)avail : n - *got;
      memcpy((char *)dst + *got, x->data + (h->pos - x->off), c);
      *got += c;
      h->pos += c;
      /* a block used up (its slot takes the next one), or the window opened for another */
      if (h->pos == x->off + x->len || h->pos >= h->wake_at) {
        h->wake_at = UINT64_MAX;
        wake_io(h);
      }
      continue;
    }
    if (some && *got) break;
    pthread_cond_wait(&h->cv, &h->mu);
  }
  pthread_mutex_unlock(&h->mu);
  return 0;
}

static int http_seek(sl__stream *st, uint64_t off) {
  http_stream *h = (http_stream *)st;
  pthread_mutex_lock(&h->mu);
  /* A jump back, or past a block ahead, starts the window again; a short skip forward (a tar member's padding past
   * the bytes a reader was given) is reading on. */
  if (off < h->pos || off - h->pos > h->cfg.block) h->from = off;
  h->pos = off;
  pthread_mutex_unlock(&h->mu);
  wake_io(h);
  return 0;
}
static uint64_t http_size(const sl__stream *st) { return ((const http_stream *)st)->size; }
static uint64_t http_tell(const sl__stream *st) { return ((const http_stream *)st)->pos; }
static bool http_net(const sl__stream *st, sl__net_stats *ns) {
  http_stream *h = (http_stream *)st;
  pthread_mutex_lock(&h->mu);
  *ns = h->st;
  pthread_mutex_unlock(&h->mu);
  ns->block = h->cfg.block;
  ns->inflight = (uint64_t)h->n;
  return true;
}
static uint64_t http_bytes(const sl__stream *st) {
  sl__net_stats ns;
  http_net(st, &ns);
  return ns.bytes;
}
static const char *http_identity(const sl__stream *st) { return ((const http_stream *)st)->ident; }

static void http_free(sl__stream *st) {
  http_stream *h = (http_stream *)st;
  if (h->th_started) {
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_mutex_unlock(&h->mu);
    wake_io(h);
    pthread_join(h->th, NULL);
  }
  if (h->kslot) sl__keep_done(h->keep, h->kslot, h->kgot == h->size);
  sl__free(h->kdone);
  sl__free(h->key);
  for (int i = 0; h->b && i < h->n; i++) {
    if (h->b[i].e) curl_easy_cleanup(h->b[i].e);
    sl__free(h->b[i].data);
  }
  sl__free(h->b);
  if (h->m) curl_multi_cleanup(h->m);
  req_dispose(&h->req);
  pthread_mutex_destroy(&h->mu);
  pthread_cond_destroy(&h->cv);
}
static const sl__stream_vt HTTP_VT = {http_read, http_seek, http_size, http_tell, http_bytes, http_net,
                                      http_identity, http_free};

int sl__stream_http_open(sl__stream **out, const char *url, const sl__stream_opts *opts) {
  *out = NULL;
  pthread_once(&g_once, global_init);
  if (g_init_rc != CURLE_OK) return sl__err(SL_EIO, "libcurl: %s", curl_easy_strerror(g_init_rc));
  http_stream *h = sl__calloc(1, sizeof *h);
  if (!h) return sl__oom("a remote stream");
  h->s.vt = &HTTP_VT;
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  h->cfg = cfg_read(opts);
  ramp_init(h);
  h->wake_at = UINT64_MAX;
  h->rng = sl__mix64((uint64_t)(uintptr_t)h ^ sl__now_ns());
  int rc;
  if (!(h->s.name = sl__url_shown(url))) {
    rc = sl__oom("a remote stream");
    goto fail;
  }
  if ((rc = req_make(&h->req, url, NULL))) goto fail;
  if (opts && opts->keep) {
    h->keep = opts->keep;
    if (!(h->key = sl__strdup(url))) {
      rc = sl__oom("a remote stream");
      goto fail;
    }
  }
  h->n = h->cfg.inflight;
  h->alone_since = h->shared_since = UINT64_MAX;
  if (!(h->b = sl__calloc((size_t)h->n, sizeof *h->b)) || !(h->m = curl_multi_init())) {
    rc = sl__oom("a remote stream");
    goto fail;
  }
  curl_multi_setopt(h->m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)h->n);
  for (int i = 0; i < h->n; i++) {
    blk *x = &h->b[i];
    x->hs = h;
    if (!(x->data = sl__malloc((size_t)h->cfg.block)) || !(x->e = curl_easy_init())) {
      rc = sl__oom("a remote stream's blocks");
      goto fail;
    }
    easy_setup(x->e, &h->req, &h->cfg);
    curl_easy_setopt(x->e, CURLOPT_PRIVATE, (char *)x);
    curl_easy_setopt(x->e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(x->e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(x->e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(x->e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->e, CURLOPT_ERRORBUFFER, x->errbuf);
  }
  if (pthread_create(&h->th, NULL, io_main, h)) {
    rc = sl__err(SL_ERROR, "%s: cannot start its I/O thread", h->s.name);
    goto fail;
  }
  h->th_started = true;
  /* the first answer's headers: the size and identity, or the error a missing object gets */
  pthread_mutex_lock(&h->mu);
  while (!h->size_known && !h->failed) pthread_cond_wait(&h->cv, &h->mu);
  if (h->failed) rc = sl__err(h->fail_rc, "%s", h->fail_msg);
  pthread_mutex_unlock(&h->mu);
  if (rc) goto fail;
  *out = &h->s;
  return 0;
fail:
  sl__stream_free(&h->s);
  return rc;
}

/* ---------------- S3 listing ---------------- */
typedef struct {
  sl__str body;
  bool oom;
} mem_sink;
static size_t mem_write(char *p, size_t size, size_t nmemb, void *ud) {
  mem_sink *m = ud;
  if (m->body.len > (64u << 20) || sl__str_append(&m->body, p, size * nmemb)) {
    m->oom = true;
    return 0;
  }
  return size * nmemb;
}

/* One GET into memory, with the stream's retries (a listing page is small); or, with `head` (a blk to take the
 * answer's headers), a HEAD. */
static int get_all(sl__str *out, const char *s3url, const char *query, const char *shown, blk *head) {
  req_cfg r;
  net_cfg c = cfg_read(NULL);
  int rc = req_make(&r, s3url, query);
  if (rc) {
    req_dispose(&r);
    return rc;
  }
  CURL *e = curl_easy_init();
  if (!e) {
    req_dispose(&r);
    return sl__oom("an S3 listing");
  }
  char errbuf[CURL_ERROR_SIZE];
  uint64_t rng = sl__mix64((uint64_t)(uintptr_t)e ^ sl__now_ns());
  rc = SL_EIO;
  for (int attempt = 1;; attempt++) {
    mem_sink m = {{0}, false};
    errbuf[0] = 0;
    easy_setup(e, &r, &c);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, mem_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &m);
    if (head) {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
      curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
      curl_easy_setopt(e, CURLOPT_HEADERDATA, head);
    }
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode res = curl_easy_perform(e);
    long st = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
    char why[CURL_ERROR_SIZE + 128];
    if (m.oom) {
      sl__str_dispose(&m.body);
      rc = sl__err(SL_ENOMEM, "LIST %s: the answer is larger than 64 MiB or memory ran out", shown);
      break;
    }
    if (res == CURLE_OK && st == 200) {
      *out = m.body;
      rc = 0;
      break;
    }
    bool retry;
    if (res == CURLE_OK) {
      char hint[128];
      body_hint(hint, sizeof hint, m.body.s ? m.body.s : "", m.body.len);
      snprintf(why, sizeof why, "HTTP %ld%s", st, hint);
      retry = status_retryable(st);
    } else {
      snprintf(why, sizeof why, "%s%s%s", curl_easy_strerror(res), errbuf[0] ? ": " : "", errbuf);
      retry = curl_retryable(res);
    }
    sl__str_dispose(&m.body);
    if (!retry) {
      rc = sl__err(st == 404 ? SL_ENOTFOUND : SL_EIO, "%s %s: %s", head ? "HEAD" : "LIST", shown, why);
      break;
    }
    if (attempt >= c.attempts) {
      rc = sl__err(SL_EIO, "%s %s: gave up after %d attempts (the last: %s)", head ? "HEAD" : "LIST", shown, attempt,
                   why);
      break;
    }
    uint64_t ns = backoff_ns(&c, attempt, &rng);
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    nanosleep(&ts, NULL);
  }
  curl_easy_cleanup(e);
  req_dispose(&r);
  return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int sl__s3_glob(char ***out, size_t *n, const char *url) {
  pthread_once(&g_once, global_init);
  if (g_init_rc != CURLE_OK) return sl__err(SL_EIO, "libcurl: %s", curl_easy_strerror(g_init_rc));
  char *bucket, *pattern;
  int rc = sl__s3_split(&bucket, &pattern, url);
  if (rc) return rc;
  size_t pl = strcspn(pattern, "*?[");
  char *prefix = sl__strndup(pattern, pl), *ep = prefix ? sl__uri_encode(prefix, false) : NULL;
  char *bucket_url = NULL, *token = NULL;
  sl__str s = {0};
  if (!ep || sl__str_printf(&s, "s3://%s/", bucket)) rc = sl__oom("an S3 listing");
  bucket_url = s.s;
  size_t found = 0, first = *n;
  for (int page = 0; !rc; page++) {
    /* the query in SigV4's canonical order (sorted by name, values encoded), as libcurl 7.88 signs it as given */
    sl__str q = {0};
    char *et = token ? sl__uri_encode(token, false) : NULL;
    /* SLUICE_S3_LIST_PAGE: keys per page (S3's default and cap is 1000; the tests ask for a few to page) */
    uint64_t page_keys = env_u64("SLUICE_S3_LIST_PAGE", 0, 1, 1000);
    char mk[32] = "";
    if (page_keys) snprintf(mk, sizeof mk, "&max-keys=%llu", (unsigned long long)page_keys);
    if ((token && !et) || sl__str_printf(&q, "%s%s%slist-type=2%s&prefix=%s", token ? "continuation-token=" : "",
                                          token ? et : "", token ? "&" : "", mk, ep)) {
      sl__free(et);
      sl__str_dispose(&q);
      rc = sl__oom("an S3 listing");
      break;
    }
    sl__free(et);
    sl__str body = {0};
    rc = get_all(&body, bucket_url, q.s, url, NULL);
    sl__str_dispose(&q);
    if (rc) break;
    char **keys = NULL, *next = NULL;
    uint64_t *sizes = NULL;
    size_t nk = 0;
    rc = sl__s3_list_parse(&keys, &sizes, &nk, &next, body.s ? body.s : "", body.len, url);
    sl__str_dispose(&body);
    for (size_t i = 0; i < nk; i++) {
      if (!rc && fnmatch(pattern, keys[i], FNM_PATHNAME) == 0) {
        sl__str u = {0};
        char **a = sl__realloc(*out, (*n + 2) * sizeof *a);
        if (!a || sl__str_printf(&u, "s3://%s/%s", bucket, keys[i])) {
          if (a) *out = a;
          sl__str_dispose(&u);
          rc = sl__oom("an S3 listing");
        } else {
          *out = a;
          a[(*n)++] = u.s;
          a[*n] = NULL;
          found++;
        }
      }
      sl__free(keys[i]);
    }
    sl__free(keys);
    sl__free(sizes);
    sl__free(token);
    token = next;
    if (!token) break;
  }
  sl__free(token);
  if (!rc && !found) rc = sl__err(SL_ENOTFOUND, "%s: no object of the bucket matches", url);
  if (!rc) qsort(*out + first, found, sizeof **out, cmp_str);
  sl__free(bucket);
  sl__free(pattern);
  sl__free(prefix);
  sl__free(ep);
  sl__free(bucket_url);
  return rc;
}

/* ---------------- a remote object's identity (saved states) ---------------- */
int sl__remote_stamp(const char *url, uint64_t *size, uint64_t *tag) {
  pthread_once(&g_once, global_init);
  if (g_init_rc != CURLE_OK) return sl__err(SL_EIO, "libcurl: %s", curl_easy_strerror(g_init_rc));
  char *shown = sl__url_shown(url);
  if (!shown) return sl__oom("a URL");
  blk *h = sl__calloc(1, sizeof *h);
  int rc = h ? 0 : sl__oom("a HEAD request");
  sl__str body = {0};
  if (!rc) {
    h->clen = -1;
    rc = get_all(&body, url, NULL, shown, h);
  }
  sl__str_dispose(&body);
  if (!rc && h->clen < 0) rc = sl__err(SL_EIO, "HEAD %s: no Content-Length in the answer", shown);
  if (!rc) {
    char id[512];
    if (h->etag[0]) snprintf(id, sizeof id, "etag:%s", h->etag);
    else snprintf(id, sizeof id, "modified:%s", h->modified);
    *size = (uint64_t)h->clen;
    *tag = XXH3_64bits(id, strlen(id));
  }
  sl__free(h);
  sl__free(shown);
  return rc;
}
