/* matmul.h — dense matrix products on the CPU through OpenBLAS (cblas_sgemm / cblas_dgemm),
 * plus the bias-gradient column sum that Linear's backward needs.
 *
 * Every matrix is row-major and contiguous in its rows: op(A) is M x K, op(B) is K x N, C is
 * M x N, with leading dimensions K or M (A), N or K (B) and N (C) as implied by the
 * transposes. Batches are given by element strides (stride 0 broadcasts one matrix over
 * the batch). Each function exists as _f32 (the runtime) and _f64 (tests, references). */
#ifndef TR_KERNELS_CPU_MATMUL_H
#define TR_KERNELS_CPU_MATMUL_H

#include <stdint.h>
#include "tr_base.h"

/* For b < batch: C_b = alpha * op(A_b) op(B_b) + beta * C_b + bias (bias[N] added to every
 * row; NULL = none). beta == 0 never reads C, so C may hold garbage (NaN) then.
 * C OVERWRITES (accumulates when beta == 1). Arguments are checked before BLAS sees them
 * (BLAS would report through xerbla and print): TR_EINTERNAL with file and line in err. */
int tr_k_matmul_fwd_f32(float *C, const float *A, const float *B, const float *bias, int batch, int M,
                  int N, int K, int transA, int transB, float alpha, float beta, int64_t strideA,
                  int64_t strideB, int64_t strideC, tr_error *err);
int tr_k_matmul_fwd_f64(double *C, const double *A, const double *B, const double *bias, int batch,
                  int M, int N, int K, int transA, int transB, double alpha, double beta,
                  int64_t strideA, int64_t strideB, int64_t strideC, tr_error *err);

/* dbias[O] += sum over rows n < N of dout[n, O]. dbias ACCUMULATES. */
void tr_k_bias_bwd_f32(float *dbias, const float *dout, int64_t N, int64_t O);
void tr_k_bias_bwd_f64(double *dbias, const double *dout, int64_t N, int64_t O);

#endif
