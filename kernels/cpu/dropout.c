/* dropout.c — the dropout kernels (dropout.h), written once over REAL and instantiated here for
 * float (the runtime) and double (the tests' finite-difference reference). */
#ifndef KFN
#include "cpu/dropout.h"
#include "cpu/fast_math.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define KERNEL_IMPL "cpu/dropout.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body of the dropout kernel over REAL / KFN(name).
 * The keep mask is regenerated from the keyed RNG by the caller for each chunk, never
 * stored across forward and backward; this kernel only applies it. */

#include "cpu/dropout_span.h"

/* out[i] = mask[i] ? x[i] * scale : 0 (=), with scale = 1/(1-p) and mask[i] 0xFFFFFFFF (kept)
 * or 0 (tr_dropout_mask_words). The same call is the backward: dx = dropout_apply(dout)
 * with the regenerated mask. out may alias x. */
void KFN(tr_k_dropout_fwd)(REAL *out, const REAL *x, const uint32_t *mask, REAL scale, int64_t n)
{
    const int64_t span = 16384, nspan = (n + span - 1) / span;
    /* Small calls (the op's 4096-element chunks, from its own parallel loop) run here: even
     * an if(0) region is a libgomp team made and freed per call (19 k frees a LoRA step). */
    if (n <= 65536) {
        KFN(dropout_span)(out, x, mask, scale, n);
        return;
    }
#pragma omp parallel for
    for (int64_t s = 0; s < nspan; s++) {
        int64_t start = s * span, len = n - start < span ? n - start : span;
        KFN(dropout_span)(out + start, x + start, mask + start, scale, len);
    }
}

#endif
