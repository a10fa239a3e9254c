/* layernorm.c — the layernorm kernels (layernorm.h), written once over REAL and instantiated
 * here for float and double. Math functions come from <tgmath.h>, so sqrt is sqrtf in the float
 * instance. */
#ifndef KFN
#include "cpu/layernorm.h"

#include <tgmath.h>

#include "cpu/fast_math.h"

/* Rows are handled LN_ROWS at a time: each row's sums run in column order (the bits of one
 * scalar loop per row), the rows' chains interleaved, so that LN_ROWS adds overlap where a
 * single row waited one add's latency per element. The fused multiply-adds of the sums are
 * written out: vectorised across rows, `v += d * d` was a multiply and an add (other bits than
 * the contracted scalar loop's). */
enum { LN_ROWS = TR_K_LAYERNORM_ROW_GROUP };

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* A group's sums on AVX2 + FMA (the float instance, where the CPU has them): the 8 rows in
 * the 8 lanes of a vector, so that each lane runs its row's sums in column order, the same
 * adds and FMAs as the scalar loops (the same bits), as one vector instruction for the 8
 * rows. Blocks of 8 columns are transposed in registers; a short tail is gathered. Without
 * this the scalar loops kept the 8 interleaved sums on the stack (GCC does not hold an array
 * indexed by the row in registers), an add and a store-to-load wait per element. */
#define LN_AVX2 1
#define LN_AVX2_FN __attribute__((target("avx2,fma")))

/* col[j] lane k = x[k * ld + j] for j, k < 8: 8 rows' 8 floats as 8 column vectors. */
LN_AVX2_FN static inline void ln_cols8(__m256 col[8], const float *x, int64_t ld)
{
    __m256 r[8], t[8], u[8];
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_ps(x + k * ld);
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);       /* a0 b0 a1 b1 | a4 b4 a5 b5 */
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);   /* a2 b2 a3 b3 | a6 b6 a7 b7 */
    }
    _Pragma("GCC unroll 8") for (int h = 0; h < 8; h += 4) {
        u[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);       /* a0 b0 c0 d0 | a4 b4 c4 d4 */
        u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);   /* a1 b1 c1 d1 | a5 b5 c5 d5 */
        u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
        u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < 4; j++) {
        col[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
        col[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
    }
}

/* x[k * ld] for the 8 rows k: one column. */
LN_AVX2_FN static inline __m256 ln_col(const float *x, int64_t ld)
{
    return _mm256_setr_ps(x[0], x[ld], x[2 * ld], x[3 * ld], x[4 * ld], x[5 * ld], x[6 * ld], x[7 * ld]);
}

/* row_sums of 8 rows: the means m and the sums of centred squares v. */
LN_AVX2_FN static void ln_row_sums8_avx2(float *m, float *v, const float *x, int64_t C)
{
    __m256 sum = _mm256_setzero_ps(), col[8];
    int64_t c = 0;
    for (; c + 8 <= C; c += 8) {
        ln_cols8(col, x + c, C);
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) sum = _mm256_add_ps(sum, col[j]);
    }
    for (; c < C; c++) sum = _mm256_add_ps(sum, ln_col(x + c, C));
    const __m256 mean = _mm256_div_ps(sum, _mm256_set1_ps((float)C));
    __m256 sq = _mm256_setzero_ps();
    for (c = 0; c + 8 <= C; c += 8) {
        ln_cols8(col, x + c, C);
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
            __m256 d = _mm256_sub_ps(col[j], mean);
            sq = _mm256_fmadd_ps(d, d, sq);
        }
    }
    for (; c < C; c++) {
        __m256 d = _mm256_sub_ps(ln_col(x + c, C), mean);
        sq = _mm256_fmadd_ps(d, d, sq);
    }
    _mm256_storeu_ps(m, mean);
    _mm256_storeu_ps(v, sq);
}

/* grad_row_sums' sums of 8 rows: gsum += g and gxsum = fma(g * (x - mean), rstd, gxsum),
 * g = dr * weight (its store into o stays the caller's). */
LN_AVX2_FN static void ln_grad_sums8_avx2(float *gsum, float *gxsum, const float *dr, const float *x, const float *w,
                                          const float *mean, const float *rstd, int64_t C)
{
    const __m256 m = _mm256_loadu_ps(mean), s = _mm256_loadu_ps(rstd);
    __m256 gs = _mm256_setzero_ps(), gx = _mm256_setzero_ps(), dc[8], xc[8];
    int64_t c = 0;
    for (; c + 8 <= C; c += 8) {
        ln_cols8(dc, dr + c, C);
        ln_cols8(xc, x + c, C);
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
            __m256 g = _mm256_mul_ps(dc[j], _mm256_set1_ps(w[c + j]));
            gs = _mm256_add_ps(gs, g);
            gx = _mm256_fmadd_ps(_mm256_mul_ps(g, _mm256_sub_ps(xc[j], m)), s, gx);
        }
    }
    for (; c < C; c++) {
        __m256 g = _mm256_mul_ps(ln_col(dr + c, C), _mm256_set1_ps(w[c]));
        gs = _mm256_add_ps(gs, g);
        gx = _mm256_fmadd_ps(_mm256_mul_ps(g, _mm256_sub_ps(ln_col(x + c, C), m)), s, gx);
    }
    _mm256_storeu_ps(gsum, gs);
    _mm256_storeu_ps(gxsum, gx);
}

static inline int ln_avx2_usable(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

#define KERNEL_IMPL "cpu/layernorm.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body over REAL, instantiated for float and double.
 * The per-row loops are functions in the AVX-512 / AVX2 clones (fast_math.h), the
 * elementwise ones under `omp simd` (`bias ? bias[c] : 0` in the loop was control flow
 * that kept it scalar). Each row's sums stay sequential in column order: summed in SIMD lanes
 * they move the LoRA gradients of tests/lua/test_keep_less.lua past its golden's 1e-5 (rows
 * are interleaved instead, layernorm_rows). */

/* ------------------------------------------------------------ rows */

/* The means m and the sums of centred squares v of rows [0, nr) (stride C), each summed in
 * column order; inlined into its caller with nr LN_ROWS (the rows' chains vectorised across
 * rows) or the last group's count. */
TR_FAST_INLINE void KFN(row_sums)(REAL *m, REAL *v, const REAL *x, int64_t nr, int64_t C)
{
    for (int64_t c = 0; c < C; c++)
        for (int64_t k = 0; k < nr; k++) m[k] += x[k * C + c];
    for (int64_t k = 0; k < nr; k++) m[k] /= (REAL)C;
    for (int64_t c = 0; c < C; c++)
        for (int64_t k = 0; k < nr; k++) {
            REAL d = x[k * C + c] - m[k];
            v[k] = fma(d, d, v[k]);
        }
}

/* Rows [0, nr) (nr <= LN_ROWS, stride C): o = (x - mean) * rstd * weight (+ bias), and their
 * means and rstds. */
TR_SIMD_CLONES static void KFN(layernorm_rows)(REAL *o, REAL *mean, REAL *rstd, const REAL *x, const REAL *weight,
                                               const REAL *bias, int64_t nr, int64_t C, REAL eps)
{
    /* two passes (mean, then centred squares): no cancellation for large means */
    REAL m[LN_ROWS] = {0}, v[LN_ROWS] = {0};
#if KPICK(1, 0) && defined(LN_AVX2)
    if (nr == LN_ROWS && ln_avx2_usable())
        ln_row_sums8_avx2(m, v, x, C);
    else
#endif
    if (nr == LN_ROWS)
        KFN(row_sums)(m, v, x, LN_ROWS, C);
    else
        KFN(row_sums)(m, v, x, nr, C);
    for (int64_t k = 0; k < nr; k++) {
        const REAL *xr = x + k * C;
        REAL *or = o + k * C, mk = m[k], vk = v[k] / (REAL)C;
        REAL s = 1 / sqrt(vk + eps);
        if (bias) {
#pragma omp simd
            for (int64_t c = 0; c < C; c++) or[c] = (xr[c] - mk) * s * weight[c] + bias[c];
        } else {
#pragma omp simd
            for (int64_t c = 0; c < C; c++) or[c] = (xr[c] - mk) * s * weight[c] + 0;
        }
        mean[k] = mk;
        rstd[k] = s;
    }
}

/* g = dout * weight into o, and the sums of g and of g * xhat, of rows [0, nr) (stride C), each
 * in column order; inlined as row_sums is. */
TR_FAST_INLINE void KFN(grad_row_sums)(REAL *gsum, REAL *gxsum, REAL *o, const REAL *dr, const REAL *x,
                                       const REAL *weight, const REAL *mean, const REAL *rstd, int64_t nr, int64_t C)
{
    for (int64_t c = 0; c < C; c++)
        for (int64_t k = 0; k < nr; k++) {
            REAL g = dr[k * C + c] * weight[c];
            o[k * C + c] = g;
            gsum[k] += g;
            gxsum[k] = fma(g * (x[k * C + c] - mean[k]), rstd[k], gxsum[k]);
        }
}

/* Rows [0, nr) (nr <= LN_ROWS) of dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout *
 * weight. */
TR_SIMD_CLONES static void KFN(layernorm_dx_rows)(REAL *o, const REAL *dr, const REAL *x, const REAL *weight,
                                                  const REAL *mean, const REAL *rstd, int64_t nr, int64_t C)
{
    /* g is stored (rounded) and read back, as in dropout_add_layernorm.c's row: recomputed,
     * dr * weight - gsum contracts into an FMA that leaves g's rounding error where it should
     * cancel */
    REAL gsum[LN_ROWS] = {0}, gxsum[LN_ROWS] = {0};
#if KPICK(1, 0) && defined(LN_AVX2)
    if (nr == LN_ROWS && ln_avx2_usable()) {
        ln_grad_sums8_avx2(gsum, gxsum, dr, x, weight, mean, rstd, C);
        for (int64_t k = 0; k < LN_ROWS; k++) {
            const REAL *dk = dr + k * C;
            REAL *ok = o + k * C;
#pragma omp simd
            for (int64_t c = 0; c < C; c++) ok[c] = dk[c] * weight[c];
        }
    } else
#endif
    if (nr == LN_ROWS)
        KFN(grad_row_sums)(gsum, gxsum, o, dr, x, weight, mean, rstd, LN_ROWS, C);
    else
        KFN(grad_row_sums)(gsum, gxsum, o, dr, x, weight, mean, rstd, nr, C);
    for (int64_t k = 0; k < nr; k++) {
        const REAL *xr = x + k * C;
        REAL *or = o + k * C, m = mean[k], s = rstd[k], gs = gsum[k] / (REAL)C, gx = gxsum[k] / (REAL)C;
#pragma omp simd
        for (int64_t c = 0; c < C; c++) {
            REAL xhat = (xr[c] - m) * s;
            or[c] = s * (or[c] - gs - xhat * gx);
        }
    }
}

/* aw += dout * xhat, ab += dout over one row's columns [0, n) (n <= 64). */
TR_SIMD_CLONES static void KFN(layernorm_dwb_row)(REAL *aw, REAL *ab, const REAL *dr, const REAL *xr, REAL m,
                                                  REAL s, int64_t n)
{
#pragma omp simd
    for (int64_t c = 0; c < n; c++) {
        aw[c] += dr[c] * (xr[c] - m) * s;
        ab[c] += dr[c];
    }
}

/* ------------------------------------------------------------ forward */

void KFN(tr_k_layernorm_fwd)(REAL *out, REAL *mean, REAL *rstd, const REAL *x,
                               const REAL *weight, const REAL *bias, int64_t N, int64_t C,
                               REAL eps)
{
    const int64_t ngroups = (N + LN_ROWS - 1) / LN_ROWS;
    if (N * C <= 16384) {   /* no OpenMP region: even an if(0) one makes a libgomp team */
        for (int64_t n = 0; n < N; n += LN_ROWS)
            KFN(layernorm_rows)(out + n * C, mean + n, rstd + n, x + n * C, weight, bias,
                                N - n < LN_ROWS ? N - n : LN_ROWS, C, eps);
        return;
    }
#pragma omp parallel for
    for (int64_t g = 0; g < ngroups; g++) {
        int64_t n = g * LN_ROWS;
        KFN(layernorm_rows)(out + n * C, mean + n, rstd + n, x + n * C, weight, bias, N - n < LN_ROWS ? N - n : LN_ROWS,
                            C, eps);
    }
}

/* ------------------------------------------------------------ backward */

/* Columns [c0, c1) of dweight and dbias (c1 - c0 <= 64): the rows summed in order. */
static void KFN(layernorm_dwb_chunk)(REAL *dweight, REAL *dbias, const REAL *dout, const REAL *x, const REAL *mean,
                                     const REAL *rstd, int64_t N, int64_t C, int64_t c0, int64_t c1)
{
    REAL aw[64], ab[64];
    for (int64_t c = c0; c < c1; c++) aw[c - c0] = ab[c - c0] = 0;
    for (int64_t n = 0; n < N; n++)
        KFN(layernorm_dwb_row)(aw, ab, dout + n * C + c0, x + n * C + c0, mean[n], rstd[n], c1 - c0);
    for (int64_t c = c0; c < c1; c++) {
        if (dweight) dweight[c] += aw[c - c0];
        if (dbias) dbias[c] += ab[c - c0];
    }
}

void KFN(tr_k_layernorm_bwd)(REAL *dx, REAL *dweight, REAL *dbias, const REAL *dout,
                                const REAL *x, const REAL *weight, const REAL *mean,
                                const REAL *rstd, int64_t N, int64_t C)
{
    /* dx by rows, dweight and dbias by column chunks of 64 (each thread sums its columns'
     * rows in order: deterministic, no races). One parallel region for both: they read
     * the same inputs and write different outputs, so no barrier between them. */
    const int64_t chunk = 64, nchunks = (C + chunk - 1) / chunk;
    const int want_dwb = dweight || dbias;
    if (N * C <= 16384) {
        for (int64_t n = 0; dx && n < N; n += LN_ROWS)
            KFN(layernorm_dx_rows)(dx + n * C, dout + n * C, x + n * C, weight, mean + n, rstd + n,
                                   N - n < LN_ROWS ? N - n : LN_ROWS, C);
        for (int64_t k = 0; want_dwb && k < nchunks; k++)
            KFN(layernorm_dwb_chunk)(dweight, dbias, dout, x, mean, rstd, N, C, k * chunk,
                                     (k + 1) * chunk < C ? (k + 1) * chunk : C);
        return;
    }
#pragma omp parallel
    {
        if (dx) {
#pragma omp for nowait
            for (int64_t g = 0; g < (N + LN_ROWS - 1) / LN_ROWS; g++) {
                int64_t n = g * LN_ROWS;
                KFN(layernorm_dx_rows)(dx + n * C, dout + n * C, x + n * C, weight, mean + n, rstd + n,
                                       N - n < LN_ROWS ? N - n : LN_ROWS, C);
            }
        }
        if (want_dwb) {
#pragma omp for nowait
            for (int64_t k = 0; k < nchunks; k++)
                KFN(layernorm_dwb_chunk)(dweight, dbias, dout, x, mean, rstd, N, C, k * chunk,
                                         (k + 1) * chunk < C ? (k + 1) * chunk : C);
        }
    }
}

#endif
