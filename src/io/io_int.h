/* io/io_int.h: what io's files share: the public TFRecord and tf.Example API they implement, and core's helpers. */
#ifndef SL_IO_INT_H
#define SL_IO_INT_H

#include "core/core_int.h"
#include "sluice/tfrecord.h"

#include <stdio.h>

/* A TFRecord writer onto a stream the caller owns (an output file in the making, core/outfile_int.h): close
 * flushes `f` and leaves it open. `name` names the file in messages. */
int sl__tfrecord_writer_on(sl_tfrecord_writer **out, FILE *f, const char *name, sl_compression comp);

#endif
