/* ops_score_loss.h — the losses on scored pairs (u_i, v_i, y_i) of sentence-transformers'
 * CoSENTLoss and CosineSimilarityLoss, over sim = cosine_sim(u, v) [B, B], whose diagonal holds
 * the pairs' cosines. Each op writes the loss and the gradient of the loss with respect to
 * sim (a diagonal matrix) in one call, on the device of sim, so a step on a GPU neither reads
 * the cosines nor builds the gradient on the host; the loss's backward feeds dsim to
 * cosine_sim_backward. The scores are a host array of B floats (the batch's labels), copied
 * before the call returns.
 *
 * Contract, as in ops_elementwise.h: outputs first, allocated by the caller; one device per call;
 * sim f32, bf16 or f16 (computed in f32 on a GPU, in double on the CPU); loss (one element)
 * and dsim ([B, B]) f32, both overwritten (=); TR_EUSER naming the op and the argument. */
#ifndef TR_OPS_SCORE_LOSS_H
#define TR_OPS_SCORE_LOSS_H

#include "tensor.h"

/* loss = log(1 + sum over y_i > y_j of exp(scale cos_j - scale cos_i)), cos_i = sim[i, i];
 * dsim = d loss / d sim (zero off the diagonal). */
int tr_op_cosent_loss(tr_ctx *ctx, tr_tensor *loss, tr_tensor *dsim, const tr_tensor *sim, const float *scores,
                      float scale);

/* loss = mean over i of (sim[i, i] - scores[i] / score_scale)^2; dsim = d loss / d sim
 * (zero off the diagonal). score_scale > 0. */
int tr_op_cosine_mse_loss(tr_ctx *ctx, tr_tensor *loss, tr_tensor *dsim, const tr_tensor *sim, const float *scores,
                          float score_scale);

#endif
