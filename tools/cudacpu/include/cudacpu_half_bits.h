/* cudacpu_half_bits.h (cudacpu) — the 16-bit float conversions of the stand-in, on raw bits,
 * for both the C++ shims (cuda_bf16.h, cuda_fp16.h) and the C cuBLASLt products: widening
 * is exact; narrowing rounds to nearest even, as the GPU does, and a NaN becomes 0x7fff, the
 * canonical quiet NaN of NVIDIA GPUs' conversions. */
#ifndef CUDACPU_HALF_BITS_H
#define CUDACPU_HALF_BITS_H
#include <math.h>
#include <stdint.h>
#include <string.h>

/* A float's bits and back (memcpy: no aliasing rule broken in C or C++). */
static inline float cudacpu_f32_of_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t cudacpu_bits_of_f32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float cudacpu_bf16_to_f32(uint16_t h) { return cudacpu_f32_of_bits((uint32_t)h << 16); }

static inline uint16_t cudacpu_f32_to_bf16(float f)
{
    const uint32_t x = cudacpu_bits_of_f32(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline float cudacpu_f16_to_f32(uint16_t h)
{
    const uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) { /* zero or subnormal: m * 2^-24 is exact in f32 */
        const float f = ldexpf((float)m, -24);
        return s ? -f : f;
    }
    return cudacpu_f32_of_bits(e == 31 ? s | 0x7f800000u | (m << 13) : s | ((e + 112u) << 23) | (m << 13));
}

static inline uint16_t cudacpu_f32_to_f16(float f)
{
    const uint32_t x = cudacpu_bits_of_f32(f);
    const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return 0x7fffu;
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to infinity */
    if (ax >= 0x38800000u) {                                   /* normal in f16 */
        const uint32_t v = ax - 0x38000000u;
        return (uint16_t)(sign | ((v + 0x0fffu + ((v >> 13) & 1u)) >> 13));
    }
    const int shift = 126 - (int)(ax >> 23); /* subnormal in f16: mantissa with its leading 1, shifted */
    if (shift >= 25) return (uint16_t)sign;
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    uint32_t q = mant >> shift;
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

#ifdef __cplusplus
/* A 16-bit float type of the shims, as CUDA's headers name its parts: TYPE holding the bits,
 * AS_USHORT and FROM_USHORT its bit views, TO_FLOAT its widening (WIDEN on the bits), and
 * FROM_FLOAT_RN and FROM_FLOAT its round-to-nearest-even narrowing (NARROW on the bits). */
#define CUDACPU_HALF_TYPE(TYPE, AS_USHORT, FROM_USHORT, TO_FLOAT, FROM_FLOAT_RN, FROM_FLOAT, WIDEN, NARROW)     \
    struct TYPE {                                                                                           \
        unsigned short __x;                                                                                 \
    };                                                                                                      \
    inline unsigned short AS_USHORT(TYPE h) { return h.__x; }                                              \
    inline TYPE FROM_USHORT(unsigned short u)                                                               \
    {                                                                                                       \
        TYPE h;                                                                                             \
        h.__x = u;                                                                                          \
        return h;                                                                                           \
    }                                                                                                       \
    inline float TO_FLOAT(TYPE h) { return WIDEN(h.__x); }                                                  \
    inline TYPE FROM_FLOAT_RN(float f) { return FROM_USHORT(NARROW(f)); }                                   \
    inline TYPE FROM_FLOAT(float f) { return FROM_FLOAT_RN(f); }
#endif

#endif
