/* sluice/gen.h: synthetic datasets for the benchmark suite and the examples (`sluice gen`):
 *   imagenet: TFRecord shards of tf.Example with photo-like JPEGs (about 400x350, about 110 KB at quality 90);
 *   ssd:      the same plus 1-20 bounding boxes (image/object/bbox/{ymin,xmin,ymax,xmax}) and labels per image;
 *   text:     text shards of sentences over a Zipf-distributed vocabulary (5-300 tokens) plus vocab.txt;
 *   tabular:  Criteo-like CSV shards (label, 13 integer columns, 26 hex categorical columns, some fields empty).
 * Images come in three layouts of the same records (`format`): TFRecord shards; an image folder root/<class>/<index>.jpg
 * as torchvision's ImageFolder reads it; WebDataset tar shards of <index>.jpg and <index>.cls.
 * Output depends only on the options (seed, n, shards, ...), never on the thread count.
 * Thread rules: sl_gen_run may be called from any thread; the progress callback runs on the calling thread. */
#ifndef SLUICE_GEN_H
#define SLUICE_GEN_H

#include <signal.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sl_gen_kind { SL_GEN_IMAGENET = 0, SL_GEN_SSD = 1, SL_GEN_TEXT = 2, SL_GEN_TABULAR = 3 } sl_gen_kind;
/* The layout of an image dataset: the same JPEGs and labels in each. */
typedef enum sl_gen_format { SL_GEN_TFRECORD = 0, SL_GEN_FOLDER = 1, SL_GEN_TAR = 2 } sl_gen_format;

/* Parses "imagenet", "ssd", "text", "tabular"; SL_EINVAL otherwise. */
SL_EXTERN int sl_gen_kind_parse(sl_gen_kind *out, const char *name);
SL_EXTERN const char *sl_gen_kind_name(sl_gen_kind kind);
/* Parses "tfrecord", "folder", "tar"; SL_EINVAL otherwise. */
SL_EXTERN int sl_gen_format_parse(sl_gen_format *out, const char *name);

/* A field left 0 takes the default written beside it. */
#define SL_GEN_OPTS_VERSION 3 /* 2 added `cancel`, 3 `format` and `classes`; older structs are still accepted */
typedef struct sl_gen_opts {
  unsigned version;   /* SL_GEN_OPTS_VERSION */
  sl_gen_kind kind;   /* 0: SL_GEN_IMAGENET */
  const char *out_dir; /* required; created when missing; existing shard files of the same names are replaced. Each
                        * file is written as .NAME.tmp-PID and renamed to NAME when complete */
  int64_t n;          /* records: images, sentences or rows (>= 1); 0: 1000 */
  int shards;         /* output files (1..n); 0: 4, or n when n < 4 */
  uint64_t seed;      /* 0 is a seed like any other (the default) */
  int quality;        /* JPEG quality, 1..100 (images); 0: 90 */
  int threads;        /* generator threads (1..256); 0: 1 */
  int64_t vocab_size; /* words in the text vocabulary (>= 10); 0: 30000 */
  int chroma;         /* JPEG chroma subsampling: 444 or 420; 0: 444 */
  /* Called after each record with (done, total). Optional. */
  void (*progress)(int64_t done, int64_t total, void *payload);
  void *payload;
  /* Optional: when *cancel becomes nonzero (a signal handler may set it) the run stops within a chunk of records
   * with SL_ECANCELED; the files completed so far stay, the one being written is removed. NULL: never. */
  const volatile sig_atomic_t *cancel;
  /* imagenet only: the layout (0: TFRecord shards train-S-of-N.tfrecord). SL_GEN_FOLDER writes
   * out_dir/<label>/<index>.jpg, the label zero-padded to the width of classes-1 so that the sorted folder names
   * are the labels in order: ImageFolder's class index is the label whenever every class has an image (the report
   * says how many do). SL_GEN_TAR writes train-S-of-N.tar of <index>.jpg and <index>.cls (the label in decimal).
   * Record i is the same image and label in every layout. */
  sl_gen_format format;
  int classes; /* imagenet and ssd: labels are 0..classes-1 (2..100000); 0: 1000. The images do not depend on it */
} sl_gen_opts;
#define SL_GEN_OPTS_INIT {SL_GEN_OPTS_VERSION}

/* What a run wrote. Image fields are 0 for text and tabular; text fields 0 for the others. */
typedef struct sl_gen_report {
  int64_t records;
  int files;
  uint64_t bytes;          /* total bytes written (shards and vocabulary) */
  double mean_image_bytes; /* mean encoded JPEG size */
  double mean_width, mean_height;
  int quality, chroma;     /* the JPEG quality and chroma subsampling used */
  double decode_us;        /* measured libjpeg-turbo decode time per image (CPU microseconds, a sample) */
  int64_t boxes;           /* ssd: boxes written */
  int64_t vocab_size;      /* text: vocabulary entries (with the special tokens) */
  double mean_tokens;      /* text: tokens per sentence */
  int classes_present;     /* images: how many of the classes have at least one image */
} sl_gen_report;

/* Generates a dataset. Errors: SL_EINVAL for bad options (message names the option), SL_EIO naming the file that
 * could not be written, SL_ENOMEM, SL_ECANCELED after `cancel`. `report` may be NULL. */
SL_EXTERN int sl_gen_run(sl_gen_report *report, const sl_gen_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
