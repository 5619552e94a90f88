/* io/example_int.h: protobuf-level access to tf.Example for parse_example (internal). */
#ifndef SL_IO_EXAMPLE_H
#define SL_IO_EXAMPLE_H
#include "example.pb-c.h"
#include "sluice.h"
/* Unpacks a serialised tf.Example; SL_ECORRUPT when it is not valid protobuf. Free with sl__example_free_unpacked. */
int sl__example_unpack(const void *data, size_t len, Sluice__Tf__Example **out);
void sl__example_free_unpacked(Sluice__Tf__Example *ex);
/* Moves value i of an unpacked bytes list into a buffer of its own without copying it (the unpacked copy becomes the
 * buffer's data; the list's value is left empty). NULL when the buffer cannot be allocated (the value stays). */
sl_buf *sl__example_take_bytes(Sluice__Tf__BytesList *bl, size_t i);
#endif
