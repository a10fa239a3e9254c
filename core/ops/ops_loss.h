/* ops_loss.h — cross-entropy over logits (label smoothing, an ignored index). Contract:
 * ops_elementwise.h. */
#ifndef TR_OPS_LOSS_H
#define TR_OPS_LOSS_H

#include "tensor.h"

/* loss (=, f32, one element) = mean over rows n with targets[n] != ignore_index of
 *   (1 - ls) * (lse_n - logits[n, t_n]) + ls * (lse_n - mean_k logits[n, k])
 * (torch.nn.functional.cross_entropy with label_smoothing ls). logits [N, K] (any
 * leading dims, last dim K); targets i32/i64 with N elements, each in [0, K) or
 * ignore_index (torch's default is -100). lse (=, f32, N elements) is the row
 * log-sum-exp that the backward needs. All rows ignored gives loss 0 (torch gives NaN). */
int tr_op_cross_entropy(tr_ctx *ctx, tr_tensor *loss, tr_tensor *lse, const tr_tensor *logits,
                        const tr_tensor *targets, int64_t ignore_index, float label_smoothing);
/* dlogits (=) = dloss * d(loss)/d(logits); dlogits may alias logits. */
int tr_op_cross_entropy_backward(tr_ctx *ctx, tr_tensor *dlogits, float dloss, const tr_tensor *logits,
                                 const tr_tensor *lse, const tr_tensor *targets, int64_t ignore_index,
                                 float label_smoothing);

#endif
