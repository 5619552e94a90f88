/* core/schema_int.h: how ops and functions describe themselves. An arg table (name, type, default, range,
 * flags, one-line doc) that spec checking, defaults, docs and the planner read; the check of a spec object against
 * it (errors name the JSON path and the nearest valid name); and the element structure (components, dtypes, ranks,
 * dims) that pipeline validation follows op by op. Lives in core because fns and ops both describe themselves. */
#ifndef SL_CORE_SCHEMA_INT_H
#define SL_CORE_SCHEMA_INT_H

#include <jansson.h>

#include "core/core_int.h"

typedef enum sl__arg_type {
  SL__ARG_INT,   /* an integer */
  SL__ARG_NUM,   /* a number */
  SL__ARG_BOOL,  /* true or false */
  SL__ARG_STR,   /* a string */
  SL__ARG_ENUM,  /* one of the strings in `values` ("a|b|c") */
  SL__ARG_COMP,  /* a string naming a component */
  SL__ARG_NUMS,  /* an array of numbers (lo..hi bound its length) */
  SL__ARG_INTS,  /* an array of integers (lo..hi bound its length) */
  SL__ARG_STRS,  /* an array of strings (lo..hi bound its length) */
  SL__ARG_GLOB,  /* a string or an array of strings */
  SL__ARG_OBJECT, /* an object, checked by its owner */
  SL__ARG_ARRAY,  /* an array, checked by its owner */
  SL__ARG_CHAIN,  /* a nested chain of ops (interleave's source) */
  SL__ARG_SCALAR, /* a number or a string */
  SL__ARG_COMP_ALT /* a component name, or alternatives: "jpg;png;webp" or ["jpg", "png", "webp"] (the first an
                    * element has is read: WebDataset's to_tuple convention) */
} sl__arg_type;

enum {
  SL__ARGF_REQUIRED = 1u << 0, /* must be given */
  SL__ARGF_TUNABLE = 1u << 1,  /* also accepts "autotune": the planner may set it */
  SL__ARGF_KNOB = 1u << 2,     /* a performance knob: changes speed, not the data (not part of the identity) */
  SL__ARGF_LO = 1u << 3,       /* lo is a bound */
  SL__ARGF_HI = 1u << 4,       /* hi is a bound */
  SL__ARGF_AUTO_STR = 1u << 5  /* also accepts the string "auto" (shard) */
};

/* One arg or knob. Tables list them positionally: {name, type, def, flags, lo, hi, values, doc}. */
typedef struct sl__arg {
  const char *name;
  sl__arg_type type;
  const char *def;    /* the default as written: JSON for numbers and booleans ("1", "true"), bare text for strings
                       * ("bilinear"); NULL: none, or computed (the doc says how) */
  unsigned flags;
  double lo, hi;      /* the valid range (SL__ARGF_LO / SL__ARGF_HI); for arrays, their length */
  const char *values; /* SL__ARG_ENUM: the valid strings, "|"-separated */
  const char *doc;    /* one line */
  /* SL__ARG_OBJECT: each value, SL__ARG_ARRAY: each entry is an object checked against this table (NULL: not
   * checked here). */
  const struct sl__arg *items;
} sl__arg;
#define SL__LOHI (SL__ARGF_LO | SL__ARGF_HI)

/* The names an SL__ARG_COMP_ALT value gives, in order ("jpg;png" or ["jpg", "png"]; the value was checked). The
 * names point into `text` (a copy), so the struct may outlive the JSON. */
#define SL__ALTS_MAX 8
typedef struct sl__alts {
  int n;
  const char *name[SL__ALTS_MAX];
  char text[1024];
} sl__alts;
/* Fills *out from value v (a string or an array of strings); SL_EINVAL naming `path`.`key` when the names do not fit
 * `text` or are more than SL__ALTS_MAX. */
int sl__alts_from_json(sl__alts *out, json_t *v, const char *path, const char *key);
/* "jpg;png;webp": the names joined for a message (into buf, n bytes). */
const char *sl__alts_text(const sl__alts *a, char *buf, size_t n);

/* The entry of `name` in a NULL-name-terminated table, or NULL. */
const sl__arg *sl__arg_find(const sl__arg *schema, const char *name);
/* Damerau-Levenshtein (optimal string alignment) distance, capped at 255. */
int sl__edit_distance(const char *a, const char *b);
/* The name in the table nearest to `name` when close enough to be a typo (NULL otherwise). */
const char *sl__arg_suggest(const sl__arg *schema, const char *name);
/* The same over a NULL-terminated list of strings. */
const char *sl__name_suggest(const char *const *names, size_t n, const char *name);

/* Checks object `obj` (at JSON path `path`, e.g. "ops[4]" or "ops[4].args") against `schema`: every key known
 * (keys in `skip`, a NULL-terminated list, are someone else's), every value of its type and in its range, every
 * required arg present. `what` names the owner in messages ("op 'batch'", "function 'decode_jpeg'"), `word` its
 * entries ("knob", "arg"). SL_EINVAL with a message naming the path, the valid range or the nearest name. */
int sl__args_check(const sl__arg *schema, json_t *obj, const char *path, const char *const *skip, const char *what,
                   const char *word);
/* Checks one value `v` of entry `a` (its type and range; "autotune" where tunable) at `path`.`a->name`. */
int sl__arg_check_value(const char *path, const sl__arg *a, json_t *v);
/* The default of `key` in `schema` as a JSON value (new reference), or NULL when it has none. */
json_t *sl__arg_default(const sl__arg *schema, const char *key);
/* The type's name for docs and messages ("integer", "\"a\" | \"b\"", ...). */
const char *sl__arg_type_name(const sl__arg *a);
/* Writes the valid range of `a` ("1..16777216", ">= 0") into b; "" when unbounded. */
const char *sl__arg_range(char *b, size_t n, const sl__arg *a);

/* ---- element structure ----
 * What validation knows of the elements an op makes: their components with dtype, rank and dims. A dim is >= 0
 * when known, SL__DIM_UNKNOWN when fixed but unknown statically, SL__DIM_VARIES when it may differ between
 * elements (a token list, a variable-length feature). `open` means components may exist that nothing declared
 * (after a function without a schema): missing components are then not errors. */
#define SL__DIM_UNKNOWN (-1)
#define SL__DIM_VARIES (-2)
#define SL__DT_ANY (-1)

typedef struct sl__comp_desc {
  const char *name;   /* borrowed: static, or from the spec (lives as long as the pipeline) */
  int dtype;          /* an sl_dtype, or SL__DT_ANY */
  int rank;           /* -1 unknown */
  int64_t dims[SL_MAX_RANK];
  const char *origin; /* path of the op that made it ("ops[2]"), borrowed */
} sl__comp_desc;

typedef struct sl__struct {
  int n;
  bool open;
  sl__comp_desc c[SL_MAX_COMPONENTS];
} sl__struct;

sl__comp_desc *sl__struct_get(sl__struct *s, const char *name);
/* Adds or replaces component `name`; dims of rank `rank` set to SL__DIM_UNKNOWN. SL_EINVAL when full. */
int sl__struct_put(sl__struct *s, const char *name, int dtype, int rank, const char *origin, sl__comp_desc **out);
void sl__struct_remove(sl__struct *s, const char *name);
/* "image uint8 [?, ?, 3], label int64 []" ("..." appended when open, "(nothing)" when empty). */
int sl__struct_describe(sl__str *b, const sl__struct *s);
/* The components' names, comma-separated, for messages. */
int sl__struct_names(sl__str *b, const sl__struct *s);

#endif
