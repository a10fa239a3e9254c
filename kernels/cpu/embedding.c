/* embedding.c — the embedding lookup kernels (embedding.h), written once over REAL and
 * instantiated here for float (the runtime) and double (the tests' finite-difference
 * reference). */
#ifndef KFN
#include "cpu/embedding.h"

#include <math.h>

#define KERNEL_IMPL "cpu/embedding.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body of the embedding kernels over REAL / KFN(name). ids are int64 and already
 * checked to lie in [0, V) by the caller. */

/* ------------------------------------------------------------ forward */

/* out[n, :] = table[ids[n], :] (=). out [N, C], table [V, C]. */
void KFN(tr_k_embedding_fwd)(REAL *out, const int64_t *ids, const REAL *table, int64_t N, int64_t C)
{
#pragma omp parallel for if (N * C > 65536)
    for (int64_t n = 0; n < N; n++) {
        const REAL *src = table + ids[n] * C;
        REAL *dst = out + n * C;
        for (int64_t c = 0; c < C; c++) dst[c] = src[c];
    }
}

/* ------------------------------------------------------------ backward */

/* dtable[ids[n], :] += dout[n, :] for every n whose id is not padding_idx (padding_idx < 0:
 * no padding row). ACCUMULATES into dtable. Deterministic: each thread owns a range of
 * columns and visits the rows in order, so repeated ids never race and the summation
 * order is fixed. */
void KFN(tr_k_embedding_bwd)(REAL *dtable, const REAL *dout, const int64_t *ids, int64_t N, int64_t C,
                             int64_t padding_idx)
{
    const int64_t block = 64;
    int64_t nblocks = (C + block - 1) / block;
#pragma omp parallel for if (N * C > 65536)
    for (int64_t bi = 0; bi < nblocks; bi++) {
        int64_t c0 = bi * block, c1 = c0 + block < C ? c0 + block : C;
        for (int64_t n = 0; n < N; n++) {
            if (ids[n] == padding_idx) continue;
            REAL *dst = dtable + ids[n] * C;
            const REAL *src = dout + n * C;
            for (int64_t c = c0; c < c1; c++) dst[c] += src[c];
        }
    }
}

#endif
