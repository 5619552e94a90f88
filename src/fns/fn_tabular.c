/* fns/fn_tabular.c: tabular functions: `parse_csv` (typed column groups, per-group defaults for empty fields,
 * RFC 4180 quoting, on_error "error" or "skip"), `hash_bucket` (XXH64 of strings mod N: stable across runs,
 * machines and versions) and `log1p` (log(1 + x) to float32, negatives clipped to 0 by default). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "fns/fns_int.h"

/* ---------------- parse_csv ---------------- */
typedef struct {
  const char *name;
  sl_dtype dtype;
  int64_t count; /* fields this group takes; output rank 1 [count] when `vector`, else a scalar */
  bool vector;
  bool has_default;
  double def_num;
  const char *def_str;
} csv_col;

typedef struct {
  const char *comp;
  char delim;
  bool skip, keep;
  int ncols;
  int64_t nfields;
  csv_col cols[SL_MAX_COMPONENTS];
  atomic_uint_fast64_t skipped;
} csv_state;

static void csv_free(void *st) { sl__free(st); }

static int csv_init(void **state, const sl_args *a, void *payload) {
  csv_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("parse_csv");
  const char *delim, *on_error;
  int rc;
  if ((rc = sl__get_str(&s->comp, a, "component")) || (rc = sl__get_str(&delim, a, "delimiter")) ||
      (rc = sl__get_str(&on_error, a, "on_error")) || (rc = sl__get_bool(&s->keep, a, "keep")))
    goto fail;
  if (strlen(delim) != 1 || delim[0] == '"' || delim[0] == '\n') {
    rc = sl__err(SL_EINVAL, "%s.delimiter: expected one character (not a quote or newline)", sl_args_path(a));
    goto fail;
  }
  s->delim = delim[0];
  if (strcmp(on_error, "error") && strcmp(on_error, "skip")) {
    rc = sl__err(SL_EINVAL, "%s.on_error: expected \"error\" or \"skip\"", sl_args_path(a));
    goto fail;
  }
  s->skip = !strcmp(on_error, "skip");
  json_t *cols = a->obj ? json_object_get(a->obj, "columns") : NULL;
  if (!json_is_array(cols) || json_array_size(cols) == 0 || json_array_size(cols) > SL_MAX_COMPONENTS - 1) {
    rc = sl__err(SL_EINVAL, "%s.columns: expected an array of 1 to %d column groups ({\"name\", \"dtype\", \"count\", "
                 "\"default\"})", sl_args_path(a), SL_MAX_COMPONENTS - 1);
    goto fail;
  }
  for (size_t i = 0; i < json_array_size(cols); i++) {
    json_t *c = json_array_get(cols, i);
    csv_col *col = &s->cols[s->ncols];
    json_t *nm = json_object_get(c, "name"), *dt = json_object_get(c, "dtype"), *cnt = json_object_get(c, "count"),
           *df = json_object_get(c, "default");
    if (!json_is_object(c) || !json_is_string(nm) || !json_is_string(dt)) {
      rc = sl__err(SL_EINVAL, "%s.columns[%zu]: expected {\"name\": ..., \"dtype\": ...}", sl_args_path(a), i);
      goto fail;
    }
    col->name = json_string_value(nm);
    if ((rc = sl_dtype_parse(&col->dtype, json_string_value(dt)))) {
      sl__err_wrap(rc, "%s.columns[%zu].dtype", sl_args_path(a), i);
      goto fail;
    }
    col->count = 1;
    if (cnt) {
      if (!json_is_integer(cnt) || json_integer_value(cnt) < 1 || json_integer_value(cnt) > 1000000) {
        rc = sl__err(SL_EINVAL, "%s.columns[%zu].count: expected an integer in 1..1000000", sl_args_path(a), i);
        goto fail;
      }
      col->count = json_integer_value(cnt);
      col->vector = true;
    }
    if (df) {
      col->has_default = true;
      if (col->dtype == SL_BYTES ? !json_is_string(df) : !json_is_number(df)) {
        rc = sl__err(SL_EINVAL, "%s.columns[%zu].default: expected a %s", sl_args_path(a), i,
                     col->dtype == SL_BYTES ? "string" : "number");
        goto fail;
      }
      if (col->dtype == SL_BYTES) col->def_str = json_string_value(df);
      else col->def_num = json_number_value(df);
      if (col->dtype != SL_BYTES && col->dtype != SL_FLOAT32 && col->dtype != SL_FLOAT64 &&
          !(fabs(col->def_num) < 0x1p62)) {
        rc = sl__err(SL_EINVAL, "%s.columns[%zu].default: out of range for %s", sl_args_path(a), i,
                     sl_dtype_name(col->dtype));
        goto fail;
      }
    }
    s->nfields += col->count;
    s->ncols++;
  }
  *state = s;
  return 0;
fail:
  sl__free(s);
  return rc;
}

/* One field: [b, e) of the line, unquoted when `quoted` (then "" stands for one quote). */
typedef struct {
  uint32_t b, e;
  bool quoted;
} csv_field;

static int csv_bad(csv_state *s, sl_fn_call *call, const sl_buf *line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A bad line: dropped under on_error "skip", else an error naming the element and, for a line from the `lines`
 * source, its file and line. */
static int csv_bad(csv_state *s, sl_fn_call *call, const sl_buf *line, const char *fmt, ...) {
  if (s->skip) {
    atomic_fetch_add_explicit(&s->skipped, 1, memory_order_relaxed);
    call->keep = false;
    return 0;
  }
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *file;
  uint64_t lineno;
  if (sl__buf_origin(&file, &lineno, line))
    return sl__err(SL_EINVAL, "%s: element %llu (%s, line %llu): %s (\"on_error\": \"skip\" drops such lines)",
                   call->op_path, (unsigned long long)call->index, file, (unsigned long long)lineno, msg);
  return sl__err(SL_EINVAL, "%s: element %llu: %s (\"on_error\": \"skip\" drops such lines)", call->op_path,
                 (unsigned long long)call->index, msg);
}

static int parse_num(const char *p, size_t n, sl_dtype dt, double *dv, int64_t *iv) {
  char buf[64];
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, p, n);
  buf[n] = 0;
  char *end;
  errno = 0;
  if (dt == SL_FLOAT32 || dt == SL_FLOAT64) {
    *dv = strtod(buf, &end);
    if (end != buf + n || errno == ERANGE) return -1;
    *iv = 0;
  } else {
    long long v = strtoll(buf, &end, 10);
    if (end != buf + n || errno == ERANGE) return -1;
    if (dt == SL_INT32 && (v < INT32_MIN || v > INT32_MAX)) return -1;
    if (dt == SL_UINT8 && (v < 0 || v > 255)) return -1;
    *iv = v;
    *dv = (double)v;
  }
  return 0;
}

/* What the helpers of csv_call return besides 0 and an error: the line was bad and on_error "skip" dropped it. */
enum { CSV_DROPPED = 1 };

/* Splits the line into s->nfields fields at f. */
static int csv_split(csv_state *s, sl_fn_call *call, const sl_buf *hold, const char *line, size_t n, csv_field *f) {
  int64_t nf = 0;
  size_t i = 0;
  int rc;
  for (;;) {
    csv_field fd = {(uint32_t)i, (uint32_t)i, false};
    if (i < n && line[i] == '"') {
      fd.quoted = true;
      fd.b = (uint32_t)++i;
      for (;;) {
        if (i >= n) {
          rc = csv_bad(s, call, hold, "field %lld: unterminated quoted field", (long long)nf + 1);
          return rc ? rc : CSV_DROPPED;
        }
        if (line[i] == '"') {
          if (i + 1 < n && line[i + 1] == '"') {
            i += 2;
            continue;
          }
          break;
        }
        i++;
      }
      fd.e = (uint32_t)i++;
      if (i < n && line[i] != s->delim) {
        rc = csv_bad(s, call, hold, "field %lld: text after the closing quote", (long long)nf + 1);
        return rc ? rc : CSV_DROPPED;
      }
    } else {
      while (i < n && line[i] != s->delim) i++;
      fd.e = (uint32_t)i;
    }
    if (nf < s->nfields) f[nf] = fd;
    nf++;
    if (i >= n) break;
    i++; /* the delimiter */
  }
  if (nf != s->nfields) {
    rc = csv_bad(s, call, hold, "%lld fields, expected %lld", (long long)nf, (long long)s->nfields);
    return rc ? rc : CSV_DROPPED;
  }
  return 0;
}

/* A bytes column from its fields f[0..col->count) (the first is field fi + 1 of the line) into `out`. */
static int csv_strings(csv_state *s, sl_fn_call *call, const sl_buf *hold, const char *line, const csv_col *col,
                       const csv_field *f, int64_t fi, sl_elem *out) {
  size_t total = 0;
  for (int64_t k = 0; k < col->count; k++) {
    const csv_field *fd = &f[k];
    size_t len = fd->e - fd->b;
    if (len == 0 && !fd->quoted) {
      if (!col->has_default) {
        int rc = csv_bad(s, call, hold, "field %lld (column '%s') is empty and has no default", (long long)(fi + k + 1),
                         col->name);
        return rc ? rc : CSV_DROPPED;
      }
      len = strlen(col->def_str);
    }
    total += len;
  }
  sl_buf *data = sl_buf_alloc(total ? total : 1), *offs = col->vector ? sl_buf_alloc((size_t)(col->count + 1) * 8) : NULL;
  if (!data || (col->vector && !offs)) {
    sl_buf_unref(data);
    sl_buf_unref(offs);
    return sl__oom("parse_csv strings");
  }
  char *d = sl_buf_data(data);
  uint64_t *o = offs ? sl_buf_data(offs) : NULL, pos = 0;
  for (int64_t k = 0; k < col->count; k++) {
    const csv_field *fd = &f[k];
    if (o) o[k] = pos;
    if (fd->e == fd->b && !fd->quoted) {
      size_t len = strlen(col->def_str);
      memcpy(d + pos, col->def_str, len);
      pos += len;
    } else if (fd->quoted) {
      for (uint32_t j = fd->b; j < fd->e; j++) {
        d[pos++] = line[j];
        if (line[j] == '"') j++; /* "" -> " */
      }
    } else {
      memcpy(d + pos, line + fd->b, fd->e - fd->b);
      pos += fd->e - fd->b;
    }
  }
  if (o) o[col->count] = pos;
  int rc = sl_elem_set_bytes(out, col->name, data, 0, NULL, (size_t)pos);
  if (!rc && col->vector) {
    sl_comp *oc = sl_elem_get(out, col->name);
    oc->rank = 1;
    oc->shape[0] = col->count;
    oc->offs = offs;
    offs = NULL;
  }
  sl_buf_unref(offs);
  sl_buf_unref(data);
  return rc;
}

/* A numeric column from its fields f[0..col->count) (the first is field fi + 1 of the line) into `out`. */
static int csv_numbers(csv_state *s, sl_fn_call *call, const sl_buf *hold, const char *line, const csv_col *col,
                       const csv_field *f, int64_t fi, sl_elem *out) {
  int64_t shape[1] = {col->count};
  void *data;
  int rc = sl_elem_new_tensor(out, col->name, col->dtype, col->vector ? 1 : 0, shape, &data);
  for (int64_t k = 0; k < col->count && !rc; k++) {
    const csv_field *fd = &f[k];
    double dv;
    int64_t iv;
    if (fd->e == fd->b) {
      if (!col->has_default) {
        rc = csv_bad(s, call, hold, "field %lld (column '%s') is empty and has no default", (long long)(fi + k + 1),
                     col->name);
        return rc ? rc : CSV_DROPPED;
      }
      dv = col->def_num;
      iv = (int64_t)dv;
    } else if (parse_num(line + fd->b, fd->e - fd->b, col->dtype, &dv, &iv)) {
      int len = (int)(fd->e - fd->b > 40 ? 40 : fd->e - fd->b);
      rc = csv_bad(s, call, hold, "field %lld (column '%s'): '%.*s%s' is not a valid %s", (long long)(fi + k + 1),
                   col->name, len, line + fd->b, fd->e - fd->b > 40 ? "..." : "", sl_dtype_name(col->dtype));
      return rc ? rc : CSV_DROPPED;
    }
    switch (col->dtype) {
    case SL_UINT8: ((uint8_t *)data)[k] = (uint8_t)iv; break;
    case SL_INT32: ((int32_t *)data)[k] = (int32_t)iv; break;
    case SL_INT64: ((int64_t *)data)[k] = iv; break;
    case SL_FLOAT32: ((float *)data)[k] = (float)dv; break;
    default: ((double *)data)[k] = dv; break;
    }
  }
  return rc;
}

/* The parsed columns into the element (the line's component removed unless kept). */
static int csv_output(const csv_state *s, sl_elem *e, const sl_elem *out) {
  int rc = 0;
  if (!s->keep) sl_elem_remove(e, s->comp);
  for (int k = 0; k < out->n && !rc; k++) {
    const sl_comp *oc = &out->c[k];
    if (oc->dtype == SL_BYTES) {
      rc = sl_elem_set_bytes(e, oc->name, oc->buf, oc->off, sl_comp_data(oc), oc->size);
      if (!rc && oc->rank) {
        sl_comp *dc = sl_elem_get(e, oc->name);
        dc->rank = 1;
        dc->shape[0] = oc->shape[0];
        dc->offs = sl_buf_ref(oc->offs);
      }
    } else {
      rc = sl_elem_set_tensor(e, oc->name, oc->dtype, oc->rank, oc->shape, oc->buf, oc->off, sl_comp_data(oc));
    }
  }
  return rc;
}

static int csv_call(void *st, sl_elem *e, sl_fn_call *call) {
  csv_state *s = st;
  sl_comp *c;
  int rc = sl__fn_component(e, call, s->comp, &c);
  if (rc) return rc;
  if (c->dtype != SL_BYTES || c->rank != 0)
    return sl__err(SL_EINVAL, "%s: element %llu: '%s' is not a text line", call->op_path,
                   (unsigned long long)call->index, s->comp);
  if (c->size > UINT32_MAX) return csv_bad(s, call, c->buf, "line longer than 4 GiB");
  /* Hold the line: outputs may replace the input component. */
  sl_buf *hold = c->buf ? sl_buf_ref(c->buf) : NULL;
  char inl[SL_INLINE_BYTES];
  const char *line = sl_comp_data(c);
  size_t n = c->size;
  if (!hold) {
    memcpy(inl, line, n);
    line = inl;
  }
  csv_field fstack[64];
  csv_field *f = s->nfields <= 64 ? fstack : sl__mallocarray((size_t)s->nfields, sizeof *f);
  sl_elem out;
  sl_elem_init(&out);
  if (!f) rc = sl__oom("parse_csv fields");
  else rc = csv_split(s, call, hold, line, n, f);
  /* Convert, group by group. */
  int64_t fi = 0;
  for (int g = 0; g < s->ncols && !rc; g++) {
    const csv_col *col = &s->cols[g];
    if (col->dtype == SL_BYTES) rc = csv_strings(s, call, hold, line, col, f + fi, fi, &out);
    else rc = csv_numbers(s, call, hold, line, col, f + fi, fi, &out);
    fi += col->count;
  }
  if (!rc) rc = csv_output(s, e, &out);
  if (rc == CSV_DROPPED) rc = 0; /* call->keep is false: the element goes */
  sl_elem_clear(&out);
  if (f != fstack) sl__free(f);
  sl_buf_unref(hold);
  return rc;
}

/* ---------------- hash_bucket ---------------- */
typedef struct {
  const char *comp, *output;
  int64_t buckets;
  int64_t seed;
} hb_state;
static void hb_free(void *st) { sl__free(st); }
static int hb_init(void **state, const sl_args *a, void *payload) {
  hb_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("hash_bucket");
  int rc;
  if ((rc = sl__get_str(&s->comp, a, "component")) || (rc = sl__get_int(&s->buckets, a, "buckets")) ||
      (rc = sl__get_int(&s->seed, a, "seed")))
    goto fail;
  if (!s->comp) {
    rc = sl__err(SL_EINVAL, "%s.component: required", sl_args_path(a));
    goto fail;
  }
  if ((rc = sl__get_str_or(&s->output, a, "output", s->comp))) goto fail;
  if (s->buckets < 1) {
    rc = sl__err(SL_EINVAL, "%s.buckets: required, >= 1", sl_args_path(a));
    goto fail;
  }
  *state = s;
  return 0;
fail:
  sl__free(s);
  return rc;
}
static int hb_call(void *st, sl_elem *e, sl_fn_call *call) {
  const hb_state *s = st;
  sl_comp *c;
  int rc = sl__fn_component(e, call, s->comp, &c);
  if (rc) return rc;
  if (c->dtype != SL_BYTES)
    return sl__err(SL_EINVAL, "%s: element %llu: '%s' is %s; hash_bucket needs strings", call->op_path,
                   (unsigned long long)call->index, s->comp, sl_dtype_name(c->dtype));
  sl_comp src = *c;
  if (src.buf) sl_buf_ref(src.buf);
  if (src.offs) sl_buf_ref(src.offs);
  int64_t n = sl_comp_count(&src);
  int64_t *out;
  rc = sl_elem_new_tensor(e, s->output, SL_INT64, src.rank, src.shape, (void **)&out);
  for (int64_t i = 0; i < n && !rc; i++) {
    const void *p;
    size_t len;
    if ((rc = sl_comp_string(&p, &len, &src, i))) break;
    out[i] = (int64_t)(XXH64(p, len, (XXH64_hash_t)s->seed) % (uint64_t)s->buckets);
  }
  sl_buf_unref(src.buf);
  sl_buf_unref(src.offs);
  return rc;
}

/* ---------------- log1p ---------------- */
typedef struct {
  const char *comp, *output;
  bool clip;
} l1p_state;
static int l1p_init(void **state, const sl_args *a, void *payload) {
  l1p_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("log1p");
  int rc;
  if ((rc = sl__get_str(&s->comp, a, "component")) ||
      (rc = sl__get_bool(&s->clip, a, "clip_negative"))) {
    sl__free(s);
    return rc;
  }
  if (!s->comp) {
    sl__free(s);
    return sl__err(SL_EINVAL, "%s.component: required", sl_args_path(a));
  }
  if ((rc = sl__get_str_or(&s->output, a, "output", s->comp))) {
    sl__free(s);
    return rc;
  }
  *state = s;
  return 0;
}
static int l1p_call(void *st, sl_elem *e, sl_fn_call *call) {
  const l1p_state *s = st;
  sl_comp *c;
  int rc = sl__fn_component(e, call, s->comp, &c);
  if (rc) return rc;
  if (c->dtype == SL_BYTES)
    return sl__err(SL_EINVAL, "%s: element %llu: '%s' is bytes; log1p needs numbers", call->op_path,
                   (unsigned long long)call->index, s->comp);
  sl_comp src = *c;
  if (src.buf) sl_buf_ref(src.buf);
  int64_t n = sl_comp_count(&src);
  float *out;
  rc = sl_elem_new_tensor(e, s->output, SL_FLOAT32, src.rank, src.shape, (void **)&out);
  const void *in = sl_comp_data(&src);
  for (int64_t i = 0; i < n && !rc; i++) {
    double v = sl__num_at(in, src.dtype, i);
    if (v < 0 && s->clip) v = 0;
    if (v <= -1) {
      rc = sl__err(SL_EINVAL, "%s: element %llu: '%s'[%lld] = %g: log1p needs values > -1 (or \"clip_negative\": true)",
                   call->op_path, (unsigned long long)call->index, s->comp, (long long)i, v);
      break;
    }
    out[i] = (float)log1p(v);
  }
  sl_buf_unref(src.buf);
  return rc;
}

/* ---- schemas ---- */
static const sl__arg CSV_COLUMN[] = {
    {"name", SL__ARG_STR, NULL, SL__ARGF_REQUIRED, 0, 0, NULL, "the component the group becomes"},
    {"dtype", SL__ARG_ENUM, NULL, SL__ARGF_REQUIRED, 0, 0, "int64|int32|uint8|float32|float64|bytes|string|float", "its dtype"},
    {"count", SL__ARG_INT, NULL, SL__LOHI, 1, 1000000, NULL, "fields taken as a vector (absent: one field, a scalar)"},
    {"default", SL__ARG_SCALAR, NULL, 0, 0, 0, NULL, "the value of an empty field (else an error)"},
    {NULL}};
static const sl__arg CSV_ARGS[] = {
    {"component", SL__ARG_COMP, "line", 0, 0, 0, NULL, "the component holding one CSV line"},
    {"columns", SL__ARG_ARRAY, NULL, SL__ARGF_REQUIRED | SL__LOHI, 1, SL_MAX_COMPONENTS - 1, NULL,
     "column groups {\"name\", \"dtype\", \"count\" (a vector of that many columns), \"default\"}; each a component",
     CSV_COLUMN},
    {"delimiter", SL__ARG_STR, ",", 0, 0, 0, NULL, "the field separator (one character)"},
    {"on_error", SL__ARG_ENUM, "error", 0, 0, 0, "error|skip", "a malformed line fails the run, or is dropped"},
    {"keep", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "keep the line after parsing"},
    {NULL}};
static const sl__fn_io CSV_READS[] = {{"component", NULL, NULL, SL_BYTES, 0, SL__IO_CONSUMED}, {NULL}};
/* Each column group becomes a component: a scalar, or a vector of `count` values. */
static int csv_infer(sl__struct *s, const sl_args *a, const char *origin) {
  json_t *args = a->obj;
  const char *path = a->path;
  (void)args;
  (void)path;
  (void)path;
  json_t *cols = json_object_get(args, "columns");
  for (size_t i = 0; i < json_array_size(cols); i++) {
    json_t *c = json_array_get(cols, i), *cnt = json_object_get(c, "count");
    const char *name = json_string_value(json_object_get(c, "name")), *dt = json_string_value(json_object_get(c, "dtype"));
    if (!name) continue;
    sl_dtype d;
    if (!dt || sl_dtype_parse(&d, dt)) d = (sl_dtype)SL__DT_ANY;
    sl_error_clear();
    sl__comp_desc *cd;
    int rc = sl__struct_put(s, name, (int)d, cnt ? 1 : 0, origin, &cd);
    if (rc) return rc;
    if (cnt) cd->dims[0] = (int64_t)json_integer_value(cnt);
  }
  return 0;
}
static const sl__fn_schema CSV_SCHEMA = {"parses one CSV line into a component per column group", CSV_ARGS,
                                         CSV_READS, NULL, csv_infer};

static const sl__arg HB_ARGS[] = {
    {"component", SL__ARG_COMP, NULL, SL__ARGF_REQUIRED, 0, 0, NULL, "the component hashed (strings or integers)"},
    {"buckets", SL__ARG_INT, NULL, SL__ARGF_REQUIRED | SL__ARGF_LO, 1, 0, NULL, "the number of buckets"},
    {"seed", SL__ARG_INT, "0", 0, 0, 0, NULL, "the hash seed"},
    {"output", SL__ARG_COMP, NULL, 0, 0, 0, NULL, "the component written (default: the component, replaced)"},
    {NULL}};
static const sl__fn_io HB_READS[] = {{"component", NULL, NULL, SL__DT_ANY, -1, 0}, {NULL}};
static const sl__fn_io HB_WRITES[] = {{"output", NULL, "component", SL_INT64, SL__RANK_SAME, 0}, {NULL}};
static const sl__fn_schema HB_SCHEMA = {"hashes each value into int64 bucket ids in 0..buckets-1", HB_ARGS,
                                        HB_READS, HB_WRITES, NULL};

static const sl__arg L1P_ARGS[] = {
    {"component", SL__ARG_COMP, NULL, SL__ARGF_REQUIRED, 0, 0, NULL, "the numeric component transformed"},
    {"clip_negative", SL__ARG_BOOL, "true", 0, 0, 0, NULL, "treat negative values as 0"},
    {"output", SL__ARG_COMP, NULL, 0, 0, 0, NULL, "the component written (default: the component, replaced)"},
    {NULL}};
static const sl__fn_io L1P_READS[] = {{"component", NULL, NULL, SL__DT_ANY, -1, 0}, {NULL}};
static const sl__fn_io L1P_WRITES[] = {{"output", NULL, "component", SL_FLOAT32, SL__RANK_SAME, 0}, {NULL}};
static const sl__fn_schema L1P_SCHEMA = {"log(1 + x) of each value, as float32", L1P_ARGS, L1P_READS, L1P_WRITES,
                                         NULL};

const sl__fn_entry sl__fns_tabular[] = {
    {"parse_csv", {SL_FN_DEF_VERSION, 0, csv_init, csv_call, csv_free}, &CSV_SCHEMA},
    {"hash_bucket", {SL_FN_DEF_VERSION, 0, hb_init, hb_call, hb_free}, &HB_SCHEMA},
    {"log1p", {SL_FN_DEF_VERSION, 0, l1p_init, l1p_call, hb_free}, &L1P_SCHEMA},
    {NULL, {0, 0, NULL, NULL, NULL}, NULL},
};
