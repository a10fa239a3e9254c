/* rotary.c — the rotary position embedding kernel (rotary.h), written once over REAL and
 * instantiated here for float (the runtime) and double (the tests' reference). Each row's
 * cos and sin are computed once and applied to its H heads. */
#ifndef KFN
#include "cpu/rotary.h"

#include <stdint.h>
#include <tgmath.h>

/* The largest head size a row's table holds on the stack. */
enum { ROT_MAX_HALF = 512 };

#define KERNEL_IMPL "cpu/rotary.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

void KFN(tr_k_rotary)(REAL *out, const REAL *x, int64_t r0, int64_t nr, int64_t T, int64_t H, int64_t D, double theta,
                      int inverse)
{
    const int64_t half = D / 2;
    REAL inv_freq[ROT_MAX_HALF];
    for (int64_t i = 0; i < half && i < ROT_MAX_HALF; i++)
        inv_freq[i] = (REAL)1 / pow((REAL)theta, (REAL)(2 * i) / (REAL)D);
#pragma omp parallel for if (nr * H * D > 65536) schedule(static)
    for (int64_t r = 0; r < nr; r++) {
        REAL cs[ROT_MAX_HALF], sn[ROT_MAX_HALF];
        const REAL t = (REAL)((r0 + r) % T);
        for (int64_t i = 0; i < half; i++) {
            const REAL a = t * inv_freq[i];
            cs[i] = cos(a);
            sn[i] = inverse ? -sin(a) : sin(a);
        }
        for (int64_t h = 0; h < H; h++) {
            const REAL *xr = x + (r * H + h) * D;
            REAL *o = out + (r * H + h) * D;
#pragma omp simd
            for (int64_t i = 0; i < half; i++) {
                const REAL x1 = xr[i], x2 = xr[i + half];
                o[i] = x1 * cs[i] - x2 * sn[i];
                o[i + half] = x2 * cs[i] + x1 * sn[i];
            }
        }
    }
}

#endif
