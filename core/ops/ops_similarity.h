/* ops_similarity.h — L2 normalisation and cosine similarity. Contract: ops_elementwise.h. */
#ifndef TR_OPS_SIMILARITY_H
#define TR_OPS_SIMILARITY_H

#include "tensor.h"

/* out = x / max(||x||, eps) over the last dim (=) (torch.nn.functional.normalize; eps
 * 1e-12 there). out may alias x. */
int tr_op_l2norm(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float eps);
/* dx (=) from dout, recomputing the norms from x. */
int tr_op_l2norm_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *x, float eps);
/* sim [N, M] (=) = normalize(a) normalize(b)^T with eps 1e-12; a [N, C], b [M, C]. */
int tr_op_cosine_sim(tr_ctx *ctx, tr_tensor *sim, const tr_tensor *a, const tr_tensor *b);
/* da [N, C] (=), db [M, C] (=), either may be NULL; the normalisation is recomputed. */
int tr_op_cosine_sim_backward(tr_ctx *ctx, tr_tensor *da, tr_tensor *db, const tr_tensor *dsim,
                              const tr_tensor *a, const tr_tensor *b);

#endif
