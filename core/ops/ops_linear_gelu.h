/* ops_linear_gelu.h — the feed-forward's up-projection and its GELU as one op
 * (core/ops/linear_gelu.c; slots core/cpu_ops/linear_gelu_cpu.c, core/cuda_ops/linear_gelu_cuda.c). */
#ifndef TR_OPS_LINEAR_GELU_H
#define TR_OPS_LINEAR_GELU_H

#include "ops_nn.h"

/* h[..., O] (=) = x[..., I] w[O, I]^T + bias[O] (bias may be NULL), the pre-activation the
 * backward reads (gelu_backward); out (=) = gelu(h), kind a tr_gelu_kind. Each output is what
 * linear then gelu give. On CUDA the tanh form runs in cuBLASLt's GELU_AUX_BIAS epilogue when
 * out and h share a dtype and O is a multiple of 8 (else, and for the erf form, the product
 * with its bias epilogue, then the GELU pass). */
int tr_op_linear_gelu(tr_ctx *ctx, tr_tensor *out, tr_tensor *h, const tr_tensor *x, const tr_tensor *w,
                      const tr_tensor *bias, int kind);

#endif
