/* io/stream_http_off.c: what stands in for io/stream_http.c in a build without libcurl (SL_WITH_REMOTE=OFF): a URL
 * is refused with a message that says so. */
#include "io/stream_int.h"

int sl__stream_http_open(sl__stream **out, const char *url, const sl__stream_opts *opts) {
  (void)opts;
  *out = NULL;
  char *shown = sl__url_shown(url);
  int rc = sl__err(SL_EINVAL, "%s: this build of sluice reads no remote data (configured with SL_WITH_REMOTE=OFF)",
                   shown ? shown : "a URL");
  sl__free(shown);
  return rc;
}

int sl__s3_glob(char ***out, size_t *n, const char *url) {
  (void)out;
  (void)n;
  return sl__stream_http_open(&(sl__stream *){NULL}, url, NULL);
}

int sl__remote_stamp(const char *url, uint64_t *size, uint64_t *tag) {
  (void)size;
  (void)tag;
  return sl__stream_http_open(&(sl__stream *){NULL}, url, NULL);
}
