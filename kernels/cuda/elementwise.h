/* elementwise.h — the elementwise kernels and casts (elementwise.cu), the device twin of
 * kernels/cpu/elementwise.h; host launchers with C linkage and no CUDA types, under
 * launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_ELEMENTWISE_H
#define TR_KERNELS_CUDA_ELEMENTWISE_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* Every output below is OVERWRITTEN (=), except axpy's y, which ACCUMULATES (+=). */

/* out = a + b (all of dtype) */
int tr_k_add_fwd_cuda(void *out, const void *a, const void *b, int dtype, int64_t n, void *stream,
                tr_error *err);
/* out = a * b */
int tr_k_mul_fwd_cuda(void *out, const void *a, const void *b, int dtype, int64_t n, void *stream,
                tr_error *err);
/* out = alpha * x */
int tr_k_scale_fwd_cuda(void *out, const void *x, float alpha, int dtype, int64_t n, void *stream,
                  tr_error *err);
/* y += alpha * x (y ACCUMULATES; computed as round(y + round(alpha * x)), no FMA) */
int tr_k_axpy_fwd_cuda(void *y, const void *x, float alpha, int dtype, int64_t n, void *stream,
                 tr_error *err);
/* out[i] = value rounded to dtype */
int tr_k_fill_fwd_cuda(void *out, float value, int dtype, int64_t n, void *stream, tr_error *err);
/* out = in converted from in_dtype to out_dtype (any pair of f32, bf16, f16; the same
 * dtype is a copy). One rounding, RNE; NaN stays NaN, overflow gives inf. */
int tr_k_cast_fwd_cuda(void *out, int out_dtype, const void *in, int in_dtype, int64_t n, void *stream,
                 tr_error *err);

TR_K_END_DECLS

#endif
