/* sluice/convert.h: writes the elements a pipeline yields as TFRecord shards of tf.Example (what TensorFlow's
 * readers take) or as WebDataset tar shards (what webdataset and the `tar` op read): `sluice convert` and Python's
 * sluice.convert call it. Every shard is written under a hidden temporary name and renamed when all are complete.
 * Thread rules: call from any thread; the progress callback runs on the calling thread. */
#ifndef SLUICE_CONVERT_H
#define SLUICE_CONVERT_H

#include <signal.h>
#include <stdint.h>

#include "common.h"
#include "pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sl_convert_format { SL_CONVERT_TFRECORD = 0, SL_CONVERT_TAR = 1 } sl_convert_format;
/* Parses "tfrecord", "tar"; SL_EINVAL otherwise. */
SL_EXTERN int sl_convert_format_parse(sl_convert_format *out, const char *name);
SL_EXTERN const char *sl_convert_format_name(sl_convert_format f);

/* A field left 0 takes the default written beside it. */
#define SL_CONVERT_OPTS_VERSION 1
typedef struct sl_convert_opts {
  unsigned version;         /* SL_CONVERT_OPTS_VERSION */
  sl_convert_format format; /* 0: TFRecord */
  const char *out_dir;      /* required; created when missing (not its parents) */
  int shards;               /* output files, 1..100000: element i goes to shard i mod shards; 0: 1 */
  const char *prefix;       /* file names PREFIX-00000-of-0000N.{tfrecord,tar}; NULL: "train" */
  /* Called after each element with the elements and the payload bytes written so far. Optional. */
  void (*progress)(int64_t elements, uint64_t bytes, void *payload);
  void *payload;
  /* Optional: when *cancel becomes nonzero (a signal handler may set it) the run stops at the next element with
   * SL_ECANCELED and removes every file it was writing. NULL: never. */
  const volatile sig_atomic_t *cancel;
} sl_convert_opts;
#define SL_CONVERT_OPTS_INIT {SL_CONVERT_OPTS_VERSION}

typedef struct sl_convert_report {
  int64_t elements;
  int files;
  uint64_t bytes; /* the records' bytes (TFRecord) or the members' bytes (tar), framing left out */
} sl_convert_report;

/* Runs p from its start and writes each element.
 * TFRecord: one tf.Example per element; each component a feature of its name, except label -> image/class/label,
 * filename -> image/filename, __key__ -> image/key, and a WebDataset image member jpg/jpeg/png/webp ->
 * image/encoded (with image/format); __url__ is left out. Byte strings become a bytes_list, integers an int64_list,
 * floats a float_list (flattened).
 * Tar: one sample per element, its key __key__ or image/key (else the element's index, 9 digits); each component a
 * member KEY.EXT: image/encoded -> jpg, png or webp (from the bytes), label and image/class/label -> cls, others
 * their name with '/' made '.'; __url__ and image/format (the extension says it) are left out. A member holds one
 * byte string, or one number in decimal. A key is confined to the folder a reader extracts to (leading '/', empty
 * and "." parts dropped, ".." parts made "_": "../../x" is "_/_/x") and made unique in its shard (a key the shard
 * holds already gets "_1", "_2", ...: sluice's and webdataset's readers group consecutive members by key).
 * A decoded image (uint8 and other pixel types) is refused: convert the encoded bytes. Errors name the element and
 * the component (or the file); on any error or cancel no output file is left, under a final or temporary name. */
SL_EXTERN int sl_convert(sl_convert_report *report, sl_pipeline *p, const sl_convert_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
