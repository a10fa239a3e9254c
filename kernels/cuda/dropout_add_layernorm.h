/* dropout_add_layernorm.h — the fused dropout + residual add + layer norm kernels
 * (dropout_add_layernorm.cu), the device twin of kernels/cpu/dropout_add_layernorm.h; host
 * launchers with C linkage and no CUDA types, under launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_DROPOUT_ADD_LAYERNORM_H
#define TR_KERNELS_CUDA_DROPOUT_ADD_LAYERNORM_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* sum[N,C] (=) = residual + dropout(x) (the dropped-out x rounded to x_dt, the sum to sum_dt,
 * as the unfused ops round them), out[N,C] (=) = layernorm(sum), mean[N], rstd[N] (=) f32
 * (both may be NULL; sum may be out itself, the row then normalised in place);
 * the keep bits are tr_dropout_mask_bits's for the key (seed, step, layer, op) and stream
 * element offset + i (p = 0 keeps all and draws nothing); bias may be NULL. */
int tr_k_dropout_add_layernorm_fwd_cuda(void *out, int out_dt, void *sum, int sum_dt, float *mean, float *rstd,
                                        const void *x, int x_dt, const void *residual, int res_dt,
                                        const void *weight, const void *bias, int w_dt, int64_t N, int64_t C,
                                        float p, float eps, uint64_t seed, uint32_t step, uint32_t layer,
                                        uint32_t op, uint64_t offset, void *stream, tr_error *err);
/* dresidual[N,C] (=, dres_dt) = the layernorm's input gradient, dx[N,C] (=) = dropout_backward
 * of it with the forward's key; either may be NULL (dres_dt still names the dtype the
 * residual gradient is rounded to). dweight, dbias (+=, f32) may be NULL; `scratch` holds
 * tr_k_layernorm_bwd_scratch_cuda(N, C) floats when either is not. */
int tr_k_dropout_add_layernorm_bwd_cuda(void *dx, int dx_dt, void *dresidual, int dres_dt, float *dweight,
                                        float *dbias, const void *dout, int dout_dt, const void *sum, int sum_dt,
                                        const void *weight, int w_dt, const float *mean, const float *rstd,
                                        int64_t N, int64_t C, float p, uint64_t seed, uint32_t step, uint32_t layer,
                                        uint32_t op, uint64_t offset, float *scratch, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
