/* geglu.c — the GeGLU kernels (geglu.h), written once over REAL and instantiated here for
 * float (the runtime) and double (the tests' reference); the GELU itself is activation.c's
 * (vectorised for float), one pass over a row's x and gate halves (tr_k_gelu_gate_*). */
#ifndef KFN
#include "cpu/geglu.h"
#include "cpu/activation.h"

#include <stdint.h>
#include <string.h>

/* Rows per block: a block is at most GG_BLOCK elements of out (one of activation.c's spans stays
 * under its parallel threshold, so a block runs on the thread that took it), at least one row. */
enum { GG_BLOCK = 16384, GG_CHUNK = 512 };
/* Calls of at most this many out elements run on the calling thread (a half path's block). */
enum { GG_SERIAL = 65536 };

static int64_t gg_rows(int64_t I)
{
    return I > 0 && I < GG_BLOCK ? GG_BLOCK / I : 1;
}

#define KERNEL_IMPL "cpu/geglu.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* ------------------------------------------------------------ forward */

/* Rows [r0, r1) of the forward. */
static void KFN(geglu_fwd_rows)(REAL *out, const REAL *h, int64_t r0, int64_t r1, int64_t I, int approx)
{
    for (int64_t r = r0; r < r1; r++) {
        const REAL *x = h + r * 2 * I;
        KFN(tr_k_gelu_gate_fwd)(out + r * I, x, x + I, I, approx);
    }
}

void KFN(tr_k_geglu_fwd)(REAL *out, const REAL *h, int64_t N, int64_t I, int approx)
{
    if (N * I <= GG_SERIAL) {   /* no OpenMP region: even an if(0) one makes a libgomp team */
        KFN(geglu_fwd_rows)(out, h, 0, N, I, approx);
        return;
    }
    const int64_t rows = gg_rows(I), nblk = (N + rows - 1) / rows;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < nblk; k++) {
        const int64_t r0 = k * rows;
        KFN(geglu_fwd_rows)(out, h, r0, N - r0 < rows ? N : r0 + rows, I, approx);
    }
}

/* ------------------------------------------------------------ backward */

/* Rows [r0, r1) of the backward. */
static void KFN(geglu_bwd_rows)(REAL *dh, const REAL *dout, const REAL *h, int64_t r0, int64_t r1, int64_t I,
                                int approx)
{
    for (int64_t r = r0; r < r1; r++) {
        REAL *dx = dh + r * 2 * I;
        const REAL *x = h + r * 2 * I, *d = dout + r * I;
        if (dh != h) {
            KFN(tr_k_gelu_gate_bwd)(dx, dx + I, d, x, x + I, I, approx);
            continue;
        }
        /* in place: each chunk's x and g are copied out first, so that the span reads
         * and writes separate memory (and vectorises without overlap checks failing) */
        REAL xs[GG_CHUNK], gs[GG_CHUNK];
        for (int64_t c0 = 0; c0 < I; c0 += GG_CHUNK) {
            const int64_t n = I - c0 < GG_CHUNK ? I - c0 : GG_CHUNK;
            memcpy(xs, x + c0, (size_t)n * sizeof *xs);
            memcpy(gs, x + I + c0, (size_t)n * sizeof *gs);
            KFN(tr_k_gelu_gate_bwd)(dx + c0, dx + I + c0, d + c0, xs, gs, n, approx);
        }
    }
}

void KFN(tr_k_geglu_bwd)(REAL *dh, const REAL *dout, const REAL *h, int64_t N, int64_t I, int approx)
{
    if (N * I <= GG_SERIAL) {   /* no OpenMP region: even an if(0) one makes a libgomp team */
        KFN(geglu_bwd_rows)(dh, dout, h, 0, N, I, approx);
        return;
    }
    const int64_t rows = gg_rows(I), nblk = (N + rows - 1) / rows;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < nblk; k++) {
        const int64_t r0 = k * rows;
        KFN(geglu_bwd_rows)(dh, dout, h, r0, N - r0 < rows ? N : r0 + rows, I, approx);
    }
}

#endif
