/* sluice/tfrecord.h: TFRecord files (reader and writer, CRC32C-checked, optional GZIP/ZLIB compression) and
 * tf.Example records (build and serialise; parsing is the `parse_example` function).
 * Thread rules: a reader, writer or example belongs to one thread at a time. */
#ifndef SLUICE_TFRECORD_H
#define SLUICE_TFRECORD_H

#include <stdint.h>

#include "common.h"
#include "element.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CRC-32C (Castagnoli) of data; sl_crc32c("123456789", 9) == 0xE3069283. */
SL_EXTERN uint32_t sl_crc32c(const void *data, size_t len);
/* Extends a CRC-32C over more data (start with 0). */
SL_EXTERN uint32_t sl_crc32c_extend(uint32_t crc, const void *data, size_t len);
/* TFRecord's masking: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
SL_EXTERN uint32_t sl_crc32c_mask(uint32_t crc);

typedef enum sl_compression { SL_COMPRESSION_NONE = 0, SL_COMPRESSION_GZIP = 1, SL_COMPRESSION_ZLIB = 2 } sl_compression;
/* Parses "", "NONE", "GZIP", "ZLIB" (case-insensitive). */
SL_EXTERN int sl_compression_parse(sl_compression *out, const char *name);

typedef struct sl_tfrecord_reader sl_tfrecord_reader;
/* Opens a TFRecord file, or a remote one (`http://`, `https://`, `s3://`: docs/remote.md; the reader then runs an I/O
 * thread of its own until freed). SL_ENOTFOUND or SL_EIO names the file (a URL without credentials) when it cannot
 * be opened. */
SL_EXTERN int sl_tfrecord_reader_open(sl_tfrecord_reader **out, const char *path, sl_compression comp);
/* Next record: 0 with *rec (a new buffer the caller unrefs) holding the record's *len bytes; SL_END at a clean end
 * of file; SL_ECORRUPT (bad CRC, truncated record, length beyond the file) with a message naming the file, the
 * record index and the byte offset. After a data-CRC error the reader can continue with the next record; after a
 * length error the framing is lost and every later call returns SL_END. */
SL_EXTERN int sl_tfrecord_reader_next(sl_buf **rec, size_t *len, sl_tfrecord_reader *r);
/* Index of the next record, and bytes read from the file so far. */
SL_EXTERN uint64_t sl_tfrecord_reader_index(const sl_tfrecord_reader *r);
SL_EXTERN uint64_t sl_tfrecord_reader_disk_bytes(const sl_tfrecord_reader *r);
/* Moves to the record at byte `offset` (of the uncompressed stream), which is record number `index`: a seek for an
 * uncompressed file; a compressed one is read forward to it. SL_EINVAL when offset is past the end or (compressed)
 * behind the reader. A resumed run uses it (docs/state.md). */
SL_EXTERN int sl_tfrecord_reader_seek(sl_tfrecord_reader *r, uint64_t offset, uint64_t index);
/* Byte offset (uncompressed stream) of the next record. */
SL_EXTERN uint64_t sl_tfrecord_reader_offset(const sl_tfrecord_reader *r);
SL_EXTERN void sl_tfrecord_reader_free(sl_tfrecord_reader *r);

/* A writer to `path`. The file is written beside its name (a hidden temporary, never through a link planted there)
 * and takes the name at close, complete and synced: until then, and after a failed write, `path` is as it was. */
typedef struct sl_tfrecord_writer sl_tfrecord_writer;
SL_EXTERN int sl_tfrecord_writer_open(sl_tfrecord_writer **out, const char *path, sl_compression comp);
SL_EXTERN int sl_tfrecord_write(sl_tfrecord_writer *w, const void *data, size_t len);
/* Flushes, closes and renames the file into place; returns the first write error, if any (then no file is
 * published). Accepts NULL. */
SL_EXTERN int sl_tfrecord_writer_close(sl_tfrecord_writer *w);

/* A tf.Example under construction: features added by name, serialised to protobuf bytes. */
typedef struct sl_example sl_example;
SL_EXTERN sl_example *sl_example_new(void);
SL_EXTERN void sl_example_free(sl_example *ex);
SL_EXTERN int sl_example_add_bytes(sl_example *ex, const char *key, const void *const *values, const size_t *lens, size_t n);
SL_EXTERN int sl_example_add_int64(sl_example *ex, const char *key, const int64_t *values, size_t n);
SL_EXTERN int sl_example_add_float(sl_example *ex, const char *key, const float *values, size_t n);
/* Serialises into a new buffer (*out, caller unrefs). */
SL_EXTERN int sl_example_serialize(sl_buf **out, const sl_example *ex);

#ifdef __cplusplus
}
#endif
#endif
