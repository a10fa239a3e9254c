/* attn_short.c — the short-sequence attention forward of attn_short.h in AVX-512 (16 queries
 * a vector) and AVX2 + FMA (8), each behind a target attribute (the file builds for baseline
 * x86-64; the CPU is checked at run time). The kernel is written once, attn_short_kern.h,
 * included once per ISA after that ISA's vector macros. Elsewhere, and on CPUs with neither,
 * tr_attn_short_usable says 0 and attention.c runs its tiled path. */
#include "cpu/attn_short.h"

#include <math.h>
#include <stdint.h>

#include "cpu/attn_tile.h"
#include "cpu/fast_math.h"
#include "tr_base.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define TR_ATTN_SHORT_X86 1
#include <immintrin.h>
#endif

int tr_attn_short_usable(int isa, int64_t T, int64_t D, int use_dropout)
{
#ifdef TR_ATTN_SHORT_X86
    /* AVX2 (16 registers, a scalar q transpose): 1.9x the tiled path at 8 keys, even at 13-16 and
     * behind it at 30 (tr_k_attention_fwd_isa_f32 at B 32, H 12, both paths alternated) */
    const int64_t most = isa == TR_ATTN_ISA_AVX512 ? TR_ATTN_SHORT_MAX_T : TR_ATTN_SHORT_MAX_T_AVX2;
    return (isa == TR_ATTN_ISA_AVX512 || isa == TR_ATTN_ISA_AVX2) && tr_attn_tile_usable(isa) && T >= 1 &&
           T <= most && (D == 32 || D == 64) && !use_dropout;
#else
    (void)isa; (void)T; (void)D; (void)use_dropout;
    return 0;
#endif
}

#ifdef TR_ATTN_SHORT_X86

/* Cephes' logf polynomial (ln m = f - f^2/2 + f^3 P(f), f = m - 1), highest power first, for
 * the log of attn_short_kern.h. */
static const float log_poly[9] = { 7.0376836292e-2f, -1.1514610310e-1f, 1.1676998740e-1f,
                                   -1.2420140846e-1f, 1.4249322787e-1f, -1.6668057665e-1f,
                                   2.0000714765e-1f, -2.4999993993e-1f, 3.3333331174e-1f };

/* ------------------------------------------------------------ AVX-512: 16 queries a vector */

#define AVX512 __attribute__((target("avx512f")))

#define SK_INLINE static inline __attribute__((always_inline, target("avx512f")))
#define SK_NAME(n) n##16
#define SK_V __m512
#define SK_VW 16
#define SK_ALIGN 64
#define SK_K __mmask16
#define SK_ZERO() _mm512_setzero_ps()
#define SK_SET1(x) _mm512_set1_ps(x)
#define SK_LOAD(p) _mm512_load_ps(p)
#define SK_LOADU(p) _mm512_loadu_ps(p)
#define SK_STORE(p, v) _mm512_store_ps((p), (v))
#define SK_STOREU(p, v) _mm512_storeu_ps((p), (v))
#define SK_BCAST(p) _mm512_set1_ps(*(p))
#define SK_ADD(a, b) _mm512_add_ps((a), (b))
#define SK_SUB(a, b) _mm512_sub_ps((a), (b))
#define SK_MUL(a, b) _mm512_mul_ps((a), (b))
#define SK_DIV(a, b) _mm512_div_ps((a), (b))
#define SK_MAX(a, b) _mm512_max_ps((a), (b))
#define SK_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define SK_FNMA(a, b, c) _mm512_fnmadd_ps((a), (b), (c))
#define SK_GE(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_GE_OQ)
#define SK_GT(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_GT_OQ)
#define SK_BLEND(k, a, b) _mm512_mask_blend_ps((k), (a), (b))
#define SK_ZERO_UNLESS(k, v) _mm512_maskz_mov_ps((k), (v))
#define SK_POW2(n) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23))
#define SK_MANT_EXP(x, m, e) \
    ((m) = _mm512_getmant_ps((x), _MM_MANT_NORM_1_2, _MM_MANT_SIGN_src), (e) = _mm512_getexp_ps(x))
#define SK_HALVE_IF(k, m) _mm512_mask_mul_ps((m), (k), (m), _mm512_set1_ps(0.5f))
#define SK_INC_IF(k, e) _mm512_mask_add_ps((e), (k), (e), _mm512_set1_ps(1.0f))
#define SK_STORE_FIRST(p, n, v)                                                                                        \
    do {                                                                                                               \
        int64_t rows_ = (n) < 16 ? (n) : 16;                                                                           \
        _mm512_mask_storeu_ps((p), (__mmask16)((1u << rows_) - 1u), (v));                                              \
    } while (0)
#define SK_PACK_QT tr_attn_tile_pack_t
/* 4 rows x 4 output vectors (D = 64) stay within the 32 registers beside the operands */
#define SK_PROWS(DV) 4
#define SK_PROWS_MAX 4
#define SK_DV_MAX 4
#define SK_ROWS_UNROLL _Pragma("GCC unroll 4")
#include "cpu/attn_short_kern.h"

/* The four shapes, each compiled with its vector counts as constants. */
AVX512 static void head_t16_d32(float *o, float *l, const float *q, const float *k, const float *v, uint32_t keep,
                                float s, int64_t T, int64_t ld) { head16(1, 2, o, l, q, k, v, keep, s, T, ld); }
AVX512 static void head_t32_d32(float *o, float *l, const float *q, const float *k, const float *v, uint32_t keep,
                                float s, int64_t T, int64_t ld) { head16(2, 2, o, l, q, k, v, keep, s, T, ld); }
AVX512 static void head_t16_d64(float *o, float *l, const float *q, const float *k, const float *v, uint32_t keep,
                                float s, int64_t T, int64_t ld) { head16(1, 4, o, l, q, k, v, keep, s, T, ld); }
AVX512 static void head_t32_d64(float *o, float *l, const float *q, const float *k, const float *v, uint32_t keep,
                                float s, int64_t T, int64_t ld) { head16(2, 4, o, l, q, k, v, keep, s, T, ld); }

/* ------------------------------------------------------------ AVX2 + FMA: 8 queries a vector */

#define AVX2 __attribute__((target("avx2,fma")))

/* q^T [D, Tp], padding queries 0, by a scalar transpose */
static inline __attribute__((always_inline, target("avx2,fma"))) void pack_qt8(float *qt, int Tp, const float *q,
                                                                             int64_t ld, int64_t T, int D)
{
    for (int d = 0; d < D; d++) {
        for (int64_t i = 0; i < T; i++) qt[d * Tp + i] = q[i * ld + d];
        for (int64_t i = T; i < Tp; i++) qt[d * Tp + i] = 0;
    }
}

#define SK_INLINE static inline __attribute__((always_inline, target("avx2,fma")))
#define SK_NAME(n) n##8
#define SK_V __m256
#define SK_VW 8
#define SK_ALIGN 32
#define SK_K __m256
#define SK_ZERO() _mm256_setzero_ps()
#define SK_SET1(x) _mm256_set1_ps(x)
#define SK_LOAD(p) _mm256_load_ps(p)
#define SK_LOADU(p) _mm256_loadu_ps(p)
#define SK_STORE(p, v) _mm256_store_ps((p), (v))
#define SK_STOREU(p, v) _mm256_storeu_ps((p), (v))
#define SK_BCAST(p) _mm256_broadcast_ss(p)
#define SK_ADD(a, b) _mm256_add_ps((a), (b))
#define SK_SUB(a, b) _mm256_sub_ps((a), (b))
#define SK_MUL(a, b) _mm256_mul_ps((a), (b))
#define SK_DIV(a, b) _mm256_div_ps((a), (b))
#define SK_MAX(a, b) _mm256_max_ps((a), (b))
#define SK_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define SK_FNMA(a, b, c) _mm256_fnmadd_ps((a), (b), (c))
#define SK_GE(a, b) _mm256_cmp_ps((a), (b), _CMP_GE_OQ)
#define SK_GT(a, b) _mm256_cmp_ps((a), (b), _CMP_GT_OQ)
#define SK_BLEND(k, a, b) _mm256_blendv_ps((a), (b), (k))
#define SK_ZERO_UNLESS(k, v) _mm256_and_ps((v), (k))
#define SK_POW2(n) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23))
/* no getexp/getmant in AVX2: the exponent and mantissa from the bits (x normal, positive) */
#define SK_MANT_EXP(x, m, e)                                                                                           \
    ((e) = _mm256_cvtepi32_ps(                                                                                         \
         _mm256_sub_epi32(_mm256_srli_epi32(_mm256_castps_si256(x), 23), _mm256_set1_epi32(127))),                    \
     (m) = _mm256_castsi256_ps(_mm256_or_si256(                                                                        \
         _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f800000))))
#define SK_HALVE_IF(k, m) _mm256_blendv_ps((m), _mm256_mul_ps((m), _mm256_set1_ps(0.5f)), (k))
#define SK_INC_IF(k, e) _mm256_add_ps((e), _mm256_and_ps((k), _mm256_set1_ps(1.0f)))
/* a plain store when all 8 lanes go (the masked one is microcode on AMD's Zen 2 and 3) */
#define SK_STORE_FIRST(p, n, v)                                                                                        \
    do {                                                                                                               \
        if ((n) >= 8) {                                                                                                \
            _mm256_storeu_ps((p), (v));                                                                                \
        } else {                                                                                                       \
            __m256i lane_ = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);                                                \
            _mm256_maskstore_ps((p), _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n)), lane_), (v));                     \
        }                                                                                                              \
    } while (0)
#define SK_PACK_QT pack_qt8
/* 16 registers: 2 rows x 4 vectors (D = 32) or 1 row x 8 (D = 64) */
#define SK_PROWS(DV) ((DV) == 4 ? 2 : 1)
#define SK_PROWS_MAX 2
#define SK_DV_MAX 8
#define SK_ROWS_UNROLL
#include "cpu/attn_short_kern.h"

/* The two head sizes; the query groups (Tp = T rounded up to 8) from T. */
AVX2 static void head8_d32(float *o, float *l, const float *q, const float *k, const float *v, uint32_t keep,
                           float s, int64_t T, int64_t ld)
{
    head8((int)((T + 7) / 8), 4, o, l, q, k, v, keep, s, T, ld);
}
AVX2 static void head8_d64(float *o, float *l, const float *q, const float *k, const float *v, uint32_t keep,
                           float s, int64_t T, int64_t ld)
{
    head8((int)((T + 7) / 8), 8, o, l, q, k, v, keep, s, T, ld);
}

/* ------------------------------------------------------------ entry points */

typedef void (*head_fn)(float *, float *, const float *, const float *, const float *, uint32_t, float, int64_t,
                        int64_t);

/* The head kernel for isa (AVX-512 or AVX2), a head of n keys and dim D (32 or 64). */
static head_fn pick(int isa, int64_t n, int64_t D)
{
    if (isa == TR_ATTN_ISA_AVX512)
        return D == 32 ? (n <= 16 ? head_t16_d32 : head_t32_d32) : (n <= 16 ? head_t16_d64 : head_t32_d64);
    return D == 32 ? head8_d32 : head8_d64;
}

/* keep bit j = 1 where key j of batch row b is kept (mask nonzero, or no mask). */
static uint32_t keep_bits(const void *mask, int mask_dtype, int64_t b, int64_t T)
{
    uint32_t keep = 0;
    for (int64_t j = 0; j < T; j++) {
        int on = 1;
        if (mask && mask_dtype == TR_F32) on = ((const float *)mask)[b * T + j] != 0;
        else if (mask) on = ((const int32_t *)mask)[b * T + j] != 0;
        keep |= (uint32_t)on << j;
    }
    return keep;
}

void tr_attn_short_fwd_f32(int isa, float *out, float *lse, const float *q, const float *k, const float *v,
                           const void *mask, int mask_dtype, float scale, int64_t B, int64_t T,
                           int64_t H, int64_t D, int nthreads)
{
    if (B <= 0 || T <= 0 || H <= 0) return;
    const int64_t ld = H * D;
    const head_fn fn = pick(isa, T, D);
    /* every head costs the same: static shares, no atomic per task */
#pragma omp parallel for num_threads(nthreads) schedule(static)
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t b = bh / H, h = bh % H, row0 = (b * T * H + h) * D;
        fn(out + row0, lse + bh * T, q + row0, k + row0, v + row0, keep_bits(mask, mask_dtype, b, T), scale, T, ld);
    }
}

void tr_attn_short_packed_fwd_f32(int isa, float *out, float *lse, const float *q, const float *k, const float *v,
                                  const int64_t *off, int64_t B, int64_t H, int64_t D, float scale, int nthreads)
{
    if (B <= 0 || H <= 0) return;
    const int64_t ld = H * D;
    /* every head of a row costs the same; rows differ, so dynamic shares */
#pragma omp parallel for num_threads(nthreads) schedule(dynamic, 8)
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t b = bh / H, h = bh % H, n = off[b + 1] - off[b];
        if (n <= 0) continue;
        const head_fn fn = pick(isa, n, D);
        int64_t row0 = off[b] * ld + h * D;
        uint32_t keep = n == 32 ? 0xffffffffu : (1u << n) - 1u;
        fn(out + row0, lse + H * off[b] + h * n, q + row0, k + row0, v + row0, keep, scale, n, ld);
    }
}

#else /* not x86-64 GCC or clang: the usable queries say 0, so these are never called */

void tr_attn_short_packed_fwd_f32(int isa, float *out, float *lse, const float *q, const float *k, const float *v,
                                  const int64_t *off, int64_t B, int64_t H, int64_t D, float scale, int nthreads)
{
    (void)isa; (void)out; (void)lse; (void)q; (void)k; (void)v; (void)off; (void)B; (void)H; (void)D; (void)scale;
    (void)nthreads;
}

void tr_attn_short_fwd_f32(int isa, float *out, float *lse, const float *q, const float *k, const float *v,
                           const void *mask, int mask_dtype, float scale, int64_t B, int64_t T,
                           int64_t H, int64_t D, int nthreads)
{
    (void)isa; (void)out; (void)lse; (void)q; (void)k; (void)v; (void)mask; (void)mask_dtype; (void)scale;
    (void)B; (void)T; (void)H; (void)D; (void)nthreads;
}

#endif
