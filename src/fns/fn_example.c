/* fns/fn_example.c: `parse_example`: decodes a serialised tf.Example (component "record" by default) into one
 * component per declared feature, with dtype, fixed shape ([] scalar, [n], or [-1] for variable length) and an
 * optional default for missing features. Example:
 *   {"fn": "parse_example", "args": {"features": {"image/encoded": {"dtype": "bytes"},
 *                                                "label": {"dtype": "int64", "default": -1}}}} */
#include <string.h>

#include "fns/fns_int.h"
#include "io/example_int.h"

typedef struct {
  const char *name;
  sl_dtype dtype;
  int rank;
  int64_t shape[SL_MAX_RANK];
  int64_t count; /* values required: product of shape, or -1 for variable length */
  bool has_default;
  double def_num;
  const char *def_str;
} feat_spec;

typedef struct {
  const char *component;
  bool keep;
  int n;
  feat_spec *f;
} pe_state;

static void pe_free(void *st) {
  pe_state *s = st;
  if (!s) return;
  sl__free(s->f);
  sl__free(s);
}

static int pe_init(void **state, const sl_args *a, void *payload) {
  pe_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("parse_example");
  int rc;
  if ((rc = sl__get_str(&s->component, a, "component")) || (rc = sl__get_bool(&s->keep, a, "keep")))
    goto fail;
  json_t *feats = a->obj ? json_object_get(a->obj, "features") : NULL;
  if (!json_is_object(feats) || json_object_size(feats) == 0) {
    rc = sl__err(SL_EINVAL, "%s.features: expected an object of feature name -> {\"dtype\": ...}", sl_args_path(a));
    goto fail;
  }
  if (json_object_size(feats) > SL_MAX_COMPONENTS - 1) {
    rc = sl__err(SL_EINVAL, "%s.features: at most %d features", sl_args_path(a), SL_MAX_COMPONENTS - 1);
    goto fail;
  }
  s->f = sl__calloc(json_object_size(feats), sizeof *s->f);
  if (!s->f) {
    rc = sl__oom("parse_example");
    goto fail;
  }
  const char *key;
  json_t *v;
  json_object_foreach(feats, key, v) {
    feat_spec *f = &s->f[s->n];
    f->name = key;
    if (!json_is_object(v)) {
      rc = sl__err(SL_EINVAL, "%s.features.%s: expected an object", sl_args_path(a), key);
      goto fail;
    }
    json_t *dt = json_object_get(v, "dtype");
    if (!json_is_string(dt)) {
      rc = sl__err(SL_EINVAL, "%s.features.%s.dtype: required (bytes, int64, int32, float32, float64, uint8)",
                   sl_args_path(a), key);
      goto fail;
    }
    if ((rc = sl_dtype_parse(&f->dtype, json_string_value(dt)))) {
      sl__err_wrap(rc, "%s.features.%s.dtype", sl_args_path(a), key);
      goto fail;
    }
    json_t *sh = json_object_get(v, "shape");
    f->count = 1;
    if (sh) {
      if (!json_is_array(sh) || json_array_size(sh) > SL_MAX_RANK) {
        rc = sl__err(SL_EINVAL, "%s.features.%s.shape: expected an array of at most %d dimensions", sl_args_path(a),
                     key, SL_MAX_RANK);
        goto fail;
      }
      f->rank = (int)json_array_size(sh);
      for (int d = 0; d < f->rank; d++) {
        json_t *x = json_array_get(sh, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < -1) {
          rc = sl__err(SL_EINVAL, "%s.features.%s.shape[%d]: expected a size or -1", sl_args_path(a), key, d);
          goto fail;
        }
        f->shape[d] = json_integer_value(x);
        if (f->shape[d] == -1) {
          if (f->rank != 1) {
            rc = sl__err(SL_EINVAL, "%s.features.%s.shape: -1 (variable length) only as [-1]", sl_args_path(a), key);
            goto fail;
          }
          f->count = -1;
        } else if (f->count >= 0) {
          f->count *= f->shape[d];
        }
      }
    }
    json_t *df = json_object_get(v, "default");
    if (df) {
      f->has_default = true;
      if (f->dtype == SL_BYTES) {
        if (!json_is_string(df)) {
          rc = sl__err(SL_EINVAL, "%s.features.%s.default: expected a string", sl_args_path(a), key);
          goto fail;
        }
        f->def_str = json_string_value(df);
      } else {
        if (!json_is_number(df)) {
          rc = sl__err(SL_EINVAL, "%s.features.%s.default: expected a number", sl_args_path(a), key);
          goto fail;
        }
        f->def_num = json_number_value(df);
      }
    }
    s->n++;
  }
  *state = s;
  return 0;
fail:
  pe_free(s);
  return rc;
}

static int put_numeric(sl_elem *e, const feat_spec *f, const Sluice__Tf__Feature *ft, const sl_fn_call *call) {
  size_t n;
  bool is_int;
  if (!ft) {
    n = f->count < 0 ? 0 : (size_t)f->count;
    is_int = true;
  } else if (ft->kind_case == SLUICE__TF__FEATURE__KIND_INT64_LIST) {
    n = ft->int64_list->n_value;
    is_int = true;
  } else if (ft->kind_case == SLUICE__TF__FEATURE__KIND_FLOAT_LIST) {
    n = ft->float_list->n_value;
    is_int = false;
  } else {
    return sl__err(SL_EINVAL, "%s: element %llu: feature '%s' holds bytes, declared %s", call->op_path,
                   (unsigned long long)call->index, f->name, sl_dtype_name(f->dtype));
  }
  if (f->count >= 0 && (int64_t)n != f->count)
    return sl__err(SL_EINVAL, "%s: element %llu: feature '%s' has %zu values, declared shape needs %lld",
                   call->op_path, (unsigned long long)call->index, f->name, n, (long long)f->count);
  int64_t shape[SL_MAX_RANK];
  memcpy(shape, f->shape, sizeof shape);
  if (f->count < 0) shape[0] = (int64_t)n;
  void *data;
  int rc = sl_elem_new_tensor(e, f->name, f->dtype, f->rank, shape, &data);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) {
    double v = !ft ? f->def_num : is_int ? (double)ft->int64_list->value[i] : (double)ft->float_list->value[i];
    int64_t iv = !ft ? (int64_t)f->def_num : is_int ? ft->int64_list->value[i] : (int64_t)v;
    switch (f->dtype) {
    case SL_UINT8: ((uint8_t *)data)[i] = (uint8_t)iv; break;
    case SL_INT32: ((int32_t *)data)[i] = (int32_t)iv; break;
    case SL_INT64: ((int64_t *)data)[i] = iv; break;
    case SL_FLOAT32: ((float *)data)[i] = (float)v; break;
    case SL_FLOAT64: ((double *)data)[i] = v; break;
    default: break;
    }
  }
  return 0;
}

/* (ft is this call's own unpacked message: a large single value is moved out of it, not copied) */
static int put_bytes(sl_elem *e, const feat_spec *f, Sluice__Tf__Feature *ft, const sl_fn_call *call) {
  if (!ft) return sl_elem_set_bytes(e, f->name, NULL, 0, f->def_str, strlen(f->def_str));
  if (ft->kind_case != SLUICE__TF__FEATURE__KIND_BYTES_LIST)
    return sl__err(SL_EINVAL, "%s: element %llu: feature '%s' is numeric, declared bytes", call->op_path,
                   (unsigned long long)call->index, f->name);
  Sluice__Tf__BytesList *bl = ft->bytes_list;
  if (f->rank == 0) {
    if (bl->n_value != 1)
      return sl__err(SL_EINVAL, "%s: element %llu: feature '%s' has %zu values, declared one", call->op_path,
                     (unsigned long long)call->index, f->name, bl->n_value);
    sl_buf *b = bl->value[0].len > 4096 ? sl__example_take_bytes(bl, 0) : NULL; /* an encoded image, say */
    if (b) {
      int rc = sl_elem_set_bytes(e, f->name, b, 0, NULL, sl_buf_size(b));
      sl_buf_unref(b);
      return rc;
    }
    return sl_elem_set_bytes(e, f->name, NULL, 0, bl->value[0].data, bl->value[0].len);
  }
  if (f->count >= 0 && (int64_t)bl->n_value != f->count)
    return sl__err(SL_EINVAL, "%s: element %llu: feature '%s' has %zu strings, declared %lld", call->op_path,
                   (unsigned long long)call->index, f->name, bl->n_value, (long long)f->count);
  size_t total = 0;
  for (size_t i = 0; i < bl->n_value; i++) total += bl->value[i].len;
  size_t offs_bytes;
  if (!sl__mul_ok(bl->n_value + 1, 8, &offs_bytes)) return sl__oom("a bytes feature's offsets");
  sl_buf *data = sl_buf_alloc(total), *offs = sl_buf_alloc(offs_bytes);
  if (!data || !offs) {
    sl_buf_unref(data);
    sl_buf_unref(offs);
    return sl__oom("a bytes feature");
  }
  uint64_t *o = sl_buf_data(offs), pos = 0;
  for (size_t i = 0; i < bl->n_value; i++) {
    o[i] = pos;
    memcpy((char *)sl_buf_data(data) + pos, bl->value[i].data, bl->value[i].len);
    pos += bl->value[i].len;
  }
  o[bl->n_value] = pos;
  int rc = sl_elem_set_bytes(e, f->name, data, 0, NULL, total);
  if (!rc) {
    sl_comp *c = sl_elem_get(e, f->name);
    c->rank = 1;
    c->shape[0] = (int64_t)bl->n_value;
    c->offs = offs;
  } else {
    sl_buf_unref(offs);
  }
  sl_buf_unref(data);
  return rc;
}

static int pe_call(void *st, sl_elem *e, sl_fn_call *call) {
  const pe_state *s = st;
  sl_comp *rec;
  int rc = sl__fn_component(e, call, s->component, &rec);
  if (rc) return rc;
  if (rec->dtype != SL_BYTES || rec->rank != 0)
    return sl__err(SL_EINVAL, "%s: element %llu: '%s' is not a serialised record", call->op_path,
                   (unsigned long long)call->index, s->component);
  Sluice__Tf__Example *ex;
  rc = sl__example_unpack(sl_comp_data(rec), rec->size, &ex);
  if (rc)
    return sl__err_wrap(rc, "%s: element %llu", call->op_path, (unsigned long long)call->index);
  for (int i = 0; i < s->n && !rc; i++) {
    const feat_spec *f = &s->f[i];
    Sluice__Tf__Feature *ft = NULL;
    if (ex->features)
      for (size_t k = 0; k < ex->features->n_feature; k++)
        if (!strcmp(ex->features->feature[k]->key, f->name)) {
          ft = ex->features->feature[k]->value;
          break;
        }
    if (ft && ft->kind_case == SLUICE__TF__FEATURE__KIND__NOT_SET) ft = NULL;
    if (!ft && !f->has_default) {
      rc = sl__err(SL_EINVAL, "%s: element %llu lacks required feature '%s' (give it a \"default\" to allow that)",
                   call->op_path, (unsigned long long)call->index, f->name);
      break;
    }
    rc = f->dtype == SL_BYTES ? put_bytes(e, f, ft, call) : put_numeric(e, f, ft, call);
  }
  sl__example_free_unpacked(ex);
  if (!rc && !s->keep) sl_elem_remove(e, s->component);
  return rc;
}

/* ---- schemas ---- */
static const sl__arg PE_FEATURE[] = {
    {"dtype", SL__ARG_ENUM, NULL, SL__ARGF_REQUIRED, 0, 0, "bytes|int64|int32|float32|float64|uint8|string|float", "the component's dtype"},
    {"shape", SL__ARG_INTS, NULL, SL__LOHI, 0, SL_MAX_RANK, NULL, "its shape ([-1]: a length that varies; absent: a scalar)"},
    {"default", SL__ARG_SCALAR, NULL, 0, 0, 0, NULL, "the value when the record lacks the feature (else an error)"},
    {NULL}};
static const sl__arg PE_ARGS[] = {
    {"component", SL__ARG_COMP, "record", 0, 0, 0, NULL, "the component holding the serialised tf.Example"},
    {"features", SL__ARG_OBJECT, NULL, SL__ARGF_REQUIRED, 0, 0, NULL,
     "feature name -> {\"dtype\", \"shape\" (-1: variable length), \"default\"}; each becomes a component", PE_FEATURE},
    {"keep", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "keep the serialised record after parsing"},
    {NULL}};
static const sl__fn_io PE_READS[] = {{"component", NULL, NULL, SL_BYTES, 0, SL__IO_CONSUMED}, {NULL}};
/* Each feature becomes a component of its dtype and shape ([-1]: a length that varies between elements). */
static int pe_infer(sl__struct *s, const sl_args *a, const char *origin) {
  json_t *args = a->obj;
  const char *path = a->path;
  (void)args;
  (void)path;
  (void)path;
  const char *key;
  json_t *v;
  json_object_foreach(json_object_get(args, "features"), key, v) {
    sl_dtype dt;
    json_t *sh = json_object_get(v, "shape");
    if (sl_dtype_parse(&dt, json_string_value(json_object_get(v, "dtype")) ? json_string_value(json_object_get(v, "dtype")) : "?"))
      dt = (sl_dtype)SL__DT_ANY;
    sl_error_clear();
    int rank = json_is_array(sh) ? (int)json_array_size(sh) : 0;
    sl__comp_desc *c;
    int rc = sl__struct_put(s, key, (int)dt, rank, origin, &c);
    if (rc) return rc;
    for (int d = 0; d < c->rank; d++) {
      json_int_t x = json_integer_value(json_array_get(sh, (size_t)d));
      c->dims[d] = x >= 0 ? (int64_t)x : SL__DIM_VARIES;
    }
  }
  return 0;
}
static const sl__fn_schema PE_SCHEMA = {"parses a serialised tf.Example into one component per listed feature",
                                        PE_ARGS, PE_READS, NULL, pe_infer};

const sl__fn_entry sl__fns_example[] = {
    {"parse_example", {SL_FN_DEF_VERSION, 0, pe_init, pe_call, pe_free}, &PE_SCHEMA},
    {NULL, {0, 0, NULL, NULL, NULL}, NULL},
};
