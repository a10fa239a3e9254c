/* matmul.c — the matmul kernels (matmul.h), written once over REAL and instantiated here for
 * float (cblas_sgemm) and double (cblas_dgemm). CBLAS returns nothing and reports bad arguments
 * by printing through xerbla, so every argument BLAS would check is checked first by
 * BLAS_ARGS_CHECK, which names the condition, file and line. */
#ifndef KFN
#include "cpu/matmul.h"

#include <cblas.h>
#include <string.h>

enum { BIAS_ROWS = 1024 };   /* rows per GEMV of the bias gradient (its ones vector is on the stack) */

#define BLAS_ARGS_CHECK(err, cond)                                                           \
    do {                                                                                     \
        if (!(cond))                                                                         \
            return tr_fail((err), TR_EINTERNAL,                                              \
                           "%s:%d: a BLAS call was given arguments it would reject (%s); "   \
                           "this is a bug in the caller of the kernel",                      \
                           __FILE__, __LINE__, #cond);                                       \
    } while (0)

#define REAL float
#define KFN(n) n##_f32
#define GEMM cblas_sgemm
#define GEMV cblas_sgemv
#include "cpu/matmul.c"
#undef REAL
#undef KFN
#undef GEMM
#undef GEMV

#define REAL double
#define KFN(n) n##_f64
#define GEMM cblas_dgemm
#define GEMV cblas_dgemv
#include "cpu/matmul.c"
#undef REAL
#undef KFN
#undef GEMM
#undef GEMV

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body, for float and double. Expects REAL, KFN(name) and GEMM (cblas_sgemm or
 * cblas_dgemm). */

/* ------------------------------------------------------------ gemm */

int KFN(tr_k_matmul_fwd)(REAL *C, const REAL *A, const REAL *B, const REAL *bias, int batch, int M,
                   int N, int K, int transA, int transB, REAL alpha, REAL beta, int64_t strideA,
                   int64_t strideB, int64_t strideC, tr_error *err)
{
    BLAS_ARGS_CHECK(err, batch >= 0 && M >= 0 && N >= 0 && K >= 0);
    BLAS_ARGS_CHECK(err, strideA >= 0 && strideB >= 0 && strideC >= 0);
    BLAS_ARGS_CHECK(err, C != NULL && (K == 0 || (A != NULL && B != NULL)));
    if (batch == 0 || M == 0 || N == 0) return TR_OK;
    int lda = transA ? M : K, ldb = transB ? K : N, ldc = N;
    for (int b = 0; b < batch; b++) {
        REAL *Cb = C + (int64_t)b * strideC;
        REAL beta_b = beta;
        if (bias || K == 0) {
            /* C = beta*C + bias first, so that the GEMM below only accumulates; beta == 0
             * must not read C (it may be uninitialised). */
#pragma omp parallel for if ((int64_t)M * N > 65536)
            for (int i = 0; i < M; i++) {
                REAL *row = Cb + (int64_t)i * ldc;
                /* the cases apart, as copies and simd loops (a select inside one loop kept
                 * it scalar: 2.6 % of an fp32 step); bias never overlaps C */
                if (beta == 0 && bias)
                    memcpy(row, bias, (size_t)N * sizeof(REAL));
                else if (beta == 0)
                    memset(row, 0, (size_t)N * sizeof(REAL));
                else if (bias) {
#pragma omp simd
                    for (int j = 0; j < N; j++) row[j] = beta * row[j] + bias[j];
                } else {
#pragma omp simd
                    for (int j = 0; j < N; j++) row[j] = beta * row[j];
                }
            }
            beta_b = 1;
        }
        if (K == 0) continue;    /* an empty product: BLAS rejects ld = 0 */
        BLAS_ARGS_CHECK(err, lda >= 1 && ldb >= 1 && ldc >= 1);
        GEMM(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
             M, N, K, alpha, A + (int64_t)b * strideA, lda, B + (int64_t)b * strideB, ldb, beta_b,
             Cb, ldc);
    }
    return TR_OK;
}

/* ------------------------------------------------------------ bias gradient */

void KFN(tr_k_bias_bwd)(REAL *dbias, const REAL *dout, int64_t N, int64_t O)
{
    /* dbias += dout^T 1: a BLAS GEMV (vectorised and threaded by the library, one pass over
     * dout) on blocks of at most BIAS_ROWS rows against a vector of ones; deterministic for
     * a given thread count, as the GEMMs are. The hand-written column sum it replaces was
     * 2-4 % of an fp32 training step. A row longer than the BLAS's int takes the plain loop. */
    if (N <= 0 || O <= 0) return;
    if (O <= INT32_MAX) {
        REAL ones[BIAS_ROWS];
        for (int i = 0; i < BIAS_ROWS; i++) ones[i] = 1;
        for (int64_t r0 = 0; r0 < N; r0 += BIAS_ROWS) {
            int rows = (int)(N - r0 < BIAS_ROWS ? N - r0 : BIAS_ROWS);
            GEMV(CblasRowMajor, CblasTrans, rows, (int)O, 1, dout + r0 * O, (int)O, ones, 1, 1, dbias, 1);
        }
        return;
    }
    for (int64_t n = 0; n < N; n++) {
        const REAL *row = dout + n * O;
        for (int64_t o = 0; o < O; o++) dbias[o] += row[o];
    }
}

#endif
