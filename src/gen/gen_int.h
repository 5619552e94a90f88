/* gen/gen_int.h: the dataset generators' shared shape: a maker turns a record index into bytes (and a few
 * statistics), deterministically from (seed, index), on any thread; gen.c runs makers on threads in chunks and
 * writes the records in index order. Not public. */
#ifndef SL_FNS_GEN_INTERNAL_H
#define SL_FNS_GEN_INTERNAL_H

#include "core/core_int.h"
#include "sluice/fn.h" /* sl_rng */
#include "sluice/gen.h"
#include "sluice/tfrecord.h"

typedef struct sl__gen_rec {
  sl__str data;   /* the record (serialised tf.Example, or a text/CSV line with its newline) */
  sl_buf *jpeg;   /* images: the encoded JPEG (kept for the decode-cost sample), else NULL */
  int64_t w, h, boxes, tokens;
} sl__gen_rec;

/* Makers: fill r from record index i. Thread-safe. */
int sl__gen_image(const sl_gen_opts *o, int64_t i, sl__gen_rec *r);
int sl__gen_sentence(const sl_gen_opts *o, const void *zipf, int64_t i, sl__gen_rec *r);
int sl__gen_csv_row(const sl_gen_opts *o, int64_t i, sl__gen_rec *r);

/* Text vocabulary: writes vocab.txt and builds the Zipf sampler (*zipf, freed with sl__gen_zipf_free). */
int sl__gen_vocab(const sl_gen_opts *o, const char *path, void **zipf, int64_t *entries, uint64_t *bytes);
void sl__gen_zipf_free(void *zipf);

/* Photo-like RGB content of w x h with `nobj` objects; their boxes (ymin, xmin, ymax, xmax in [0, 1]) go to boxes
 * (4 floats each) when not NULL. */
void sl__gen_picture(uint64_t seed, uint8_t *rgb, int w, int h, int nobj, float *boxes);

#endif
