/* py_fn.c: Python functions as map/filter functions of the library (register_fn): the element as a dict, the op's
 * args bound by sluice._bind_args, a raised exception kept for the consumer, a missing component a spec error. */
#include "py_ext.h"

#include <string.h>

/* sluice._Element (the dict a Python function receives) and sluice._MissingComponent (what reading a component it
 * lacks raises), from sluice/__init__.py (sluice._sluice._set_element_types). */
static PyObject *element_cls, *missing_cls;

typedef struct {
  PyObject *fn;
  char *name;
  bool filter;
  bool random;       /* also called with rng=: a numpy Generator seeded from the element's seed */
  PyObject *argspec; /* {name: {"type", "default"?}} as sl__py_register_fn checked it; NULL: takes no args */
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
  Py_XSETREF(sl__py_last_fn_exc, cause);
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
  Py_XSETREF(sl__py_last_fn_exc, v); /* owns v */
  Py_XDECREF(t);
  Py_XDECREF(tb);
  return rc;
}

static int pyfn_call(void *state, sl_elem *elem, sl_fn_call *call) {
  const pyfn_use *u = state;
  pyfn *f = u->f;
  PyGILState_STATE g = PyGILState_Ensure();
  int rc = 0;
  PyObject *d = sl__py_elem_to_dict(elem, true, element_cls), *r = NULL;
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
      const char *name = sl__py_pool_name(k);
      rc = name ? sl__py_to_comp(&out, name, v) : SL_EINVAL;
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
      sl__py_raise_sl(PyExc_ValueError, SL_EINVAL);
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

PyObject *sl__py_register_fn(PyObject *m, PyObject *args, PyObject *kw) {
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
  if (rc) return sl__py_raise_sl(rc == SL_EINVAL ? PyExc_ValueError : sl__py_Error, rc);
  Py_RETURN_NONE;
}

PyObject *sl__py_set_element_types(PyObject *m, PyObject *args) {
  PyObject *e, *k;
  if (!PyArg_ParseTuple(args, "OO", &e, &k)) return NULL;
  Py_XSETREF(element_cls, Py_NewRef(e));
  Py_XSETREF(missing_cls, Py_NewRef(k));
  Py_RETURN_NONE;
}

PyObject *sl__py_fn_names(PyObject *m, PyObject *unused) {
  const char **names = NULL;
  int rc = sl_fn_list(&names);
  if (rc) return sl__py_raise_sl(sl__py_Error, rc);
  PyObject *l = PyList_New(0);
  for (size_t i = 0; l && names[i]; i++) {
    PyObject *s = PyUnicode_FromString(names[i]);
    if (!s || PyList_Append(l, s) < 0) Py_CLEAR(l);
    Py_XDECREF(s);
  }
  sl_free(names);
  return l;
}
