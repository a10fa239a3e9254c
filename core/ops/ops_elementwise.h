/* ops_elementwise.h — elementwise arithmetic: add, mul (with a row-broadcast vector), scale,
 * axpy, fill.
 *
 * Contract shared by the tensor-level ops of core/ops/ops_*.h (ops_nn.h states its own):
 *   - outputs come first and are allocated by the caller (who owns their lifetime and
 *     tag); inputs follow, then scalars;
 *   - every tensor of one call is on one device (TR_EUSER otherwise); every op is
 *     in the op table (core/ops/op_table.h), a device without a slot answers TR_EUSER;
 *   - activations may be f32, bf16 or f16 (each tensor independently); the CPU computes
 *     in f32 (reductions accumulate in f32 or better) and converts on the way in and out,
 *     through workspace blocks that are returned before the op returns;
 *   - errors return TR_EUSER (or TR_EOOM from the allocator) with the message in
 *     tr_ctx_err(ctx), naming the op, the argument and its shape;
 *   - "(=)" marks outputs that are overwritten, "(+=)" those that accumulate. */
#ifndef TR_OPS_ELEMENTWISE_H
#define TR_OPS_ELEMENTWISE_H

#include "tensor.h"

/* out = a + b, out = a * b (=). b has a's shape, or is a vector [C] (C = a's last dim)
 * broadcast over a's rows. out has a's number of elements. out may alias a. */
int tr_op_add(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b);
int tr_op_mul(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b);
/* da = dout * b (=), db = dout * a (=, summed over rows when b was broadcast); da or db
 * may be NULL. */
int tr_op_mul_backward(tr_ctx *ctx, tr_tensor *da, tr_tensor *db, const tr_tensor *dout, const tr_tensor *a,
                       const tr_tensor *b);
/* out = alpha * x (=); out may alias x. */
int tr_op_scale(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float alpha);
/* y += alpha * x (+=). */
int tr_op_axpy(tr_ctx *ctx, tr_tensor *y, const tr_tensor *x, float alpha);
/* out = value (=). */
int tr_op_fill(tr_ctx *ctx, tr_tensor *out, float value);

#endif
