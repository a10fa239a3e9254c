/* softmax.c — the softmax kernels (softmax.h), written once over REAL and instantiated here for
 * float and double. */
#ifndef KFN
#include "cpu/softmax.h"

#include <tgmath.h>

#define KERNEL_IMPL "cpu/softmax.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body over REAL, instantiated for float and double. */

/* ------------------------------------------------------------ forward */

void KFN(tr_k_softmax_fwd)(REAL *out, const REAL *x, int64_t N, int64_t C)
{
#pragma omp parallel for if (N * C > 16384)
    for (int64_t n = 0; n < N; n++) {
        const REAL *xr = x + n * C;
        REAL *o = out + n * C;
        REAL mx = -INFINITY;
        for (int64_t c = 0; c < C; c++) mx = xr[c] > mx ? xr[c] : mx;
        if (mx == -INFINITY) {    /* every logit -inf (fully masked): define the row as 0 */
            for (int64_t c = 0; c < C; c++) o[c] = 0;
            continue;
        }
        REAL sum = 0;
        for (int64_t c = 0; c < C; c++) {
            o[c] = exp(xr[c] - mx);
            sum += o[c];
        }
        REAL inv = 1 / sum;
        for (int64_t c = 0; c < C; c++) o[c] *= inv;
    }
}

/* ------------------------------------------------------------ backward */

void KFN(tr_k_softmax_bwd)(REAL *dx, const REAL *dout, const REAL *y, int64_t N, int64_t C)
{
#pragma omp parallel for if (N * C > 16384)
    for (int64_t n = 0; n < N; n++) {
        const REAL *dr = dout + n * C, *yr = y + n * C;
        REAL dot = 0;
        for (int64_t c = 0; c < C; c++) dot += dr[c] * yr[c];
        REAL *o = dx + n * C;
        for (int64_t c = 0; c < C; c++) o[c] = yr[c] * (dr[c] - dot);
    }
}

#endif
