/* py_module.c: the module sluice._sluice (the CPython extension behind `import sluice`): its function table, the
 * exception classes and PyInit__sluice, plus the analyzer on a trace, version, redact and a test-only C-API view.
 * The extension's files share py_ext.h; they use the public C API only (include/sluice.h). */
#include "py_ext.h"

/* numpy's C API table: defined here, filled by import_array() below, used by py_element.c */
#define PY_ARRAY_UNIQUE_SYMBOL sluice_ARRAY_API
#include <numpy/arrayobject.h>

/* test-only: the C API's own view */
/* Runs `pipe` to its end (at most `limit` elements, 0: all) through the C API alone and returns each element as
 * {name: (dtype name, shape, payload bytes or list of bytes)}: what the tests compare the zero-copy path with. */
static PyObject *c_elements(PyObject *m, PyObject *args) {
  PipelineObject *pipe;
  long long limit = 0;
  if (!PyArg_ParseTuple(args, "O!|L", &sl__py_PipelineType, &pipe, &limit)) return NULL;
  if (!sl__py_need_pipeline(pipe)) return NULL;
  sl_iter *it = NULL;
  int rc = sl_pipeline_iter(&it, pipe->p);
  if (rc) return sl__py_raise_sl(sl__py_Error, rc);
  PyObject *l = PyList_New(0);
  sl_elem e;
  sl_elem_init(&e);
  while (l && (limit <= 0 || PyList_GET_SIZE(l) < limit)) {
    Py_BEGIN_ALLOW_THREADS
  rc = sl_iter_next(&e, it);
    Py_END_ALLOW_THREADS
  if (rc) break;
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < e.n; i++) {
      const sl_comp *c = &e.c[i];
      PyObject *shape = PyTuple_New(c->rank), *payload;
      for (int k = 0; shape && k < c->rank; k++) PyTuple_SET_ITEM(shape, k, PyLong_FromLongLong(c->shape[k]));
      if (c->dtype == SL_BYTES && c->rank > 0) {
        int64_t n = sl_comp_count(c);
        payload = PyList_New(0);
        for (int64_t k = 0; payload && k < n; k++) {
          const void *s;
          size_t sn;
          sl_comp_string(&s, &sn, c, k);
          PyObject *b = PyBytes_FromStringAndSize(s, (Py_ssize_t)sn);
          if (!b || PyList_Append(payload, b)) Py_CLEAR(payload);
          Py_XDECREF(b);
        }
      } else {
        payload = PyBytes_FromStringAndSize(sl_comp_data(c), (Py_ssize_t)c->size);
      }
      PyObject *v = shape && payload ? Py_BuildValue("(sOO)", sl_dtype_name(c->dtype), shape, payload) : NULL;
      Py_XDECREF(shape);
      Py_XDECREF(payload);
      if (!v || PyDict_SetItemString(d, c->name, v)) Py_CLEAR(d);
      Py_XDECREF(v);
    }
    sl_elem_clear(&e);
    if (!d || PyList_Append(l, d)) Py_CLEAR(l);
    Py_XDECREF(d);
  }
  if (l && rc < 0) {
    Py_CLEAR(l);
    sl__py_raise_sl(sl__py_data_class(rc), rc);
  }
  Py_BEGIN_ALLOW_THREADS
  sl_iter_free(it);
  Py_END_ALLOW_THREADS
  return l;
}

static PyObject *version(PyObject *m, PyObject *unused) { return PyUnicode_FromString(sl_version()); }

/* sl_redact: the text with connection strings' passwords as `***` (Store's repr). */
static PyObject *redact(PyObject *m, PyObject *args) {
  const char *s;
  if (!PyArg_ParseTuple(args, "s", &s)) return NULL;
  size_t n = sl_redact(NULL, 0, s);
  char *r = PyMem_Malloc(n + 1);
  if (!r) return PyErr_NoMemory();
  sl_redact(r, n + 1, s);
  PyObject *o = PyUnicode_FromString(r);
  PyMem_Free(r);
  return o;
}

/* analyze_trace: the analyzer (sluice analyze) on a trace given as JSON text (docs/trace-format.md), e.g. one that
 * sluice.torch.diagnose made from a PyTorch DataLoader. Returns {"report": the analyzer's JSON, "spec": the planned
 * spec, "html": the `sluice report` page or None}. Numbers <= 0 mean the default. */
static PyObject *analyze_trace(PyObject *m, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"trace", "cores", "consumer_cores", "memory", "only_autotune", "no_cache", "html",
                           "source", NULL};
  const char *text = NULL, *source = NULL;
  Py_ssize_t len = 0;
  double cores = 0, consumer = 0;
  long long memory = 0;
  int only_auto = 0, no_cache = 0, html = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "s#|ddLpppz", kwlist, &text, &len, &cores, &consumer, &memory,
                                   &only_auto, &no_cache, &html, &source))
    return NULL;
  sl_report_trace_opts ro = SL_REPORT_TRACE_OPTS_INIT;
  sl_plan_opts *po = &ro.plan;
  po->version = SL_PLAN_OPTS_VERSION; /* sl_plan_solve checks it; the report leaves it 0 */
  if (cores > 0) po->cores = cores;
  if (consumer > 0) po->consumer_cores = consumer;
  if (memory > 0) po->memory = memory;
  po->knobs = only_auto ? SL_PLAN_KNOBS_AUTOTUNE : SL_PLAN_KNOBS_ALL;
  po->no_cache = no_cache;
  ro.source = source;
  sl_trace *t = NULL;
  sl_plan *pl = NULL;
  char *report = NULL, *spec = NULL, *page = NULL, msg[2048] = "";
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = sl_trace_from_json(&t, text, (size_t)len, source ? source : "<trace>");
  if (!rc) rc = sl_plan_solve(&pl, t, po);
  if (!rc) rc = sl_plan_report(&report, pl, true);
  if (!rc) rc = sl_plan_spec_json(&spec, pl);
  if (!rc && html) rc = sl_report_trace_html(&page, t, &ro);
  if (rc) snprintf(msg, sizeof msg, "%s", sl_error_last());
  sl_plan_free(pl);
  sl_trace_free(t);
  Py_END_ALLOW_THREADS
  PyObject *r = NULL;
  if (rc)
    sl__py_raise_msg(sl__py_Error, rc, msg);
  else
    r = Py_BuildValue("{s:s,s:s,s:z}", "report", report, "spec", spec, "html", page);
  sl_free(report);
  sl_free(spec);
  sl_free(page);
  return r;
}

static PyMethodDef module_methods[] = {
    {"version", version, METH_NOARGS, "The library's version (sl_version)."},
    {"redact", redact, METH_VARARGS, "The text with connection strings' passwords as *** (sl_redact)."},
    {"register_fn", (PyCFunction)(void (*)(void))sl__py_register_fn, METH_VARARGS | METH_KEYWORDS, NULL},
    {"fn_names", sl__py_fn_names, METH_NOARGS, "Names of the registered functions."},
    {"_set_element_types", sl__py_set_element_types, METH_VARARGS,
     "The dict class Python functions get, its KeyError."},
    {"close_all", sl__py_close_all, METH_NOARGS, "Cancels and joins every live run."},
    {"prov_check", sl__py_prov_check, METH_VARARGS, NULL},
    {"prov_record_run", (PyCFunction)(void (*)(void))sl__py_prov_record_run, METH_VARARGS | METH_KEYWORDS, NULL},
    {"prov_should_train", (PyCFunction)(void (*)(void))sl__py_prov_should_train, METH_VARARGS | METH_KEYWORDS, NULL},
    {"analyze_trace", (PyCFunction)(void (*)(void))analyze_trace, METH_VARARGS | METH_KEYWORDS,
     "The analyzer's report, planned spec and (html=True) HTML page of a trace given as JSON text."},
    {"_c_elements", c_elements, METH_VARARGS, "test-only: the elements as the C API yields them, copied"},
    {NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "sluice._sluice", "The C core of sluice.", -1,
                                       module_methods};

static int add_exc(PyObject *m, PyObject **slot, const char *name, PyObject *base, const char *doc) {
  char full[64];
  snprintf(full, sizeof full, "sluice.%s", name);
  *slot = PyErr_NewExceptionWithDoc(full, doc, base, NULL);
  if (!*slot) return -1;
  Py_INCREF(*slot);
  return PyModule_AddObject(m, name, *slot);
}

PyMODINIT_FUNC PyInit__sluice(void) {
  import_array();
  if (PyType_Ready(&sl__py_BufType) < 0 || PyType_Ready(&sl__py_PipelineType) < 0 ||
      PyType_Ready(&sl__py_IterType) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&moduledef);
  if (!m) return NULL;
  if (sl__py_names_init() < 0) return NULL;
  if (add_exc(m, &sl__py_Error, "Error", NULL, "An error of the sluice library; str() is the library's message.") ||
      add_exc(m, &sl__py_SpecError, "SpecError", sl__py_Error,
              "A bad pipeline spec (the message names the JSON path).") ||
      add_exc(m, &sl__py_DataError, "DataError", sl__py_Error,
              "Bad input data while running (the message names file and record).") ||
      add_exc(m, &sl__py_StoreError, "StoreError", sl__py_Error, "A provenance store error."))
    return NULL;
  Py_INCREF(&sl__py_PipelineType);
  Py_INCREF(&sl__py_BufType);
  Py_INCREF(&sl__py_IterType);
  if (PyModule_AddObject(m, "Pipeline", (PyObject *)&sl__py_PipelineType) ||
      PyModule_AddObject(m, "Buf", (PyObject *)&sl__py_BufType) ||
      PyModule_AddObject(m, "Iterator", (PyObject *)&sl__py_IterType))
    return NULL;
  return m;
}
