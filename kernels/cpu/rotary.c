/* rotary.c — the rotary position embedding kernel (rotary.h), written once over REAL and
 * instantiated here for float (the runtime) and double (the tests' reference). Each position's
 * cos and sin are computed once (per row where the positions' table would not fit the stack)
 * and applied to its H heads. */
#ifndef KFN
#include "cpu/rotary.h"

#include <stdint.h>
#include <tgmath.h>

/* The largest head size a row's table holds on the stack. */
enum { ROT_MAX_HALF = 512 };

#define KERNEL_IMPL "cpu/rotary.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* inv_freq[i] = 1 / theta^(2i / D), i < half (at most ROT_MAX_HALF). */
static inline void KFN(rotary_inv_freq)(REAL *inv_freq, int64_t half, int64_t D, double theta)
{
    for (int64_t i = 0; i < half && i < ROT_MAX_HALF; i++)
        inv_freq[i] = (REAL)1 / pow((REAL)theta, (REAL)(2 * i) / (REAL)D);
}

/* Row r's cos and sin (sn negated for the inverse rotation) at its position t. */
static inline void KFN(rotary_angles)(REAL *cs, REAL *sn, const REAL *inv_freq, int64_t half, int64_t t, int inverse)
{
    for (int64_t i = 0; i < half; i++) {
        const REAL a = (REAL)t * inv_freq[i];
        cs[i] = cos(a);
        sn[i] = inverse ? -sin(a) : sin(a);
    }
}

void KFN(tr_k_rotary_table)(REAL *table, int64_t T, int64_t D, double theta, int inverse)
{
    const int64_t half = D / 2;
    REAL inv_freq[ROT_MAX_HALF];
    KFN(rotary_inv_freq)(inv_freq, half, D, theta);
    for (int64_t t = 0; t < T; t++)
        KFN(rotary_angles)(table + 2 * t * half, table + (2 * t + 1) * half, inv_freq, half, t, inverse);
}

/* Row r's H heads rotated by cs and sn. */
static inline void KFN(rotary_row)(REAL *out, const REAL *x, const REAL *cs, const REAL *sn, int64_t H, int64_t half)
{
    for (int64_t h = 0; h < H; h++) {
        const REAL *xr = x + h * 2 * half;
        REAL *o = out + h * 2 * half;
#pragma omp simd
        for (int64_t i = 0; i < half; i++) {
            const REAL x1 = xr[i], x2 = xr[i + half];
            o[i] = x1 * cs[i] - x2 * sn[i];
            o[i + half] = x2 * cs[i] + x1 * sn[i];
        }
    }
}

void KFN(tr_k_rotary_rows)(REAL *out, const REAL *x, const REAL *table, int64_t r0, int64_t nr, int64_t T, int64_t H,
                           int64_t D)
{
    const int64_t half = D / 2;
    for (int64_t r = 0; r < nr; r++) {
        const int64_t t = (r0 + r) % T;
        KFN(rotary_row)(out + r * H * D, x + r * H * D, table + 2 * t * half, table + (2 * t + 1) * half, H, half);
    }
}

void KFN(tr_k_rotary)(REAL *out, const REAL *x, int64_t r0, int64_t nr, int64_t T, int64_t H, int64_t D, double theta,
                      int inverse)
{
    const int64_t half = D / 2;
    REAL inv_freq[ROT_MAX_HALF];
    KFN(rotary_inv_freq)(inv_freq, half, D, theta);
    /* Rows of a batch repeat the T positions: when the rows span more than T and the T
     * positions' tables fit ROT_TABLE_BYTES, each position's cos and sin are made once, here,
     * instead of once per row (the same values: the same angle through the same functions). */
    enum { ROT_TABLE_BYTES = 1 << 16 };
    REAL table[ROT_TABLE_BYTES / sizeof(REAL)];
    const int shared = nr > T && 2 * T * half * (int64_t)sizeof(REAL) <= ROT_TABLE_BYTES;
    if (shared) KFN(tr_k_rotary_table)(table, T, D, theta, inverse);
#pragma omp parallel for if (nr * H * D > 65536) schedule(static)
    for (int64_t r = 0; r < nr; r++) {
        REAL own_cs[ROT_MAX_HALF], own_sn[ROT_MAX_HALF];
        const int64_t t = (r0 + r) % T;
        const REAL *cs = own_cs, *sn = own_sn;
        if (shared) {
            cs = table + 2 * t * half;
            sn = table + (2 * t + 1) * half;
        } else {
            KFN(rotary_angles)(own_cs, own_sn, inv_freq, half, t, inverse);
        }
        KFN(rotary_row)(out + r * H * D, x + r * H * D, cs, sn, H, half);
    }
}

#endif
