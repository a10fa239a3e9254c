/* geglu.c — the GeGLU kernels (geglu.h), written once over REAL and instantiated here for
 * float (the runtime) and double (the tests' reference); the GELU itself is activation.c's
 * (vectorised for float), run on a row's x half and then multiplied by its gate half. */
#ifndef KFN
#include "cpu/geglu.h"
#include "cpu/activation.h"

#include <stdint.h>

/* Rows per block: a block is at most GG_BLOCK elements of out (one of activation.c's spans stays
 * under its parallel threshold, so a block runs on the thread that took it), at least one row. */
enum { GG_BLOCK = 16384 };

static int64_t gg_rows(int64_t I)
{
    return I > 0 && I < GG_BLOCK ? GG_BLOCK / I : 1;
}

#define KERNEL_IMPL "cpu/geglu.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* ------------------------------------------------------------ forward */

void KFN(tr_k_geglu_fwd)(REAL *out, const REAL *h, int64_t N, int64_t I, int approx)
{
    const int64_t rows = gg_rows(I), nblk = (N + rows - 1) / rows;
#pragma omp parallel for if (N * I > 65536) schedule(static)
    for (int64_t k = 0; k < nblk; k++) {
        const int64_t r0 = k * rows, r1 = N - r0 < rows ? N : r0 + rows;
        for (int64_t r = r0; r < r1; r++) {
            REAL *o = out + r * I;
            const REAL *x = h + r * 2 * I, *g = x + I;
            KFN(tr_k_gelu_fwd)(o, x, I, approx);
#pragma omp simd
            for (int64_t c = 0; c < I; c++) o[c] *= g[c];
        }
    }
}

/* ------------------------------------------------------------ backward */

void KFN(tr_k_geglu_bwd)(REAL *dh, const REAL *dout, const REAL *h, int64_t N, int64_t I, int approx)
{
    const int64_t rows = gg_rows(I), nblk = (N + rows - 1) / rows;
#pragma omp parallel for if (N * I > 65536) schedule(static)
    for (int64_t k = 0; k < nblk; k++) {
        const int64_t r0 = k * rows, r1 = N - r0 < rows ? N : r0 + rows;
        for (int64_t r = r0; r < r1; r++) {
            REAL *dx = dh + r * 2 * I, *dg = dx + I;
            const REAL *x = h + r * 2 * I, *g = x + I, *d = dout + r * I;
            KFN(tr_k_gelu_bwd)(dx, d, x, I, approx); /* dout * gelu'(x) */
            KFN(tr_k_gelu_fwd)(dg, x, I, approx);    /* gelu(x) */
#pragma omp simd
            for (int64_t c = 0; c < I; c++) {
                dx[c] *= g[c];
                dg[c] *= d[c];
            }
        }
    }
}

#endif
