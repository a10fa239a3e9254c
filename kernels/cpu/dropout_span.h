/* dropout_span.h — the keep mask applied to one span: out[i] = x[i] * scale where mask[i]
 * is all ones (kept), else +0, even where x is not finite; out may be x. Written once for
 * the kernel families that apply a dropout mask (dropout.c, attention.c): each includes it
 * in its body, which instantiate.h compiles once per REAL / KFN(name); the bit types are
 * defined once.
 *
 * A bit select (the value's bits AND the mask, sign-extended to REAL's width) in `omp simd`
 * under the AVX-512 / AVX2 clones: a scalar loop with a branch per element costs ~5 % of a
 * short-text LoRA step, GCC -O2 vectorises neither the branch nor a ?: on a byte, and byte
 * masks beside the floats give 16-byte vectors only. */
#ifndef TR_KERNELS_CPU_DROPOUT_BITS
#define TR_KERNELS_CPU_DROPOUT_BITS
#include <stdint.h>
#include <string.h>

#include "cpu/fast_math.h"

/* The unsigned integer as wide as each REAL. */
typedef uint32_t dropout_bits_f32;
typedef uint64_t dropout_bits_f64;
#endif

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
