/* fns/img_slab.c: "batch_slab" for the image functions that write a fixed-size output (decode_and_crop_jpeg,
 * random_resized_crop): the outputs of n consecutive elements share one buffer, so that a batch of n right after
 * adopts it instead of copying each element into a new one (op_batch.c). */
#include <string.h>

#include "fns/image_int.h"

static void slab_drop(sl__slabs *s, int k) {
  sl_buf_unref(s->e[k].buf);
  s->e[k].buf = NULL;
}

int sl__slabs_init(sl__slabs *s, int64_t n, size_t item, const char *what) {
  memset(s, 0, sizeof *s);
  size_t all;
  if (n < 2 || (item && !sl__mul_ok(item, (size_t)n, &all))) return 0; /* off */
  for (int k = 0; k < SL__NSLAB; k++)
    if (!(s->e[k].given = sl__calloc((size_t)(n + 63) / 64, sizeof(uint64_t)))) {
      for (int j = 0; j < k; j++) sl__free(s->e[j].given);
      return sl__oom(what);
    }
  pthread_mutex_init(&s->mu, NULL);
  s->n = n;
  s->item = item;
  return 0;
}

void sl__slabs_dispose(sl__slabs *s) {
  if (!s->n) return;
  for (int k = 0; k < SL__NSLAB; k++) {
    slab_drop(s, k);
    sl__free(s->e[k].given);
  }
  pthread_mutex_destroy(&s->mu);
  s->n = 0;
}

void sl__slabs_slot(sl__slabs *s, uint64_t index, size_t item, sl_buf **buf, size_t *off) {
  *buf = NULL;
  *off = 0;
  if (!s->n || !item) return;
  uint64_t no = index / (uint64_t)s->n, i = index % (uint64_t)s->n;
  pthread_mutex_lock(&s->mu);
  size_t all;
  if (!s->item && sl__mul_ok(item, (size_t)s->n, &all)) s->item = item; /* the first output's size fixes it */
  if (item != s->item) {
    pthread_mutex_unlock(&s->mu);
    return;
  }
  int k = -1, old = 0;
  for (int j = 0; j < SL__NSLAB; j++) {
    if (s->e[j].buf && s->e[j].no == no) k = j;
    if (!s->e[j].buf || (s->e[old].buf && s->e[j].no < s->e[old].no)) old = j;
  }
  if (k < 0 && (!s->e[old].buf || s->e[old].no < no)) { /* a newer slab replaces the oldest (or a free entry) */
    sl_buf *b = sl_buf_alloc(s->item * (size_t)s->n); /* the product checked above or at init */
    if (b) {
      slab_drop(s, old);
      k = old;
      s->e[k].buf = b;
      s->e[k].no = no;
      s->e[k].left = s->n;
      memset(s->e[k].given, 0, (size_t)(s->n + 63) / 64 * sizeof(uint64_t));
    }
  }
  if (k >= 0 && !(s->e[k].given[i / 64] >> (i % 64) & 1)) {
    s->e[k].given[i / 64] |= (uint64_t)1 << (i % 64);
    *buf = sl_buf_ref(s->e[k].buf);
    *off = (size_t)i * s->item;
    if (--s->e[k].left == 0) slab_drop(s, k); /* every slot handed out: the elements hold it now */
  }
  pthread_mutex_unlock(&s->mu);
}
