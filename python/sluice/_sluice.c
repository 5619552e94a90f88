/* sluice/_sluice.c: the CPython extension behind `import sluice`, written against the public C API only
 * (include/sluice.h). Elements become dicts of numpy arrays that borrow the engine's buffers (the array's base is
 * a Buf holding one sl_buf reference); sl_iter_next runs with the GIL released; SIGINT cancels the iterators
 * that are blocked in it. The pure-Python layer (__init__.py, torch.py, prov.py) wraps what is here. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#define PY_ARRAY_UNIQUE_SYMBOL sluice_ARRAY_API
#include <numpy/arrayobject.h>

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <sluice.h>

static PyObject *Error, *SpecError, *DataError, *StoreError;

/* ------------------------------------------------------------------ errors */

/* The exception stored by the last Python map function that raised (chained as the cause of the error the
 * iteration raises). Guarded by the GIL. */
static PyObject *last_fn_exc;
/* sluice._Element (the dict a Python function receives) and sluice._MissingComponent (what reading a component it
 * lacks raises), from sluice/__init__.py. */
static PyObject *element_cls, *missing_cls;

/* Raises `cls` with the library's message (the same text the CLI prints) and the code as `.code`. */
static PyObject *raise_msg(PyObject *cls, int code, const char *msg) {
  PyObject *exc = PyObject_CallFunction(cls, "s", msg && *msg ? msg : sl_strerror(code));
  if (!exc) return NULL;
  PyObject *c = PyLong_FromLong(code);
  if (c) {
    PyObject_SetAttrString(exc, "code", c);
    Py_DECREF(c);
  }
  PyErr_SetObject(cls, exc);
  Py_DECREF(exc);
  return NULL;
}
static PyObject *raise_sl(PyObject *cls, int code) { return raise_msg(cls, code, sl_error_last()); }
static PyObject *raise_run_error(int rc, const char *msg);

/* Which class an error of the running pipeline is: DataError for bad input data (a file, a record, a value),
 * MemoryError for allocation failures, Error otherwise. */
static PyObject *data_class(int code) {
  switch (code) {
  case SL_EINVAL:
  case SL_EIO:
  case SL_ECORRUPT:
  case SL_ENOTFOUND:
    return DataError;
  default:
    return Error;
  }
}

/* ------------------------------------------------------------------ Buf: one sl_buf reference */

typedef struct {
  PyObject_HEAD sl_buf *buf;
} BufObject;

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
static PyTypeObject BufType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice._sluice.Buf",
    .tp_basicsize = sizeof(BufObject),
    .tp_dealloc = (destructor)Buf_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A reference to a buffer of the engine: the base of the numpy arrays sluice yields.",
    .tp_getset = Buf_getset,
};

/* ------------------------------------------------------------------ element -> dict */

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
      v = rc ? raise_sl(Error, rc) : PyBytes_FromStringAndSize(d, (Py_ssize_t)n);
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
  if (t < 0) return raise_msg(Error, SL_EINVAL, "component of an unknown dtype");
  npy_intp dims[SL_MAX_RANK];
  for (int d = 0; d < c->rank; d++) dims[d] = (npy_intp)c->shape[d];
  if (!c->buf) {
    PyObject *a = PyArray_SimpleNew(c->rank, dims, t);
    if (a && c->size) memcpy(PyArray_DATA((PyArrayObject *)a), sl_comp_data(c), c->size);
    return a;
  }
  BufObject *base = PyObject_New(BufObject, &BufType);
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
static PyObject *elem_to_dict(const sl_elem *e, bool readonly, PyObject *cls) {
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

/* ------------------------------------------------------------------ SIGINT -> sl_iter_cancel */
/* Python's own SIGINT handler only sets a flag that the main thread reads between bytecodes; a thread blocked in
 * sl_iter_next would not see it until the next element arrives. So a handler of ours, chained in front of
 * Python's, posts a semaphore (async-signal-safe), and a watcher thread cancels every iterator blocked in next.
 * sl_iter_next then returns SL_ECANCELED and the consumer raises KeyboardInterrupt through PyErr_CheckSignals. */

typedef struct IterObject IterObject;
struct IterObject {
  PyObject_HEAD sl_iter *it;
  PyObject *pipe; /* the Pipeline: it outlives its iterators */
  bool readonly;
  bool in_next;   /* blocked in sl_iter_next (guarded by watch_mu) */
  IterObject *prev, *next; /* every live iterator (guarded by watch_mu) */
  /* next() from several Python threads is serialised: one at a time runs sl_iter_next (the engine's iterator is
   * one consumer's), the others wait for this lock with the GIL released, so that the holder can take the GIL back.
   * close() takes it too: the run is never freed under a next() in progress. */
  pthread_mutex_t next_mu;
  /* The process that started the run: its threads exist only there. A forked child that touches the iterator gets
   * an error instead of waiting for threads it does not have; its copy of the run is left alone (never freed). */
  pid_t pid;
};

static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static IterObject *live_iters;
static sem_t sig_sem;
static bool watcher_started;
static struct sigaction prev_sigint;

static void *watcher_main(void *arg) {
  for (;;) {
    while (sem_wait(&sig_sem) && errno == EINTR) {
    }
    pthread_mutex_lock(&watch_mu);
    for (IterObject *o = live_iters; o; o = o->next)
      if (o->in_next && o->it) sl_iter_cancel(o->it);
    pthread_mutex_unlock(&watch_mu);
  }
  return NULL;
}

/* Polled by a running sl_convert (its opts.cancel): set by the handler below, cleared when a convert starts. */
static volatile sig_atomic_t convert_cancel;

static void on_sigint(int sig, siginfo_t *info, void *ctx) {
  int saved = errno;
  convert_cancel = 1;
  sem_post(&sig_sem);
  if (prev_sigint.sa_flags & SA_SIGINFO) {
    if (prev_sigint.sa_sigaction) prev_sigint.sa_sigaction(sig, info, ctx);
  } else if (prev_sigint.sa_handler != SIG_DFL && prev_sigint.sa_handler != SIG_IGN && prev_sigint.sa_handler) {
    prev_sigint.sa_handler(sig);
  }
  errno = saved;
}

/* A forked child (a DataLoader worker, say) has no watcher thread: it starts its own at its first run. watch_mu is
 * held across the fork so that the child's copy is not left locked by a thread it does not have. */
static void watcher_before_fork(void) { pthread_mutex_lock(&watch_mu); }
static void watcher_parent_fork(void) { pthread_mutex_unlock(&watch_mu); }
static void watcher_after_fork(void) {
  pthread_mutex_unlock(&watch_mu);
  watcher_started = false;
}

/* Puts on_sigint in front of the handler in force when that is a function (Python's, or one the user set with
 * signal.signal since: that replaced ours, so we chain again). Leaves SIG_DFL/SIG_IGN alone. */
static void watch_sigint(void) {
  static bool atfork;
  if (!atfork) atfork = pthread_atfork(watcher_before_fork, watcher_parent_fork, watcher_after_fork) == 0;
  if (!watcher_started) {
    if (sem_init(&sig_sem, 0, 0)) return;
    pthread_t t;
    if (pthread_create(&t, NULL, watcher_main, NULL)) return;
    pthread_detach(t);
    watcher_started = true;
  }
  struct sigaction cur;
  if (sigaction(SIGINT, NULL, &cur)) return;
  if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigint) return;
  if (!(cur.sa_flags & SA_SIGINFO) && (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN)) return;
  struct sigaction sa = cur;
  sa.sa_sigaction = on_sigint;
  sa.sa_flags = cur.sa_flags | SA_SIGINFO;
  prev_sigint = cur;
  sigaction(SIGINT, &sa, NULL);
}

/* ------------------------------------------------------------------ Pipeline */

typedef struct {
  PyObject_HEAD sl_pipeline *p;
  bool readonly; /* a cache op shares its buffers between epochs: yield read-only arrays */
  int live;      /* iterators not yet freed */
  /* tune=True: the online tuner (sl_pipeline_tune) starts with the first iterator and runs, from run to run, until
   * the pipeline is rebuilt or freed; each tuner's change list (JSON text) is kept in tuner_logs when it stops. */
  bool tune;
  sl_tune_opts tune_opts;
  sl_tuner *tuner;
  pid_t tuner_pid;      /* the process whose thread the tuner is: a forked child leaves its copy alone */
  PyObject *tuner_logs; /* list of str */
  int tuner_solves;     /* solves of the tuners already stopped */
  PyObject *fused;      /* tune=True: what sl_pipeline_fuse fused when it was built (str), or None */
} PipelineObject;

static PyTypeObject PipelineType, IterType;

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
    PyErr_SetString(Error, "Pipeline: cannot rebuild a pipeline while an iterator of it is live");
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
    raise_sl(SpecError, rc);
    return -1;
  }
  /* tune=True: the window crops fused first, as `sluice run --tuner sluice` does (a live pipeline takes no new op). */
  char *note = NULL;
  if (tune) {
    sl_pipeline *f = NULL;
    if ((rc = sl_pipeline_fuse(&f, p, &note))) {
      sl_pipeline_free(p);
      Py_DECREF(logs);
      raise_sl(SpecError, rc);
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

static bool need_pipeline(PipelineObject *self) {
  if (self->p) return true;
  PyErr_SetString(Error, "Pipeline: not built");
  return false;
}

/* A run: from the start, or (state: bytes of Iterator.state()) from a saved position. */
static PyObject *pipeline_run(PipelineObject *self, const void *state, size_t state_len) {
  if (!need_pipeline(self)) return NULL;
  IterObject *o = PyObject_New(IterObject, &IterType);
  if (!o) return NULL;
  o->it = NULL;
  o->in_next = false;
  o->readonly = self->readonly;
  o->pid = getpid();
  pthread_mutex_init(&o->next_mu, NULL);
  Py_INCREF(self);
  o->pipe = (PyObject *)self;
  o->prev = NULL;
  pthread_mutex_lock(&watch_mu);
  o->next = live_iters;
  if (live_iters) live_iters->prev = o;
  live_iters = o;
  pthread_mutex_unlock(&watch_mu);
  int rc = 0;
  /* The tuner before the run: its one-off probes measure process CPU, which the run's threads would add to. */
  if (self->tune && !self->tuner) self->tuner_pid = getpid();
  if (self->tune && !self->tuner && (rc = sl_pipeline_tune(&self->tuner, self->p, &self->tune_opts))) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", sl_error_last());
    self->tuner = NULL;
    Py_DECREF(o);
    return raise_msg(Error, rc, msg);
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
    return raise_msg(Error, rc, msg);
  }
  self->live++;
  watch_sigint();
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
  if (!need_pipeline(self)) return NULL;
  unsigned long long n = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return NULL;
  if (self->live) return PyErr_Format(Error, "set_epoch: a run of this pipeline is open; close it first");
  sl_pipeline_set_epoch(self->p, (uint64_t)n);
  Py_RETURN_NONE;
}

static PyObject *Pipeline_tuner_fused(PipelineObject *self, PyObject *unused) {
  return Py_NewRef(self->fused ? self->fused : Py_None);
}

/* The change lists of the tuners so far (JSON text, one per tuned stretch of runs; the running tuner's last). */
static PyObject *Pipeline_tuner_logs(PipelineObject *self, PyObject *unused) {
  if (!need_pipeline(self)) return NULL;
  PyObject *l = PyList_GetSlice(self->tuner_logs, 0, PY_SSIZE_T_MAX);
  if (!l || !self->tuner) return l;
  char *log = NULL;
  int rc = sl_tuner_log(&log, self->tuner, true); /* safe while the tuner runs; takes its lock only briefly */
  PyObject *s = rc ? raise_sl(Error, rc) : PyUnicode_FromString(log);
  sl_free(log);
  if (!s || PyList_Append(l, s) < 0) Py_CLEAR(l);
  Py_XDECREF(s);
  return l;
}

static PyObject *Pipeline_tuner_solves(PipelineObject *self, PyObject *unused) {
  return PyLong_FromLong(self->tuner_solves + (self->tuner ? sl_tuner_solves(self->tuner) : 0));
}

static PyObject *Pipeline_to_json(PipelineObject *self, PyObject *unused) {
  if (!need_pipeline(self)) return NULL;
  char *s = NULL;
  int rc = sl_pipeline_to_json(&s, self->p);
  if (rc) return raise_sl(Error, rc);
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
  if (!need_pipeline(self)) return NULL;
  int n = sl_pipeline_op_count(self->p);
  PyObject *l = PyList_New(n);
  if (!l) return NULL;
  for (int i = 0; i < n; i++) {
    sl_op_stats st;
    int rc = sl_pipeline_op_stats(&st, self->p, i);
    PyObject *d = rc ? raise_sl(Error, rc) : stats_to_dict(&st);
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
  if (!need_pipeline(self)) return NULL;
  int i = PyLong_AsLong(arg);
  if (i == -1 && PyErr_Occurred()) return NULL;
  char *s = NULL;
  int rc = sl_pipeline_op_skips(&s, self->p, i);
  if (rc) return raise_sl(Error, rc);
  PyObject *r = PyUnicode_FromString(s);
  sl_free(s);
  return r;
}

static PyObject *Pipeline_reset_stats(PipelineObject *self, PyObject *unused) {
  if (!need_pipeline(self)) return NULL;
  sl_pipeline_reset_stats(self->p);
  Py_RETURN_NONE;
}

static PyObject *Pipeline_input_files(PipelineObject *self, PyObject *unused) {
  if (!need_pipeline(self)) return NULL;
  const char **paths = NULL;
  size_t n = 0;
  int rc = sl_pipeline_input_files(&paths, &n, self->p);
  if (rc) return raise_sl(Error, rc);
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
  if (!need_pipeline(self)) return NULL;
  if (self->live) return raise_msg(Error, SL_EINVAL, "optimize: an iterator of this pipeline is still live");
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
  if (rc) return raise_msg(rc == SL_EINVAL ? SpecError : Error, rc, msg);
  self->readonly = has_cache(self->p);
  PyObject *r = Py_BuildValue("{s:d,s:d,s:d,s:d,s:i,s:d,s:d,s:d,s:O,s:d,s:d,s:s,s:d,s:d,s:d,s:O}", "baseline", res.baseline,
                              "predicted", res.predicted, "measured", res.measured, "bound", res.bound, "rounds",
                              res.rounds, "other_load", res.other_load, "model_cpu", res.model_cpu, "measured_cpu",
                              res.measured_cpu, "kept_input", res.kept_input ? Py_True : Py_False, "input_cpu_traced",
                              res.input_cpu_traced, "input_cpu_checked", res.input_cpu_checked, "report",
                              report ? report : "{}", "predicted_all_cores", res.predicted_all, "predicted_cores",
                              res.predicted_cores, "trace_cores", res.trace_cores, "cores_from_run",
                              res.cores_from_run ? Py_True : Py_False);
  sl_free(report);
  return r;
}

/* A trace of `seconds` and the HTML report of it (sluice trace + sluice report in one). */
static PyObject *Pipeline_report_html(PipelineObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"seconds", NULL};
  double seconds = 2;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|d", kwlist, &seconds)) return NULL;
  if (!need_pipeline(self)) return NULL;
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
  if (rc) return raise_msg(data_class(rc), rc, msg);
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
  if (!need_pipeline(self)) return NULL;
  if (sl_convert_format_parse(&o.format, to)) return raise_sl(PyExc_ValueError, SL_EINVAL);
  if (o.shards < 1) return raise_msg(PyExc_ValueError, SL_EINVAL, "shards: must be >= 1");
  watch_sigint();
  convert_cancel = 0;
  o.cancel = &convert_cancel;
  self->live++; /* not rebuilt under the run */
  sl_convert_report r;
  int rc;
  char msg[4096] = "";
  Py_BEGIN_ALLOW_THREADS
  rc = sl_convert(&r, self->p, &o);
  if (rc) snprintf(msg, sizeof msg, "%s", sl_error_last());
  Py_END_ALLOW_THREADS
  self->live--;
  if (rc) return raise_run_error(rc, msg);
  return Py_BuildValue("{s:L,s:i,s:K}", "elements", (long long)r.elements, "files", r.files, "bytes",
                       (unsigned long long)r.bytes);
}

static PyObject *Pipeline_name(PipelineObject *self, void *c) {
  if (!need_pipeline(self)) return NULL;
  const char *n = sl_pipeline_name(self->p);
  return PyUnicode_FromString(n ? n : "");
}
static PyObject *Pipeline_seed(PipelineObject *self, void *c) {
  if (!need_pipeline(self)) return NULL;
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

static PyTypeObject PipelineType = {
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

/* ------------------------------------------------------------------ Iterator */

/* Joins the run's workers (GIL released: they may be waiting for it in a Python map function) and drops the
 * pipeline's count. self->it is cleared first, under the GIL, so cancel() from another thread never sees a freed
 * iterator. */
static void iter_release_locked(IterObject *self) {
  pthread_mutex_lock(&watch_mu);
  sl_iter *it = self->it;
  self->it = NULL;
  pthread_mutex_unlock(&watch_mu);
  if (!it) return;
  PipelineObject *pipe = (PipelineObject *)self->pipe;
  if (self->pid != getpid()) { /* a forked child's copy: its threads are the parent's */
    pipe->live--;
    return;
  }
  sl_iter_cancel(it);
  Py_BEGIN_ALLOW_THREADS
  sl_iter_free(it);
  Py_END_ALLOW_THREADS
  /* The tuner stays for the next run (one tuner per pipeline, keeping what it learned from epoch to epoch); it stops
   * when the pipeline is rebuilt (optimize, __init__) or freed. */
  pipe->live--;
}

/* Takes self->next_mu, waiting for it with the GIL released (its holder may need the GIL to finish). */
static void next_lock(IterObject *self) {
  if (pthread_mutex_trylock(&self->next_mu) == 0) return;
  Py_BEGIN_ALLOW_THREADS
  pthread_mutex_lock(&self->next_mu);
  Py_END_ALLOW_THREADS
}

/* From outside next(): a next() in progress on another thread is cancelled and waited for first. */
static void iter_release(IterObject *self) {
  if (self->pid != getpid()) { /* the lock may have been held by a thread of the parent: never taken here */
    iter_release_locked(self);
    return;
  }
  pthread_mutex_lock(&watch_mu);
  if (self->it) sl_iter_cancel(self->it);
  pthread_mutex_unlock(&watch_mu);
  next_lock(self);
  iter_release_locked(self);
  pthread_mutex_unlock(&self->next_mu);
}

/* The error of a forked child touching its parent's run. */
static PyObject *iter_forked(IterObject *self) {
  return PyErr_Format(Error, "this iterator was started in process %ld and cannot be continued in process %ld, a "
                             "fork of it: the run's threads exist only in the process that started it (start a new "
                             "iterator in the child, e.g. iter(pipeline))", (long)self->pid, (long)getpid());
}

static void Iter_dealloc(IterObject *self) {
  iter_release(self);
  if (self->pid == getpid()) pthread_mutex_destroy(&self->next_mu);
  pthread_mutex_lock(&watch_mu);
  if (self->prev) self->prev->next = self->next;
  else if (live_iters == self) live_iters = self->next;
  if (self->next) self->next->prev = self->prev;
  pthread_mutex_unlock(&watch_mu);
  Py_XDECREF(self->pipe);
  PyObject_Free(self);
}

static PyObject *Iter_next_locked(IterObject *self);
static PyObject *Iter_next(IterObject *self) {
  if (self->pid != getpid()) return self->it ? iter_forked(self) : NULL;
  if (!self->it) return NULL; /* ended, failed or closed: StopIteration */
  next_lock(self);
  PyObject *r = Iter_next_locked(self);
  pthread_mutex_unlock(&self->next_mu);
  return r;
}

static PyObject *Iter_next_locked(IterObject *self) {
  if (!self->it) return NULL; /* another thread's next() ended it while this one waited */
  /* A Ctrl-C that came before we block is handled here; one that comes while blocked cancels the run. */
  if (PyErr_CheckSignals() < 0) {
    iter_release_locked(self);
    return NULL;
  }
  sl_elem e;
  sl_elem_init(&e);
  pthread_mutex_lock(&watch_mu);
  self->in_next = true;
  pthread_mutex_unlock(&watch_mu);
  int rc;
  char msg[4096] = "";
  Py_BEGIN_ALLOW_THREADS
  rc = sl_iter_next(&e, self->it);
  if (rc < 0) snprintf(msg, sizeof msg, "%s", sl_error_last());
  Py_END_ALLOW_THREADS
  pthread_mutex_lock(&watch_mu);
  self->in_next = false;
  pthread_mutex_unlock(&watch_mu);
  if (rc == 0) {
    PyObject *d = elem_to_dict(&e, self->readonly, NULL);
    sl_elem_clear(&e);
    return d;
  }
  iter_release_locked(self);
  if (rc == SL_END) return NULL;
  return raise_run_error(rc, msg);
}

/* Raises the error `rc` (message msg) that a run ended with: KeyboardInterrupt after a Ctrl-C, the exception a
 * Python map function raised (as itself when it is no Exception, else as the cause), else SpecError (a component
 * an element lacks), DataError or Error. */
static PyObject *raise_run_error(int rc, const char *msg) {
  if (rc == SL_ECANCELED && PyErr_CheckSignals() < 0) return NULL; /* KeyboardInterrupt */
  PyObject *cause = last_fn_exc;
  last_fn_exc = NULL;
  if (cause && !PyErr_GivenExceptionMatches(cause, PyExc_Exception)) {
    /* KeyboardInterrupt (or SystemExit) raised inside a map function: re-raised as itself, never wrapped in
     * sluice.Error, so that `except Exception` does not swallow a Ctrl-C. */
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(cause)), cause, PyException_GetTraceback(cause));
    return NULL;
  }
  /* A component an element lacks (a function's, a Python function's read): the message says it is a spec error. */
  bool spec = rc == SL_ENOTFOUND && msg && strstr(msg, "(a spec error");
  raise_msg(spec ? SpecError : data_class(rc), rc, msg);
  if (cause) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    PyException_SetCause(v, cause); /* steals cause */
    PyErr_Restore(t, v, tb);
  }
  return NULL;
}

static PyObject *Iter_iter(PyObject *self) {
  Py_INCREF(self);
  return self;
}

static PyObject *Iter_close(IterObject *self, PyObject *unused) {
  if (self->pid != getpid() && self->it) return iter_forked(self);
  iter_release(self);
  Py_RETURN_NONE;
}

/* Safe from any Python thread: the consumer's blocked next() returns and raises sluice.Error (cancelled). */
static PyObject *Iter_cancel(IterObject *self, PyObject *unused) {
  if (self->pid != getpid() && self->it) return iter_forked(self);
  pthread_mutex_lock(&watch_mu);
  if (self->it) sl_iter_cancel(self->it);
  pthread_mutex_unlock(&watch_mu);
  Py_RETURN_NONE;
}

/* state(): the run's position as bytes (docs/state.md); between next() calls of this run. */
static PyObject *Iter_state(IterObject *self, PyObject *unused) {
  if (self->pid != getpid() && self->it) return iter_forked(self);
  next_lock(self);
  if (!self->it) {
    pthread_mutex_unlock(&self->next_mu);
    return PyErr_Format(Error, "state(): the run has ended or was closed: it has no position to save");
  }
  void *buf = NULL;
  size_t len = 0;
  int rc;
  char msg[2048] = "";
  Py_BEGIN_ALLOW_THREADS
  rc = sl_iter_state(self->it, &buf, &len);
  if (rc) snprintf(msg, sizeof msg, "%s", sl_error_last());
  Py_END_ALLOW_THREADS
  pthread_mutex_unlock(&self->next_mu);
  if (rc) return raise_msg(Error, rc, msg);
  PyObject *r = PyBytes_FromStringAndSize(buf, (Py_ssize_t)len);
  sl_free(buf);
  return r;
}

/* keep_state(): every later state() quick (sl_iter_keep_state). */
static PyObject *Iter_keep_state(IterObject *self, PyObject *unused) {
  if (self->it) sl_iter_keep_state(self->it);
  Py_RETURN_NONE;
}

/* position(): elements handed out, those before a restored state included. */
static PyObject *Iter_position(IterObject *self, PyObject *unused) {
  if (!self->it) Py_RETURN_NONE;
  return PyLong_FromUnsignedLongLong(sl_iter_position(self->it));
}

static PyMethodDef Iter_methods[] = {
    {"state", (PyCFunction)Iter_state, METH_NOARGS, "The run's position as bytes (Pipeline.iter(state=...) resumes it)."},
    {"position", (PyCFunction)Iter_position, METH_NOARGS, "Elements handed out so far (a resumed run counts on)."},
    {"keep_state", (PyCFunction)Iter_keep_state, METH_NOARGS,
     "States will be asked for: keep what they need at hand, so that each is quick, the first included."},
    {"close", (PyCFunction)Iter_close, METH_NOARGS, "Stops the run and joins its threads."},
    {"cancel", (PyCFunction)Iter_cancel, METH_NOARGS, "Asks the run to stop; safe from any thread."},
    {NULL}};

static PyTypeObject IterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice._sluice.Iterator",
    .tp_basicsize = sizeof(IterObject),
    .tp_dealloc = (destructor)Iter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One run of a pipeline; yields one dict per element.",
    .tp_iter = Iter_iter,
    .tp_iternext = (iternextfunc)Iter_next,
    .tp_methods = Iter_methods,
};

/* Cancels and joins every live run (atexit: no engine thread may wait for the GIL during finalisation). */
static PyObject *close_all(PyObject *m, PyObject *unused) {
  for (;;) {
    pthread_mutex_lock(&watch_mu);
    IterObject *o = live_iters;
    while (o && !o->it) o = o->next;
    pthread_mutex_unlock(&watch_mu);
    if (!o) break;
    iter_release(o);
  }
  Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ Python map/filter functions */

/* Component names must outlive the elements: each distinct name is kept for the life of the process. */
static PyObject *name_pool;
static const char *pool_name(PyObject *key) {
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
static int py_to_comp(sl_elem *e, const char *name, PyObject *v) {
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
    if (Py_TYPE(b) != &BufType) continue;
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

typedef struct {
  PyObject *fn;
  char *name;
  bool filter;
  bool random;       /* also called with rng=: a numpy Generator seeded from the element's seed */
  PyObject *argspec; /* {name: {"type", "default"?}} as register_fn checked it; NULL: takes no args */
  PyObject *makes;   /* the names of the components it declared it makes (list of str); NULL: none declared */
} pyfn;

/* One map op's use of a Python function: the function and the op's args as keyword arguments. */
typedef struct {
  pyfn *f;
  PyObject *kwargs; /* NULL when the function takes none and draws no randomness */
} pyfn_use;

/* The op's args for the function: each declared one read (so that an arg it does not declare is refused with the
 * nearest name), checked and defaulted by sluice._bind_args, which raises for a wrong type or a missing one. */
static int pyfn_init(void **state, const sl_args *args, void *payload) {
  pyfn *f = payload;
  pyfn_use *u = PyMem_RawCalloc(1, sizeof *u);
  if (!u) return sl_error_set(SL_ENOMEM, "%s: out of memory", sl_args_path(args));
  u->f = f;
  *state = u;
  if (!f->argspec) return 0;
  PyGILState_STATE g = PyGILState_Ensure();
  int rc = 0;
  PyObject *given = PyDict_New(), *k, *v, *mod = NULL;
  Py_ssize_t pos = 0;
  while (given && PyDict_Next(f->argspec, &pos, &k, &v)) {
    const char *key = PyUnicode_AsUTF8(k);
    char *text = key ? sl_args_json(args, key) : NULL;
    PyObject *t = text ? PyUnicode_FromString(text) : Py_NewRef(Py_None);
    sl_free(text);
    if (!t || PyDict_SetItem(given, k, t) < 0) Py_CLEAR(given);
    Py_XDECREF(t);
  }
  if (given && (mod = PyImport_ImportModule("sluice")))
    u->kwargs = PyObject_CallMethod(mod, "_bind_args", "sOOs", f->name, f->argspec, given, sl_args_path(args));
  if (!u->kwargs) {
    PyObject *t, *e, *tb;
    PyErr_Fetch(&t, &e, &tb);
    PyObject *msg = e ? PyObject_Str(e) : NULL;
    rc = sl_error_set(SL_EINVAL, "%s", msg && PyUnicode_Check(msg) ? PyUnicode_AsUTF8(msg) : "bad args");
    PyErr_Clear();
    Py_XDECREF(msg);
    Py_XDECREF(t);
    Py_XDECREF(e);
    Py_XDECREF(tb);
  }
  Py_XDECREF(mod);
  Py_XDECREF(given);
  PyGILState_Release(g);
  return rc;
}

static void pyfn_free(void *state) {
  pyfn_use *u = state;
  if (u->kwargs) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(u->kwargs);
    PyGILState_Release(g);
  }
  PyMem_RawFree(u);
}

/* fn(element, **args) and, for a random function, rng=numpy.random.default_rng(the element's seed): the seed the
 * library derives from the pipeline's seed, the op, the epoch and the element's index, as C functions get it. */
static PyObject *pyfn_invoke(const pyfn_use *u, PyObject *d, const sl_fn_call *call) {
  if (!u->kwargs && !u->f->random) return PyObject_CallOneArg(u->f->fn, d);
  PyObject *kw = u->kwargs ? PyDict_Copy(u->kwargs) : PyDict_New(), *r = NULL;
  if (kw && u->f->random) {
    static PyObject *default_rng;
    if (!default_rng) {
      PyObject *np_random = PyImport_ImportModule("numpy.random");
      default_rng = np_random ? PyObject_GetAttrString(np_random, "default_rng") : NULL;
      Py_XDECREF(np_random);
    }
    PyObject *rng = default_rng ? PyObject_CallFunction(default_rng, "K", (unsigned long long)call->seed) : NULL;
    if (!rng || PyDict_SetItemString(kw, "rng", rng) < 0) Py_CLEAR(kw);
    Py_XDECREF(rng);
  }
  PyObject *a = kw ? PyTuple_Pack(1, d) : NULL;
  if (a) r = PyObject_Call(u->f->fn, a, kw);
  Py_XDECREF(a);
  Py_XDECREF(kw);
  return r;
}

/* A spec error of a Python function at run time (a component read that the element lacks, one declared made
 * that it did not return): SL_ENOTFOUND, which on_error "skip" does not skip, with the text sluice._missing_message
 * (or `text`) gives; the consumer raises it as SpecError (raise_run_error), with `cause` (stolen, may be NULL). */
static int pyfn_spec_fail(const pyfn *f, const sl_fn_call *call, PyObject *key, PyObject *elem, const char *text,
                          PyObject *cause) {
  PyObject *mod = text ? NULL : PyImport_ImportModule("sluice");
  PyObject *have = elem ? PyDict_Keys(elem) : NULL;
  PyObject *m = mod && have ? PyObject_CallMethod(mod, "_missing_message", "sOO", f->name, key, have) : NULL;
  const char *s = text ? text : m ? PyUnicode_AsUTF8(m) : NULL;
  int rc = sl_error_set(SL_ENOTFOUND, "%s (%s %s), element %llu: %s (a spec error: not skipped)", call->op_path,
                        f->filter ? "filter" : "map", f->name, (unsigned long long)call->index,
                        s ? s : "a component the element lacks");
  PyErr_Clear();
  Py_XDECREF(m);
  Py_XDECREF(have);
  Py_XDECREF(mod);
  Py_XSETREF(last_fn_exc, cause);
  return rc;
}

/* Records the raised exception (with its traceback text) as the element's error and keeps it for the consumer.
 * `elem` is the dict the function was given (NULL when none was made). */
static int pyfn_fail(const pyfn *f, const sl_fn_call *call, PyObject *elem) {
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  if (tb && v) PyException_SetTraceback(v, tb);
  if (v && missing_cls && PyErr_GivenExceptionMatches(v, missing_cls)) {
    PyObject *args = PyObject_GetAttrString(v, "args");
    PyObject *key = args && PyTuple_Check(args) && PyTuple_GET_SIZE(args) ? PyTuple_GET_ITEM(args, 0) : Py_None;
    int rc = pyfn_spec_fail(f, call, key, elem, NULL, v); /* owns v */
    Py_XDECREF(args);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    return rc;
  }
  PyObject *text = NULL, *tbmod = PyImport_ImportModule("traceback");
  if (tbmod && v) {
    PyObject *lines = PyObject_CallMethod(tbmod, "format_exception", "O", v);
    if (lines) {
      PyObject *sep = PyUnicode_FromString("");
      if (sep) text = PyUnicode_Join(sep, lines);
      Py_XDECREF(sep);
      Py_DECREF(lines);
    }
  }
  Py_XDECREF(tbmod);
  PyErr_Clear();
  const char *s = text ? PyUnicode_AsUTF8(text) : NULL;
  /* KeyboardInterrupt and SystemExit are no element's fault: they stop the run (on_error "skip" lets cancellation
   * through) and the consumer re-raises them as they are. */
  int code = v && !PyErr_GivenExceptionMatches(v, PyExc_Exception) ? SL_ECANCELED : SL_ERROR;
  int rc = sl_error_set(code, "%s: Python function '%s' raised at element %llu:\n%s", call->op_path, f->name,
                        (unsigned long long)call->index, s ? s : "(no traceback)\n");
  PyErr_Clear();
  Py_XDECREF(text);
  Py_XSETREF(last_fn_exc, v); /* owns v */
  Py_XDECREF(t);
  Py_XDECREF(tb);
  return rc;
}

static int pyfn_call(void *state, sl_elem *elem, sl_fn_call *call) {
  const pyfn_use *u = state;
  pyfn *f = u->f;
  PyGILState_STATE g = PyGILState_Ensure();
  int rc = 0;
  PyObject *d = elem_to_dict(elem, true, element_cls), *r = NULL;
  if (d) r = pyfn_invoke(u, d, call);
  PyObject *lacks = NULL; /* a component it declared it makes and did not return */
  for (Py_ssize_t i = 0; r && PyDict_Check(r) && f->makes && !lacks && i < PyList_GET_SIZE(f->makes); i++)
    if (PyDict_Contains(r, PyList_GET_ITEM(f->makes, i)) == 0) lacks = PyList_GET_ITEM(f->makes, i);
  if (!r) {
    rc = pyfn_fail(f, call, d);
  } else if (f->filter) {
    int keep = PyObject_IsTrue(r);
    if (keep < 0) rc = pyfn_fail(f, call, d);
    else call->keep = keep;
  } else if (!PyDict_Check(r)) {
    PyErr_Format(PyExc_TypeError, "a map function must return a dict, not %s", Py_TYPE(r)->tp_name);
    rc = pyfn_fail(f, call, d);
  } else if (lacks) {
    PyObject *got = PyDict_Keys(r);
    PyObject *msg = got ? PyUnicode_FromFormat("Python function '%s' declares it makes component %R but returned "
                                               "none (it returned: %R)", f->name, lacks, got) : NULL;
    rc = pyfn_spec_fail(f, call, lacks, NULL, msg ? PyUnicode_AsUTF8(msg) : NULL, NULL);
    Py_XDECREF(msg);
    Py_XDECREF(got);
  } else if (PyDict_GET_SIZE(r) > SL_MAX_COMPONENTS) {
    PyErr_Format(PyExc_ValueError, "an element has at most %d components", SL_MAX_COMPONENTS);
    rc = pyfn_fail(f, call, d);
  } else {
    sl_elem out;
    sl_elem_init(&out);
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (!rc && PyDict_Next(r, &pos, &k, &v)) {
      const char *name = pool_name(k);
      rc = name ? py_to_comp(&out, name, v) : SL_EINVAL;
      if (rc && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, sl_error_last());
    }
    if (rc) {
      sl_elem_clear(&out);
      rc = pyfn_fail(f, call, d);
    } else {
      sl_elem_clear(elem);
      sl_elem_move(elem, &out);
    }
  }
  Py_XDECREF(r);
  Py_XDECREF(d);
  PyGILState_Release(g);
  return rc;
}

/* register_fn's reads or makes as sluice._components gave them, [(name, dtype name or None, [dims, -1 not known]
 * or None)], into io[0..*n) (at most SL_MAX_COMPONENTS); the names borrowed from the list. -1 with an exception. */
static int io_from_py(sl_fn_io *io, int *n, PyObject *list) {
  *n = 0;
  if (list == Py_None) return 0;
  if (!PyList_Check(list) || PyList_GET_SIZE(list) > SL_MAX_COMPONENTS) {
    PyErr_Format(PyExc_ValueError, "register_fn: at most %d components read and made", SL_MAX_COMPONENTS);
    return -1;
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
    const char *name, *dt = NULL;
    PyObject *shape;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(list, i), "szO", &name, &dt, &shape)) return -1;
    sl_fn_io *c = &io[(*n)++];
    *c = (sl_fn_io){.name = name, .dtype = -1, .rank = -1};
    sl_dtype t;
    if (dt && sl_dtype_parse(&t, dt)) {
      raise_sl(PyExc_ValueError, SL_EINVAL);
      return -1;
    }
    if (dt) c->dtype = (int)t;
    if (shape == Py_None) continue;
    if (!PyList_Check(shape) || PyList_GET_SIZE(shape) > SL_MAX_RANK) {
      PyErr_Format(PyExc_ValueError, "register_fn: the shape of '%s': a list of at most %d dims", name, SL_MAX_RANK);
      return -1;
    }
    c->rank = (int)PyList_GET_SIZE(shape);
    for (int d = 0; d < c->rank; d++) {
      c->dims[d] = PyLong_AsLongLong(PyList_GET_ITEM(shape, d));
      if (c->dims[d] == -1 && PyErr_Occurred()) return -1;
    }
  }
  return 0;
}

static PyObject *register_fn(PyObject *m, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"name", "fn", "random", "filter", "args", "reads", "makes", "declared", NULL};
  const char *name;
  PyObject *fn, *argspec = Py_None, *reads = Py_None, *makes = Py_None;
  int random = 0, filter = 0, declared = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|ppOOOp", kwlist, &name, &fn, &random, &filter, &argspec, &reads,
                                   &makes, &declared))
    return NULL;
  if (!PyCallable_Check(fn)) return PyErr_Format(PyExc_TypeError, "register_fn: %R is not callable", fn);
  if (argspec != Py_None && !PyDict_Check(argspec)) return PyErr_Format(PyExc_TypeError, "register_fn: args: a dict");
  sl_fn_io rd[SL_MAX_COMPONENTS], mk[SL_MAX_COMPONENTS];
  int nrd, nmk;
  if (io_from_py(rd, &nrd, reads) < 0 || io_from_py(mk, &nmk, makes) < 0) return NULL;
  PyObject *made = NULL; /* the names made, for the check after each call */
  if (nmk) {
    if (!(made = PyList_New(nmk))) return NULL;
    for (int i = 0; i < nmk; i++) PyList_SET_ITEM(made, i, Py_NewRef(PyTuple_GET_ITEM(PyList_GET_ITEM(makes, i), 0)));
  }
  /* Kept for the life of the process: pipelines built earlier may still call it. */
  pyfn *f = PyMem_RawCalloc(1, sizeof *f);
  if (!f || !(f->name = strdup(name))) {
    PyMem_RawFree(f);
    Py_XDECREF(made);
    return PyErr_NoMemory();
  }
  f->makes = made;
  Py_INCREF(fn);
  f->fn = fn;
  f->filter = filter;
  f->random = random;
  f->argspec = argspec == Py_None ? NULL : Py_NewRef(argspec);
  sl_fn_def def = {.version = SL_FN_DEF_VERSION,
                   .flags = SL_FN_SERIAL | (random ? SL_FN_RANDOM : 0u) | (filter ? SL_FN_FILTER : 0u),
                   .init = pyfn_init,
                   .call = pyfn_call,
                   .free = pyfn_free};
  int rc = sl_fn_register(name, &def, f);
  if (!rc && declared) rc = sl_fn_declare(name, rd, nrd, mk, nmk);
  if (rc) return raise_sl(rc == SL_EINVAL ? PyExc_ValueError : Error, rc);
  Py_RETURN_NONE;
}

static PyObject *set_element_types(PyObject *m, PyObject *args) {
  PyObject *e, *k;
  if (!PyArg_ParseTuple(args, "OO", &e, &k)) return NULL;
  Py_XSETREF(element_cls, Py_NewRef(e));
  Py_XSETREF(missing_cls, Py_NewRef(k));
  Py_RETURN_NONE;
}

static PyObject *fn_names(PyObject *m, PyObject *unused) {
  const char **names = NULL;
  int rc = sl_fn_list(&names);
  if (rc) return raise_sl(Error, rc);
  PyObject *l = PyList_New(0);
  for (size_t i = 0; l && names[i]; i++) {
    PyObject *s = PyUnicode_FromString(names[i]);
    if (!s || PyList_Append(l, s) < 0) Py_CLEAR(l);
    Py_XDECREF(s);
  }
  sl_free(names);
  return l;
}

/* ------------------------------------------------------------------ provenance */

static PyObject *prov_check(PyObject *m, PyObject *args) {
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
  PyObject *r = rc ? raise_msg(StoreError, rc, msg) : PyUnicode_FromString(backend);
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

static PyObject *prov_record_run(PyObject *m, PyObject *args, PyObject *kw) {
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
  r = rc ? raise_msg(StoreError, rc, msg) : PyLong_FromLongLong(id);
done:
  PyMem_Free(in);
  PyMem_Free(outp);
  PyMem_Free(outt);
  PyMem_Free(outs);
  return r;
}

static PyObject *prov_should_train(PyObject *m, PyObject *args, PyObject *kw) {
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
  if (rc) return raise_msg(StoreError, rc, msg);
  sl_free(d.features);
  return Py_BuildValue("(Odd)", d.train ? Py_True : Py_False, d.p_push, d.threshold);
}

/* ------------------------------------------------------------------ test-only: the C API's own view */

/* Runs `pipe` to its end (at most `limit` elements, 0: all) through the C API alone and returns each element as
 * {name: (dtype name, shape, payload bytes or list of bytes)}: what the tests compare the zero-copy path with. */
static PyObject *c_elements(PyObject *m, PyObject *args) {
  PipelineObject *pipe;
  long long limit = 0;
  if (!PyArg_ParseTuple(args, "O!|L", &PipelineType, &pipe, &limit)) return NULL;
  if (!need_pipeline(pipe)) return NULL;
  sl_iter *it = NULL;
  int rc = sl_pipeline_iter(&it, pipe->p);
  if (rc) return raise_sl(Error, rc);
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
    raise_sl(data_class(rc), rc);
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
    raise_msg(Error, rc, msg);
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
    {"register_fn", (PyCFunction)(void (*)(void))register_fn, METH_VARARGS | METH_KEYWORDS, NULL},
    {"fn_names", fn_names, METH_NOARGS, "Names of the registered functions."},
    {"_set_element_types", set_element_types, METH_VARARGS, "The dict class Python functions get, its KeyError."},
    {"close_all", close_all, METH_NOARGS, "Cancels and joins every live run."},
    {"prov_check", prov_check, METH_VARARGS, NULL},
    {"prov_record_run", (PyCFunction)(void (*)(void))prov_record_run, METH_VARARGS | METH_KEYWORDS, NULL},
    {"prov_should_train", (PyCFunction)(void (*)(void))prov_should_train, METH_VARARGS | METH_KEYWORDS, NULL},
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
  if (PyType_Ready(&BufType) < 0 || PyType_Ready(&PipelineType) < 0 || PyType_Ready(&IterType) < 0) return NULL;
  PyObject *m = PyModule_Create(&moduledef);
  if (!m) return NULL;
  name_pool = PyDict_New();
  if (!name_pool) return NULL;
  if (add_exc(m, &Error, "Error", NULL, "An error of the sluice library; str() is the library's message.") ||
      add_exc(m, &SpecError, "SpecError", Error, "A bad pipeline spec (the message names the JSON path).") ||
      add_exc(m, &DataError, "DataError", Error, "Bad input data while running (the message names file and record).") ||
      add_exc(m, &StoreError, "StoreError", Error, "A provenance store error."))
    return NULL;
  Py_INCREF(&PipelineType);
  Py_INCREF(&BufType);
  Py_INCREF(&IterType);
  if (PyModule_AddObject(m, "Pipeline", (PyObject *)&PipelineType) ||
      PyModule_AddObject(m, "Buf", (PyObject *)&BufType) || PyModule_AddObject(m, "Iterator", (PyObject *)&IterType))
    return NULL;
  return m;
}
