/* ops_pooling.h — masked pooling of token states into one vector per sequence
 * (sentence-transformers' modes). Contract: ops_elementwise.h. */
#ifndef TR_OPS_POOLING_H
#define TR_OPS_POOLING_H

#include "tensor.h"

/* sentence-transformers' pooling modes. */
typedef enum tr_pool_mode {
    TR_POOL_MEAN = 0,          /* mean over kept tokens */
    TR_POOL_CLS = 1,           /* token 0 */
    TR_POOL_MAX = 2,           /* per-channel max over kept tokens */
    TR_POOL_MEAN_SQRT_LEN = 3  /* sum over kept tokens / sqrt(number kept) */
} tr_pool_mode;

/* out [B, C] (=) from hidden [B, T, C] and the attention mask [B, T] (i32, i64 or a
 * float dtype; non-zero = real token; NULL = every token real). Rows without a kept
 * token pool to 0. */
int tr_op_pool(tr_ctx *ctx, tr_tensor *out, const tr_tensor *hidden, const tr_tensor *mask, int mode);
/* dhidden [B, T, C] (=); padding positions get 0; max sends the gradient to the first
 * maximal token. */
int tr_op_pool_backward(tr_ctx *ctx, tr_tensor *dhidden, const tr_tensor *dout, const tr_tensor *hidden,
                        const tr_tensor *mask, int mode);

#endif
