/* fns/jpeg_seen.c: the JPEGs this process has read whole in strict mode without an error, by content (see
 * image_int.h). An insert-only set of 64-bit keys in open-addressed segments that double in size: a lookup probes
 * each segment without a lock (a slot goes from 0 to its key once, by compare-and-swap); only adding a segment takes
 * the mutex. Segments are never freed while the process runs, so a reader never sees one go. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "fns/image_int.h"

/* 4,096 slots, doubling to 2^22: at most 8,384,512 slots, 64 MiB, some 4 million images at half load. Past that,
 * images are no longer added: their strict decodes read the whole stream every time, as before the set. */
enum { SEG_MIN = 12, SEG_MAX = 22, NSEG = SEG_MAX - SEG_MIN + 1, PROBES = 32 };

typedef struct {
  _Atomic(uint64_t) *slot;
  atomic_size_t used;
} seen_seg;

static seen_seg g_seg[NSEG];
static atomic_int g_nseg; /* segments 0..g_nseg-1 are allocated (release-published) */
static pthread_mutex_t g_grow = PTHREAD_MUTEX_INITIALIZER;

uint64_t sl__jpeg_key(const uint8_t *data, size_t len) {
  uint64_t k = XXH3_64bits(data, len);
  return k ? k : 1; /* 0 marks an empty slot */
}

static size_t seg_cap(int s) { return (size_t)1 << (SEG_MIN + s); }

/* Where `key` is in segment s, or the first empty slot of its probe run (*found tells which); SIZE_MAX when the
 * run is full of other keys. */
static size_t seg_find(int s, uint64_t key, bool *found) {
  size_t mask = seg_cap(s) - 1, i = (size_t)(key ^ key >> 29) & mask;
  for (int p = 0; p < PROBES; p++, i = (i + 1) & mask) {
    uint64_t v = atomic_load_explicit(&g_seg[s].slot[i], memory_order_relaxed);
    if (v == key || v == 0) {
      *found = v == key;
      return i;
    }
  }
  *found = false;
  return SIZE_MAX;
}

bool sl__jpeg_seen(uint64_t key) {
  int n = atomic_load_explicit(&g_nseg, memory_order_acquire);
  for (int s = n - 1; s >= 0; s--) {
    bool found;
    seg_find(s, key, &found);
    if (found) return true;
  }
  return false;
}

/* A new segment when the newest is half full (or there is none); false when none can be added. */
static bool grow(int seen_n) {
  pthread_mutex_lock(&g_grow);
  int n = atomic_load_explicit(&g_nseg, memory_order_relaxed);
  bool ok = n > seen_n; /* another thread added one meanwhile */
  if (!ok && n < NSEG) {
    /* calloc: zero pages the kernel maps as they are first written, so a small dataset costs little memory */
    g_seg[n].slot = calloc(seg_cap(n), sizeof(uint64_t));
    if (g_seg[n].slot) {
      atomic_store_explicit(&g_nseg, n + 1, memory_order_release);
      ok = true;
    }
  }
  pthread_mutex_unlock(&g_grow);
  return ok;
}

void sl__jpeg_seen_add(uint64_t key) {
  for (int tries = 0; tries < 3; tries++) {
    int n = atomic_load_explicit(&g_nseg, memory_order_acquire);
    int s = n - 1;
    if (s < 0 || atomic_load_explicit(&g_seg[s].used, memory_order_relaxed) >= seg_cap(s) / 2) {
      if (!grow(n)) return;
      continue;
    }
    bool found;
    size_t i = seg_find(s, key, &found);
    while (i != SIZE_MAX && !found) {
      uint64_t want = 0;
      if (atomic_compare_exchange_strong_explicit(&g_seg[s].slot[i], &want, key, memory_order_relaxed,
                                                  memory_order_relaxed)) {
        atomic_fetch_add_explicit(&g_seg[s].used, 1, memory_order_relaxed);
        return;
      }
      if (want == key) return; /* another thread added it */
      i = seg_find(s, key, &found);
    }
    if (found) return;
    if (!grow(n)) return; /* a full probe run: the next segment */
  }
}
