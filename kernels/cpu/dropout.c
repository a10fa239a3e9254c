/* dropout.c — the dropout kernels (dropout.h), written once over REAL and instantiated here for
 * float (the runtime) and double (the tests' finite-difference reference). */
#ifndef KFN
#include "cpu/dropout.h"
#include "cpu/fast_math.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The unsigned integer as wide as each REAL, for the body's bit select (below). */
typedef uint32_t dropout_bits_f32;
typedef uint64_t dropout_bits_f64;

#define KERNEL_IMPL "cpu/dropout.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body of the dropout kernel over REAL / KFN(name).
 * The keep mask is regenerated from the keyed RNG by the caller for each chunk, never
 * stored across forward and backward; this kernel only applies it. */

/* One span, as a bit select (the value's bits AND the all-ones-or-zero mask, sign-extended
 * to REAL's width) in `omp simd` under the AVX-512 / AVX2 clones: the scalar loop with its
 * branch per element was ~5 % of a short-text LoRA step, GCC vectorises neither the branch
 * nor a ?: on a byte, and with byte masks beside the floats it used 16-byte vectors only.
 * A dropped element is +0 even where x is not finite, as before. KFN(dropout_bits) is the
 * unsigned integer as wide as REAL (dropout.c). */
TR_SIMD_CLONES static void KFN(dropout_span)(REAL *out, const REAL *x, const uint32_t *mask, REAL scale, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        REAL v = x[i] * scale;
        KFN(dropout_bits) b;
        memcpy(&b, &v, sizeof b);
        b &= (KFN(dropout_bits))(int32_t)mask[i];
        memcpy(&out[i], &b, sizeof b);
    }
}

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
