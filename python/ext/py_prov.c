/* py_prov.c: the provenance store's calls behind sluice.prov: open-check, record a run, should-train. */
#include "py_ext.h"

#include <string.h>

PyObject *sl__py_prov_check(PyObject *m, PyObject *args) {
  const char *uri;
  if (!PyArg_ParseTuple(args, "s", &uri)) return NULL;
  sl_prov *p = NULL;
  int rc;
  char msg[2048] = "";
  const char *backend = NULL;
  Py_BEGIN_ALLOW_THREADS
  rc = sl_prov_open(&p, uri, SL_PROV_CREATE);
  if (rc) snprintf(msg, sizeof msg, "%s", sl_error_last());
  else backend = sl_prov_backend(p);
  Py_END_ALLOW_THREADS
  PyObject *r = rc ? sl__py_raise_msg(sl__py_StoreError, rc, msg) : PyUnicode_FromString(backend);
  sl_prov_close(p);
  return r;
}

/* Copies a list of str into a NULL-free array of UTF-8 pointers owned by the list's items. */
static int str_list(PyObject *l, const char ***out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (l == Py_None) return 0;
  PyObject *seq = PySequence_Fast(l, "a list of paths");
  if (!seq) return -1;
  Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
  const char **a = PyMem_Calloc((size_t)k + 1, sizeof *a);
  if (!a) {
    Py_DECREF(seq);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < k; i++) {
    a[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
    if (!a[i]) {
      PyMem_Free(a);
      Py_DECREF(seq);
      return -1;
    }
  }
  Py_DECREF(seq); /* the items stay alive in the caller's list */
  *out = a;
  *n = (size_t)k;
  return 0;
}

PyObject *sl__py_prov_record_run(PyObject *m, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"uri", "pipeline", "kind", "spec_path", "inputs", "outputs", "output_types", "throughput",
                           "bottleneck", "cpu_seconds", "elapsed", "failed", "error", "start_ms", NULL};
  const char *uri, *pipeline, *kind = "sluice.Run", *spec_path = NULL, *bottleneck = NULL, *error = NULL;
  PyObject *inputs = Py_None, *outputs = Py_None, *otypes = Py_None;
  double throughput = 0, cpu = 0, elapsed = 0;
  int failed = 0;
  long long start_ms = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|szOOOdzddpzL", kwlist, &uri, &pipeline, &kind, &spec_path, &inputs,
                                   &outputs, &otypes, &throughput, &bottleneck, &cpu, &elapsed, &failed, &error,
                                   &start_ms))
    return NULL;
  const char **in = NULL, **outp = NULL, **outt = NULL;
  size_t nin = 0, nout = 0, ntypes = 0;
  sl_prov_output *outs = NULL;
  PyObject *r = NULL;
  if (str_list(inputs, &in, &nin) || str_list(outputs, &outp, &nout) || str_list(otypes, &outt, &ntypes)) goto done;
  if (ntypes != nout) {
    PyErr_SetString(PyExc_ValueError, "record_run: one output type per output");
    goto done;
  }
  outs = PyMem_Calloc(nout + 1, sizeof *outs);
  if (!outs) {
    PyErr_NoMemory();
    goto done;
  }
  for (size_t i = 0; i < nout; i++) {
    outs[i].path = outp[i];
    outs[i].type = outt[i];
  }
  sl_prov_run run = SL_PROV_RUN_INIT;
  run.kind = kind;
  run.pipeline = pipeline;
  run.spec_path = spec_path;
  run.inputs = in;
  run.ninputs = nin;
  run.outputs = outs;
  run.noutputs = nout;
  run.throughput = throughput;
  run.bottleneck = bottleneck;
  run.cpu_seconds = cpu;
  run.elapsed = elapsed;
  run.failed = failed;
  run.error = error;
  run.start_ms = start_ms;
  int64_t id = 0;
  int rc;
  char msg[2048] = "";
  Py_BEGIN_ALLOW_THREADS
  rc = sl_prov_record_run(&id, uri, &run);
  if (rc) snprintf(msg, sizeof msg, "%s", sl_error_last());
  Py_END_ALLOW_THREADS
  r = rc ? sl__py_raise_msg(sl__py_StoreError, rc, msg) : PyLong_FromLongLong(id);
done:
  PyMem_Free(in);
  PyMem_Free(outp);
  PyMem_Free(outt);
  PyMem_Free(outs);
  return r;
}

PyObject *sl__py_prov_should_train(PyObject *m, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"uri", "pipeline", "model", "threshold", "now_ms", NULL};
  const char *uri, *pipeline, *model = NULL;
  double threshold = -1;
  long long now_ms = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|zdL", kwlist, &uri, &pipeline, &model, &threshold, &now_ms))
    return NULL;
  sl_prov_model *mo = NULL;
  sl_prov *p = NULL;
  sl_prov_decision d;
  memset(&d, 0, sizeof d);
  int rc = 0;
  char msg[2048] = "";
  Py_BEGIN_ALLOW_THREADS
  if (model) rc = sl_prov_model_load(&mo, model);
  if (!rc) rc = sl_prov_open(&p, uri, 0);
  if (!rc) rc = sl_prov_should_train(&d, p, pipeline, mo, threshold, now_ms);
  if (rc) snprintf(msg, sizeof msg, "%s", sl_error_last());
  sl_prov_close(p);
  sl_prov_model_free(mo);
  Py_END_ALLOW_THREADS
  if (rc) return sl__py_raise_msg(sl__py_StoreError, rc, msg);
  sl_free(d.features);
  return Py_BuildValue("(Odd)", d.train ? Py_True : Py_False, d.p_push, d.threshold);
}
