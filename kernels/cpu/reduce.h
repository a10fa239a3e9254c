/* reduce.h — CPU reductions, _f32 and _f64: pairwise sums (whole buffer, last dim),
 * sum of squares (for global norms), and in-place scale with an inf/NaN check (the loss
 * scaler's unscale). No gradients. */
#ifndef TR_KERNELS_CPU_REDUCE_H
#define TR_KERNELS_CPU_REDUCE_H

#include <stdint.h>

float tr_k_sum_all_fwd_f32(const float *x, int64_t n);
double tr_k_sum_all_fwd_f64(const double *x, int64_t n);
float tr_k_sumsq_all_fwd_f32(const float *x, int64_t n);
double tr_k_sumsq_all_fwd_f64(const double *x, int64_t n);
void tr_k_sum_lastdim_fwd_f32(float *out, const float *x, int64_t N, int64_t C);
void tr_k_sum_lastdim_fwd_f64(double *out, const double *x, int64_t N, int64_t C);
int tr_k_scale_check_finite_fwd_f32(float *x, int64_t n, float scale);
int tr_k_scale_check_finite_fwd_f64(double *x, int64_t n, double scale);

#endif
