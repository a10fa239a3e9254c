/* pair_features.c — the feature-matrix kernels (pair_features.h), written once over REAL and
 * instantiated here for float (the runtime) and double (the tests' reference). */
#ifndef KFN
#include "cpu/pair_features.h"

#include <string.h>

#define KERNEL_IMPL "cpu/pair_features.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body of the feature-matrix kernels, written once over the scalar
 * type: the instantiation defines REAL (float or double) and KFN(name) (the suffixed
 * function name) and includes this file once per type. */

/* ------------------------------------------------------------ column blocks */

/* dst[r, dst_col + j] = src[r, src_col + j] (accumulate == 0) or += (accumulate != 0) for
 * r < N, j < ncols. dst rows hold dst_C elements, src rows src_C; the caller has checked
 * that both blocks lie inside their rows. dst and src must not overlap. */
void KFN(tr_k_copy_cols_fwd)(REAL *dst, const REAL *src, int64_t N, int64_t dst_C, int64_t dst_col, int64_t src_C,
                    int64_t src_col, int64_t ncols, int accumulate)
{
#pragma omp parallel for if (N * ncols > 65536)
    for (int64_t r = 0; r < N; r++) {
        REAL *d = dst + r * dst_C + dst_col;
        const REAL *s = src + r * src_C + src_col;
        /* memcpy and omp simd: the plain loops compiled to one scalar move per element (the
         * compiler cannot rule out overlap; the contract above does) */
        if (accumulate) {
#pragma omp simd
            for (int64_t j = 0; j < ncols; j++) d[j] += s[j];
        } else {
            memcpy(d, s, (size_t)ncols * sizeof *d);
        }
    }
}

/* ------------------------------------------------------------ |a - b| */

/* out = |a - b| (=). out may alias a or b. */
void KFN(tr_k_abs_diff_fwd)(REAL *out, const REAL *a, const REAL *b, int64_t n)
{
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        REAL d = a[i] - b[i];
        out[i] = d < 0 ? -d : d;
    }
}

/* da = dout * sign(a - b) (=), db = -da (=), with sign(0) = 0 as torch.abs's backward.
 * Either gradient may be NULL. */
void KFN(tr_k_abs_diff_bwd)(REAL *da, REAL *db, const REAL *dout, const REAL *a, const REAL *b, int64_t n)
{
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        REAL d = a[i] - b[i];
        REAL g = d > 0 ? dout[i] : d < 0 ? -dout[i] : 0;
        if (da) da[i] = g;
        if (db) db[i] = -g;
    }
}

#endif
