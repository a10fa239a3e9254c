/* dropout_add_layernorm.h — the end of a post-LN transformer block in one pass per row:
 *   sum = residual + dropout(x)        (dropout(x) = keep ? x * scale : 0)
 *   out = layernorm(sum) = (sum - mean) * rstd * weight + bias
 * over rows of C, with the biased variance and rstd = 1 / sqrt(var + eps) (as
 * kernels/cpu/layernorm.h). The forward writes sum (the layernorm input, what the backward
 * reads), mean and rstd; the keep bytes come from the caller (regenerated from the keyed
 * RNG for the backward, never stored). keep NULL keeps every element with scale 1 (p = 0,
 * eval): sum = x + residual.
 * _f32 is the runtime (rows in parallel over OpenMP, each row vectorised under the
 * AVX-512/AVX2 clones, dropout as a bit select), _f64 the tests' reference. */
#ifndef TR_KERNELS_CPU_DROPOUT_ADD_LAYERNORM_H
#define TR_KERNELS_CPU_DROPOUT_ADD_LAYERNORM_H

#include <stdint.h>

/* out[N,C] (=), sum[N,C] (=), mean[N] (=), rstd[N] (=); bias may be NULL (no shift); keep
 * [N,C] (1 keep, 0 drop) or NULL. out must not alias sum; sum may alias x or residual. */
void tr_k_dropout_add_layernorm_fwd_f32(float *out, float *sum, float *mean, float *rstd, const float *x,
                                        const float *residual, const uint8_t *keep, float scale,
                                        const float *weight, const float *bias, int64_t N, int64_t C, float eps);
void tr_k_dropout_add_layernorm_fwd_f64(double *out, double *sum, double *mean, double *rstd, const double *x,
                                        const double *residual, const uint8_t *keep, double scale,
                                        const double *weight, const double *bias, int64_t N, int64_t C,
                                        double eps);

/* dresidual[N,C] (=) = the layernorm's input gradient (the residual's gradient), dx[N,C] (=)
 * = dropout_backward(dresidual) with the forward's keep and scale; either may be NULL.
 * dweight[C] and dbias[C] ACCUMULATE (+=) and may be NULL (frozen); they are summed over rows
 * in order by kernels/cpu/layernorm.c's column pass, so they are the unfused op's bits.
 * sum, mean and rstd are those the forward wrote. */
void tr_k_dropout_add_layernorm_bwd_f32(float *dx, float *dresidual, float *dweight, float *dbias,
                                        const float *dout, const float *sum, const float *weight,
                                        const float *mean, const float *rstd, const uint8_t *keep, float scale,
                                        int64_t N, int64_t C);
void tr_k_dropout_add_layernorm_bwd_f64(double *dx, double *dresidual, double *dweight, double *dbias,
                                        const double *dout, const double *sum, const double *weight,
                                        const double *mean, const double *rstd, const uint8_t *keep,
                                        double scale, int64_t N, int64_t C);

#endif
