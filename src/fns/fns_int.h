/* fns/fns_int.h: the function registry's lookup (what map/filter call) and what the built-in function files
 * share: the table type and helpers. */
#ifndef SL_FNS_H
#define SL_FNS_H

#include "core/args_int.h"
#include "core/core_int.h"
#include "core/schema_int.h"

/* A component a function reads or writes. Its name is the value of arg `arg` when given, else `name` (a fixed name
 * or the arg's default), else the name `like` resolves to (an output written in place of its input by default). */
enum {
  SL__IO_OPTIONAL = 1u << 0, /* read only when its arg is given (or its default names one) */
  SL__IO_CONSUMED = 1u << 1, /* removed from the element after the call unless "keep": true */
  SL__IO_IF_PRESENT = 1u << 2 /* read when the element has it (no error when missing) */
};
#define SL__DT_SAME (-2)   /* a write's dtype: that of the first read */
#define SL__RANK_SAME (-2) /* a write's rank: that of the first read */
typedef struct sl__fn_io {
  const char *arg;
  const char *name;
  const char *like;
  int dtype; /* an sl_dtype, SL__DT_ANY or SL__DT_SAME */
  int rank;  /* >= 0, -1 any, or SL__RANK_SAME */
  unsigned flags;
} sl__fn_io;

/* A function's self-description: args, the components it reads and writes (tables end with an all-NULL entry), and
 * optionally an `infer` hook for structure the tables cannot say (parse_example's features, select's list), called
 * after the reads are checked and the writes applied, with the args (may be NULL) at JSON path `path`. */
typedef struct sl__fn_schema {
  const char *doc;
  const sl__arg *args;
  const sl__fn_io *reads, *writes;
  int (*infer)(sl__struct *s, const sl_args *a, const char *origin);
  /* Optional, for a function flagged SL_FN_RANDOM whose randomness depends on its args: false when an instance with
   * these args draws nothing (the planner may then cache above it). Conservative: true when unsure. */
  bool (*is_random)(json_t *args);
} sl__fn_schema;

typedef struct sl__fn_entry {
  const char *name;
  sl_fn_def def;
  const sl__fn_schema *schema; /* every built-in has one (test_schema checks) */
} sl__fn_entry;

/* What a function registered at run time declared it reads and makes (sl_fn_declare). Never freed: a pipeline
 * built from an earlier declaration may still point at it. */
typedef struct sl__fn_decl {
  int nreads, nmakes;
  sl_fn_io *reads, *makes; /* names copied into the same block */
  struct sl__fn_decl *next; /* every declaration made, in one list (kept, see above) */
} sl__fn_decl;

/* A function as the registry hands it out: a copy of the definition and the payload (name is NULL for a
 * built-in). */
typedef struct sl__fn {
  char *name;
  sl_fn_def def;
  void *payload;
  const sl__fn_schema *schema; /* NULL for functions registered at run time */
  const sl__fn_decl *decl;     /* a function registered at run time that declared its components; else NULL */
} sl__fn;

/* Looks a function up by name (run-time registrations first, then the built-ins) and copies it into out;
 * SL_ENOTFOUND when there is none. */
int sl__fn_lookup(const char *name, sl__fn *out);

/* Each fn_*.c exports one NULL-name-terminated table. */
extern const sl__fn_entry sl__fns_basic[];
extern const sl__fn_entry sl__fns_example[];
extern const sl__fn_entry sl__fns_jpeg[];
extern const sl__fn_entry sl__fns_codec[];
extern const sl__fn_entry sl__fns_image[];
extern const sl__fn_entry sl__fns_text[];
extern const sl__fn_entry sl__fns_tabular[];

/* The built-in entries, in table order, NULL-name-terminated (for docs and tests); *n gets their number. */
const sl__fn_entry *sl__fn_builtin(size_t i);
size_t sl__fn_builtin_count(void);

/* Checks map/filter args against the function's schema (no-op for functions without one). */
int sl__fn_check_args(const sl__fn_schema *sc, json_t *args, const char *path, const char *fn);
/* Applies a function's reads and writes to structure s (the element before the call). `origin` (the op's path,
 * kept by the components it makes) must outlive s; errors name `who` ("ops[3] (map decode_jpeg)") and list the
 * components that exist. A function without a schema opens s. */
int sl__fn_infer(sl__struct *s, const sl__fn_schema *sc, json_t *args, const char *path, const char *origin,
                 const char *who);
/* The same for a function registered at run time: what it declared (sl_fn_declare), or an open s when nothing. */
int sl__fn_infer_decl(sl__struct *s, const sl__fn_decl *d, const char *origin, const char *who);

/* The component `name` of e (an arg of the function names it), or SL_EINVAL naming the op and the element when e has
 * none (fn_common.c). */
int sl__fn_component(sl_elem *e, const sl_fn_call *call, const char *name, sl_comp **out);
/* The first of the alternatives e has (sl__get_alts: "jpg;png;webp"); when it has none, the error sl__fn_component
 * gives, naming them all and the components e has (a data error for a tar sample, else a spec error). */
int sl__fn_component_alt(sl_elem *e, const sl_fn_call *call, const sl__alts *alts, sl_comp **out);
/* Removes every alternative e has but `keep` (a consumed input whose name the output does not reuse). */
void sl__fn_remove_alts(sl_elem *e, const sl__alts *alts, const char *keep);
/* Where element e came from, for a message: " (file 'F')" when it has a byte-string `filename` (files,
 * image_folder), " (shard 'U', sample 'K')" when it has `__url__` and `__key__` (tar), else "" (in buf, n bytes;
 * 2200 hold both names whole up to 1024 bytes each). */
const char *sl__fn_origin(const sl_elem *e, char *buf, size_t n);

/* The whole of regular file `path` into a new buffer (*out, caller unrefs; *len bytes). Errors name the file:
 * SL_ENOTFOUND when missing, SL_EINVAL for a non-regular file or one over max_bytes, SL_EIO (fn_codec.c). */
int sl__read_whole_file(const char *path, int64_t max_bytes, sl_buf **out, size_t *len);

/* Value i of a numeric tensor's data as a double (any dtype but bytes). */
static inline double sl__num_at(const void *in, sl_dtype dt, int64_t i) {
  switch (dt) {
  case SL_UINT8: return ((const uint8_t *)in)[i];
  case SL_INT32: return ((const int32_t *)in)[i];
  case SL_INT64: return (double)((const int64_t *)in)[i];
  case SL_FLOAT32: return ((const float *)in)[i];
  default: return ((const double *)in)[i];
  }
}

#endif
