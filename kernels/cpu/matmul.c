/* matmul.c — instantiates matmul_impl.h for float (cblas_sgemm) and double (cblas_dgemm).
 * CBLAS returns nothing and reports bad arguments by printing through xerbla, so every
 * argument BLAS would check is checked first by BLAS_ARGS_CHECK, which names the
 * condition, file and line. */
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
#include "cpu/matmul_impl.h"
#undef REAL
#undef KFN
#undef GEMM
#undef GEMV

#define REAL double
#define KFN(n) n##_f64
#define GEMM cblas_dgemm
#define GEMV cblas_dgemv
#include "cpu/matmul_impl.h"
#undef REAL
#undef KFN
#undef GEMM
#undef GEMV
