/* sluice/common.h: error codes, the per-thread error message, version, sl_free, allocator hooks.
 * Every sluice function returns 0 on success or a negative SL_E... code; the message that names what was wrong
 * is kept per thread and read with sl_error_last() on the thread that saw the error. */
#ifndef SLUICE_COMMON_H
#define SLUICE_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* SL_EXTERN marks a declaration of the public API. libsluice is built with -fvisibility=hidden, so a function
 * leaves libsluice.so only with this mark (the static library is not affected). */
#if defined(__GNUC__) || defined(__clang__)
#define SL_EXTERN __attribute__((visibility("default")))
#else
#define SL_EXTERN
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. SL_END is not an error: the stream is exhausted. */
enum {
  SL_OK = 0,
  SL_END = 1,
  SL_ERROR = -1,     /* generic: read the message */
  SL_EINVAL = -2,    /* bad argument, spec or input value */
  SL_ENOMEM = -3,    /* allocation failed */
  SL_EIO = -4,       /* a file or device error */
  SL_ECORRUPT = -5,  /* data failed a checksum or a format check */
  SL_ENOTFOUND = -6, /* a named thing does not exist */
  SL_ECANCELED = -7, /* the pipeline was cancelled */
  SL_EVERSION = -8   /* a file or database of another version */
};

/* The message of the last error set on the calling thread ("" when none). Valid until the next sluice call on
 * this thread. Safe from any thread. */
SL_EXTERN const char *sl_error_last(void);
/* The last error's code on this thread (0 when none). */
SL_EXTERN int sl_error_code(void);
/* Clears this thread's error. */
SL_EXTERN void sl_error_clear(void);
/* A short name for a code ("SL_EINVAL"). */
SL_EXTERN const char *sl_strerror(int code);

/* The library's version string, e.g. "0.1.0". */
SL_EXTERN const char *sl_version(void);

/* Frees anything the library allocated and handed to the caller (JSON and HTML strings, name arrays, feature
 * vectors), through the installed allocator. Accepts NULL. Safe from any thread. */
SL_EXTERN void sl_free(void *ptr);

/* Copies `src` to `dst` (at most cap - 1 bytes and a NUL, like snprintf) with the passwords of connection strings
 * replaced by `***`: the password of `scheme://user:PASSWORD@host` and the value of `password=...` (URI query
 * strings and libpq key=value conninfo, quoted or not), whatever characters the password holds, and the text of
 * every password of a store URI the process has opened (raw and decoded) wherever it appears. Returns the length
 * of the whole redacted text, so `sl_redact(NULL, 0, src) + 1` bytes hold it. Every message, page and log line of
 * sluice goes through it (docs/reliability.md). `src` NULL is "". Safe from any thread. */
SL_EXTERN size_t sl_redact(char *dst, size_t cap, const char *src);

/* Writes `len` bytes of `data` to `path` atomically: into a hidden temporary created beside it (never through a
 * link planted there), synced, then renamed over `path`. On failure (a full disk: the message says ENOSPC's "No
 * space left on device") `path` is as it was and the temporary is gone. When `path` is a symbolic link the link
 * itself is replaced by the new file; its target is not written. Safe from any thread. */
SL_EXTERN int sl_file_write(const char *path, const void *data, size_t len);

/* Allocator hooks. All of libsluice's heap use goes through these, and so does that of jansson, stb_image_resize
 * and libspng; tests install a failing allocator to check that every allocation failure surfaces as SL_ENOMEM.
 * The other libraries allocate their own working state with the C library's malloc (libjpeg-turbo, libwebp,
 * libarchive, SQLite, libpq, GLPK, XGBoost); decoded pixels always land in sluice's buffers. Not thread-safe: set
 * before any other sluice call. */
typedef struct sl_allocator {
  void *(*malloc_fn)(size_t size, void *payload);
  void *(*realloc_fn)(void *ptr, size_t size, void *payload);
  void (*free_fn)(void *ptr, void *payload);
  void *payload;
} sl_allocator;
/* Installs `a` (copied), or the C library's allocator when `a` is NULL. */
SL_EXTERN void sl_set_allocator(const sl_allocator *a);

#ifdef __cplusplus
}
#endif
#endif
