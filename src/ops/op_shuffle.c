/* ops/op_shuffle.c: `shuffle`: a buffer of `buffer` elements; each output is a uniformly chosen buffered element,
 * replaced by the next input (tf.data's algorithm). The seed is the op's "seed" or the pipeline's; with
 * reshuffle_each_iteration (default true) each epoch (each re-open by repeat) draws a new order. With `initial`,
 * the first output comes once that many are buffered and the buffer then grows by one an output up to `buffer`
 * (WebDataset's `initial`): a remote dataset's first batch waits for a shard's worth of records, not for the
 * whole buffer. The buffer's fill follows from its count alone, so a saved state resumes the same order. */
#include <string.h>

#include "ops/op_int.h"

typedef struct {
  int64_t buffer, initial;
  int64_t seed;
  bool reshuffle;
} shuf_cfg;

typedef struct {
  sl__it it;
  sl_elem *buf;
  int64_t n, cap, alloc; /* alloc grows by doubling up to cap: a big buffer over small data stays small */
  int64_t fill;          /* elements buffered before an output: `initial`, else cap */
  bool eof;
  sl_rng rng;
} shuf_it;

static int shuf_parse(sl__op *op, json_t *o) {
  sl_args k = sl__op_knobs(op, o);
  shuf_cfg *c = sl__calloc(1, sizeof *c);
  if (!c) return sl__oom("shuffle");
  op->impl = c;
  int rc;
  if ((rc = sl__get_int(&c->buffer, &k, "buffer")) || (rc = sl__get_int(&c->seed, &k, "seed")) ||
      (rc = sl__get_bool(&c->reshuffle, &k, "reshuffle_each_iteration")) ||
      (rc = sl__get_int(&c->initial, &k, "initial")))
    return rc;
  if (c->initial > c->buffer)
    return sl__op_err(op, SL_EINVAL, "initial %lld is more than the buffer's %lld elements", (long long)c->initial,
                      (long long)c->buffer);
  op->random = true;
  op->buffer = c->buffer;
  op->cardinality = op->input ? op->input->cardinality : -1;
  return 0;
}

/* One more input into the buffer (room made by doubling up to cap); SL_END sets eof. */
static int shuf_pull(shuf_it *s) {
  if (s->n == s->alloc) {
    int64_t na = s->alloc * 2 < s->cap ? s->alloc * 2 : s->cap;
    sl_elem *nb = sl__realloc(s->buf, (size_t)na * sizeof(sl_elem));
    if (!nb) return sl__op_err(s->it.op, SL_ENOMEM, "out of memory growing the buffer to %lld elements", (long long)na);
    s->buf = nb;
    s->alloc = na;
  }
  sl_elem_init(&s->buf[s->n]);
  int rc = sl__it_pull(&s->it, &s->buf[s->n]);
  if (rc == SL_END) {
    s->eof = true;
    return 0;
  }
  if (rc) return rc;
  sl__stats_held(s->it.op, (int64_t)sl_elem_bytes(&s->buf[s->n]));
  s->n++;
  return 0;
}

static int shuf_next(sl__it *it, sl_elem *out) {
  shuf_it *s = (shuf_it *)it;
  while (!s->eof && s->n < s->fill) {
    int rc = shuf_pull(s);
    if (rc) return rc;
  }
  if (s->n == 0) return SL_END;
  int64_t k = (int64_t)(sl_rng_u64(&s->rng) % (uint64_t)s->n);
  sl__stats_held(it->op, -(int64_t)sl_elem_bytes(&s->buf[k]));
  sl_elem_move(out, &s->buf[k]);
  if (k != s->n - 1) sl_elem_move(&s->buf[k], &s->buf[s->n - 1]);
  s->n--;
  /* Refill the hole with the next input so the buffer stays full, and below cap (after an `initial` start) take
   * one more: the buffer grows by one an output. */
  for (int pulls = 0; pulls < 2 && !s->eof && (pulls == 0 || s->n < s->cap); pulls++) {
    int rc = shuf_pull(s);
    if (rc) {
      sl_elem_clear(out);
      return rc;
    }
  }
  return 0;
}

static void shuf_free(sl__it *it) {
  shuf_it *s = (shuf_it *)it;
  for (int64_t i = 0; i < s->n; i++) {
    sl__stats_held(it->op, -(int64_t)sl_elem_bytes(&s->buf[i]));
    sl_elem_clear(&s->buf[i]);
  }
  sl__free(s->buf);
  sl__free(s);
}
static const sl__it_vt SHUF_IT = {shuf_next, shuf_free};

/* Its part: the generator, whether the input ended, and the buffer as refs to its elements (made again on restore,
 * not saved as bytes). */
static int shuf_save(sl__it *it, sl__sw *w) {
  shuf_it *s = (shuf_it *)it;
  for (int i = 0; i < 4; i++) sl__sw_u64(w, s->rng.s[i]);
  sl__sw_u64(w, s->eof);
  sl__sw_u64(w, (uint64_t)s->n);
  for (int64_t i = 0; i < s->n; i++) sl__sw_ref(w, &s->buf[i].ref);
  return 0;
}
static int shuf_load(sl__it *it, sl__sr *r) {
  shuf_it *s = (shuf_it *)it;
  uint64_t v[6];
  int rc;
  for (int i = 0; i < 6; i++)
    if ((rc = sl__sr_u64(r, &v[i], "a shuffle's state"))) return rc;
  if (v[5] > (uint64_t)s->cap)
    return sl__op_err(it->op, SL_ECORRUPT, "the saved state holds %llu buffered elements; the buffer holds %lld",
                      (unsigned long long)v[5], (long long)s->cap);
  for (int i = 0; i < 4; i++) s->rng.s[i] = v[i];
  s->eof = v[4] != 0;
  sl_elem *nb = sl__realloc(s->buf, (size_t)(v[5] > (uint64_t)s->alloc ? v[5] : (uint64_t)s->alloc) * sizeof(sl_elem));
  if (!nb) return sl__op_err(it->op, SL_ENOMEM, "out of memory for the buffer");
  s->buf = nb;
  if (v[5] > (uint64_t)s->alloc) s->alloc = (int64_t)v[5];
  for (; s->n < (int64_t)v[5]; s->n++) {
    sl_eref ref;
    if ((rc = sl__sr_ref(r, &ref))) return rc;
    sl_elem_init(&s->buf[s->n]);
    rc = sl__remake(it->op->input, it->run, &ref, &s->buf[s->n]);
    sl_buf_unref(ref.members);
    if (rc) {
      sl_elem_clear(&s->buf[s->n]);
      return rc;
    }
    sl__stats_held(it->op, (int64_t)sl_elem_bytes(&s->buf[s->n]));
  }
  return 0;
}
static const sl__op_state SHUF_STATE = {shuf_save, shuf_load, NULL, NULL, SL__STF_PASS};

static int shuf_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  int rc = sl__it_new(out, sizeof(shuf_it), &SHUF_IT, op, run, seed);
  if (rc) return rc;
  shuf_it *s = (shuf_it *)*out;
  const shuf_cfg *c = op->impl;
  /* Buffer capacity is the knob, bounded by the input's known size so small datasets stay small. */
  s->cap = c->buffer;
  s->fill = c->initial > 0 && c->initial < s->cap ? c->initial : s->cap;
  s->alloc = s->cap < 16 ? s->cap : 16;
  s->buf = sl__mallocarray((size_t)s->alloc, sizeof(sl_elem));
  if (!s->buf) {
    sl__it_free(*out);
    *out = NULL;
    return sl__op_err(op, SL_ENOMEM, "out of memory for a shuffle buffer");
  }
  uint64_t base = c->seed >= 0 ? (uint64_t)c->seed : sl_pipeline_seed(op->pl);
  sl_rng_seed(&s->rng, sl__seed_of(base, (uint64_t)op->seed_ops[0], c->reshuffle ? (*out)->epoch : 0, 0x5eed));
  return 0;
}
static void shuf_free_op(sl__op *op) { sl__free(op->impl); }

static const sl__arg SHUF_KNOBS[] = {
    {"buffer", SL__ARG_INT, NULL, SL__ARGF_REQUIRED | SL__LOHI, 1, 67108864, NULL,
     "elements to choose from (changes the order: not a knob)"},
    {"seed", SL__ARG_INT, "-1", SL__ARGF_LO, -1, 0, NULL, "the seed (-1: from the pipeline's)"},
    {"reshuffle_each_iteration", SL__ARG_BOOL, "true", 0, 0, 0, NULL, "a new order each epoch"},
    {"initial", SL__ARG_INT, "0", SL__LOHI, 0, 67108864, NULL,
     "elements buffered before the first output, the buffer then growing by one an output (0: the whole buffer)"},
    {NULL}};
static const sl__op_schema SHUF_SCHEMA = {SL__MK_SHUFFLE, 0, "a random order, drawn from a buffer", SHUF_KNOBS, NULL};
const sl__op_vt sl__op_shuffle = {"shuffle", shuf_parse, shuf_open, shuf_free_op, SL__OPF_NEEDS_INPUT, &SHUF_SCHEMA,
                                  &SHUF_STATE};
