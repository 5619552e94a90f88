/* gen/gen_int.h: the dataset generators' shared shape: a maker turns a record index into bytes (and a few
 * statistics), deterministically from (seed, index), on any thread; gen.c runs makers on threads in chunks and
 * writes the records in index order. Not public. */
#ifndef SL_FNS_GEN_INTERNAL_H
#define SL_FNS_GEN_INTERNAL_H

#include "core/core_int.h"
#include "core/outfile_int.h"
#include "sluice/fn.h" /* sl_rng */
#include "sluice/gen.h"
#include "sluice/tfrecord.h"

typedef struct sl__gen_rec {
  sl__str data;   /* the record (serialised tf.Example, or a text/CSV line with its newline) */
  sl_buf *jpeg;   /* images: the encoded JPEG (kept for the decode-cost sample), else NULL */
  int64_t w, h, boxes, tokens, label;
} sl__gen_rec;

/* Makers: fill r from record index i. Thread-safe. */
int sl__gen_image(const sl_gen_opts *o, int64_t i, sl__gen_rec *r);
int sl__gen_sentence(const sl_gen_opts *o, const void *zipf, int64_t i, sl__gen_rec *r);
int sl__gen_csv_row(const sl_gen_opts *o, int64_t i, sl__gen_rec *r);

/* Where records go, in index order: the shard being written (TFRecord, tar or text lines), or for an image folder
 * one file per image (gen_layout.c). Every file is written under a temporary name and renamed when complete. */
typedef struct sl__gen_sink {
  const sl_gen_opts *o;
  const char *ext;            /* shard files' extension */
  int shard;                  /* the shard being written, -1 before the first */
  int iwidth, cwidth;         /* digits of the record index (n-1) and of the label (classes-1) */
  sl__outfile of;             /* the file being written */
  sl_tfrecord_writer *tw;     /* on of.f, for TFRecord shards */
  struct sl__tarw *tar;       /* on of.f, for tar shards */
  sl__str path, member;
  unsigned char *seen;        /* images: classes that have an image (a class folder made, for folders) */
  int files, classes_present;
  uint64_t bytes;
} sl__gen_sink;
/* Starts a sink for o (its out_dir exists). */
int sl__gen_sink_open(sl__gen_sink *s, const sl_gen_opts *o);
/* Writes record i (the next in order). */
int sl__gen_sink_put(sl__gen_sink *s, int64_t i, const sl__gen_rec *r);
/* Completes the file being written (keep) or removes it (!keep, or after an error), and releases the sink; returns
 * the first error. */
int sl__gen_sink_close(sl__gen_sink *s, bool keep);

/* Text vocabulary: writes vocab.txt and builds the Zipf sampler (*zipf, freed with sl__gen_zipf_free). */
int sl__gen_vocab(const sl_gen_opts *o, const char *path, void **zipf, int64_t *entries, uint64_t *bytes);
void sl__gen_zipf_free(void *zipf);

/* Photo-like RGB content of w x h with `nobj` objects; their boxes (ymin, xmin, ymax, xmax in [0, 1]) go to boxes
 * (4 floats each) when not NULL. */
void sl__gen_picture(uint64_t seed, uint8_t *rgb, int w, int h, int nobj, float *boxes);

#endif
