/* py_ext.h: what the files of the extension sluice._sluice share (not installed; one module, py_module.c its entry).
 * The extension uses the public C API only (include/sluice.h). Names shared between these files carry sl__py_; the
 * module is compiled with hidden visibility, so that PyInit__sluice is its one export. */
#ifndef SL_PY_EXT_H
#define SL_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include <sluice.h>

/* ---- errors (py_errors.c): sluice.Error and its subclasses, made by PyInit__sluice */
extern PyObject *sl__py_Error, *sl__py_SpecError, *sl__py_DataError, *sl__py_StoreError;
/* The exception stored by the last Python map function that raised (chained as the cause of the error the
 * iteration raises). Guarded by the GIL. */
extern PyObject *sl__py_last_fn_exc;
/* Raises `cls` with the library's message (the same text the CLI prints) and the code as `.code`; returns NULL. */
PyObject *sl__py_raise_msg(PyObject *cls, int code, const char *msg);
PyObject *sl__py_raise_sl(PyObject *cls, int code); /* with sl_error_last() */
PyObject *sl__py_data_class(int code);
PyObject *sl__py_raise_run_error(int rc, const char *msg);

/* ---- elements (py_element.c): sl_elem <-> dict of numpy arrays over the engine's buffers */
typedef struct {
  PyObject_HEAD sl_buf *buf;
} BufObject;
extern PyTypeObject sl__py_BufType;
int sl__py_names_init(void); /* the component name pool; -1 with an exception */
const char *sl__py_pool_name(PyObject *key);
PyObject *sl__py_elem_to_dict(const sl_elem *e, bool readonly, PyObject *cls);
int sl__py_to_comp(sl_elem *e, const char *name, PyObject *v);

/* ---- pipelines and their runs (py_pipeline.c, py_iter.c) */
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

typedef struct IterObject IterObject;
struct IterObject {
  PyObject_HEAD sl_iter *it;
  PyObject *pipe; /* the Pipeline: it outlives its iterators */
  bool readonly;
  bool in_next;   /* blocked in sl_iter_next (guarded by sl__py_watch_mu) */
  unsigned next_gen; /* sl__py_sigint_gen when that next() began (guarded by sl__py_watch_mu) */
  IterObject *prev, *next; /* every live iterator (guarded by sl__py_watch_mu) */
  /* next() from several Python threads is serialised: one at a time runs sl_iter_next (the engine's iterator is
   * one consumer's), the others wait for this lock with the GIL released, so that the holder can take the GIL back.
   * close() takes it too: the run is never freed under a next() in progress. */
  pthread_mutex_t next_mu;
  /* The process that started the run: its threads exist only there. A forked child that touches the iterator gets
   * an error instead of waiting for threads it does not have; its copy of the run is left alone (never freed). */
  pid_t pid;
};

extern PyTypeObject sl__py_PipelineType, sl__py_IterType;
bool sl__py_need_pipeline(PipelineObject *self); /* false with sluice.Error when it was never built */
/* A new iterator of `pipe` (no run yet: it->it NULL), on the list of live ones. */
IterObject *sl__py_iter_new(PipelineObject *pipe);
PyObject *sl__py_close_all(PyObject *m, PyObject *unused);

/* ---- SIGINT -> sl_iter_cancel (py_sigint.c) */
extern pthread_mutex_t sl__py_watch_mu;
extern IterObject *sl__py_live_iters;
/* SIGINTs seen so far: a Ctrl-C cancels only the next() calls that began before it (py_sigint.c). */
unsigned sl__py_sigint_seen(void);
extern volatile sig_atomic_t sl__py_convert_cancel;
void sl__py_watch_sigint(void);

/* ---- module functions (py_fn.c, py_prov.c) */
PyObject *sl__py_register_fn(PyObject *m, PyObject *args, PyObject *kw);
PyObject *sl__py_set_element_types(PyObject *m, PyObject *args);
PyObject *sl__py_fn_names(PyObject *m, PyObject *unused);
PyObject *sl__py_prov_check(PyObject *m, PyObject *args);
PyObject *sl__py_prov_record_run(PyObject *m, PyObject *args, PyObject *kw);
PyObject *sl__py_prov_should_train(PyObject *m, PyObject *args, PyObject *kw);

#endif
