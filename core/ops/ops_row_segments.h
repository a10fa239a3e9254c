/* ops_row_segments.h — moving an activation between the padded layout [B, T, C] (as
 * [R = B*T, C]) and the packed one [N, C], the rows that hold real tokens stored back to
 * back (trainer.nn.packing), so that the encoder's linear layers, layernorms and GELUs
 * skip the padding; and dropout in the packed layout with the padded layout's masks.
 *
 * The packed rows are runs of consecutive padded rows. A segment table holds three int64
 * per run: packed first row, number of rows, padded first row; runs are in increasing
 * padded order and do not overlap (trainer.nn.packing makes them from the attention mask).
 * The table does not depend on C, so one table serves every width.
 * Each run is one device-dispatched call (tr_tensor_copy, tr_tensor_fill, tr_op_dropout)
 * on a view that lives on the stack: nothing is allocated, and every device that has
 * those runs these. Every segment is checked before any data moves: a bad table is
 * TR_EUSER naming the segment, and changes nothing. */
#ifndef TR_OPS_ROW_SEGMENTS_H
#define TR_OPS_ROW_SEGMENTS_H

#include "tensor.h"
#include "rng.h"

/* out [N, C] (=) = the padded rows of x [R, C] the segments name, packed. Dtypes may
 * differ (converted). */
int tr_op_gather_segments(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, const int64_t *segs, int64_t nseg);
/* out [R, C] (=): the packed rows of x [N, C] at their padded rows, every other row 0. */
int tr_op_scatter_segments(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, const int64_t *segs, int64_t nseg);
/* out = x * keep / (1 - p) (=), x and out packed [N, C] (same number of elements; out may
 * alias x): the rows of a segment draw their keep bits from stream element padded first
 * row * C on, so every real element gets exactly the mask tr_op_dropout gives it in the
 * padded tensor (core/ops/ops_dropout.h): packing changes which elements are computed,
 * never a mask. Rows outside every segment are left as they are. */
int tr_op_dropout_segments(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float p, const tr_rng_key *key,
                           const int64_t *segs, int64_t nseg);
/* dx = dout * keep / (1 - p) (=) with the forward's key and segments. */
int tr_op_dropout_segments_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, float p, const tr_rng_key *key,
                                    const int64_t *segs, int64_t nseg);

#endif
