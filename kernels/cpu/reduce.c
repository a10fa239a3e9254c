/* reduce.c — the reduction kernels (reduce.h), written once over REAL and instantiated here for
 * float (the runtime) and double (the tests' finite-difference reference). */
#ifndef KFN
#include "cpu/reduce.h"

#include <math.h>

#define KERNEL_IMPL "cpu/reduce.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body of the reduction kernels over REAL / KFN(name).
 * Sums are pairwise (error grows like log n, not n), with a fixed split so that results
 * do not depend on the number of threads. */

/* ------------------------------------------------------------ pairwise sums */

/* Below 128 elements: 8 interleaved partial sums (the compiler vectorises them); above,
 * halve and recurse. */
static REAL KFN(pairwise_sum)(const REAL *x, int64_t n)
{
    if (n <= 128) {
        REAL acc[8] = { 0 }, s = 0;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++) acc[j] += x[i + j];
        for (; i < n; i++) s += x[i];
        return s + ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    int64_t h = n / 2;
    return KFN(pairwise_sum)(x, h) + KFN(pairwise_sum)(x + h, n - h);
}

static REAL KFN(pairwise_sumsq)(const REAL *x, int64_t n)
{
    if (n <= 128) {
        REAL acc[8] = { 0 }, s = 0;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++) acc[j] += x[i + j] * x[i + j];
        for (; i < n; i++) s += x[i] * x[i];
        return s + ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    int64_t h = n / 2;
    return KFN(pairwise_sumsq)(x, h) + KFN(pairwise_sumsq)(x + h, n - h);
}

/* Sum of the n elements of x. */
REAL KFN(tr_k_sum_all_fwd)(const REAL *x, int64_t n) { return KFN(pairwise_sum)(x, n); }

/* Sum of squares of the n elements of x. */
REAL KFN(tr_k_sumsq_all_fwd)(const REAL *x, int64_t n) { return KFN(pairwise_sumsq)(x, n); }

/* out[n] = sum over the last dim of x [N, C] (=). */
void KFN(tr_k_sum_lastdim_fwd)(REAL *out, const REAL *x, int64_t N, int64_t C)
{
#pragma omp parallel for if (N * C > 65536)
    for (int64_t n = 0; n < N; n++) out[n] = KFN(pairwise_sum)(x + n * C, C);
}

/* ------------------------------------------------------------ scale and check */

/* x *= scale in place; returns 1 when any element of the result is inf or NaN, else 0. */
int KFN(tr_k_scale_check_finite_fwd)(REAL *x, int64_t n, REAL scale)
{
    int bad = 0;
#pragma omp parallel for reduction(| : bad) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        x[i] *= scale;
        bad |= !isfinite(x[i]);
    }
    return bad;
}

#endif
