/* io/stream_int.h: the byte streams the file readers (tfrecord, tar, lines) read: a local file, or a remote object
 * (http://, https://, s3://) fetched by large ranged requests kept in flight ahead of the reader. Callers never ask
 * which one they have. io/stream.c holds the local one and the dispatch; io/stream_http.c the remote one on
 * libcurl (io/stream_http_off.c stands in when the build has no libcurl, SL_WITH_REMOTE=OFF). */
#ifndef SL_IO_STREAM_INT_H
#define SL_IO_STREAM_INT_H

#include "core/core_int.h"

#include <stdio.h>

typedef struct sl__stream sl__stream;
typedef struct sl__keep sl__keep;

/* How a remote stream reads ahead. 0 in a field: its default (SLUICE_REMOTE_BLOCK / SLUICE_REMOTE_INFLIGHT in the
 * environment, else 8 MiB blocks, 4 in flight). Ignored for local files. */
typedef struct {
  uint64_t block;  /* bytes per ranged request */
  int inflight;    /* requests in flight ahead of the reader (its memory: inflight x block) */
  sl__keep *keep;  /* where remote objects read in full are kept for the next open of the same URL (NULL: none) */
} sl__stream_opts;

/* Remote objects kept in memory after they were read in full, up to a budget of bytes, so that the next epoch of a
 * pipeline reads its shards from memory instead of the link (a reader's "keep" knob; docs/remote.md). An object is
 * kept only when all of its bytes were received (a stream closed early, or one that failed, keeps nothing) and only
 * while the budget has room for its whole size, reserved when its size is known; a kept object is never evicted
 * and never asked of the server again while the keep lives (what a cache of one run promises: the ETag it had
 * when it was read). Thread-safe: the streams of an interleave open, fill and read it at once. */
int sl__keep_create(sl__keep **out, uint64_t budget);
void sl__keep_free(sl__keep *k);
/* True once an object was opened a second time (a later epoch began) and no object is being read into the keep:
 * from then on its reader runs from memory as far as the budget allowed (the pipeline's steady state). */
bool sl__keep_complete(sl__keep *k);

/* What a remote stream did (the tracer's network counters): requests sent (retries included), bytes received,
 * the summed time to first byte and time transferring of the requests, and the retries among them. */
typedef struct {
  uint64_t requests, bytes, ttfb_ns, xfer_ns, retries;
  uint64_t block, inflight; /* its read-ahead: bytes per request, requests in flight */
  /* Bytes received while a request was the only one of the stream asked and not ended, and its transfer time then;
   * bytes received while two or more were, and the time they were transferring (the union of the intervals between
   * their bytes): the planner
   * compares the rates to see a saturated link (plan_net.c). A request's first bytes are in neither (they have no
   * interval: they came with its first byte) but those that came while others transferred count as shared. */
  uint64_t solo_bytes, solo_ns, overlap_bytes, overlap_ns;
  uint64_t cpu_ns; /* CPU time of its I/O thread (receiving, copying): gone when a later epoch reads a keep */
} sl__net_stats;

/* True when `path` names a remote object (http://, https:// or s3://). */
bool sl__is_url(const char *path);

/* Opens `path` (a local file or a URL). A remote open waits for the first response's headers, so that a missing
 * object fails here: SL_ENOTFOUND (404, ENOENT), SL_EIO (unreachable after the retries) or SL_EINVAL (a URL it
 * cannot read). The message names the path (a URL without its credentials or query). opts may be NULL. */
int sl__stream_open(sl__stream **out, const char *path, const sl__stream_opts *opts);
/* Reads up to n bytes into dst; *got < n only at the end of the stream (0 at the end). */
int sl__stream_read(sl__stream *s, void *dst, size_t n, size_t *got);
/* The same, but returns as soon as some bytes are there (*got > 0, 0 only at the end): a reader that parses as the
 * bytes come (tar, tfrecord, lines) does not wait for a whole buffer of a remote object's first block, which shares
 * the link with the blocks behind it and with the other files an interleave opens. */
int sl__stream_read_some(sl__stream *s, void *dst, size_t n, size_t *got);
/* Moves the read position to byte `off` (<= the size); a remote stream drops what it fetched outside its window. */
int sl__stream_seek(sl__stream *s, uint64_t off);
/* The size in bytes; the read position. */
uint64_t sl__stream_size(const sl__stream *s);
uint64_t sl__stream_tell(const sl__stream *s);
/* Bytes read from the disk or the network so far (a remote stream's read-ahead included). */
uint64_t sl__stream_source_bytes(const sl__stream *s);
/* The remote stream's counters (all 0 for a local file); false for a local file. */
bool sl__stream_net(const sl__stream *s, sl__net_stats *st);
/* True for a remote stream: its source bytes are network bytes (the op's net_bytes), never disk_bytes, which the
 * planner weighs against what the block devices delivered. */
bool sl__stream_remote(const sl__stream *s);
/* True for a stream that reads a kept copy of a remote object (opts.keep) rather than the object itself. */
bool sl__stream_kept(const sl__stream *s);
/* The name to show in messages: the path, or the URL without credentials or query. */
const char *sl__stream_name(const sl__stream *s);
/* A remote object's identity, "etag:<ETag>" or "modified:<Last-Modified>", then ";size:<bytes>"; "" for a local
 * file (its identity is the reader's business). Valid until the stream is freed. */
const char *sl__stream_identity(const sl__stream *s);
/* Frees s (accepts NULL); a remote stream's requests are cancelled and its thread joined. */
void sl__stream_free(sl__stream *s);

/* ---- the implementations' side ---- */
typedef struct {
  int (*read)(sl__stream *s, void *dst, size_t n, size_t *got, bool some);
  int (*seek)(sl__stream *s, uint64_t off);
  uint64_t (*size)(const sl__stream *s);
  uint64_t (*tell)(const sl__stream *s);
  uint64_t (*source_bytes)(const sl__stream *s);
  bool (*net)(const sl__stream *s, sl__net_stats *st);
  const char *(*identity)(const sl__stream *s);
  void (*free)(sl__stream *s);
} sl__stream_vt;
struct sl__stream {
  const sl__stream_vt *vt;
  char *name;
};
/* The remote implementation: opens a URL (stream_http.c, or the stand-in that says the build has none). */
int sl__stream_http_open(sl__stream **out, const char *url, const sl__stream_opts *opts);
/* The remote stream's side of a keep (io/stream.c): asks room for an object of `size` bytes under `url`; the
 * object's bytes are then written to *buf (size bytes, the stream's to fill) and handed over with
 * sl__keep_done(k, slot, full): kept when full, else the room is given back and *buf freed. A NULL *buf (no room,
 * the object already kept or being read, no memory) asks nothing more. Returns the slot for sl__keep_done. */
void *sl__keep_reserve(sl__keep *k, const char *url, uint64_t size, const char *ident, unsigned char **buf);
void sl__keep_done(sl__keep *k, void *slot, bool full);

/* A remote object's identity for a saved state, asked by a HEAD request: its size and a 64-bit hash of its ETag
 * (or, without one, its Last-Modified). The error names the URL (without credentials). */
int sl__remote_stamp(const char *url, uint64_t *size, uint64_t *tag);

/* ---- URLs (io/url.c: no network, fuzzed) ---- */
/* The URL as messages show it: no user:password@, no query string (a presigned URL's signature is a secret);
 * NULL when out of memory. sl__free it. */
char *sl__url_shown(const char *url);
/* An s3://bucket/key URL split: *bucket and *key are new strings (sl__free them); key may be "" (a bucket or a
 * prefix). SL_EINVAL naming the URL when it is not one. */
int sl__s3_split(char **bucket, char **key, const char *url);
/* Expands brace ranges, WebDataset's shard notation: "a-{000..127}.tar" gives a-000.tar ... a-127.tar (the width of
 * the first bound is kept when it starts with 0), "{a,b}" gives both words, several braces multiply. The strings
 * are appended to *out (a NULL-terminated array, *n of them; sl__free each and the array) in order. More than
 * `max` names, an unbalanced brace or a range with a bound above 10^12 is SL_EINVAL naming the pattern. */
int sl__brace_expand(char ***out, size_t *n, const char *pattern, size_t max);
/* Percent-encodes s the way SigV4 wants a query value or a key (unreserved characters kept; '/' too when
 * keep_slash) into a new string; NULL when out of memory. */
char *sl__uri_encode(const char *s, bool keep_slash);

/* ---- S3 listing (io/s3_list.c parses; the request is in stream_http.c) ---- */
/* One page of a ListObjectsV2 answer parsed: the keys (with their sizes) appended to *keys / *sizes (*n of them),
 * *next the continuation token (NULL when this is the last page). SL_ECORRUPT naming `where` when the XML is not
 * such an answer; an S3 error document (<Error><Code>...) gives SL_EIO with its code and message. */
int sl__s3_list_parse(char ***keys, uint64_t **sizes, size_t *n, char **next, const char *xml, size_t len,
                      const char *where);
/* Lists s3://bucket/prefix*pattern: the URLs (s3://bucket/key) of the keys under the prefix that match the glob
 * (fnmatch, '/' matched only by '/'), sorted, appended to *out (*n). SL_ENOTFOUND when none match. */
int sl__s3_glob(char ***out, size_t *n, const char *url);

#endif
