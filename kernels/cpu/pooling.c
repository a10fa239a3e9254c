/* pooling.c — the masked pooling kernels (pooling.h), written once over REAL and instantiated
 * here for float (the runtime) and double (the tests' finite-difference reference). */
#ifndef KFN
#include "cpu/pooling.h"

#include <math.h>
#include <stddef.h>

#define KERNEL_IMPL "cpu/pooling.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body of the masked pooling kernels over REAL / KFN(name). hidden [B, T, C], mask
 * [B, T] int32 (non-zero = real token, 0 = padding), out [B, C]. Modes follow sentence-transformers' Pooling module:
 *   TR_POOL_MEAN (0)           sum of kept tokens / number kept
 *   TR_POOL_CLS (1)            token 0, whatever the mask says
 *   TR_POOL_MAX (2)            per channel maximum over kept tokens
 *   TR_POOL_MEAN_SQRT_LEN (3)  sum of kept tokens / sqrt(number kept)
 * A row with no kept token pools to 0 (mean, max, mean_sqrt_len) and gets no gradient.
 * Max ties send the gradient to the first maximal token. */

/* ------------------------------------------------------------ forward */

void KFN(tr_k_pool_fwd)(REAL *out, const REAL *hidden, const int32_t *mask, int64_t B, int64_t T, int64_t C,
                       int mode)
{
#pragma omp parallel for if (B * T * C > 65536)
    for (int64_t b = 0; b < B; b++) {
        const REAL *h = hidden + b * T * C;
        const int32_t *m = mask + b * T;
        REAL *o = out + b * C;
        if (mode == 1) {
            for (int64_t c = 0; c < C; c++) o[c] = h[c];
            continue;
        }
        int64_t kept = 0;
        for (int64_t t = 0; t < T; t++) kept += m[t] != 0;
        for (int64_t c = 0; c < C; c++) o[c] = 0;
        if (kept == 0) continue;
        if (mode == 2) {
            int first = 1;
            for (int64_t t = 0; t < T; t++) {
                if (!m[t]) continue;
                for (int64_t c = 0; c < C; c++)
                    if (first || h[t * C + c] > o[c]) o[c] = h[t * C + c];
                first = 0;
            }
            continue;
        }
        for (int64_t t = 0; t < T; t++)
            if (m[t])
                for (int64_t c = 0; c < C; c++) o[c] += h[t * C + c];
        REAL div = mode == 3 ? KSQRT((REAL)kept) : (REAL)kept;
        for (int64_t c = 0; c < C; c++) o[c] /= div;
    }
}

/* ------------------------------------------------------------ backward */

/* dhidden (=) from dout [B, C]; hidden is read only by the max mode (to find the argmax)
 * and may be NULL for the other modes. */
void KFN(tr_k_pool_bwd)(REAL *dhidden, const REAL *dout, const REAL *hidden, const int32_t *mask, int64_t B,
                        int64_t T, int64_t C, int mode)
{
#pragma omp parallel for if (B * T * C > 65536)
    for (int64_t b = 0; b < B; b++) {
        const REAL *h = hidden ? hidden + b * T * C : NULL;
        const int32_t *m = mask + b * T;
        const REAL *d = dout + b * C;
        REAL *dh = dhidden + b * T * C;
        for (int64_t i = 0; i < T * C; i++) dh[i] = 0;
        if (mode == 1) {
            for (int64_t c = 0; c < C; c++) dh[c] = d[c];
            continue;
        }
        int64_t kept = 0, t0 = -1;
        for (int64_t t = 0; t < T; t++)
            if (m[t]) {
                kept++;
                if (t0 < 0) t0 = t;
            }
        if (kept == 0) continue;
        if (mode == 2) {
            for (int64_t c = 0; c < C; c++) {
                int64_t arg = t0;
                for (int64_t t = t0 + 1; t < T; t++)
                    if (m[t] && h[t * C + c] > h[arg * C + c]) arg = t;
                dh[arg * C + c] = d[c];
            }
            continue;
        }
        REAL div = mode == 3 ? KSQRT((REAL)kept) : (REAL)kept;
        for (int64_t t = 0; t < T; t++)
            if (m[t])
                for (int64_t c = 0; c < C; c++) dh[t * C + c] = d[c] / div;
    }
}

#endif
