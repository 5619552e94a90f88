/* py_iter.c: sluice._sluice.Iterator: one run of a pipeline, next() with the GIL released, state() to resume,
 * cancel() from any thread, and the guards for a forked child that touches its parent's run. */
#include "py_ext.h"

#include <unistd.h>

/* A new iterator of `pipe`, not yet running (the caller starts the run into o->it), on the list of live ones (the
 * SIGINT watcher's and close_all's). */
IterObject *sl__py_iter_new(PipelineObject *pipe) {
  IterObject *o = PyObject_New(IterObject, &sl__py_IterType);
  if (!o) return NULL;
  o->it = NULL;
  o->in_next = false;
  o->readonly = pipe->readonly;
  o->pid = getpid();
  pthread_mutex_init(&o->next_mu, NULL);
  Py_INCREF(pipe);
  o->pipe = (PyObject *)pipe;
  o->prev = NULL;
  pthread_mutex_lock(&sl__py_watch_mu);
  o->next = sl__py_live_iters;
  if (sl__py_live_iters) sl__py_live_iters->prev = o;
  sl__py_live_iters = o;
  pthread_mutex_unlock(&sl__py_watch_mu);
  return o;
}

/* Joins the run's workers (GIL released: they may be waiting for it in a Python map function) and drops the
 * pipeline's count. self->it is cleared first, under the GIL, so cancel() from another thread never sees a freed
 * iterator. */
static void iter_release_locked(IterObject *self) {
  pthread_mutex_lock(&sl__py_watch_mu);
  sl_iter *it = self->it;
  self->it = NULL;
  pthread_mutex_unlock(&sl__py_watch_mu);
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
  pthread_mutex_lock(&sl__py_watch_mu);
  if (self->it) sl_iter_cancel(self->it);
  pthread_mutex_unlock(&sl__py_watch_mu);
  next_lock(self);
  iter_release_locked(self);
  pthread_mutex_unlock(&self->next_mu);
}

/* The error of a forked child touching its parent's run. */
static PyObject *iter_forked(IterObject *self) {
  return PyErr_Format(sl__py_Error,
                      "this iterator was started in process %ld and cannot be continued in process %ld, a "
                             "fork of it: the run's threads exist only in the process that started it (start a new "
                             "iterator in the child, e.g. iter(pipeline))", (long)self->pid, (long)getpid());
}

static void Iter_dealloc(IterObject *self) {
  iter_release(self);
  if (self->pid == getpid()) pthread_mutex_destroy(&self->next_mu);
  pthread_mutex_lock(&sl__py_watch_mu);
  if (self->prev) self->prev->next = self->next;
  else if (sl__py_live_iters == self) sl__py_live_iters = self->next;
  if (self->next) self->next->prev = self->prev;
  pthread_mutex_unlock(&sl__py_watch_mu);
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
  pthread_mutex_lock(&sl__py_watch_mu);
  self->in_next = true;
  self->next_gen = sl__py_sigint_seen();
  pthread_mutex_unlock(&sl__py_watch_mu);
  int rc;
  char msg[4096] = "";
  Py_BEGIN_ALLOW_THREADS
  rc = sl_iter_next(&e, self->it);
  if (rc < 0) snprintf(msg, sizeof msg, "%s", sl_error_last());
  Py_END_ALLOW_THREADS
  pthread_mutex_lock(&sl__py_watch_mu);
  self->in_next = false;
  pthread_mutex_unlock(&sl__py_watch_mu);
  if (rc == 0) {
    PyObject *d = sl__py_elem_to_dict(&e, self->readonly, NULL);
    sl_elem_clear(&e);
    return d;
  }
  iter_release_locked(self);
  if (rc == SL_END) return NULL;
  return sl__py_raise_run_error(rc, msg);
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
  pthread_mutex_lock(&sl__py_watch_mu);
  if (self->it) sl_iter_cancel(self->it);
  pthread_mutex_unlock(&sl__py_watch_mu);
  Py_RETURN_NONE;
}

/* state(): the run's position as bytes (docs/state.md); between next() calls of this run. */
static PyObject *Iter_state(IterObject *self, PyObject *unused) {
  if (self->pid != getpid() && self->it) return iter_forked(self);
  next_lock(self);
  if (!self->it) {
    pthread_mutex_unlock(&self->next_mu);
    return PyErr_Format(sl__py_Error, "state(): the run has ended or was closed: it has no position to save");
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
  if (rc) return sl__py_raise_msg(sl__py_Error, rc, msg);
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

PyTypeObject sl__py_IterType = {
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
PyObject *sl__py_close_all(PyObject *m, PyObject *unused) {
  for (;;) {
    pthread_mutex_lock(&sl__py_watch_mu);
    IterObject *o = sl__py_live_iters;
    while (o && !o->it) o = o->next;
    pthread_mutex_unlock(&sl__py_watch_mu);
    if (!o) break;
    iter_release(o);
  }
  Py_RETURN_NONE;
}
