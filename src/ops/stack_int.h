/* ops/stack_int.h: stacking n elements' component into one batched component, shared by batch, padded_batch and
 * bucket_by_sequence_length (op_batch.c). Errors name the op and the component. */
#ifndef SL_OPS_STACK_H
#define SL_OPS_STACK_H

#include "ops/pipeline_int.h"

/* Byte strings: component c0 (a single string in every element) becomes a rank-1 string array appended to out. */
int sl__stack_bytes(sl__op *op, sl_elem *out, sl_elem *els, int64_t n, const sl_comp *c0);
/* Numeric tensors: component c0 of every element, each padded with `pad` to `shape` (c0's rank; at least every
 * element's shape), stacked into a tensor of rank + 1 appended to out. */
int sl__stack_padded(sl__op *op, sl_elem *out, sl_elem *els, int64_t n, const sl_comp *c0, const int64_t *shape,
                     double pad);

#endif
