/* ops/engine_handoff.c: what the asynchronous ops (parallel map, interleave, prefetch) share to hand elements
 * between threads: bounded condition waits, a short spin before sleeping, and adaptive mutexes. */
#define _GNU_SOURCE /* PTHREAD_MUTEX_ADAPTIVE_NP, where the C library has it */
#include <time.h>

#include "ops/op_async_int.h"

void sl__cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += (long)ms * 1000000L;
  ts.tv_sec += ts.tv_nsec / 1000000000L;
  ts.tv_nsec %= 1000000000L;
  pthread_cond_timedwait(cv, mu, &ts);
}

void sl__handoff_poll(pthread_mutex_t *mu, const atomic_uint *counter) {
  unsigned seen = atomic_load_explicit(counter, memory_order_relaxed);
  pthread_mutex_unlock(mu);
  uint64_t t0 = sl__now_ns();
  for (bool changed = false; !changed && sl__now_ns() - t0 < SL__HANDOFF_SPIN_NS;)
    for (int i = 0; i < 64 && !changed; i++) {
      changed = atomic_load_explicit(counter, memory_order_relaxed) != seen;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  pthread_mutex_lock(mu);
}

void sl__handoff_mutex_init(pthread_mutex_t *mu) {
#ifdef PTHREAD_MUTEX_ADAPTIVE_NP
  pthread_mutexattr_t a;
  if (!pthread_mutexattr_init(&a)) {
    int rc = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP) || pthread_mutex_init(mu, &a);
    pthread_mutexattr_destroy(&a);
    if (!rc) return;
  }
#endif
  pthread_mutex_init(mu, NULL);
}

