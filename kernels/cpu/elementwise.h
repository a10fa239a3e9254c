/* elementwise.h — CPU elementwise kernels: add, mul (with a row vector broadcast over
 * rows), scale, axpy, fill. Each exists as _f32 (runtime) and _f64 (test reference).
 * a and out are [N, C]; b is [N, C] (b_rows == N) or a row vector [C] (b_rows == 1).
 * Gradient contract: mul_backward OVERWRITES da and db; axpy ACCUMULATES into y. */
#ifndef TR_KERNELS_CPU_ELEMENTWISE_H
#define TR_KERNELS_CPU_ELEMENTWISE_H

#include <stdint.h>

void tr_k_add_fwd_f32(float *out, const float *a, const float *b, int64_t N, int64_t C, int64_t b_rows);
void tr_k_add_fwd_f64(double *out, const double *a, const double *b, int64_t N, int64_t C, int64_t b_rows);
void tr_k_mul_fwd_f32(float *out, const float *a, const float *b, int64_t N, int64_t C, int64_t b_rows);
void tr_k_mul_fwd_f64(double *out, const double *a, const double *b, int64_t N, int64_t C, int64_t b_rows);
void tr_k_mul_bwd_f32(float *da, float *db, const float *dout, const float *a, const float *b,
                      int64_t N, int64_t C, int64_t b_rows);
void tr_k_mul_bwd_f64(double *da, double *db, const double *dout, const double *a, const double *b,
                      int64_t N, int64_t C, int64_t b_rows);
void tr_k_scale_fwd_f32(float *out, const float *x, float alpha, int64_t n);
void tr_k_scale_fwd_f64(double *out, const double *x, double alpha, int64_t n);
void tr_k_axpy_fwd_f32(float *y, const float *x, float alpha, int64_t n);
void tr_k_axpy_fwd_f64(double *y, const double *x, double alpha, int64_t n);
void tr_k_fill_fwd_f32(float *out, float value, int64_t n);
void tr_k_fill_fwd_f64(double *out, double value, int64_t n);

#endif
