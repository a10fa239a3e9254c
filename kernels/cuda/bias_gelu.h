/* bias_gelu.h — the fused bias + GELU kernels (bias_gelu.cu), the device twin of
 * kernels/cpu/bias_gelu.h; host launchers with C linkage and no CUDA types, under launcher.h's
 * contract. */
#ifndef TR_KERNELS_CUDA_BIAS_GELU_H
#define TR_KERNELS_CUDA_BIAS_GELU_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* h[N,I] (in place) = h + bias[I] (bias may be NULL), out[N,I] (=) = gelu of that fp32 value;
 * approx 0 = erf, 1 = tanh. */
int tr_k_bias_gelu_fwd_cuda(void *out, int out_dt, void *h, int h_dt, const void *bias, int b_dt, int64_t N, int64_t I,
                            int approx, void *stream, tr_error *err);
/* dx[N,I] (=) = dout * gelu'(h); dbias[I] (+=, f32, may be NULL) += the column sums of dx. */
int tr_k_bias_gelu_bwd_cuda(void *dx, int dx_dt, float *dbias, const void *dout, int dout_dt, const void *h, int h_dt,
                            int64_t N, int64_t I, int approx, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
