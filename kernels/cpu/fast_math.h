/* fast_math.h — float exp and erf written so that `omp simd` loops vectorise them (libm's
 * expf and erff are one call per element, a scalar loop), and the attribute that compiles
 * a hot loop for AVX-512 and AVX2 beside the baseline build, picked at load time by the
 * CPU (an ifunc: the shipped binary never assumes more than x86-64's SSE2).
 *
 * Both functions are branch-free (bit selects, not ifs: GCC -O2 does not if-convert, and a
 * branch keeps the loop scalar). Only the float kernels use them; the double kernels, the
 * tests' reference, keep libm. */
#ifndef TR_FAST_MATH_H
#define TR_FAST_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "isa_max.h"

/* Hot float loops: clones for AVX-512 and AVX2 + FMA, chosen by the CPU at load time.
 * Empty where the compiler or target cannot clone (the loop then runs the baseline ISA).
 * The AVX2 clone is the x86-64-v3 level (AVX2, FMA, F16C, BMI), which the resolver picks
 * by the CPU's features; "arch=haswell" was picked by the CPU's model, Intel Haswell only,
 * so every AMD CPU without AVX-512 (and every later Intel core without it) ran the SSE2
 * baseline. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && TR_ISA_AVX512_ALLOWED
#define TR_SIMD_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define TR_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))   /* ISA_MAX=avx2 */
#else
#define TR_SIMD_CLONES
#endif

/* The helpers are always inlined: the AVX2 clone is compiled for arch=x86-64-v3, and GCC does
 * not inline a plain static inline function (compiled for the baseline arch) into a
 * function of another arch, so the call stayed and the AVX2 clones of GELU, the attention
 * softmax and probs_from_lse were scalar (the AVX-512 clone, same arch, inlined them). */
#define TR_FAST_INLINE static inline __attribute__((always_inline))

/* e^x: Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, with n rounded by the
 * 1.5 * 2^23 trick, then the Cephes degree-6 polynomial for e^r (about 1 ulp) and 2^n
 * assembled in the exponent bits. Arguments below -87 (including -inf, padded keys) give
 * exactly 0; callers pass arguments <= ~0 (scores minus their row maximum, -x^2/2), so no
 * overflow handling. Max relative error 8.3e-8 over [-87, 1]. */
/* Its constants, shared with the vector twins (kernels/cpu/attn_short.c): e^r ~ 1 + r + r^2
 * (P0 r^5 + P1 r^4 + ... + P5). */
#define TR_EXP_LOG2E 1.44269504088896341f
#define TR_EXP_LN2_HI 0.693359375f
#define TR_EXP_LN2_LO -2.12194440e-4f
#define TR_EXP_MAGIC 12582912.0f
#define TR_EXP_LO -87.0f
#define TR_EXP_POLY { 1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, \
                      4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f }

TR_FAST_INLINE float tr_fast_expf(float x)
{
    const float log2e = TR_EXP_LOG2E, ln2_hi = TR_EXP_LN2_HI, ln2_lo = TR_EXP_LN2_LO;
    const float round_magic = TR_EXP_MAGIC, lo = TR_EXP_LO;
    const float c[6] = TR_EXP_POLY;
    int32_t xi, loi, keep = -(int32_t)(x >= lo);    /* all ones when x >= -87, else 0 */
    memcpy(&xi, &x, sizeof xi);
    memcpy(&loi, &lo, sizeof loi);
    int32_t ci = (xi & keep) | (loi & ~keep);
    float xc;
    memcpy(&xc, &ci, sizeof xc);
    float nf = (xc * log2e + round_magic) - round_magic;
    float r = xc - nf * ln2_hi - nf * ln2_lo;
    /* written out: a loop here is a nested loop to `omp simd`, which then stays scalar */
    float p = c[0];
    p = p * r + c[1];
    p = p * r + c[2];
    p = p * r + c[3];
    p = p * r + c[4];
    p = p * r + c[5];
    float e = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)nf + 127) << 23;
    float scale, out;
    memcpy(&scale, &bits, sizeof scale);
    e *= scale;
    int32_t ei;
    memcpy(&ei, &e, sizeof ei);
    ei &= keep;
    memcpy(&out, &ei, sizeof out);
    return out;
}

/* cond ? a : b as a bit select (a's bits where cond, else b's): a ?: on floats is control
 * flow to GCC -O2 (it does not if-convert a float compare without -ffinite-math-only),
 * which keeps the whole loop around it scalar. */
TR_FAST_INLINE float tr_fast_selectf(int cond, float a, float b)
{
    int32_t ai, bi, m = -(int32_t)cond;
    memcpy(&ai, &a, sizeof ai);
    memcpy(&bi, &b, sizeof bi);
    int32_t oi = (ai & m) | (bi & ~m);
    float out;
    memcpy(&out, &oi, sizeof out);
    return out;
}

/* min(x, cap) for x not NaN, branch-free. */
TR_FAST_INLINE float tr_fast_capf(float x, float cap)
{
    return tr_fast_selectf(x < cap, x, cap);
}

/* erfc(a) for a >= 0 given e = e^{-a^2}: erfc(a) = t e^{-a^2} Q(t), t = 1 / (1 + a/2), where
 * Q(t) = erfcx(a) / t is smooth on t in (0, 1] (1/(2 sqrt(pi)) at t = 0). Q is a degree-10
 * polynomial fitted here to relative error 1.1e-8 (least squares on Chebyshev nodes, made
 * near-minimax by reweighting, in float64 against scipy's erfcx), so the far tail, where
 * 1 - erf cancels, stays accurate too. Taking e^{-a^2} as an argument lets GELU's derivative
 * share the one exp its density term needs (Numerical Recipes' erfcc, used before, hid the
 * exp inside: e^{-a^2 + P(t)}, a second exp per element). */
TR_FAST_INLINE float tr_fast_erfcf_nonneg_e(float a, float e)
{
    float t = 1.0f / (1.0f + 0.5f * a);
    float q = 0.042367224825f;
    q = q * t - 0.230923719264f;
    q = q * t + 0.486304460879f;
    q = q * t - 0.447108217629f;
    q = q * t + 0.127170725502f;
    q = q * t - 0.057263287957f;
    q = q * t + 0.093007577891f;
    q = q * t + 0.175375936435f;
    q = q * t + 0.246880642976f;
    q = q * t + 0.282093851324f;
    q = q * t + 0.282094794802f;
    return (t * q) * e;
}

/* 1 + erf(x) given e = e^{-x^2}, accurate relative to itself for negative x too (erfc(|x|)
 * there, not 1 minus a number close to 1): GELU's 2 Phi(x sqrt 2), whose left tail a plain
 * 1 + erf loses. */
TR_FAST_INLINE float tr_fast_one_plus_erff_e(float x, float e)
{
    float c = tr_fast_erfcf_nonneg_e(fabsf(x), e);
    /* x < 0 ? c : 2 - c without a branch: a ?: keeps GELU's AVX2 and baseline loops scalar
     * (AVX-512's mask registers if-convert it) */
    return tr_fast_selectf(x < 0, c, 2.0f - c);
}

/* 1 + erf(x) (e^{-x^2} computed here). */
TR_FAST_INLINE float tr_fast_one_plus_erff(float x)
{
    return tr_fast_one_plus_erff_e(x, tr_fast_expf(-x * x));
}

#endif
