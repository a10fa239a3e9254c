/* ops_dropout_linear.h — a Linear without bias over the dropped-out input, and its backward,
 * each as one op (core/ops/dropout_linear.c; slots core/cpu_ops/dropout_linear_cpu.c,
 * core/cuda_ops/dropout_linear_cuda.c): LoRA's down-projection, a = dropout(x) A^T, whose
 * rank-r output is so narrow that the product is a pass over x. Fused on CUDA, the
 * dropped-out copy of x is never written: the forward and the backward draw each element's
 * keep bit where they read it. */
#ifndef TR_OPS_DROPOUT_LINEAR_H
#define TR_OPS_DROPOUT_LINEAR_H

#include "ops_nn.h"

/* out[..., R] (=) = dropout(x[..., I], p, key, offset) w[R, I]^T: the values of tr_op_dropout
 * into x's dtype, then tr_op_linear without bias. The keep bits are tr_op_dropout's for the
 * same key and offset (element e of x drawn at offset + e). key may be NULL when p is 0. */
int tr_op_dropout_linear(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, const tr_tensor *w, float p,
                         const tr_rng_key *key, uint64_t offset);

/* Its backward, with the forward's x, w, p, key and offset: dx[..., I] (+=) +=
 * dropout_backward(dout w) (the product in dout's dtype, then the mask, then the sum), dw[R, I]
 * (+=, f32) += dout^T dropout(x). dx or dw may be NULL (not wanted). */
int tr_op_dropout_linear_backward(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dw, const tr_tensor *dout,
                                  const tr_tensor *x, const tr_tensor *w, float p, const tr_rng_key *key,
                                  uint64_t offset);

#endif
