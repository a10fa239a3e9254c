/* pooling.h — CPU masked pooling [B, T, C] -> [B, C], _f32 and _f64; modes (the int
 * `mode`, equal to tr_pool_mode in core/ops/ops_pooling.h): 0 mean, 1 cls, 2 max,
 * 3 mean_sqrt_len. mask [B, T] int32, non-zero = real token.
 * Gradient contract: pool_backward OVERWRITES dhidden (padding positions get 0). */
#ifndef TR_KERNELS_CPU_POOLING_H
#define TR_KERNELS_CPU_POOLING_H

#include <stdint.h>

void tr_k_pool_fwd_f32(float *out, const float *hidden, const int32_t *mask, int64_t B, int64_t T, int64_t C,
                      int mode);
void tr_k_pool_fwd_f64(double *out, const double *hidden, const int32_t *mask, int64_t B, int64_t T,
                      int64_t C, int mode);
void tr_k_pool_bwd_f32(float *dhidden, const float *dout, const float *hidden, const int32_t *mask, int64_t B,
                       int64_t T, int64_t C, int mode);
void tr_k_pool_bwd_f64(double *dhidden, const double *dout, const double *hidden, const int32_t *mask,
                       int64_t B, int64_t T, int64_t C, int mode);

#endif
