/* py_element.c: elements between the engine and Python: a component as a numpy array over the engine's buffer (its
 * base a Buf holding one sl_buf reference), byte strings as bytes, and a Python value back into a component
 * (arrays still viewing an engine buffer passed on without a copy). */
#include "py_ext.h"

#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL sluice_ARRAY_API
#include <numpy/arrayobject.h>

#include <string.h>

static void Buf_dealloc(BufObject *self) {
  sl_buf_unref(self->buf);
  Py_TYPE(self)->tp_free((PyObject *)self);
}
static PyObject *Buf_address(BufObject *self, void *closure) {
  return PyLong_FromVoidPtr(sl_buf_data(self->buf));
}
static PyObject *Buf_size(BufObject *self, void *closure) { return PyLong_FromSize_t(sl_buf_size(self->buf)); }
static PyGetSetDef Buf_getset[] = {
    {"address", (getter)Buf_address, NULL, "address of the engine buffer's first byte", NULL},
    {"size", (getter)Buf_size, NULL, "bytes in the engine buffer", NULL},
    {NULL}};
PyTypeObject sl__py_BufType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice._sluice.Buf",
    .tp_basicsize = sizeof(BufObject),
    .tp_dealloc = (destructor)Buf_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A reference to a buffer of the engine: the base of the numpy arrays sluice yields.",
    .tp_getset = Buf_getset,
};

/* ---- element -> dict */

static int npy_type(sl_dtype dt) {
  switch (dt) {
  case SL_UINT8: return NPY_UINT8;
  case SL_INT32: return NPY_INT32;
  case SL_INT64: return NPY_INT64;
  case SL_FLOAT32: return NPY_FLOAT32;
  case SL_FLOAT64: return NPY_FLOAT64;
  default: return -1;
  }
}

/* Strings of a rank >= 1 byte-string component as nested lists following its shape. */
static PyObject *strings_to_list(const sl_comp *c, int dim, int64_t *i) {
  PyObject *l = PyList_New((Py_ssize_t)c->shape[dim]);
  if (!l) return NULL;
  for (int64_t k = 0; k < c->shape[dim]; k++) {
    PyObject *v;
    if (dim + 1 < c->rank) {
      v = strings_to_list(c, dim + 1, i);
    } else {
      const void *d;
      size_t n;
      int rc = sl_comp_string(&d, &n, c, (*i)++);
      v = rc ? sl__py_raise_sl(sl__py_Error, rc) : PyBytes_FromStringAndSize(d, (Py_ssize_t)n);
    }
    if (!v) {
      Py_DECREF(l);
      return NULL;
    }
    PyList_SET_ITEM(l, (Py_ssize_t)k, v);
  }
  return l;
}

/* One component as a Python value: numeric tensors as numpy arrays over the engine's buffer (payloads small
 * enough to live inline in the component are copied: there is no buffer to borrow). */
static PyObject *comp_to_py(const sl_comp *c, bool readonly) {
  if (c->dtype == SL_BYTES) {
    if (c->rank == 0) return PyBytes_FromStringAndSize(sl_comp_data(c), (Py_ssize_t)c->size);
    int64_t i = 0;
    return strings_to_list(c, 0, &i);
  }
  int t = npy_type(c->dtype);
  if (t < 0) return sl__py_raise_msg(sl__py_Error, SL_EINVAL, "component of an unknown dtype");
  npy_intp dims[SL_MAX_RANK];
  for (int d = 0; d < c->rank; d++) dims[d] = (npy_intp)c->shape[d];
  if (!c->buf) {
    PyObject *a = PyArray_SimpleNew(c->rank, dims, t);
    if (a && c->size) memcpy(PyArray_DATA((PyArrayObject *)a), sl_comp_data(c), c->size);
    return a;
  }
  BufObject *base = PyObject_New(BufObject, &sl__py_BufType);
  if (!base) return NULL;
  base->buf = sl_buf_ref(c->buf);
  int flags = readonly ? NPY_ARRAY_CARRAY_RO : NPY_ARRAY_CARRAY;
  PyObject *a = PyArray_New(&PyArray_Type, c->rank, dims, t, NULL, (void *)sl_comp_data(c), 0, flags, NULL);
  if (!a) {
    Py_DECREF(base);
    return NULL;
  }
  if (PyArray_SetBaseObject((PyArrayObject *)a, (PyObject *)base) < 0) { /* steals base */
    Py_DECREF(a);
    return NULL;
  }
  return a;
}

/* The element as a dict: a plain one, or (cls not NULL) an instance of that dict subclass. */
PyObject *sl__py_elem_to_dict(const sl_elem *e, bool readonly, PyObject *cls) {
  PyObject *d = cls ? PyObject_CallNoArgs(cls) : PyDict_New();
  if (!d) return NULL;
  for (int i = 0; i < e->n; i++) {
    PyObject *v = comp_to_py(&e->c[i], readonly);
    if (!v || PyDict_SetItemString(d, e->c[i].name, v) < 0) {
      Py_XDECREF(v);
      Py_DECREF(d);
      return NULL;
    }
    Py_DECREF(v);
  }
  return d;
}

/* ---- dict -> element */

/* Component names must outlive the elements: each distinct name is kept for the life of the process. */
static PyObject *name_pool;

int sl__py_names_init(void) {
  name_pool = PyDict_New();
  return name_pool ? 0 : -1;
}

const char *sl__py_pool_name(PyObject *key) {
  if (!PyUnicode_Check(key)) {
    PyErr_SetString(PyExc_TypeError, "component names must be str");
    return NULL;
  }
  PyObject *b = PyDict_GetItemWithError(name_pool, key);
  if (!b) {
    if (PyErr_Occurred()) return NULL;
    b = PyUnicode_AsUTF8String(key);
    if (!b || PyDict_SetItem(name_pool, key, b) < 0) {
      Py_XDECREF(b);
      return NULL;
    }
    Py_DECREF(b);
  }
  return PyBytes_AS_STRING(b);
}

static int sl_dtype_of(int npy, sl_dtype *out) {
  switch (npy) {
  case NPY_UINT8: *out = SL_UINT8; return 0;
  case NPY_INT32: *out = SL_INT32; return 0;
  case NPY_INT64: *out = SL_INT64; return 0;
  case NPY_FLOAT32: *out = SL_FLOAT32; return 0;
  case NPY_FLOAT64: *out = SL_FLOAT64; return 0;
  default: return -1;
  }
}

/* Sets component `name` of `e` from a Python value. An array that still views an engine buffer is passed on
 * without a copy; other arrays are copied (the engine must not keep Python memory alive off the GIL). */
int sl__py_to_comp(sl_elem *e, const char *name, PyObject *v) {
  if (PyBytes_Check(v))
    return sl_elem_set_bytes(e, name, NULL, 0, PyBytes_AS_STRING(v), (size_t)PyBytes_GET_SIZE(v));
  if (PyBool_Check(v) || PyLong_Check(v)) {
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) return SL_EINVAL;
    return sl_elem_set_i64(e, name, x);
  }
  if (PyFloat_Check(v)) return sl_elem_set_f64(e, name, PyFloat_AS_DOUBLE(v));
  if (!PyArray_Check(v) && !PyArray_IsScalar(v, Generic)) {
    PyErr_Format(PyExc_TypeError, "component '%s': cannot hold a %s (numpy arrays, bytes, int and float can)", name,
                 Py_TYPE(v)->tp_name);
    return SL_EINVAL;
  }
  PyArrayObject *a = (PyArrayObject *)PyArray_FROM_OF(v, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
  if (!a) return SL_EINVAL;
  sl_dtype dt;
  if (sl_dtype_of(PyArray_TYPE(a), &dt) || PyArray_NDIM(a) > SL_MAX_RANK) {
    PyErr_Format(PyExc_TypeError, "component '%s': arrays of uint8, int32, int64, float32 or float64 of rank <= %d "
                 "only", name, SL_MAX_RANK);
    Py_DECREF(a);
    return SL_EINVAL;
  }
  int64_t shape[SL_MAX_RANK];
  for (int d = 0; d < PyArray_NDIM(a); d++) shape[d] = PyArray_DIM(a, d);
  sl_buf *buf = NULL;
  size_t off = 0;
  for (PyObject *b = PyArray_BASE(a); b; b = PyArray_Check(b) ? PyArray_BASE((PyArrayObject *)b) : NULL) {
    if (Py_TYPE(b) != &sl__py_BufType) continue;
    sl_buf *cand = ((BufObject *)b)->buf;
    const char *lo = sl_buf_data(cand), *p = PyArray_BYTES(a);
    size_t n = (size_t)PyArray_NBYTES(a);
    if (p >= lo && n <= sl_buf_size(cand) && (size_t)(p - lo) <= sl_buf_size(cand) - n) {
      buf = cand;
      off = (size_t)(p - lo);
    }
    break;
  }
  int rc = sl_elem_set_tensor(e, name, dt, PyArray_NDIM(a), shape, buf, off, buf ? NULL : PyArray_DATA(a));
  Py_DECREF(a);
  return rc;
}
