/* dropout_add_layernorm.c — the dropout_add_layernorm kernels (dropout_add_layernorm.h),
 * written once over REAL and instantiated here for float (the runtime) and double (the tests'
 * reference). <tgmath.h> makes sqrt sqrtf in the float instance. */
#ifndef KFN
#include "cpu/dropout_add_layernorm.h"
#include "cpu/layernorm.h"
#include "cpu/fast_math.h"

#include <stdint.h>
#include <string.h>
#include <tgmath.h>

/* The unsigned integer as wide as each REAL, for the dropout bit select. */
typedef uint32_t dal_bits_f32;
typedef uint64_t dal_bits_f64;

#define KERNEL_IMPL "cpu/dropout_add_layernorm.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body over REAL / KFN(name).
 *
 * One row per call of the row functions, under `omp simd` in the AVX-512 / AVX2 clones:
 * the reductions are simd reductions (so the f32 mean and rstd differ from the scalar
 * layernorm kernel's in the last bits, never by more than a few ulps), the dropout is a bit
 * select (the value's bits AND all ones or zero: a branch or a float ?: keeps GCC -O2's loop
 * scalar). A dropped element is +0 even where x is not finite, as in dropout.c. Rows
 * never depend on each other or on the thread that runs them: the same inputs give the same
 * bits on any number of threads. */

/* v when keep is 1, +0 when it is 0. */
static inline REAL KFN(dal_select)(REAL v, uint8_t keep)
{
    KFN(dal_bits) b;
    memcpy(&b, &v, sizeof b);
    b &= (KFN(dal_bits))0 - (KFN(dal_bits))keep;
    memcpy(&v, &b, sizeof b);
    return v;
}

/* ------------------------------------------------------------ forward */

TR_SIMD_CLONES static void KFN(dal_row_fwd)(REAL *out, REAL *sum, REAL *mean, REAL *rstd, const REAL *x,
                                            const REAL *res, const uint8_t *keep, REAL scale, const REAL *w,
                                            const REAL *b, int64_t C, REAL eps)
{
    if (keep) {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) sum[c] = KFN(dal_select)(x[c] * scale, keep[c]) + res[c];
    } else {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) sum[c] = x[c] + res[c];
    }
    /* one reduction over the row's sums whatever made them, so that the row's output remade
     * from its kept sum (x = sum, residual 0, no dropout: nn/dropout_add_norm.lua's remake)
     * has the forward's mean, rstd and bits */
    REAL m = 0;
#pragma omp simd reduction(+ : m)
    for (int64_t c = 0; c < C; c++) m += sum[c];
    m /= (REAL)C;
    /* two passes (mean, then centred squares), as layernorm: no cancellation for large means.
     * The normalisation repeats layernorm_row's, with the sums in SIMD lanes where that one
     * keeps them scalar (its comment: test_keep_less's golden); sharing one would move the
     * bits of the other. */
    REAL v = 0;
#pragma omp simd reduction(+ : v)
    for (int64_t c = 0; c < C; c++) {
        REAL d = sum[c] - m;
        v += d * d;
    }
    v /= (REAL)C;
    REAL s = 1 / sqrt(v + eps);
    if (b) {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) out[c] = (sum[c] - m) * s * w[c] + b[c];
    } else {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) out[c] = (sum[c] - m) * s * w[c];
    }
    *mean = m;
    *rstd = s;
}

void KFN(tr_k_dropout_add_layernorm_fwd)(REAL *out, REAL *sum, REAL *mean, REAL *rstd, const REAL *x,
                                         const REAL *residual, const uint8_t *keep, REAL scale, const REAL *weight,
                                         const REAL *bias, int64_t N, int64_t C, REAL eps)
{
#pragma omp parallel for if (N * C > 16384)
    for (int64_t n = 0; n < N; n++)
        KFN(dal_row_fwd)(out + n * C, sum + n * C, mean + n, rstd + n, x + n * C, residual + n * C,
                         keep ? keep + n * C : NULL, scale, weight, bias, C, eps);
}

/* ------------------------------------------------------------ backward */

/* d = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * weight, into dres (or dx when
 * dres is NULL); then dx = dropout_backward(d). */
TR_SIMD_CLONES static void KFN(dal_row_bwd)(REAL *dx, REAL *dres, const REAL *dout, const REAL *sum, const REAL *w,
                                            REAL m, REAL s, const uint8_t *keep, REAL scale, int64_t C)
{
    /* g is stored (rounded) and read back: recomputed, dout * w - gsum would contract into
     * one FMA whose exact product leaves the rounding error of g where the row's g are all
     * equal (one column), instead of 0 */
    REAL *d = dres ? dres : dx;
    REAL gsum = 0, gxsum = 0;
#pragma omp simd reduction(+ : gsum, gxsum)
    for (int64_t c = 0; c < C; c++) {
        REAL g = dout[c] * w[c];
        d[c] = g;
        gsum += g;
        gxsum += g * (sum[c] - m) * s;
    }
    gsum /= (REAL)C;
    gxsum /= (REAL)C;
#pragma omp simd
    for (int64_t c = 0; c < C; c++) {
        REAL xhat = (sum[c] - m) * s;
        d[c] = s * (d[c] - gsum - xhat * gxsum);
    }
    if (!dx) return;
    if (keep) {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) dx[c] = KFN(dal_select)(d[c] * scale, keep[c]);
    } else if (dx != d) {
        memcpy(dx, d, sizeof(REAL) * (size_t)C);
    }
}

void KFN(tr_k_dropout_add_layernorm_bwd)(REAL *dx, REAL *dresidual, REAL *dweight, REAL *dbias, const REAL *dout,
                                         const REAL *sum, const REAL *weight, const REAL *mean, const REAL *rstd,
                                         const uint8_t *keep, REAL scale, int64_t N, int64_t C)
{
    if (dx || dresidual) {
#pragma omp parallel for if (N * C > 16384)
        for (int64_t n = 0; n < N; n++)
            KFN(dal_row_bwd)(dx ? dx + n * C : NULL, dresidual ? dresidual + n * C : NULL, dout + n * C, sum + n * C,
                             weight, mean[n], rstd[n], keep ? keep + n * C : NULL, scale, C);
    }
    /* the parameter gradients: layernorm's deterministic column pass over (dout, sum) */
    if (dweight || dbias) KFN(tr_k_layernorm_bwd)(NULL, dweight, dbias, dout, sum, weight, mean, rstd, N, C);
}

#endif
