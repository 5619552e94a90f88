/* py_sigint.c: Ctrl-C while a thread is blocked in sl_iter_next: a SIGINT handler chained in front of Python's
 * wakes a watcher thread that cancels every live run blocked in next (and a running sl_convert). */
#include "py_ext.h"

#include <errno.h>
#include <stdatomic.h>
#include <semaphore.h>
#include <unistd.h>

/* Python's own SIGINT handler only sets a flag that the main thread reads between bytecodes; a thread blocked in
 * sl_iter_next would not see it until the next element arrives. So a handler of ours, chained in front of
 * Python's, posts a semaphore (async-signal-safe), and a watcher thread cancels every iterator blocked in next.
 * sl_iter_next then returns SL_ECANCELED and the consumer raises KeyboardInterrupt through PyErr_CheckSignals. */

pthread_mutex_t sl__py_watch_mu = PTHREAD_MUTEX_INITIALIZER;
IterObject *sl__py_live_iters;
static sem_t sig_sem;
/* Counts SIGINTs (a lock-free atomic: async-signal-safe). The watcher cancels only the iterators whose next() began
 * before the count it woke for: woken late on a busy machine, it cancelled a run started after the Ctrl-C had
 * already been raised as KeyboardInterrupt (test_hardening's ctrl_c test, in a clean-clone CI run). */
static atomic_uint sig_gen;

unsigned sl__py_sigint_seen(void) { return atomic_load(&sig_gen); }
static bool watcher_started;
static struct sigaction prev_sigint;

static void *watcher_main(void *arg) {
  for (;;) {
    while (sem_wait(&sig_sem) && errno == EINTR) {
    }
    unsigned g = atomic_load(&sig_gen);
    pthread_mutex_lock(&sl__py_watch_mu);
    for (IterObject *o = sl__py_live_iters; o; o = o->next)
      if (o->in_next && o->it && (int)(g - o->next_gen) > 0) sl_iter_cancel(o->it);
    pthread_mutex_unlock(&sl__py_watch_mu);
  }
  return NULL;
}

/* Polled by a running sl_convert (its opts.cancel): set by the handler below, cleared when a convert starts. */
volatile sig_atomic_t sl__py_convert_cancel;

/* Python's handler runs first: it sets the flag PyErr_CheckSignals reads, and only then is the watcher woken. Posted
 * first, the watcher could cancel the run and the consumer check the flag before it was set: the Ctrl-C then came
 * out as "the run was cancelled" instead of KeyboardInterrupt (seen in test_hardening's ctrl_c test at load 20;
 * the signal lands on any thread, so the two handlers' order was the only thing keeping them in step). */
static void on_sigint(int sig, siginfo_t *info, void *ctx) {
  int saved = errno;
  if (prev_sigint.sa_flags & SA_SIGINFO) {
    if (prev_sigint.sa_sigaction) prev_sigint.sa_sigaction(sig, info, ctx);
  } else if (prev_sigint.sa_handler != SIG_DFL && prev_sigint.sa_handler != SIG_IGN && prev_sigint.sa_handler) {
    prev_sigint.sa_handler(sig);
  }
  sl__py_convert_cancel = 1;
  atomic_fetch_add(&sig_gen, 1);
  sem_post(&sig_sem);
  errno = saved;
}

/* A forked child (a DataLoader worker, say) has no watcher thread: it starts its own at its first run. watch_mu is
 * held across the fork so that the child's copy is not left locked by a thread it does not have. */
static void watcher_before_fork(void) { pthread_mutex_lock(&sl__py_watch_mu); }
static void watcher_parent_fork(void) { pthread_mutex_unlock(&sl__py_watch_mu); }
static void watcher_after_fork(void) {
  pthread_mutex_unlock(&sl__py_watch_mu);
  watcher_started = false;
}

/* Puts on_sigint in front of the handler in force when that is a function (Python's, or one the user set with
 * signal.signal since: that replaced ours, so we chain again). Leaves SIG_DFL/SIG_IGN alone. */
void sl__py_watch_sigint(void) {
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
