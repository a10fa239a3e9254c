/* elementwise_impl.h — the body of the elementwise kernels, written once over the scalar
 * type: the including file defines REAL (float or double) and KFN(name) (the suffixed
 * function name) and includes this file once per type. No include guard on purpose.
 *
 * Shapes: a and out are [N, C]; b is [N, C] when b_rows == N, or a row vector [C]
 * broadcast over the N rows when b_rows == 1. */

/* ------------------------------------------------------------ add, mul */

/* out = a + b (=). out may alias a or b. */
void KFN(tr_k_add_fwd)(REAL *out, const REAL *a, const REAL *b, int64_t N, int64_t C, int64_t b_rows)
{
    int64_t n = N * C;
    if (b_rows == N) {
#pragma omp parallel for if (n > 65536)
        for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
        return;
    }
#pragma omp parallel for if (n > 65536)
    for (int64_t r = 0; r < N; r++)
        for (int64_t c = 0; c < C; c++) out[r * C + c] = a[r * C + c] + b[c];
}

/* out = a * b (=). out may alias a or b. */
void KFN(tr_k_mul_fwd)(REAL *out, const REAL *a, const REAL *b, int64_t N, int64_t C, int64_t b_rows)
{
    int64_t n = N * C;
    if (b_rows == N) {
#pragma omp parallel for if (n > 65536)
        for (int64_t i = 0; i < n; i++) out[i] = a[i] * b[i];
        return;
    }
#pragma omp parallel for if (n > 65536)
    for (int64_t r = 0; r < N; r++)
        for (int64_t c = 0; c < C; c++) out[r * C + c] = a[r * C + c] * b[c];
}

/* da = dout * b (=), db = dout * a (=), summed over rows when b is broadcast.
 * Either gradient may be NULL (not wanted). Neither may alias dout, a or b. */
void KFN(tr_k_mul_bwd)(REAL *da, REAL *db, const REAL *dout, const REAL *a, const REAL *b,
                       int64_t N, int64_t C, int64_t b_rows)
{
    int64_t n = N * C;
    if (da) {
        if (b_rows == N) {
#pragma omp parallel for if (n > 65536)
            for (int64_t i = 0; i < n; i++) da[i] = dout[i] * b[i];
        } else {
#pragma omp parallel for if (n > 65536)
            for (int64_t r = 0; r < N; r++)
                for (int64_t c = 0; c < C; c++) da[r * C + c] = dout[r * C + c] * b[c];
        }
    }
    if (!db) return;
    if (b_rows == N) {
#pragma omp parallel for if (n > 65536)
        for (int64_t i = 0; i < n; i++) db[i] = dout[i] * a[i];
        return;
    }
    /* one thread per column: the row order of the sum is fixed, so results are deterministic */
#pragma omp parallel for if (n > 65536)
    for (int64_t c = 0; c < C; c++) {
        REAL s = 0;
        for (int64_t r = 0; r < N; r++) s += dout[r * C + c] * a[r * C + c];
        db[c] = s;
    }
}

/* ------------------------------------------------------------ scale, axpy, fill */

/* out = alpha * x (=). out may alias x. */
void KFN(tr_k_scale_fwd)(REAL *out, const REAL *x, REAL alpha, int64_t n)
{
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; i++) out[i] = alpha * x[i];
}

/* y += alpha * x (ACCUMULATES into y). */
void KFN(tr_k_axpy_fwd)(REAL *y, const REAL *x, REAL alpha, int64_t n)
{
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

/* out = value (=). */
void KFN(tr_k_fill_fwd)(REAL *out, REAL value, int64_t n)
{
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; i++) out[i] = value;
}
