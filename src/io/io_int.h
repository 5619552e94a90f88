/* io/io_int.h: what io's files share: the public TFRecord and tf.Example API they implement, and core's helpers. */
#ifndef SL_IO_INT_H
#define SL_IO_INT_H

#include "core/core_int.h"
#include "io/stream_int.h"
#include "sluice/tfrecord.h"

#include <stdio.h>

/* A TFRecord writer onto a stream the caller owns (an output file in the making, core/outfile_int.h): close
 * flushes `f` and leaves it open. `name` names the file in messages. */
int sl__tfrecord_writer_on(sl_tfrecord_writer **out, FILE *f, const char *name, sl_compression comp);

/* sl_tfrecord_reader_open with the read-ahead of a remote file set (opts NULL: the defaults); the reader's stream
 * (for its network counters). */
int sl__tfrecord_reader_open_ex(sl_tfrecord_reader **out, const char *path, sl_compression comp,
                                const sl__stream_opts *opts);
const sl__stream *sl__tfrecord_reader_stream(const sl_tfrecord_reader *r);

/* A tar (POSIX pax, ustar-compatible) writer onto a stream the caller owns, for WebDataset shards (io/tar_write.c):
 * members are regular files, mode 0644, time 0 (the output depends only on the members). close writes the end of
 * the archive and flushes `f`, leaving it open. `name` names the file in messages. */
typedef struct sl__tarw sl__tarw;
int sl__tarw_on(sl__tarw **out, FILE *f, const char *name);
int sl__tarw_add(sl__tarw *w, const char *member, const void *data, size_t len);
/* Ends the archive; returns the first error, if any. Frees w (accepts NULL). */
int sl__tarw_close(sl__tarw *w);

#endif
