/* bias_gelu.c — the bias_gelu kernels (bias_gelu.h), written once over REAL and instantiated
 * here for float (the runtime) and double (the tests' reference); the GELU itself is activation.c's
 * (vectorised for float). */
#ifndef KFN
#include "cpu/bias_gelu.h"
#include "cpu/activation.h"
#include "cpu/fast_math.h"

#include <stdint.h>

/* Rows per block: a block is at most BG_BLOCK elements (one of activation.c's spans stays under
 * its parallel threshold, so a block runs on the thread that took it), at least one row. */
enum { BG_BLOCK = 32768 };

static int64_t bg_rows(int64_t I) { return I > 0 && I < BG_BLOCK ? BG_BLOCK / I : 1; }

int64_t tr_k_bias_gelu_bwd_scratch(int64_t N, int64_t I)
{
    int64_t rows = bg_rows(I);
    return ((N + rows - 1) / rows) * I;
}

#define KERNEL_IMPL "cpu/bias_gelu.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body over REAL / KFN(name). */

/* ------------------------------------------------------------ forward */

TR_SIMD_CLONES static void KFN(bg_add_rows)(REAL *h, const REAL *bias, int64_t nr, int64_t I)
{
    for (int64_t r = 0; r < nr; r++) {
        REAL *row = h + r * I;
#pragma omp simd
        for (int64_t c = 0; c < I; c++) row[c] += bias[c];
    }
}

void KFN(tr_k_bias_gelu_fwd)(REAL *out, REAL *h, const REAL *bias, int64_t N, int64_t I, int approx)
{
    const int64_t rows = bg_rows(I), nblk = (N + rows - 1) / rows;
#pragma omp parallel for if (N * I > 65536) schedule(static)
    for (int64_t k = 0; k < nblk; k++) {
        const int64_t r0 = k * rows, nr = N - r0 < rows ? N - r0 : rows;
        if (bias) KFN(bg_add_rows)(h + r0 * I, bias, nr, I);
        KFN(tr_k_gelu_fwd)(out + r0 * I, h + r0 * I, nr * I, approx);   /* the block, still in cache */
    }
}

/* ------------------------------------------------------------ backward */

TR_SIMD_CLONES static void KFN(bg_col_sums)(REAL *part, const REAL *dx, int64_t nr, int64_t I)
{
#pragma omp simd
    for (int64_t c = 0; c < I; c++) part[c] = 0;
    for (int64_t r = 0; r < nr; r++) {
        const REAL *row = dx + r * I;
#pragma omp simd
        for (int64_t c = 0; c < I; c++) part[c] += row[c];
    }
}

void KFN(tr_k_bias_gelu_bwd)(REAL *dx, REAL *dbias, const REAL *dout, const REAL *h, int64_t N, int64_t I, int approx,
                             REAL *scratch)
{
    const int64_t rows = bg_rows(I), nblk = (N + rows - 1) / rows;
#pragma omp parallel for if (N * I > 65536) schedule(static)
    for (int64_t k = 0; k < nblk; k++) {
        const int64_t r0 = k * rows, nr = N - r0 < rows ? N - r0 : rows;
        KFN(tr_k_gelu_bwd)(dx + r0 * I, dout + r0 * I, h + r0 * I, nr * I, approx);
        if (dbias) KFN(bg_col_sums)(scratch + k * I, dx + r0 * I, nr, I);   /* while the block is cached */
    }
    if (!dbias) return;
    /* the partial rows in block order: the same bits on any number of threads */
#pragma omp parallel for if (nblk * I > 65536) schedule(static)
    for (int64_t c0 = 0; c0 < I; c0 += 256) {
        const int64_t c1 = c0 + 256 < I ? c0 + 256 : I;
        for (int64_t k = 0; k < nblk; k++)
            for (int64_t c = c0; c < c1; c++) dbias[c] += scratch[k * I + c];
    }
}

#endif
