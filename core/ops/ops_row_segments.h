/* ops_row_segments.h — dropout over a packed tensor: the rows of a padded [B, T, C]
 * activation that hold real tokens, stored back to back as [N, C] (trainer.nn.packing), so
 * that the encoder's linear layers, layernorms and GELUs skip the padding.
 *
 * The packed rows are runs of consecutive padded rows. Segment s (three int64 in segs:
 * packed first row, number of rows, stream offset) covers packed rows
 * [segs[3s], segs[3s] + segs[3s+1]) and draws its keep bits from stream element
 * segs[3s+2] on, the padded layout's index of the run's first element. The mask of every
 * real element is therefore exactly the one tr_op_dropout gives the padded tensor
 * (core/ops/ops_elem.h): packing changes which elements are computed, never a mask.
 * Each segment is one tr_op_dropout on a view, so every device with a dropout slot runs it.
 * Segments must lie inside the tensor's rows; they need not cover all of them (rows
 * outside every segment are left as they are). */
#ifndef TR_OPS_ROW_SEGMENTS_H
#define TR_OPS_ROW_SEGMENTS_H

#include "tensor.h"
#include "rng.h"

/* out = x * keep / (1 - p) (=), segment by segment; x, out: [N, C] (any leading dims,
 * last dim C), the same number of elements; out may alias x. */
int tr_op_dropout_segments(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float p, const tr_rng_key *key,
                           const int64_t *segs, int64_t nseg);
/* dx = dout * keep / (1 - p) (=) with the forward's key and segments. */
int tr_op_dropout_segments_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, float p,
                                    const tr_rng_key *key, const int64_t *segs, int64_t nseg);

#endif
