/* similarity.c — the L2-normalisation and cosine-similarity kernels (similarity.h), written
 * once over REAL and instantiated here for float (the runtime) and double (the tests' finite-
 * difference reference). */
#ifndef KFN
#include "cpu/similarity.h"

#include <cblas.h>
#include <math.h>

#define KERNEL_IMPL "cpu/similarity.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body of the row L2-normalisation and cosine-similarity kernels
 * over REAL / KFN(name). Normalisation follows
 * torch.nn.functional.normalize: y = x / max(||x||, eps). */

/* ------------------------------------------------------------ l2 normalisation */

/* out[N, C] = rows of x divided by max(norm, eps) (=). out may alias x. */
void KFN(tr_k_l2norm_fwd)(REAL *out, const REAL *x, int64_t N, int64_t C, REAL eps)
{
#pragma omp parallel for if (N * C > 65536)
    for (int64_t n = 0; n < N; n++) {
        const REAL *xr = x + n * C;
        REAL ss = 0;
        for (int64_t c = 0; c < C; c++) ss += xr[c] * xr[c];
        REAL norm = KSQRT(ss);
        REAL inv = 1 / (norm > eps ? norm : eps);
        for (int64_t c = 0; c < C; c++) out[n * C + c] = xr[c] * inv;
    }
}

/* dx (=) from dout, recomputing the norms from x: dx = (dout - y (y . dout)) / ||x|| when
 * ||x|| > eps, else dout / eps. dx may alias dout but not x. */
void KFN(tr_k_l2norm_bwd)(REAL *dx, const REAL *dout, const REAL *x, int64_t N, int64_t C, REAL eps)
{
#pragma omp parallel for if (N * C > 65536)
    for (int64_t n = 0; n < N; n++) {
        const REAL *xr = x + n * C, *dr = dout + n * C;
        REAL ss = 0, xd = 0;
        for (int64_t c = 0; c < C; c++) {
            ss += xr[c] * xr[c];
            xd += xr[c] * dr[c];
        }
        REAL norm = KSQRT(ss);
        if (norm > eps) {
            REAL inv = 1 / norm, k = xd * inv * inv * inv;
            for (int64_t c = 0; c < C; c++) dx[n * C + c] = dr[c] * inv - xr[c] * k;
        } else {
            for (int64_t c = 0; c < C; c++) dx[n * C + c] = dr[c] / eps;
        }
    }
}

/* ------------------------------------------------------------ cosine-similarity matrix */

/* sim[N, M] = an bn^T (=), where an [N, C] and bn [M, C] are already normalised rows.
 * One GEMM (KGEMM: cblas_sgemm or cblas_dgemm). */
void KFN(tr_k_cosine_sim_fwd)(REAL *sim, const REAL *an, const REAL *bn, int64_t N, int64_t M, int64_t C)
{
    if (N == 0 || M == 0) return;
    if (C == 0) {
        for (int64_t i = 0; i < N * M; i++) sim[i] = 0;
        return;
    }
    KGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)M, (int)C, 1, an, (int)C, bn, (int)C, 0, sim, (int)M);
}

/* dan = dsim bn (=), dbn = dsim^T an (=); either may be NULL. These are the gradients with
 * respect to the normalised rows: pass them through l2norm_backward for da and db. */
void KFN(tr_k_cosine_sim_bwd)(REAL *dan, REAL *dbn, const REAL *dsim, const REAL *an, const REAL *bn,
                              int64_t N, int64_t M, int64_t C)
{
    if (C == 0) return;
    if (dan && N > 0) {
        if (M == 0) for (int64_t i = 0; i < N * C; i++) dan[i] = 0;
        else KGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)C, (int)M, 1, dsim, (int)M, bn, (int)C, 0,
                   dan, (int)C);
    }
    if (dbn && M > 0) {
        if (N == 0) for (int64_t i = 0; i < M * C; i++) dbn[i] = 0;
        else KGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)M, (int)C, (int)N, 1, dsim, (int)M, an, (int)C, 0,
                   dbn, (int)C);
    }
}

#endif
