/* convert.c — dtype conversions on the host: scalar f32 <-> bf16 / f16 and bulk
 * tr_convert between any two dtypes.
 *
 * Contract:
 *   - f32 -> bf16 and f32 -> f16 round to nearest, ties to even; values beyond the
 *     largest finite half round to +-inf exactly as IEEE prescribes (65520 -> inf in
 *     f16, 0x7f7fffff -> inf in bf16); NaN stays a quiet NaN with the sign and the top
 *     payload bits kept; f16 subnormals are produced and read correctly. The results
 *     do not depend on _Float16, F16C or the FPU's denormal mode (f32 denormals in the
 *     inputs are far below the smallest f16 subnormal, so flushing them changes nothing).
 *   - bf16/f16 -> f32 is exact.
 *   - Integers convert by value. Float -> integer truncates toward zero, saturates at
 *     the integer type's range and maps NaN to 0. Integer -> bf16/f16 goes through f32
 *     (exact for |v| <= 2^24; beyond that the two roundings may differ from a single
 *     one in the last bit, which no model input reaches: token ids are small).
 *   - i64 -> f32/f64 intermediate is exact up to 2^53.
 *
 * The f32 <-> half loops are hot (activations are stored in bf16/f16): they are written
 * branch-free as `omp simd` loops, which GCC vectorises whatever the trip count (its -O2
 * cost model alone, "very-cheap", leaves an unknown count scalar; blocks of a known count
 * through a stack array vectorised, but each block's wide reload of two narrower stores
 * missed store forwarding: 3 Gelem/s in cache where these run 29). They are compiled for
 * AVX-512 and AVX2 beside the baseline (TR_SIMD_CLONES, chosen by the CPU at load time: the
 * baseline's SSE2 code was a fifth of a bf16 training step), the same integer arithmetic
 * and so the same bits on every ISA, and a large conversion is shared among threads. */
#include "tensor.h"
#include "cpu/fast_math.h"
#include "cpu/bf16_bits.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------------------ bf16 (the bits: cpu/bf16_bits.h) */

uint16_t tr_f32_to_bf16(float x) { return tr_bf16_from_f32_bits(tr_f32_bits(x)); }

float tr_bf16_to_f32(uint16_t x) { return tr_f32_from_bits((uint32_t)x << 16); }

/* ------------------------------------------------------------ f16 */

/* f32 -> f16 in three regimes chosen without branches:
 *   |x| >= 65536 or inf/NaN : inf, or a quiet NaN keeping the top payload bits;
 *   |x| <  2^-14            : the f16 subnormal range; adding 0.5f makes the FPU
 *                             round the value at bit 2^-24 (ties to even), leaving the
 *                             f16 subnormal mantissa in the low bits of the sum;
 *   otherwise               : rebias the exponent and round the 13 dropped bits to
 *                             nearest even with the same add-carry trick as bf16; a
 *                             carry past 65504 lands exactly on 0x7c00 (inf). */
TR_FAST_INLINE uint16_t f16_from_bits(uint32_t u)
{
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;

    uint32_t is_nan = 0u - (uint32_t)(a > 0x7f800000u);
    uint32_t big = 0x7c00u | (is_nan & (0x0200u | ((a >> 13) & 0x3ffu)));

    const uint32_t half_bits = 126u << 23;   /* 0.5f */
    uint32_t tiny = tr_f32_bits(tr_f32_from_bits(a) + tr_f32_from_bits(half_bits)) - half_bits;

    uint32_t normal = (a + ((uint32_t)(15 - 127) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;

    /* masks rather than ?: so that GCC if-converts and vectorises the blocked loop */
    uint32_t is_big = 0u - (uint32_t)(a >= 0x47800000u);
    uint32_t is_tiny = 0u - (uint32_t)(a < 0x38800000u);
    uint32_t mag = (big & is_big) | (tiny & is_tiny) | (normal & ~(is_big | is_tiny));
    return (uint16_t)(mag | sign);
}

/* f16 -> f32: shift exponent and mantissa into place and rebias; inf/NaN get the
 * maximal exponent; subnormals (exponent 0) are normalised by a float subtraction of
 * 2^-14, which is exact. */
TR_FAST_INLINE float f16_to_f32_inline(uint16_t h)
{
    const uint32_t exp_mask = 0x7c00u << 13;
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
    uint32_t e = o & exp_mask;
    o += (uint32_t)(127 - 15) << 23;
    uint32_t inf_nan = o + ((uint32_t)(128 - 16) << 23);
    uint32_t sub = tr_f32_bits(tr_f32_from_bits(o + (1u << 23)) - tr_f32_from_bits(113u << 23));
    uint32_t is_inf_nan = 0u - (uint32_t)(e == exp_mask);
    uint32_t is_sub = 0u - (uint32_t)(e == 0);
    uint32_t mag = (inf_nan & is_inf_nan) | (sub & is_sub) | (o & ~(is_inf_nan | is_sub));
    return tr_f32_from_bits(mag | (((uint32_t)h & 0x8000u) << 16));
}

uint16_t tr_f32_to_f16(float x) { return f16_from_bits(tr_f32_bits(x)); }

float tr_f16_to_f32(uint16_t x) { return f16_to_f32_inline(x); }

/* ------------------------------------------------------------ hot bulk loops */

/* f32 -> bf16 and f32 -> f16: name(dst, src, n) rounds each f32's bits by narrow_bits. */
#define NARROW_F32_N(name, narrow_bits)                                                             \
    TR_SIMD_CLONES static void name(uint16_t *restrict dst, const float *restrict src, size_t n)    \
    {                                                                                               \
        _Pragma("omp simd") for (size_t i = 0; i < n; i++) dst[i] = narrow_bits(tr_f32_bits(src[i])); \
    }
NARROW_F32_N(f32_to_bf16_n, tr_bf16_from_f32_bits)
NARROW_F32_N(f32_to_f16_n, f16_from_bits)

TR_SIMD_CLONES static void bf16_to_f32_n(float *restrict dst, const uint16_t *restrict src, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dst[i] = tr_f32_from_bits((uint32_t)src[i] << 16);
}

TR_SIMD_CLONES static void f16_to_f32_n(float *restrict dst, const uint16_t *restrict src, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dst[i] = f16_to_f32_inline(src[i]);
}

/* ------------------------------------------------------------ generic element path */

/* Every value of every dtype except i64 beyond 2^53 is exact in a double. */
static double load_as_double(const void *src, int dtype, size_t i)
{
    switch (dtype) {
    case TR_F32: { float v; memcpy(&v, (const char *)src + 4 * i, 4); return v; }
    case TR_BF16: { uint16_t v; memcpy(&v, (const char *)src + 2 * i, 2); return tr_bf16_to_f32(v); }
    case TR_F16: { uint16_t v; memcpy(&v, (const char *)src + 2 * i, 2); return tr_f16_to_f32(v); }
    case TR_I32: { int32_t v; memcpy(&v, (const char *)src + 4 * i, 4); return v; }
    case TR_I64: { int64_t v; memcpy(&v, (const char *)src + 8 * i, 8); return (double)v; }
    default: return 0.0;
    }
}

/* Truncate toward zero, saturate, NaN -> 0 (a plain C cast would be undefined). */
static int64_t double_to_int_saturating(double v, double lo, double hi_exclusive, int64_t lo_i,
                                        int64_t hi_i)
{
    if (isnan(v)) return 0;
    if (v < lo) return lo_i;
    if (v >= hi_exclusive) return hi_i;
    return (int64_t)v;
}

static void store_from_double(void *dst, int dtype, size_t i, double v)
{
    switch (dtype) {
    case TR_F32: { float f = (float)v; memcpy((char *)dst + 4 * i, &f, 4); break; }
    case TR_BF16: { uint16_t h = tr_f32_to_bf16((float)v); memcpy((char *)dst + 2 * i, &h, 2); break; }
    case TR_F16: { uint16_t h = tr_f32_to_f16((float)v); memcpy((char *)dst + 2 * i, &h, 2); break; }
    case TR_I32: {
        int32_t x = (int32_t)double_to_int_saturating(v, -2147483648.0, 2147483648.0, INT32_MIN,
                                                      INT32_MAX);
        memcpy((char *)dst + 4 * i, &x, 4);
        break;
    }
    case TR_I64: {
        int64_t x = double_to_int_saturating(v, -9223372036854775808.0, 9223372036854775808.0,
                                             INT64_MIN, INT64_MAX);
        memcpy((char *)dst + 8 * i, &x, 8);
        break;
    }
    default: break;
    }
}

/* ------------------------------------------------------------ tr_convert */

/* One of the four hot float <-> half conversions, or -1. */
static int hot_kind(int dst_dtype, int src_dtype)
{
    if (src_dtype == TR_F32 && dst_dtype == TR_BF16) return 0;
    if (src_dtype == TR_BF16 && dst_dtype == TR_F32) return 1;
    if (src_dtype == TR_F32 && dst_dtype == TR_F16) return 2;
    if (src_dtype == TR_F16 && dst_dtype == TR_F32) return 3;
    return -1;
}

static void hot_convert(int kind, void *dst, const void *src, size_t n)
{
    switch (kind) {
    case 0: f32_to_bf16_n(dst, src, n); break;
    case 1: bf16_to_f32_n(dst, src, n); break;
    case 2: f32_to_f16_n(dst, src, n); break;
    default: f16_to_f32_n(dst, src, n); break;
    }
}

/* Elements from which a conversion is shared among threads (a staged block of activations,
 * a weight), in chunks; never from inside a parallel
 * region (no nested teams), and below the bound no region at all. */
enum { CONVERT_PARALLEL_MIN = 1 << 18, CONVERT_CHUNK = 1 << 15 };

void tr_convert(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n)
{
    if (n == 0 || tr_dtype_size(dst_dtype) == 0 || tr_dtype_size(src_dtype) == 0) return;
    if (dst_dtype == src_dtype) {
        memmove(dst, src, n * tr_dtype_size(src_dtype));
        return;
    }
    int kind = hot_kind(dst_dtype, src_dtype);
    if (kind >= 0) {
#ifdef _OPENMP
        if (n >= CONVERT_PARALLEL_MIN && !omp_in_parallel() && omp_get_max_threads() > 1) {
            const size_t ds = tr_dtype_size(dst_dtype), ss = tr_dtype_size(src_dtype);
            const int64_t nchunk = (int64_t)((n + CONVERT_CHUNK - 1) / CONVERT_CHUNK);
#pragma omp parallel for schedule(static)
            for (int64_t c = 0; c < nchunk; c++) {
                size_t start = (size_t)c * CONVERT_CHUNK, len = n - start < CONVERT_CHUNK ? n - start : CONVERT_CHUNK;
                hot_convert(kind, (char *)dst + start * ds, (const char *)src + start * ss, len);
            }
            return;
        }
#endif
        hot_convert(kind, dst, src, n);
        return;
    }
    /* i64 <-> i32 by value without the double's 53-bit limit */
    if (src_dtype == TR_I64 && dst_dtype == TR_I32) {
        const int64_t *s = src;
        int32_t *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] = s[i] > INT32_MAX ? INT32_MAX : s[i] < INT32_MIN ? INT32_MIN : (int32_t)s[i];
        return;
    }
    if (src_dtype == TR_I32 && dst_dtype == TR_I64) {
        const int32_t *s = src;
        int64_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = s[i];
        return;
    }
    /* Everything else (half <-> half, ints <-> floats) is cold: one element at a time
     * through a double, which holds every source value exactly (i64 up to 2^53). */
    for (size_t i = 0; i < n; i++) store_from_double(dst, dst_dtype, i, load_as_double(src, src_dtype, i));
}
