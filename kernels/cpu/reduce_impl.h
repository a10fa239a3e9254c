/* reduce_impl.h — body of the reduction kernels over REAL / KFN(name) (see reduce.c).
 * Sums are pairwise (error grows like log n, not n), with a fixed split so that results
 * do not depend on the number of threads. */

/* ------------------------------------------------------------ pairwise sums */

static REAL KFN(pairwise_sum)(const REAL *x, int64_t n)
{
    if (n <= 16) {
        REAL s = 0;
        for (int64_t i = 0; i < n; i++) s += x[i];
        return s;
    }
    int64_t h = n / 2;
    return KFN(pairwise_sum)(x, h) + KFN(pairwise_sum)(x + h, n - h);
}

static REAL KFN(pairwise_sumsq)(const REAL *x, int64_t n)
{
    if (n <= 16) {
        REAL s = 0;
        for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
        return s;
    }
    int64_t h = n / 2;
    return KFN(pairwise_sumsq)(x, h) + KFN(pairwise_sumsq)(x + h, n - h);
}

/* Sum of the n elements of x. */
REAL KFN(sum_all)(const REAL *x, int64_t n) { return KFN(pairwise_sum)(x, n); }

/* Sum of squares of the n elements of x. */
REAL KFN(sumsq_all)(const REAL *x, int64_t n) { return KFN(pairwise_sumsq)(x, n); }

/* out[n] = sum over the last dim of x [N, C] (=). */
void KFN(sum_lastdim)(REAL *out, const REAL *x, int64_t N, int64_t C)
{
#pragma omp parallel for if (N * C > 65536)
    for (int64_t n = 0; n < N; n++) out[n] = KFN(pairwise_sum)(x + n * C, C);
}

/* ------------------------------------------------------------ scale and check */

/* x *= scale in place; returns 1 when any element of the result is inf or NaN, else 0. */
int KFN(scale_check_finite)(REAL *x, int64_t n, REAL scale)
{
    int bad = 0;
#pragma omp parallel for reduction(| : bad) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        x[i] *= scale;
        bad |= !isfinite(x[i]);
    }
    return bad;
}
