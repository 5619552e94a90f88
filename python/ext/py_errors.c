/* py_errors.c: sluice.Error and its subclasses as the extension raises them: the library's message and code, the
 * class an error code maps to, and how a run's ending error is raised (a Python function's exception chained). */
#include "py_ext.h"

#include <string.h>

PyObject *sl__py_Error, *sl__py_SpecError, *sl__py_DataError, *sl__py_StoreError;
PyObject *sl__py_last_fn_exc;

/* Raises `cls` with the library's message (the same text the CLI prints) and the code as `.code`. */
PyObject *sl__py_raise_msg(PyObject *cls, int code, const char *msg) {
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
PyObject *sl__py_raise_sl(PyObject *cls, int code) { return sl__py_raise_msg(cls, code, sl_error_last()); }

/* Which class an error of the running pipeline is: DataError for bad input data (a file, a record, a value),
 * MemoryError for allocation failures, Error otherwise. */
PyObject *sl__py_data_class(int code) {
  switch (code) {
  case SL_EINVAL:
  case SL_EIO:
  case SL_ECORRUPT:
  case SL_ENOTFOUND:
    return sl__py_DataError;
  default:
    return sl__py_Error;
  }
}

/* Raises the error `rc` (message msg) that a run ended with: KeyboardInterrupt after a Ctrl-C, the exception a
 * Python map function raised (as itself when it is no Exception, else as the cause), else SpecError (a component
 * an element lacks), DataError or Error. */
PyObject *sl__py_raise_run_error(int rc, const char *msg) {
  if (rc == SL_ECANCELED && PyErr_CheckSignals() < 0) return NULL; /* KeyboardInterrupt */
  PyObject *cause = sl__py_last_fn_exc;
  sl__py_last_fn_exc = NULL;
  if (cause && !PyErr_GivenExceptionMatches(cause, PyExc_Exception)) {
    /* KeyboardInterrupt (or SystemExit) raised inside a map function: re-raised as itself, never wrapped in
     * sluice.Error, so that `except Exception` does not swallow a Ctrl-C. */
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(cause)), cause, PyException_GetTraceback(cause));
    return NULL;
  }
  /* A component an element lacks (a function's, a Python function's read): the message says it is a spec error. */
  bool spec = rc == SL_ENOTFOUND && msg && strstr(msg, "(a spec error");
  sl__py_raise_msg(spec ? sl__py_SpecError : sl__py_data_class(rc), rc, msg);
  if (cause) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    PyException_SetCause(v, cause); /* steals cause */
    PyErr_Restore(t, v, tb);
  }
  return NULL;
}
