/* elementwise.h — CPU elementwise kernels: add, mul (with a row vector broadcast over
 * rows), scale, axpy, fill. Each exists as _f32 (runtime) and _f64 (test reference).
 * a and out are [N, C]; b is [N, C] (b_rows == N) or a row vector [C] (b_rows == 1).
 * Gradient contract: mul_backward OVERWRITES da and db; axpy ACCUMULATES into y. */
#ifndef TR_KERNELS_CPU_ELEMENTWISE_H
#define TR_KERNELS_CPU_ELEMENTWISE_H

#include <stdint.h>

void add_forward_f32(float *out, const float *a, const float *b, int64_t N, int64_t C, int64_t b_rows);
void add_forward_f64(double *out, const double *a, const double *b, int64_t N, int64_t C, int64_t b_rows);
void mul_forward_f32(float *out, const float *a, const float *b, int64_t N, int64_t C, int64_t b_rows);
void mul_forward_f64(double *out, const double *a, const double *b, int64_t N, int64_t C, int64_t b_rows);
void mul_backward_f32(float *da, float *db, const float *dout, const float *a, const float *b,
                      int64_t N, int64_t C, int64_t b_rows);
void mul_backward_f64(double *da, double *db, const double *dout, const double *a, const double *b,
                      int64_t N, int64_t C, int64_t b_rows);
void scale_forward_f32(float *out, const float *x, float alpha, int64_t n);
void scale_forward_f64(double *out, const double *x, double alpha, int64_t n);
void axpy_f32(float *y, const float *x, float alpha, int64_t n);
void axpy_f64(double *y, const double *x, double alpha, int64_t n);
void fill_f32(float *out, float value, int64_t n);
void fill_f64(double *out, double value, int64_t n);

#endif
