/* py_pipeline.c: sluice._sluice.Pipeline: a pipeline built from a JSON spec, its runs (iterators, py_iter.c), the
 * online tuner of tune=True, stats, optimize, convert and the HTML report. */
#include "py_ext.h"

#include <string.h>
#include <unistd.h>

static bool has_cache(const sl_pipeline *p) {
  int n = sl_pipeline_op_count(p);
  for (int i = 0; i < n; i++) {
    sl_op_stats st;
    if (!sl_pipeline_op_stats(&st, p, i) && st.op && !strcmp(st.op, "cache")) return true;
  }
  return false;
}

static void tuner_release(PipelineObject *self);

static int Pipeline_init(PipelineObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"spec", "origin", "is_path", "tune", "tune_interval", "tune_drift", NULL};
  const char *spec, *origin = NULL;
  Py_ssize_t len;
  int is_path = 0, tune = 0;
  double interval = 0, drift = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "s#|zppdd", kwlist, &spec, &len, &origin, &is_path, &tune, &interval,
                                   &drift))
    return -1;
  if (self->live) {
    PyErr_SetString(sl__py_Error, "Pipeline: cannot rebuild a pipeline while an iterator of it is live");
    return -1;
  }
  if (!(interval >= 0) || !(drift >= 0)) {
    PyErr_SetString(PyExc_ValueError, "Pipeline: the tuner's interval and drift must not be negative");
    return -1;
  }
  PyObject *logs = PyList_New(0);
  if (!logs) return -1;
  sl_pipeline *p = NULL;
  int rc = is_path ? sl_pipeline_from_file(&p, spec) : sl_pipeline_from_json(&p, spec, (size_t)len, origin);
  if (rc) {
    Py_DECREF(logs);
    sl__py_raise_sl(sl__py_SpecError, rc);
    return -1;
  }
  /* tune=True: the window crops fused first, as `sluice run --tuner sluice` does (a live pipeline takes no new op). */
  char *note = NULL;
  if (tune) {
    sl_pipeline *f = NULL;
    if ((rc = sl_pipeline_fuse(&f, p, &note))) {
      sl_pipeline_free(p);
      Py_DECREF(logs);
      sl__py_raise_sl(sl__py_SpecError, rc);
      return -1;
    }
    if (f) {
      sl_pipeline_free(p);
      p = f;
    }
  }
  PyObject *fused = note ? PyUnicode_FromString(note) : Py_NewRef(Py_None);
  sl_free(note);
  if (!fused) {
    sl_pipeline_free(p);
    Py_DECREF(logs);
    return -1;
  }
  Py_XSETREF(self->fused, fused);
  tuner_release(self); /* it watches the pipeline freed here */
  sl_pipeline_free(self->p);
  self->p = p;
  self->readonly = has_cache(p);
  self->tune = tune;
  self->tune_opts = (sl_tune_opts)SL_TUNE_OPTS_INIT;
  self->tune_opts.interval = interval;
  self->tune_opts.drift = drift;
  Py_XSETREF(self->tuner_logs, logs);
  self->tuner_solves = 0;
  return 0;
}

/* Stops the pipeline's tuner (the GIL released: the join waits for its current window) and keeps its change list.
 * Called before the pipeline is rebuilt or freed, with no iterator live; self->tuner is cleared first. */
static void tuner_release(PipelineObject *self) {
  sl_tuner *t = self->tuner;
  if (!t) return;
  self->tuner = NULL;
  if (self->tuner_pid != getpid()) return; /* a fork's copy: its thread is the parent's */
  char *log = NULL;
  int solves;
  Py_BEGIN_ALLOW_THREADS
  solves = sl_tuner_solves(t);
  if (sl_tuner_log(&log, t, true)) log = NULL; /* out of memory: that stretch's list is lost, not the run */
  sl_tuner_stop(t);
  Py_END_ALLOW_THREADS
  self->tuner_solves += solves;
  PyObject *s = log ? PyUnicode_FromString(log) : NULL;
  sl_free(log);
  if (!s || !self->tuner_logs || PyList_Append(self->tuner_logs, s) < 0) PyErr_Clear();
  Py_XDECREF(s);
}

static void Pipeline_dealloc(PipelineObject *self) {
  tuner_release(self); /* none is left running: iterators hold their pipeline; this only guards */
  Py_XDECREF(self->tuner_logs);
  Py_XDECREF(self->fused);
  sl_pipeline_free(self->p);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

bool sl__py_need_pipeline(PipelineObject *self) {
  if (self->p) return true;
  PyErr_SetString(sl__py_Error, "Pipeline: not built");
  return false;
}

/* A run: from the start, or (state: bytes of Iterator.state()) from a saved position. */
static PyObject *pipeline_run(PipelineObject *self, const void *state, size_t state_len) {
  if (!sl__py_need_pipeline(self)) return NULL;
  IterObject *o = sl__py_iter_new(self);
  if (!o) return NULL;
  int rc = 0;
  /* The tuner before the run: its one-off probes measure process CPU, which the run's threads would add to. */
  if (self->tune && !self->tuner) self->tuner_pid = getpid();
  if (self->tune && !self->tuner && (rc = sl_pipeline_tune(&self->tuner, self->p, &self->tune_opts))) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", sl_error_last());
    self->tuner = NULL;
    Py_DECREF(o);
    return sl__py_raise_msg(sl__py_Error, rc, msg);
  }
  if (state) {
    Py_BEGIN_ALLOW_THREADS /* restoring makes buffered elements again: it may run Python map functions */
    rc = sl_pipeline_iter_at(&o->it, self->p, state, state_len);
    Py_END_ALLOW_THREADS
  } else {
    rc = sl_pipeline_iter(&o->it, self->p);
  }
  if (rc) {
    o->it = NULL;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", sl_error_last());
    if (!self->live) tuner_release(self); /* the tuner started above watches no run */
    Py_DECREF(o);
    return sl__py_raise_msg(sl__py_Error, rc, msg);
  }
  self->live++;
  sl__py_watch_sigint();
  return (PyObject *)o;
}

static PyObject *Pipeline_iter(PipelineObject *self) { return pipeline_run(self, NULL, 0); }

/* _iter_at(state): a run that continues from a saved state (Pipeline.iter(state=...)). */
static PyObject *Pipeline_iter_at(PipelineObject *self, PyObject *arg) {
  Py_buffer b;
  if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
  PyObject *r = pipeline_run(self, b.buf, (size_t)b.len);
  PyBuffer_Release(&b);
  return r;
}

/* set_epoch(n): the next run is epoch n. */
static PyObject *Pipeline_set_epoch(PipelineObject *self, PyObject *arg) {
  if (!sl__py_need_pipeline(self)) return NULL;
  unsigned long long n = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return NULL;
  if (self->live) return PyErr_Format(sl__py_Error, "set_epoch: a run of this pipeline is open; close it first");
  sl_pipeline_set_epoch(self->p, (uint64_t)n);
  Py_RETURN_NONE;
}

static PyObject *Pipeline_tuner_fused(PipelineObject *self, PyObject *unused) {
  return Py_NewRef(self->fused ? self->fused : Py_None);
}

/* The change lists of the tuners so far (JSON text, one per tuned stretch of runs; the running tuner's last). */
static PyObject *Pipeline_tuner_logs(PipelineObject *self, PyObject *unused) {
  if (!sl__py_need_pipeline(self)) return NULL;
  PyObject *l = PyList_GetSlice(self->tuner_logs, 0, PY_SSIZE_T_MAX);
  if (!l || !self->tuner) return l;
  char *log = NULL;
  int rc = sl_tuner_log(&log, self->tuner, true); /* safe while the tuner runs; takes its lock only briefly */
  PyObject *s = rc ? sl__py_raise_sl(sl__py_Error, rc) : PyUnicode_FromString(log);
  sl_free(log);
  if (!s || PyList_Append(l, s) < 0) Py_CLEAR(l);
  Py_XDECREF(s);
  return l;
}

static PyObject *Pipeline_tuner_solves(PipelineObject *self, PyObject *unused) {
  return PyLong_FromLong(self->tuner_solves + (self->tuner ? sl_tuner_solves(self->tuner) : 0));
}

static PyObject *Pipeline_to_json(PipelineObject *self, PyObject *unused) {
  if (!sl__py_need_pipeline(self)) return NULL;
  char *s = NULL;
  int rc = sl_pipeline_to_json(&s, self->p);
  if (rc) return sl__py_raise_sl(sl__py_Error, rc);
  PyObject *r = PyUnicode_FromString(s);
  sl_free(s);
  return r;
}

/* Builds the dict; Py_BuildValue keeps the field list in one place. */
static PyObject *stats_to_dict(const sl_op_stats *s) {
  return Py_BuildValue(
      "{s:s,s:s,s:s,s:i,s:O,s:L,s:L,s:O,s:O,s:K,s:K,s:K,s:d,s:d,s:d,s:K,s:K,s:K,s:d,s:K,s:K,s:L,s:d,s:d,s:K,s:d,s:K}", "op",
      s->op, "path", s->path, "label", s->label, "parent", s->parent, "nested", s->nested ? Py_True : Py_False,
      "parallelism", (long long)s->parallelism, "buffer", (long long)s->buffer, "async", s->async ? Py_True : Py_False,
      "random", s->random ? Py_True : Py_False, "elements_out", (unsigned long long)s->elements_out, "elements_in",
      (unsigned long long)s->elements_in, "bytes_out", (unsigned long long)s->bytes_out, "cpu_seconds",
      s->cpu_seconds, "wall_seconds", s->wall_seconds, "wait_seconds", s->wait_seconds, "disk_bytes",
      (unsigned long long)s->disk_bytes, "source_bytes", (unsigned long long)s->source_bytes, "skipped",
      (unsigned long long)s->skipped, "buffer_occupancy", s->buffer_occupancy, "bytes_held",
      (unsigned long long)s->bytes_held, "bytes_held_peak", (unsigned long long)s->bytes_held_peak, "cardinality",
      (long long)s->cardinality, "call_mean", s->call_mean, "call_sd", s->call_sd, "errors_skipped",
      (unsigned long long)s->errors_skipped, "runq_seconds", s->runq_seconds, "filled", (unsigned long long)s->filled);
}

static PyObject *Pipeline_stats(PipelineObject *self, PyObject *unused) {
  if (!sl__py_need_pipeline(self)) return NULL;
  int n = sl_pipeline_op_count(self->p);
  PyObject *l = PyList_New(n);
  if (!l) return NULL;
  for (int i = 0; i < n; i++) {
    sl_op_stats st;
    int rc = sl_pipeline_op_stats(&st, self->p, i);
    PyObject *d = rc ? sl__py_raise_sl(sl__py_Error, rc) : stats_to_dict(&st);
    if (!d) {
      Py_DECREF(l);
      return NULL;
    }
    PyList_SET_ITEM(l, i, d);
  }
  return l;
}

/* Why op i skipped elements (sl_pipeline_op_skips' JSON text; the Python layer reads it). */
static PyObject *Pipeline_skips(PipelineObject *self, PyObject *arg) {
  if (!sl__py_need_pipeline(self)) return NULL;
  int i = PyLong_AsLong(arg);
  if (i == -1 && PyErr_Occurred()) return NULL;
  char *s = NULL;
  int rc = sl_pipeline_op_skips(&s, self->p, i);
  if (rc) return sl__py_raise_sl(sl__py_Error, rc);
  PyObject *r = PyUnicode_FromString(s);
  sl_free(s);
  return r;
}

static PyObject *Pipeline_reset_stats(PipelineObject *self, PyObject *unused) {
  if (!sl__py_need_pipeline(self)) return NULL;
  sl_pipeline_reset_stats(self->p);
  Py_RETURN_NONE;
}

static PyObject *Pipeline_input_files(PipelineObject *self, PyObject *unused) {
  if (!sl__py_need_pipeline(self)) return NULL;
  const char **paths = NULL;
  size_t n = 0;
  int rc = sl_pipeline_input_files(&paths, &n, self->p);
  if (rc) return sl__py_raise_sl(sl__py_Error, rc);
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) {
    PyObject *s = PyUnicode_DecodeFSDefault(paths[i]);
    if (!s) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, (Py_ssize_t)i, s);
  }
  sl_free(paths);
  return l;
}

/* optimize: the library's planner over the "autotune" knobs, in place. Numbers <= 0 mean the default. */
static PyObject *Pipeline_optimize(PipelineObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"seconds", "cores", "consumer_cores", "memory", "measure", NULL};
  double seconds = 0, cores = 0, consumer = 0, measure = 0;
  long long memory = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|dddLd", kwlist, &seconds, &cores, &consumer, &memory, &measure))
    return NULL;
  if (!sl__py_need_pipeline(self)) return NULL;
  if (self->live)
    return sl__py_raise_msg(sl__py_Error, SL_EINVAL, "optimize: an iterator of this pipeline is still live");
  tuner_release(self); /* the pipeline it watches is replaced */
  sl_optimize_opts oo = SL_OPTIMIZE_OPTS_INIT;
  sl_optimize_result res;
  memset(&res, 0, sizeof res);
  if (seconds > 0) oo.trace_seconds = seconds;
  if (cores > 0) oo.plan.cores = cores;
  if (consumer > 0) oo.plan.consumer_cores = consumer;
  if (memory > 0) oo.plan.memory = memory;
  if (measure > 0) oo.measure_seconds = measure;
  oo.result = &res;
  char *report = NULL; /* the final plan's analyzer report (JSON): the Python layer reads its sentences */
  oo.report = &report;
  int rc;
  char msg[2048] = "";
  Py_BEGIN_ALLOW_THREADS
  rc = sl_pipeline_optimize(self->p, &oo);
  if (rc) snprintf(msg, sizeof msg, "%s", sl_error_last());
  Py_END_ALLOW_THREADS
  if (rc) return sl__py_raise_msg(rc == SL_EINVAL ? sl__py_SpecError : sl__py_Error, rc, msg);
  self->readonly = has_cache(self->p);
  PyObject *r = Py_BuildValue("{s:d,s:d,s:d,s:d,s:i,s:d,s:d,s:d,s:O,s:d,s:d,s:s,s:d,s:d,s:d,s:O,s:d,s:d,s:i}",
                              "baseline", res.baseline,
                              "predicted", res.predicted, "measured", res.measured, "bound", res.bound, "rounds",
                              res.rounds, "other_load", res.other_load, "model_cpu", res.model_cpu, "measured_cpu",
                              res.measured_cpu, "kept_input", res.kept_input ? Py_True : Py_False, "input_cpu_traced",
                              res.input_cpu_traced, "input_cpu_checked", res.input_cpu_checked, "report",
                              report ? report : "{}", "predicted_all_cores", res.predicted_all, "predicted_cores",
                              res.predicted_cores, "trace_cores", res.trace_cores, "cores_from_run",
                              res.cores_from_run ? Py_True : Py_False, "measured_min", res.measured_lo,
                              "measured_max", res.measured_hi, "check_rounds", res.check_rounds);
  sl_free(report);
  return r;
}

/* A trace of `seconds` and the HTML report of it (sluice trace + sluice report in one). */
static PyObject *Pipeline_report_html(PipelineObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"seconds", NULL};
  double seconds = 2;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|d", kwlist, &seconds)) return NULL;
  if (!sl__py_need_pipeline(self)) return NULL;
  sl_trace_opts to = SL_TRACE_OPTS_INIT;
  to.seconds = seconds;
  sl_report_trace_opts ro = SL_REPORT_TRACE_OPTS_INIT;
  sl_trace *t = NULL;
  char *html = NULL, msg[2048] = "";
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = sl_trace_run(&t, self->p, &to);
  if (!rc) rc = sl_report_trace_html(&html, t, &ro);
  if (rc) snprintf(msg, sizeof msg, "%s", sl_error_last());
  sl_trace_free(t);
  Py_END_ALLOW_THREADS
  if (rc) return sl__py_raise_msg(sl__py_data_class(rc), rc, msg);
  PyObject *r = PyUnicode_FromString(html);
  sl_free(html);
  return r;
}

/* _convert(out, to="tfrecord", shards=1, prefix="train"): sl_convert over this pipeline (a run of its own, like an
 * iterator's), the GIL released; Ctrl-C stops it at the next element with nothing written. */
static PyObject *Pipeline_convert(PipelineObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"out", "to", "shards", "prefix", NULL};
  const char *to = "tfrecord";
  sl_convert_opts o = SL_CONVERT_OPTS_INIT;
  o.prefix = "train";
  if (!PyArg_ParseTupleAndKeywords(args, kw, "s|sis", kwlist, &o.out_dir, &to, &o.shards, &o.prefix)) return NULL;
  if (!sl__py_need_pipeline(self)) return NULL;
  if (sl_convert_format_parse(&o.format, to)) return sl__py_raise_sl(PyExc_ValueError, SL_EINVAL);
  if (o.shards < 1) return sl__py_raise_msg(PyExc_ValueError, SL_EINVAL, "shards: must be >= 1");
  sl__py_watch_sigint();
  sl__py_convert_cancel = 0;
  o.cancel = &sl__py_convert_cancel;
  self->live++; /* not rebuilt under the run */
  sl_convert_report r;
  int rc;
  char msg[4096] = "";
  Py_BEGIN_ALLOW_THREADS
  rc = sl_convert(&r, self->p, &o);
  if (rc) snprintf(msg, sizeof msg, "%s", sl_error_last());
  Py_END_ALLOW_THREADS
  self->live--;
  if (rc) return sl__py_raise_run_error(rc, msg);
  return Py_BuildValue("{s:L,s:i,s:K}", "elements", (long long)r.elements, "files", r.files, "bytes",
                       (unsigned long long)r.bytes);
}

static PyObject *Pipeline_name(PipelineObject *self, void *c) {
  if (!sl__py_need_pipeline(self)) return NULL;
  const char *n = sl_pipeline_name(self->p);
  return PyUnicode_FromString(n ? n : "");
}
static PyObject *Pipeline_seed(PipelineObject *self, void *c) {
  if (!sl__py_need_pipeline(self)) return NULL;
  return PyLong_FromUnsignedLongLong(sl_pipeline_seed(self->p));
}

static PyMethodDef Pipeline_methods[] = {
    {"to_json", (PyCFunction)Pipeline_to_json, METH_NOARGS, "The spec as normalised JSON text."},
    {"stats", (PyCFunction)Pipeline_stats, METH_NOARGS, "Per-op counters, one dict per op (pre-order)."},
    {"reset_stats", (PyCFunction)Pipeline_reset_stats, METH_NOARGS, "Zeroes every op's counters."},
    {"input_files", (PyCFunction)Pipeline_input_files, METH_NOARGS, "The data files the `files` ops list."},
    {"_optimize", (PyCFunction)(void (*)(void))Pipeline_optimize, METH_VARARGS | METH_KEYWORDS, NULL},
    {"_convert", (PyCFunction)(void (*)(void))Pipeline_convert, METH_VARARGS | METH_KEYWORDS, NULL},
    {"_report_html", (PyCFunction)(void (*)(void))Pipeline_report_html, METH_VARARGS | METH_KEYWORDS, NULL},
    {"_tuner_logs", (PyCFunction)Pipeline_tuner_logs, METH_NOARGS, NULL},
    {"_iter_at", (PyCFunction)Pipeline_iter_at, METH_O, NULL},
    {"set_epoch", (PyCFunction)Pipeline_set_epoch, METH_O,
     "set_epoch(n): the next run is epoch n (its order a function of the seed and n: DistributedSampler's "
     "convention)."},
    {"_skips", (PyCFunction)Pipeline_skips, METH_O, NULL},
    {"tuner_fused", (PyCFunction)Pipeline_tuner_fused, METH_NOARGS,
     "tune=True: what was fused when the pipeline was built (decode_jpeg + a window crop, as sluice optimize fuses "
     "them; a live pipeline takes no new op), or None."},
    {"tuner_solves", (PyCFunction)Pipeline_tuner_solves, METH_NOARGS,
     "Solves of the online tuner (tune=True) so far, over every run."},
    {NULL}};
static PyGetSetDef Pipeline_getset[] = {{"name", (getter)Pipeline_name, NULL, "the spec's name", NULL},
                                        {"seed", (getter)Pipeline_seed, NULL, "the spec's seed", NULL},
                                        {NULL}};

PyTypeObject sl__py_PipelineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice._sluice.Pipeline",
    .tp_basicsize = sizeof(PipelineObject),
    .tp_dealloc = (destructor)Pipeline_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A pipeline built from a JSON spec (use sluice.Pipeline).",
    .tp_iter = (getiterfunc)Pipeline_iter,
    .tp_methods = Pipeline_methods,
    .tp_getset = Pipeline_getset,
    .tp_init = (initproc)Pipeline_init,
    .tp_new = PyType_GenericNew,
};
