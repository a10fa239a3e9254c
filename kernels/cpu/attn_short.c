/* attn_short.c — the short-sequence attention forward of attn_short.h in AVX-512 (16 queries
 * a vector) and AVX2 + FMA (8), each behind a target attribute (the file builds for baseline
 * x86-64; the CPU is checked at run time). Elsewhere, and on CPUs with neither,
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

#define AVX512 __attribute__((target("avx512f")))
#define AVX512_INLINE static inline __attribute__((always_inline, target("avx512f")))

/* Query rows per register block: 4 rows x 2 score vectors, or 4 rows x 4 output vectors
 * (D = 64), stay within the 32 registers beside the operands. */
enum { ROWS = 4 };

/* e^x for 16 floats: fast_math.h's tr_fast_expf (Cody-Waite reduction, Cephes degree-6
 * polynomial, about 1 ulp), with x < -87 (including -inf: masked keys) giving exactly 0. */
AVX512_INLINE __m512 exp16(__m512 x)
{
    const float c[6] = TR_EXP_POLY;
    const __m512 lo = _mm512_set1_ps(TR_EXP_LO), magic = _mm512_set1_ps(TR_EXP_MAGIC);
    __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
    __m512 xc = _mm512_mask_blend_ps(keep, lo, x);
    __m512 nf = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(TR_EXP_LOG2E), magic), magic);
    __m512 r = _mm512_fnmadd_ps(nf, _mm512_set1_ps(TR_EXP_LN2_HI), xc);
    r = _mm512_fnmadd_ps(nf, _mm512_set1_ps(TR_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(c[0]);
    for (int i = 1; i < 6; i++) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c[i]));
    __m512 e = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(nf), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mov_ps(keep, _mm512_mul_ps(e, _mm512_castsi512_ps(bits)));
}

/* Cephes' logf polynomial (ln m = f - f^2/2 + f^3 P(f), f = m - 1), highest power first, for
 * log16 and log8. */
static const float log_poly[9] = { 7.0376836292e-2f, -1.1514610310e-1f, 1.1676998740e-1f,
                                   -1.2420140846e-1f, 1.4249322787e-1f, -1.6668057665e-1f,
                                   2.0000714765e-1f, -2.4999993993e-1f, 3.3333331174e-1f };

/* ln x for 16 floats x >= 1 (row sums): Cephes' logf, x = 2^e m with m in [sqrt(1/2), sqrt(2)),
 * ln m = f - f^2/2 + f^3 P(f), f = m - 1, and e ln2 in two parts (about 1 ulp). */
AVX512_INLINE __m512 log16(__m512 x)
{
    __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_src);
    __m512 e = _mm512_getexp_ps(x);
    __mmask16 big = _mm512_cmp_ps_mask(m, _mm512_set1_ps(1.41421356237f), _CMP_GT_OQ);
    m = _mm512_mask_mul_ps(m, big, m, _mm512_set1_ps(0.5f));
    e = _mm512_mask_add_ps(e, big, e, _mm512_set1_ps(1.0f));
    __m512 f = _mm512_sub_ps(m, _mm512_set1_ps(1.0f)), z = _mm512_mul_ps(f, f);
    __m512 p = _mm512_set1_ps(log_poly[0]);
    for (int i = 1; i < 9; i++) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(log_poly[i]));
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, f), z);
    y = _mm512_fmadd_ps(e, _mm512_set1_ps(TR_EXP_LN2_LO), y);
    y = _mm512_fnmadd_ps(z, _mm512_set1_ps(0.5f), y);
    return _mm512_fmadd_ps(e, _mm512_set1_ps(TR_EXP_LN2_HI), _mm512_add_ps(f, y));
}

/* One head: q, k, v point at its row 0 (rows ld apart), out likewise, lse at its T values.
 * NV = groups of 16 query rows (T <= 16 * NV), DV = vectors of D. keep bit j = key j kept.
 *
 * The scores are computed transposed, S^T[j, i], 16 queries to a vector: the softmax over
 * keys is then an elementwise max, exp and sum over the kept keys' vectors (no horizontal
 * reductions, no per-row calls), a masked key is simply left out, and the score products
 * run one accumulator chain per key, KEYS at a time. */
AVX512_INLINE void head(const int NV, const int DV, float *out, float *lse, const float *q, const float *k,
                        const float *v, uint32_t keep, float scale, int64_t T, int64_t ld)
{
    enum { MAXP = 16 * 2, KEYS = 8 };
    const int Tp = 16 * NV, D = 16 * DV;
    float qt[64 * MAXP] __attribute__((aligned(64)));    /* q^T [D, Tp], padding queries 0 */
    float PT[MAXP * MAXP] __attribute__((aligned(64)));  /* exp(s - max), [kept key][Tp] */
    float inv[MAXP] __attribute__((aligned(64)));        /* 1 / row sum, per query */
    int idx[MAXP];                                       /* the kept keys */
    int nk = 0;
    for (int j = 0; j < T; j++)
        if (keep >> j & 1u) idx[nk++] = j;
    if (nk == 0) {   /* every key masked: out 0, lse -inf */
        for (int64_t i = 0; i < T; i++) {
            lse[i] = -INFINITY;
            for (int c = 0; c < DV; c++) _mm512_storeu_ps(out + i * ld + 16 * c, _mm512_setzero_ps());
        }
        return;
    }
    tr_attn_tile_pack_t(qt, Tp, q, ld, T, D);
    const __m512 vscale = _mm512_set1_ps(scale);

    for (int g = 0; g < NV; g++) {
        /* S^T of the kept keys for queries 16g .. 16g+15 (a short last run repeats a key) */
        for (int u0 = 0; u0 < nk; u0 += KEYS) {
            const float *kr[KEYS];
            for (int u = 0; u < KEYS; u++) kr[u] = k + (int64_t)idx[u0 + u < nk ? u0 + u : nk - 1] * ld;
            __m512 acc[KEYS];
            _Pragma("GCC unroll 8") for (int u = 0; u < KEYS; u++) acc[u] = _mm512_setzero_ps();
            for (int d = 0; d < D; d++) {
                __m512 qv = _mm512_load_ps(qt + d * Tp + 16 * g);
                _Pragma("GCC unroll 8") for (int u = 0; u < KEYS; u++)
                    acc[u] = _mm512_fmadd_ps(_mm512_set1_ps(kr[u][d]), qv, acc[u]);
            }
            for (int u = 0; u < KEYS && u0 + u < nk; u++)
                _mm512_store_ps(PT + (u0 + u) * Tp + 16 * g, _mm512_mul_ps(acc[u], vscale));
        }
        __m512 mx = _mm512_load_ps(PT + 16 * g);
        for (int u = 1; u < nk; u++) mx = _mm512_max_ps(mx, _mm512_load_ps(PT + u * Tp + 16 * g));
        __m512 sum = _mm512_setzero_ps();
        for (int u = 0; u < nk; u++) {
            __m512 p = exp16(_mm512_sub_ps(_mm512_load_ps(PT + u * Tp + 16 * g), mx));
            _mm512_store_ps(PT + u * Tp + 16 * g, p);
            sum = _mm512_add_ps(sum, p);
        }
        /* sum >= 1 (the maximum gives exp(0)) */
        _mm512_store_ps(inv + 16 * g, _mm512_div_ps(_mm512_set1_ps(1.0f), sum));
        int64_t rows = T - 16 * g < 16 ? T - 16 * g : 16;
        _mm512_mask_storeu_ps(lse + 16 * g, (__mmask16)((1u << rows) - 1u), _mm512_add_ps(mx, log16(sum)));
    }

    /* out = diag(1 / row sum) (P v), ROWS rows at a time (a short last block repeats row T-1) */
    for (int64_t i = 0; i < T; i += ROWS) {
        int64_t ir[ROWS];
        for (int r = 0; r < ROWS; r++) ir[r] = i + r < T ? i + r : T - 1;
        __m512 acc[ROWS][4];
        _Pragma("GCC unroll 4") for (int r = 0; r < ROWS; r++)
            _Pragma("GCC unroll 4") for (int c = 0; c < DV; c++) acc[r][c] = _mm512_setzero_ps();
        for (int u = 0; u < nk; u++) {
            const float *vr = v + (int64_t)idx[u] * ld, *Pu = PT + u * Tp;
            __m512 vv[4];
            _Pragma("GCC unroll 4") for (int c = 0; c < DV; c++) vv[c] = _mm512_loadu_ps(vr + 16 * c);
            _Pragma("GCC unroll 4") for (int r = 0; r < ROWS; r++) {
                __m512 b = _mm512_set1_ps(Pu[ir[r]]);
                _Pragma("GCC unroll 4") for (int c = 0; c < DV; c++) acc[r][c] = _mm512_fmadd_ps(b, vv[c], acc[r][c]);
            }
        }
        for (int r = 0; r < ROWS && i + r < T; r++) {
            __m512 sc = _mm512_set1_ps(inv[i + r]);
            _Pragma("GCC unroll 4") for (int c = 0; c < DV; c++)
                _mm512_storeu_ps(out + (i + r) * ld + 16 * c, _mm512_mul_ps(acc[r][c], sc));
        }
    }
}

/* The four shapes, each compiled with its vector counts as constants. */
AVX512 static void head_t16_d32(float *o, float *l, const float *q, const float *k, const float *v, uint32_t keep,
                                float s, int64_t T, int64_t ld) { head(1, 2, o, l, q, k, v, keep, s, T, ld); }
AVX512 static void head_t32_d32(float *o, float *l, const float *q, const float *k, const float *v, uint32_t keep,
                                float s, int64_t T, int64_t ld) { head(2, 2, o, l, q, k, v, keep, s, T, ld); }
AVX512 static void head_t16_d64(float *o, float *l, const float *q, const float *k, const float *v, uint32_t keep,
                                float s, int64_t T, int64_t ld) { head(1, 4, o, l, q, k, v, keep, s, T, ld); }
AVX512 static void head_t32_d64(float *o, float *l, const float *q, const float *k, const float *v, uint32_t keep,
                                float s, int64_t T, int64_t ld) { head(2, 4, o, l, q, k, v, keep, s, T, ld); }

/* ------------------------------------------------------------ AVX2 + FMA */

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))

/* exp16 on 8 floats (the same reduction and polynomial; blends for the masks). */
AVX2_INLINE __m256 exp8(__m256 x)
{
    const float c[6] = TR_EXP_POLY;
    const __m256 lo = _mm256_set1_ps(TR_EXP_LO), magic = _mm256_set1_ps(TR_EXP_MAGIC);
    __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
    __m256 xc = _mm256_blendv_ps(lo, x, keep);
    __m256 nf = _mm256_sub_ps(_mm256_fmadd_ps(xc, _mm256_set1_ps(TR_EXP_LOG2E), magic), magic);
    __m256 r = _mm256_fnmadd_ps(nf, _mm256_set1_ps(TR_EXP_LN2_HI), xc);
    r = _mm256_fnmadd_ps(nf, _mm256_set1_ps(TR_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(c[0]);
    for (int i = 1; i < 6; i++) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c[i]));
    __m256 e = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nf), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(e, _mm256_castsi256_ps(bits)), keep);
}

/* log16 on 8 floats x >= 1: the exponent and mantissa from the bits (no getexp in AVX2). */
AVX2_INLINE __m256 log8(__m256 x)
{
    __m256i xi = _mm256_castps_si256(x);
    __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(xi, 23), _mm256_set1_epi32(127)));
    __m256 m = _mm256_castsi256_ps(
        _mm256_or_si256(_mm256_and_si256(xi, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f800000)));
    __m256 big = _mm256_cmp_ps(m, _mm256_set1_ps(1.41421356237f), _CMP_GT_OQ);
    m = _mm256_blendv_ps(m, _mm256_mul_ps(m, _mm256_set1_ps(0.5f)), big);
    e = _mm256_add_ps(e, _mm256_and_ps(big, _mm256_set1_ps(1.0f)));
    __m256 f = _mm256_sub_ps(m, _mm256_set1_ps(1.0f)), z = _mm256_mul_ps(f, f);
    __m256 p = _mm256_set1_ps(log_poly[0]);
    for (int i = 1; i < 9; i++) p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(log_poly[i]));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, f), z);
    y = _mm256_fmadd_ps(e, _mm256_set1_ps(TR_EXP_LN2_LO), y);
    y = _mm256_fnmadd_ps(z, _mm256_set1_ps(0.5f), y);
    return _mm256_fmadd_ps(e, _mm256_set1_ps(TR_EXP_LN2_HI), _mm256_add_ps(f, y));
}

/* head() with 8 queries to a vector and 16 registers: groups of 8 queries (Tp = T rounded up
 * to 8), DV = vectors of D (4 or 8), P v one or two rows at a time; q^T by a scalar transpose. */
AVX2_INLINE void head8(const int DV, float *out, float *lse, const float *q, const float *k, const float *v,
                       uint32_t keep, float scale, int64_t T, int64_t ld)
{
    enum { MAXP = 32, KEYS = 8 };
    const int D = 8 * DV, NG = (int)((T + 7) / 8), Tp = 8 * NG, PROWS = DV == 4 ? 2 : 1;
    float qt[64 * MAXP] __attribute__((aligned(32)));
    float PT[MAXP * MAXP] __attribute__((aligned(32)));
    float inv[MAXP] __attribute__((aligned(32)));
    int idx[MAXP];
    int nk = 0;
    for (int j = 0; j < T; j++)
        if (keep >> j & 1u) idx[nk++] = j;
    if (nk == 0) {
        for (int64_t i = 0; i < T; i++) {
            lse[i] = -INFINITY;
            for (int c = 0; c < DV; c++) _mm256_storeu_ps(out + i * ld + 8 * c, _mm256_setzero_ps());
        }
        return;
    }
    for (int d = 0; d < D; d++) {
        for (int64_t i = 0; i < T; i++) qt[d * Tp + i] = q[i * ld + d];
        for (int64_t i = T; i < Tp; i++) qt[d * Tp + i] = 0;
    }
    const __m256 vscale = _mm256_set1_ps(scale);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int g = 0; g < NG; g++) {
        for (int u0 = 0; u0 < nk; u0 += KEYS) {
            const float *kr[KEYS];
            for (int u = 0; u < KEYS; u++) kr[u] = k + (int64_t)idx[u0 + u < nk ? u0 + u : nk - 1] * ld;
            __m256 acc[KEYS];
            _Pragma("GCC unroll 8") for (int u = 0; u < KEYS; u++) acc[u] = _mm256_setzero_ps();
            for (int d = 0; d < D; d++) {
                __m256 qv = _mm256_load_ps(qt + d * Tp + 8 * g);
                _Pragma("GCC unroll 8") for (int u = 0; u < KEYS; u++)
                    acc[u] = _mm256_fmadd_ps(_mm256_broadcast_ss(kr[u] + d), qv, acc[u]);
            }
            for (int u = 0; u < KEYS && u0 + u < nk; u++)
                _mm256_store_ps(PT + (u0 + u) * Tp + 8 * g, _mm256_mul_ps(acc[u], vscale));
        }
        __m256 mx = _mm256_load_ps(PT + 8 * g);
        for (int u = 1; u < nk; u++) mx = _mm256_max_ps(mx, _mm256_load_ps(PT + u * Tp + 8 * g));
        __m256 sum = _mm256_setzero_ps();
        for (int u = 0; u < nk; u++) {
            __m256 p = exp8(_mm256_sub_ps(_mm256_load_ps(PT + u * Tp + 8 * g), mx));
            _mm256_store_ps(PT + u * Tp + 8 * g, p);
            sum = _mm256_add_ps(sum, p);
        }
        _mm256_store_ps(inv + 8 * g, _mm256_div_ps(_mm256_set1_ps(1.0f), sum));
        int rows = (int)(T - 8 * g < 8 ? T - 8 * g : 8);
        _mm256_maskstore_ps(lse + 8 * g, _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), lane),
                            _mm256_add_ps(mx, log8(sum)));
    }
    for (int64_t i = 0; i < T; i += PROWS) {
        int64_t ir[2] = { i, i + 1 < T ? i + 1 : T - 1 };
        __m256 acc[2][8];
        for (int r = 0; r < PROWS; r++)
            _Pragma("GCC unroll 8") for (int c = 0; c < DV; c++) acc[r][c] = _mm256_setzero_ps();
        for (int u = 0; u < nk; u++) {
            const float *vr = v + (int64_t)idx[u] * ld, *Pu = PT + u * Tp;
            for (int r = 0; r < PROWS; r++) {
                __m256 b = _mm256_broadcast_ss(Pu + ir[r]);
                _Pragma("GCC unroll 8") for (int c = 0; c < DV; c++)
                    acc[r][c] = _mm256_fmadd_ps(b, _mm256_loadu_ps(vr + 8 * c), acc[r][c]);
            }
        }
        for (int r = 0; r < PROWS && i + r < T; r++) {
            __m256 sc = _mm256_set1_ps(inv[i + r]);
            _Pragma("GCC unroll 8") for (int c = 0; c < DV; c++)
                _mm256_storeu_ps(out + (i + r) * ld + 8 * c, _mm256_mul_ps(acc[r][c], sc));
        }
    }
}

AVX2 static void head8_d32(float *o, float *l, const float *q, const float *k, const float *v, uint32_t keep,
                           float s, int64_t T, int64_t ld) { head8(4, o, l, q, k, v, keep, s, T, ld); }
AVX2 static void head8_d64(float *o, float *l, const float *q, const float *k, const float *v, uint32_t keep,
                           float s, int64_t T, int64_t ld) { head8(8, o, l, q, k, v, keep, s, T, ld); }

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
