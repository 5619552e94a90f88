/* plan/plan_fuse_int.h: the fusion rewrite (plan_fuse.c), which the optimizer applies before it traces: a
 * `decode_jpeg` map followed by a `random_resized_crop`, `center_crop` or `resize` map becomes one
 * `decode_and_crop_jpeg` map that decodes only the window, at the smallest DCT scale that keeps the output size. */
#ifndef SL_PLAN_FUSE_INT_H
#define SL_PLAN_FUSE_INT_H

#include <jansson.h>

#include "sluice.h"

/* Rewrites spec (a whole spec object) in place: every fusable pair in its chain and in nested `source` chains.
 * An op with "fuse": false stays apart. Returns the number of pairs fused (0: spec unchanged), or SL_ENOMEM.
 * When some were fused, the spec's "comment" says which (appended to the one it had). */
int sl__plan_fuse_spec(json_t *spec);
/* The same; *note (when not NULL) gets what was fused ("ops[4] decode_jpeg + ops[5] random_resized_crop -> ..."; free
 * with sl__free), NULL when nothing was. */
int sl__plan_fuse_spec_note(json_t *spec, char **note);
/* A rewrite that inserts or removes ops shifts the pre-order index the later ops draw their seeds from. Pin before
 * it (every op without a "seed_op" gets its index: SL_ENOMEM or 0), unpin after (a "seed_op" equal to the op's new
 * index is dropped), and the moved ops keep their randomness. */
int sl__plan_seeds_pin(json_t *ops);
void sl__plan_seeds_unpin(json_t *ops);

/* *out is a new pipeline built from p's spec with its pairs fused, or NULL when there was nothing to fuse. */
int sl__plan_fuse(sl_pipeline **out, const sl_pipeline *p);

#endif
