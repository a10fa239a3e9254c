/* ops_pair_features.h — tensor-level ops that build and take apart feature matrices for losses
 * and heads: column-block copies (concatenation along the last dim, truncation to the
 * first d dims, and their backwards) and |a - b| (sentence-transformers' SoftmaxLoss
 * features [u, v, |u - v|]).
 *
 * Contract, as in ops_elementwise.h: outputs first, allocated by the caller; one device per
 * call (the op table dispatches; a backend without the op answers TR_EUSER); f32, bf16 or f16
 * tensors, each independently, computed in f32; TR_EUSER with a message naming the op,
 * the argument and its shape; "(=)" overwritten, "(+=)" accumulated. */
#ifndef TR_OPS_PAIR_FEATURES_H
#define TR_OPS_PAIR_FEATURES_H

#include "tensor.h"

/* dst[r, dst_col + j] (= when accumulate is 0, += otherwise) src[r, src_col + j] for every
 * row r and j < ncols. Rows are the leading dims flattened: dst and src must have the
 * same number of rows; each block must lie inside its tensor's last dim. Columns of dst
 * outside the block are left as they are. dst and src must be different tensors. */
int tr_op_copy_cols(tr_ctx *ctx, tr_tensor *dst, int64_t dst_col, const tr_tensor *src, int64_t src_col,
                    int64_t ncols, int accumulate);

/* out = |a - b| (=); a, b and out have the same number of elements. */
int tr_op_abs_diff(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b);

/* da = dout * sign(a - b) (=), db = -da (=), sign(0) = 0 (torch.abs's backward); da or db
 * may be NULL. */
int tr_op_abs_diff_backward(tr_ctx *ctx, tr_tensor *da, tr_tensor *db, const tr_tensor *dout, const tr_tensor *a,
                            const tr_tensor *b);

#endif
