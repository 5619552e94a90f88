/* io/example_int.h: protobuf-level access to tf.Example for parse_example (internal). */
#ifndef SL_IO_EXAMPLE_H
#define SL_IO_EXAMPLE_H
#include "example.pb-c.h"
/* Unpacks a serialised tf.Example; SL_ECORRUPT when it is not valid protobuf. Free with sl__example_free_unpacked. */
int sl__example_unpack(const void *data, size_t len, Sluice__Tf__Example **out);
void sl__example_free_unpacked(Sluice__Tf__Example *ex);
#endif
