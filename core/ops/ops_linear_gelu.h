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

/* The backward of out = linear(gelu(h), w, bias) through to h, for the layer after
 * linear_gelu: dh[..., I] (=) = (dout[..., O] w[O, I]) * gelu'(h); dw (+=) += dout^T x, with x
 * the layer's input gelu(h) as it kept it (x and dw NULL for a frozen weight); dbias[O] (+=)
 * += column sums of dout; dhbias[I] (+=) += column sums of dh, the bias gradient of the layer
 * that made h. dw, dbias, dhbias may be NULL and are f32. On CUDA the tanh form runs the
 * derivative in the dh product's cuBLASLt epilogue when dh and h share a dtype and I is a
 * multiple of 8: DGELU without dhbias, DGELU_BGRAD with it for an f32 dh (a half dh with dhbias
 * is not fused: core/cuda_ops/matmul_cuda.c says why); otherwise the product, the GELU
 * derivative's pass and a column sum. The CPU runs linear_backward, gelu_backward and
 * linear_backward's bias sum. */
int tr_op_linear_backward_dgelu(tr_ctx *ctx, tr_tensor *dh, tr_tensor *dw, tr_tensor *dbias, tr_tensor *dhbias,
                                const tr_tensor *dout, const tr_tensor *x, const tr_tensor *w, const tr_tensor *h,
                                int kind);

#endif
