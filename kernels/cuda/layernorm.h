/* layernorm.h — the layer norm kernels (layernorm.cu), the device twin of
 * kernels/cpu/layernorm.h; host launchers with C linkage and no CUDA types, under launcher.h's
 * contract. */
#ifndef TR_KERNELS_CUDA_LAYERNORM_H
#define TR_KERNELS_CUDA_LAYERNORM_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* out[N,C] (=), mean[N] (=), rstd[N] (=) over the last dim, biased variance; weight[C] and
 * bias[C] (may be NULL) have dtype w_dt. */
int tr_k_layernorm_fwd_cuda(void *out, int out_dt, float *mean, float *rstd, const void *x, int x_dt,
                            const void *weight, const void *bias, int w_dt, int64_t N, int64_t C, float eps,
                            void *stream, tr_error *err);
/* Scratch (f32 elements) the backward needs for N x C: per-chunk column partial sums. */
int64_t tr_k_layernorm_bwd_scratch_cuda(int64_t N, int64_t C);
/* dx[N,C] (=) may be NULL; dweight[C], dbias[C] (+=, f32) may be NULL. `scratch` holds
 * tr_k_layernorm_bwd_scratch_cuda(N, C) floats (may be NULL when both are NULL). */
int tr_k_layernorm_bwd_cuda(void *dx, int dx_dt, float *dweight, float *dbias, const void *dout, int dout_dt,
                            const void *x, int x_dt, const void *weight, int w_dt, const float *mean,
                            const float *rstd, int64_t N, int64_t C, float *scratch, void *stream,
                            tr_error *err);

TR_K_END_DECLS

#endif
