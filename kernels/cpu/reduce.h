/* reduce.h — CPU reductions, _f32 and _f64: pairwise sums (whole buffer, last dim),
 * sum of squares (for global norms), and in-place scale with an inf/NaN check (the loss
 * scaler's unscale). No gradients. */
#ifndef TR_KERNELS_CPU_REDUCE_H
#define TR_KERNELS_CPU_REDUCE_H

#include <stdint.h>

float sum_all_f32(const float *x, int64_t n);
double sum_all_f64(const double *x, int64_t n);
float sumsq_all_f32(const float *x, int64_t n);
double sumsq_all_f64(const double *x, int64_t n);
void sum_lastdim_f32(float *out, const float *x, int64_t N, int64_t C);
void sum_lastdim_f64(double *out, const double *x, int64_t N, int64_t C);
int scale_check_finite_f32(float *x, int64_t n, float scale);
int scale_check_finite_f64(double *x, int64_t n, double scale);

#endif
