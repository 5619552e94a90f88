/* sluice/fn.h: element functions that `map` and `filter` run, and how users add their own.
 * A function has optional per-op state made by init() from the op's "args" object; call() then runs once per
 * element, possibly on several worker threads at once (parallel map), so call() must not mutate shared state
 * without its own synchronisation. Randomness must come from call->seed, which depends only on the pipeline
 * seed, the op and the element's index: the output is then the same whatever the parallelism. */
#ifndef SLUICE_FN_H
#define SLUICE_FN_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "element.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read-only view of an op's "args" object. */
typedef struct sl_args sl_args;
/* Each getter returns 0 and the value (or `def` when the key is absent), or SL_EINVAL with a message naming
 * the JSON path when the value has the wrong type. */
SL_EXTERN int sl_args_int(int64_t *out, const sl_args *a, const char *key, int64_t def);
SL_EXTERN int sl_args_double(double *out, const sl_args *a, const char *key, double def);
SL_EXTERN int sl_args_bool(bool *out, const sl_args *a, const char *key, bool def);
/* The returned string lives as long as the pipeline. */
SL_EXTERN int sl_args_string(const char **out, const sl_args *a, const char *key, const char *def);
/* Reads a numeric array into out[0..max); *n gets its length. Absent: *n = 0. */
SL_EXTERN int sl_args_doubles(double *out, int *n, const sl_args *a, const char *key, int max);
SL_EXTERN bool sl_args_has(const sl_args *a, const char *key);
/* JSON path of the args object ("ops[3].args"), for messages. */
SL_EXTERN const char *sl_args_path(const sl_args *a);
/* The value at `key` serialised as JSON (NULL when absent). Free with sl_free(). */
SL_EXTERN char *sl_args_json(const sl_args *a, const char *key);

/* Per-call information. */
typedef struct sl_fn_call {
  uint64_t index;      /* the element's position in the op's input stream during this epoch */
  uint64_t seed;       /* per-element seed: a hash of pipeline seed, op, epoch and index */
  bool keep;           /* filter functions set it to false to drop the element (starts true) */
  const char *op_path; /* "ops[4]": name it in error messages */
  /* A function the planner fused from several ops (decode_and_crop_jpeg standing for a crop and a random_flip)
   * draws each part's randomness from the seed that part's op had: seeds[k] for the k-th (seeds[0] == seed).
   * NULL and 0 for an ordinary call. */
  const uint64_t *seeds;
  int nseeds;
  /* A function that reads files adds the bytes it read here (starts 0): they count as its op's disk_bytes in a
   * trace, which the planner weighs against the bytes the block device delivered (read_file). */
  uint64_t read_bytes;
} sl_fn_call;

enum {
  SL_FN_RANDOM = 1u << 0, /* output depends on call->seed (a cache above it would freeze the randomness) */
  SL_FN_FILTER = 1u << 1, /* a predicate for `filter`: sets call->keep, must not change the element */
  /* Declares that calls of all functions with this flag never run at once: each takes one process-wide lock, as
   * Python functions take the GIL. Together they get at most one core whatever the parallelism; the planner and
   * `analyze` plan and explain them so. (The flag does not add a lock: the function holds its own.) */
  SL_FN_SERIAL = 1u << 2
};

#define SL_FN_DEF_VERSION 1
typedef struct sl_fn_def {
  unsigned version; /* SL_FN_DEF_VERSION */
  unsigned flags;   /* SL_FN_RANDOM, SL_FN_FILTER */
  /* Optional. Makes the state from args. `payload` is the one given to sl_fn_register. The names init() asks
   * the sl_args getters for (present in the spec or not) are the function's args: any other name in the spec's
   * "args" is refused when the pipeline is built, naming its JSON path and the nearest of them (so a misspelt
   * name is caught); a function without init() takes no args. */
  int (*init)(void **state, const sl_args *args, void *payload);
  /* Transforms `elem` in place (map) or sets call->keep (filter). Returns 0 or a negative code after
   * sl_error_set() with a message. */
  int (*call)(void *state, sl_elem *elem, sl_fn_call *call);
  /* Optional. Frees the state. */
  void (*free)(void *state);
} sl_fn_def;

/* Registers (or replaces) function `name`. The definition is copied. Safe from any thread; pipelines built
 * afterwards see it. */
SL_EXTERN int sl_fn_register(const char *name, const sl_fn_def *def, void *payload);
/* A component a function registered at run time reads or makes (sl_fn_declare). */
typedef struct sl_fn_io {
  const char *name;          /* the component */
  int dtype;                 /* an sl_dtype, or -1: any (a read), not known before running (a make) */
  int rank;                  /* -1: any, or not known */
  int64_t dims[SL_MAX_RANK]; /* a made component's dims (`rank` of them): each >= 0, or -1 when not known */
} sl_fn_io;
/* Declares what registered function `name` reads and makes, as a built-in's schema says it: pipelines built
 * afterwards check it like a built-in. A read of a component no earlier op makes (or of another dtype or rank) is
 * a spec error naming the op, the nearest name and the components there are; the components it makes join the
 * element after it (the others are taken to pass through). Without a declaration nothing is checked and the
 * structure after the function is open (anything may follow). The arrays are copied; registering `name` again
 * drops its declaration. SL_ENOTFOUND when no function `name` was registered, SL_EINVAL for a bad entry. */
SL_EXTERN int sl_fn_declare(const char *name, const sl_fn_io *reads, int nreads, const sl_fn_io *makes, int nmakes);
/* Names of registered functions, sorted, NULL-terminated; free with sl_free() (one block). */
SL_EXTERN int sl_fn_list(const char ***names);

/* Sets this thread's error (printf-style message) and returns `code`; for use inside function callbacks. */
SL_EXTERN int sl_error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A small fast PRNG (xoshiro256**) for functions: seed it from call->seed. */
typedef struct sl_rng { uint64_t s[4]; } sl_rng;
SL_EXTERN void sl_rng_seed(sl_rng *r, uint64_t seed);
SL_EXTERN uint64_t sl_rng_u64(sl_rng *r);
SL_EXTERN double sl_rng_uniform(sl_rng *r); /* [0, 1) */

#ifdef __cplusplus
}
#endif
#endif
