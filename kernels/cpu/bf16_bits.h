/* bf16_bits.h — f32 <-> bf16 by their bits, always inlined (fast_math.h's TR_FAST_INLINE) so
 * that an `omp simd` loop of any clone vectorises them: the one rounding of the host's
 * conversions (core/tensor/convert.c) and of the CPU kernels that round a value through
 * bf16 in registers instead of a staged pass. */
#ifndef TR_KERNELS_CPU_BF16_BITS_H
#define TR_KERNELS_CPU_BF16_BITS_H

#include <stdint.h>
#include <string.h>

#include "cpu/fast_math.h"

TR_FAST_INLINE uint32_t tr_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

TR_FAST_INLINE float tr_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Rounding adds 0x7fff plus the lowest kept bit, so a tie carries only when the kept
 * part is odd (ties to even); a carry out of the mantissa bumps the exponent, which is
 * also how the largest finite values round up to inf. NaN is exempt from the add (it
 * could carry into inf) and gets the quiet bit instead. */
TR_FAST_INLINE uint16_t tr_bf16_from_f32_bits(uint32_t u)
{
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x0040u;
    return (uint16_t)(((u & 0x7fffffffu) > 0x7f800000u) ? quiet_nan : rounded);
}

/* bf16 is the top half of an f32: exact. */
TR_FAST_INLINE float tr_f32_from_bf16_bits(uint16_t h)
{
    return tr_f32_from_bits((uint32_t)h << 16);
}

#endif
