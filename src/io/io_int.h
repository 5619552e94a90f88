/* io/io_int.h: what io's files share: the public TFRecord and tf.Example API they implement, and core's helpers. */
#ifndef SL_IO_INT_H
#define SL_IO_INT_H

#include "core/core_int.h"
#include "sluice/tfrecord.h"

#endif
