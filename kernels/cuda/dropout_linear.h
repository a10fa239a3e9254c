/* dropout_linear.h — LoRA's down-projection and its backward fused with the input's dropout
 * (dropout_linear.cu); host launchers with C linkage and no CUDA types, under launcher.h's
 * contract. x is [N, I] (row-major), w [R, I], out and dout [N, R]; the keep bit of x's
 * element e is core/base/rng.h's stream element offset + e for the key (seed, step, layer,
 * op), the same as kernels/cuda/dropout.cu draws; p in [0, 1]. */
#ifndef TR_KERNELS_CUDA_DROPOUT_LINEAR_H
#define TR_KERNELS_CUDA_DROPOUT_LINEAR_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* out (=) = xd w^T, xd = dropout(x) rounded to x's dtype, accumulated in f32 and rounded once
 * to out's dtype: the values of dropout then a product, without xd in memory. */
int tr_k_dropout_linear_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, const void *w, int w_dt, int64_t N,
                                 int64_t I, int64_t R, float p, uint64_t seed, uint32_t step, uint32_t layer,
                                 uint32_t op, uint64_t offset, void *stream, tr_error *err);

/* The f32 elements of scratch the backward needs for dw (0 when dw is not wanted). */
int64_t tr_k_dropout_linear_bwd_scratch_cuda(int64_t N, int64_t I, int64_t R);

/* dx (+=, may be NULL) += dropout_backward(dout w), the product rounded to dout's dtype and the
 * mask applied in it, as linear_backward then dropout_backward then add give; dw (+=, f32, may
 * be NULL) += dout^T xd, summed over fixed chunks of rows in scratch and then in chunk order
 * (deterministic). */
int tr_k_dropout_linear_bwd_cuda(void *dx, int dx_dt, float *dw, const void *dout, int dout_dt, const void *x,
                                 int x_dt, const void *w, int w_dt, int64_t N, int64_t I, int64_t R, float p,
                                 uint64_t seed, uint32_t step, uint32_t layer, uint32_t op, uint64_t offset,
                                 float *scratch, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
