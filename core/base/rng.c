/* rng.c — Philox-4x32-10 and the keyed streams built on it; rng.h documents the exact
 * stream layout that the CUDA kernels must reproduce.
 *
 * Invariant: a stream element depends only on (key, element index), never on n, the
 * offset, the thread count or the order of evaluation, so slices and parallel loops
 * give the same values as one sequential pass. */
#include "rng.h"

#include "isa_max.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------------------ Philox-4x32-10 */

static const uint32_t PHILOX_M0 = 0xD2511F53u;   /* round multipliers */
static const uint32_t PHILOX_M1 = 0xCD9E8D57u;
static const uint32_t PHILOX_W0 = 0x9E3779B9u;   /* key increments: golden ratio, sqrt(3) - 1 */
static const uint32_t PHILOX_W1 = 0xBB67AE85u;

static inline void philox_round(uint32_t x[4], uint32_t k0, uint32_t k1)
{
    uint64_t p0 = (uint64_t)PHILOX_M0 * x[0];
    uint64_t p1 = (uint64_t)PHILOX_M1 * x[2];
    uint32_t y0 = (uint32_t)(p1 >> 32) ^ x[1] ^ k0;
    uint32_t y1 = (uint32_t)p1;
    uint32_t y2 = (uint32_t)(p0 >> 32) ^ x[3] ^ k1;
    uint32_t y3 = (uint32_t)p0;
    x[0] = y0;
    x[1] = y1;
    x[2] = y2;
    x[3] = y3;
}

void tr_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t x[4] = { ctr[0], ctr[1], ctr[2], ctr[3] };
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        philox_round(x, k0, k1);
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = x[0];
    out[1] = x[1];
    out[2] = x[2];
    out[3] = x[3];
}

/* ------------------------------------------------------------ streams */

/* The streams compute RNG_BATCH consecutive blocks at once, as structure-of-arrays
 * lanes, so that the vectoriser runs the rounds on SIMD 32x32->64 multiplies; the
 * result is identical to calling tr_philox4x32_10 per block (test_rng checks it). */
enum { RNG_BATCH = 8 };

/* w[lane][k] = word `lane` of block block0 + k. */
static void philox_batch(tr_rng_key key, uint64_t block0, uint32_t w[4][RNG_BATCH])
{
    uint32_t x0[RNG_BATCH], x1[RNG_BATCH], x2[RNG_BATCH], x3[RNG_BATCH];
    for (int k = 0; k < RNG_BATCH; k++) {
        x0[k] = key.step;
        x1[k] = key.layer;
        x2[k] = key.op;
        x3[k] = (uint32_t)(block0 + (uint64_t)k);
    }
    uint32_t k0 = (uint32_t)key.seed, k1 = (uint32_t)(key.seed >> 32);
    for (int r = 0; r < 10; r++) {
        for (int k = 0; k < RNG_BATCH; k++) {
            uint64_t p0 = (uint64_t)PHILOX_M0 * x0[k];
            uint64_t p1 = (uint64_t)PHILOX_M1 * x2[k];
            uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1[k] ^ k0;
            uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3[k] ^ k1;
            x0[k] = y0;
            x1[k] = (uint32_t)p1;
            x2[k] = y2;
            x3[k] = (uint32_t)p0;
        }
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    for (int k = 0; k < RNG_BATCH; k++) {
        w[0][k] = x0[k];
        w[1][k] = x1[k];
        w[2][k] = x2[k];
        w[3][k] = x3[k];
    }
}

/* The same 8 blocks on AVX2, one block per 32-bit lane: _mm256_mul_epu32 gives the 64-bit
 * products of the even lanes, so the odd lanes are shifted down and multiplied apart, then
 * the high and low halves blended back into lane order. The baseline build (SSE2) moves the
 * words between two-lane registers and ran the dropout keep bits at ~10 cycles a bit; the
 * words are identical (test_rng compares both paths against tr_philox4x32_10). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define RNG_HAVE_AVX2 1

__attribute__((target("avx2"))) static inline void mul_hi_lo(__m256i x, __m256i m, __m256i *hi, __m256i *lo)
{
    __m256i even = _mm256_mul_epu32(x, m);                          /* 64-bit products, lanes 0 2 4 6 */
    __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);    /* lanes 1 3 5 7 */
    *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

/* One Philox round of one set of blocks, a block a 32-bit lane of registers of type V (x0..x3
 * are lvalues, kk0 and kk1 the round's keys in every lane): vmul splits the lanes' products by
 * the multipliers m0 and m1 (in scope) into high and low words, vxor is V's xor. The AVX2 and
 * AVX-512 paths are this round at their widths. */
#define PHILOX_ROUND_V(V, vmul, vxor, x0, x1, x2, x3, kk0, kk1)                     \
    do {                                                                            \
        V hi0_, lo0_, hi1_, lo1_;                                                   \
        vmul(x0, m0, &hi0_, &lo0_);                                                 \
        vmul(x2, m1, &hi1_, &lo1_);                                                 \
        x0 = vxor(vxor(hi1_, x1), kk0);                                             \
        x2 = vxor(vxor(hi0_, x3), kk1);                                             \
        x1 = lo1_;                                                                  \
        x3 = lo0_;                                                                  \
    } while (0)
#define PHILOX_ROUND_256(x0, x1, x2, x3, kk0, kk1)                                  \
    PHILOX_ROUND_V(__m256i, mul_hi_lo, _mm256_xor_si256, x0, x1, x2, x3, kk0, kk1)

/* The 8 blocks' words in registers, lane k = block block0 + k. */
__attribute__((target("avx2"))) static inline void philox8_avx2(tr_rng_key key, uint64_t block0, __m256i x[4])
{
    const __m256i m0 = _mm256_set1_epi32((int)PHILOX_M0), m1 = _mm256_set1_epi32((int)PHILOX_M1);
    __m256i x0 = _mm256_set1_epi32((int)key.step), x1 = _mm256_set1_epi32((int)key.layer);
    __m256i x2 = _mm256_set1_epi32((int)key.op);
    __m256i x3 = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)block0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    uint32_t k0 = (uint32_t)key.seed, k1 = (uint32_t)(key.seed >> 32);
    for (int r = 0; r < 10; r++) {
        const __m256i kk0 = _mm256_set1_epi32((int)k0), kk1 = _mm256_set1_epi32((int)k1);
        PHILOX_ROUND_256(x0, x1, x2, x3, kk0, kk1);
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    x[0] = x0;
    x[1] = x1;
    x[2] = x2;
    x[3] = x3;
}

__attribute__((target("avx2"))) static void philox_batch_avx2(tr_rng_key key, uint64_t block0, uint32_t w[4][RNG_BATCH])
{
    __m256i x[4];
    philox8_avx2(key, block0, x);
    for (int lane = 0; lane < 4; lane++) _mm256_storeu_si256((__m256i *)w[lane], x[lane]);
}
#endif

/* The words of 8 blocks, on AVX2 where the CPU has it (avx2: __builtin_cpu_supports). */
static inline void batch_words(int avx2, tr_rng_key key, uint64_t block0, uint32_t w[4][RNG_BATCH])
{
#ifdef RNG_HAVE_AVX2
    if (avx2) {
        philox_batch_avx2(key, block0, w);
        return;
    }
#endif
    philox_batch(key, block0, w);
}

static inline float word_to_uniform(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

typedef enum stream_kind { STREAM_UNIFORM, STREAM_NORMAL } stream_kind;

/* v[4k + lane] = the value of element 4 (block0 + k) + lane (UNIFORM or NORMAL). */
static void batch_values(stream_kind kind, int avx2, tr_rng_key key, uint64_t block0, float v[4 * RNG_BATCH])
{
    uint32_t w[4][RNG_BATCH];
    batch_words(avx2, key, block0, w);
    if (kind == STREAM_NORMAL) {
        const float two_pi = 6.28318530717958647692f;
        for (int k = 0; k < RNG_BATCH; k++) {
            for (int j = 0; j < 2; j++) {
                float u1 = (float)((w[2 * j][k] >> 8) + 1) * (1.0f / 16777216.0f);
                float u2 = word_to_uniform(w[2 * j + 1][k]);
                float r = sqrtf(-2.0f * logf(u1));
                float t = two_pi * u2;
                v[4 * k + 2 * j] = r * cosf(t);
                v[4 * k + 2 * j + 1] = r * sinf(t);
            }
        }
        return;
    }
    for (int k = 0; k < RNG_BATCH; k++)
        for (int lane = 0; lane < 4; lane++) v[4 * k + lane] = word_to_uniform(w[lane][k]);
}

/* Batches are independent; big streams (dropout over an activation) are split across
 * threads. Below this many batches the thread start-up costs more than it saves. */
enum { RNG_PARALLEL_BATCHES = 2048 };

/* Whether a stream of nbatch batches is worth a parallel region: big enough, and not called
 * from inside one already (the attention kernel and the dropout op draw from their own
 * threads; a nested region, even an if(0) one, is a libgomp team start per call). */
static int stream_parallel(int64_t nbatch)
{
#ifdef _OPENMP
    return nbatch > RNG_PARALLEL_BATCHES && !omp_in_parallel();
#else
    (void)nbatch;
    return 0;
#endif
}

/* Batch g of a float stream from block `first`: its part of elements [offset, offset + n). */
static void stream_batch(stream_kind kind, int avx2, float *out, size_t n, tr_rng_key key, uint64_t offset,
                         uint64_t first, int64_t g)
{
    const uint64_t per_batch = 4 * RNG_BATCH;
    uint64_t block0 = first + (uint64_t)g * RNG_BATCH;
    uint64_t e0 = block0 * 4;
    uint64_t lo = e0 > offset ? e0 : offset;
    uint64_t hi = e0 + per_batch < offset + n ? e0 + per_batch : offset + n;
    float v[4 * RNG_BATCH];
    batch_values(kind, avx2, key, block0, v);
    memcpy(out + (lo - offset), v + (lo - e0), (size_t)(hi - lo) * sizeof(float));
}

/* Writes elements [offset, offset + n) of the stream as floats. */
static void run_stream(stream_kind kind, float *out, size_t n, tr_rng_key key, uint64_t offset)
{
    if (n == 0) return;
    uint64_t first = offset / 4, last = (offset + n - 1) / 4;
    int64_t nbatch = (int64_t)((last - first) / RNG_BATCH + 1);
#ifdef RNG_HAVE_AVX2
    const int avx2 = __builtin_cpu_supports("avx2");
#else
    const int avx2 = 0;
#endif
    if (!stream_parallel(nbatch)) {
        for (int64_t g = 0; g < nbatch; g++) stream_batch(kind, avx2, out, n, key, offset, first, g);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int64_t g = 0; g < nbatch; g++) stream_batch(kind, avx2, out, n, key, offset, first, g);
}

/* ------------------------------------------------------------ dropout keep bytes */

/* keep(e) = uniform(e) >= p, as an integer comparison of the word's top 24 bits u:
 * u * 2^-24 >= p exactly when u >= ceil(p * 2^24) (p * 2^24 is exact in double), so the
 * bits are those of the float definition in rng.h, without a float per element (the
 * float path was most of a dropout's cost). p <= 0 keeps all; p > 1 - 2^-24 and NaN none. */
static uint32_t keep_threshold(float p)
{
    if (!(p > 0.0f)) return p <= 0.0f ? 0u : 1u << 24;   /* NaN: v >= NaN is false */
    double t = ceil((double)p * 16777216.0);
    return t >= 16777216.0 ? 1u << 24 : (uint32_t)t;
}

/* Each ISA's batch writes the keep bytes of KEEP_MAX_BLOCKS or fewer consecutive blocks,
 * 4 bytes a block in element order. The four bytes of block k are one little-endian 32-bit
 * word b0 | b1 << 8 | b2 << 16 | b3 << 24 of its four words' bits, so the SIMD paths store
 * lanes of words straight out, with no transpose. */
enum { KEEP_MAX_BLOCKS = 32 };

static int keep_batch_blocks(tr_rng_isa isa)
{
    return isa == TR_RNG_ISA_AVX512 ? 32 : isa == TR_RNG_ISA_AVX2 ? 16 : RNG_BATCH;
}

static void keep_batch_scalar(tr_rng_key key, uint64_t block0, uint32_t thr, uint8_t *dst)
{
    uint32_t w[4][RNG_BATCH];
    philox_batch(key, block0, w);
    for (int k = 0; k < RNG_BATCH; k++)
        for (int lane = 0; lane < 4; lane++) dst[4 * k + lane] = (uint8_t)((w[lane][k] >> 8) >= thr);
}

#ifdef RNG_HAVE_AVX2
/* The 32 keep bytes of one set of 8 blocks, a word of 4 bytes per block. (w >> 8) >= thr
 * is a signed compare against thr - 1: both sides lie in [-1, 2^24]. */
__attribute__((target("avx2"))) static inline void keep_store_256(__m256i x0, __m256i x1, __m256i x2, __m256i x3,
                                                                  uint32_t thr, uint8_t *dst)
{
    const __m256i below = _mm256_set1_epi32((int)thr - 1), one = _mm256_set1_epi32(1);
    const __m256i x[4] = { x0, x1, x2, x3 };
    __m256i packed = _mm256_setzero_si256();
    for (int lane = 0; lane < 4; lane++) {
        __m256i bit = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_srli_epi32(x[lane], 8), below), one);
        packed = _mm256_or_si256(packed, _mm256_slli_epi32(bit, 8 * lane));
    }
    _mm256_storeu_si256((__m256i *)dst, packed);
}

/* Two sets of 8 blocks interleaved in named registers, as the AVX-512 path does, so that
 * one set's multiplies run in the other's latency. */
__attribute__((target("avx2"))) static void keep_batch_avx2(tr_rng_key key, uint64_t block0, uint32_t thr, uint8_t *dst)
{
    const __m256i m0 = _mm256_set1_epi32((int)PHILOX_M0), m1 = _mm256_set1_epi32((int)PHILOX_M1);
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i a0 = _mm256_set1_epi32((int)key.step), a1 = _mm256_set1_epi32((int)key.layer);
    __m256i a2 = _mm256_set1_epi32((int)key.op);
    __m256i a3 = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)block0), lanes);
    __m256i b0 = a0, b1 = a1, b2 = a2;
    __m256i b3 = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)(block0 + 8)), lanes);
    uint32_t k0 = (uint32_t)key.seed, k1 = (uint32_t)(key.seed >> 32);
    for (int r = 0; r < 10; r++) {
        const __m256i kk0 = _mm256_set1_epi32((int)k0), kk1 = _mm256_set1_epi32((int)k1);
        PHILOX_ROUND_256(a0, a1, a2, a3, kk0, kk1);
        PHILOX_ROUND_256(b0, b1, b2, b3, kk0, kk1);
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    keep_store_256(a0, a1, a2, a3, thr, dst);
    keep_store_256(b0, b1, b2, b3, thr, dst + 32);
}

/* 16 blocks, one per 32-bit lane, as in the AVX2 path (even and odd lanes multiplied apart). */
__attribute__((target("avx512f"))) static inline void mul_hi_lo_512(__m512i x, __m512i m, __m512i *hi, __m512i *lo)
{
    __m512i even = _mm512_mul_epu32(x, m);
    __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), m);
    *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
    *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

#define PHILOX_ROUND_512(x0, x1, x2, x3, kk0, kk1)                                  \
    PHILOX_ROUND_V(__m512i, mul_hi_lo_512, _mm512_xor_si512, x0, x1, x2, x3, kk0, kk1)

/* The 64 keep bytes of one set, packed as in the AVX2 path (a word of 4 bytes per block). */
__attribute__((target("avx512f"))) static inline void keep_store_512(__m512i x0, __m512i x1, __m512i x2, __m512i x3,
                                                                     __m512i t, uint8_t *dst)
{
    __m512i packed = _mm512_maskz_mov_epi32(_mm512_cmpge_epu32_mask(_mm512_srli_epi32(x0, 8), t), _mm512_set1_epi32(1));
    packed = _mm512_mask_or_epi32(packed, _mm512_cmpge_epu32_mask(_mm512_srli_epi32(x1, 8), t), packed,
                                  _mm512_set1_epi32(1 << 8));
    packed = _mm512_mask_or_epi32(packed, _mm512_cmpge_epu32_mask(_mm512_srli_epi32(x2, 8), t), packed,
                                  _mm512_set1_epi32(1 << 16));
    packed = _mm512_mask_or_epi32(packed, _mm512_cmpge_epu32_mask(_mm512_srli_epi32(x3, 8), t), packed,
                                  _mm512_set1_epi32(1 << 24));
    _mm512_storeu_si512((void *)dst, packed);
}

/* Two sets of 16 blocks interleaved, so that one set's multiplies run in the other's
 * latency (a round is a dependent chain of multiply, blend and xor); each set in its own
 * registers (as arrays, GCC kept them on the stack). */
__attribute__((target("avx512f"))) static void keep_batch_avx512(tr_rng_key key, uint64_t block0, uint32_t thr,
                                                                 uint8_t *dst)
{
    const __m512i m0 = _mm512_set1_epi32((int)PHILOX_M0), m1 = _mm512_set1_epi32((int)PHILOX_M1);
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i a0 = _mm512_set1_epi32((int)key.step), a1 = _mm512_set1_epi32((int)key.layer);
    __m512i a2 = _mm512_set1_epi32((int)key.op);
    __m512i a3 = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)block0), lanes);
    __m512i b0 = a0, b1 = a1, b2 = a2;
    __m512i b3 = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)(block0 + 16)), lanes);
    uint32_t k0 = (uint32_t)key.seed, k1 = (uint32_t)(key.seed >> 32);
    for (int r = 0; r < 10; r++) {
        const __m512i kk0 = _mm512_set1_epi32((int)k0), kk1 = _mm512_set1_epi32((int)k1);
        PHILOX_ROUND_512(a0, a1, a2, a3, kk0, kk1);
        PHILOX_ROUND_512(b0, b1, b2, b3, kk0, kk1);
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    const __m512i t = _mm512_set1_epi32((int)thr);
    keep_store_512(a0, a1, a2, a3, t, dst);
    keep_store_512(b0, b1, b2, b3, t, dst + 64);
}
#endif

static inline void keep_batch(tr_rng_isa isa, tr_rng_key key, uint64_t block0, uint32_t thr, uint8_t *dst)
{
#ifdef RNG_HAVE_AVX2
    if (isa == TR_RNG_ISA_AVX512) {
        keep_batch_avx512(key, block0, thr, dst);
        return;
    }
    if (isa == TR_RNG_ISA_AVX2) {
        keep_batch_avx2(key, block0, thr, dst);
        return;
    }
#endif
    keep_batch_scalar(key, block0, thr, dst);
}

/* mask[i] = 0 - bytes[i] (all ones for a kept element) for the n <= 128 bytes of one batch. */
#ifdef RNG_HAVE_AVX2
__attribute__((target("avx512f"))) static void widen_avx512(uint32_t *mask, const uint8_t *bytes)
{
    for (int q = 0; q < 8; q++) {
        __m512i w = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(bytes + 16 * q)));
        _mm512_storeu_si512((void *)(mask + 16 * q), _mm512_sub_epi32(_mm512_setzero_si512(), w));
    }
}

__attribute__((target("avx2"))) static void widen_avx2(uint32_t *mask, const uint8_t *bytes)
{
    for (int q = 0; q < 8; q++) {
        __m256i w = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(bytes + 8 * q)));
        _mm256_storeu_si256((__m256i *)(mask + 8 * q), _mm256_sub_epi32(_mm256_setzero_si256(), w));
    }
}
#endif

static inline void widen_batch(tr_rng_isa isa, uint32_t *mask, const uint8_t *bytes, size_t n)
{
#ifdef RNG_HAVE_AVX2
    if (isa == TR_RNG_ISA_AVX512 && n == 128) {
        widen_avx512(mask, bytes);
        return;
    }
    if (isa == TR_RNG_ISA_AVX2 && n == 64) {
        widen_avx2(mask, bytes);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) mask[i] = 0u - (uint32_t)bytes[i];
}

/* Elements [offset, offset + n) on one thread, as 0/1 bytes (words == 0) or 32-bit masks:
 * whole batches of bytes are written in place, the partial first and last through a small
 * buffer; masks are widened from a batch's bytes. */
static void keep_range(tr_rng_isa isa, void *out, int words, size_t n, uint32_t thr, tr_rng_key key,
                       uint64_t offset)
{
    const uint64_t bw = (uint64_t)keep_batch_blocks(isa), per_batch = 4 * bw;
    const uint64_t end = offset + n;
    uint8_t *bytes = out;
    uint32_t *mask = out;
    for (uint64_t block0 = offset / 4; block0 * 4 < end; block0 += bw) {
        uint64_t e0 = block0 * 4;
        if (!words && e0 >= offset && e0 + per_batch <= end) {
            keep_batch(isa, key, block0, thr, bytes + (e0 - offset));
            continue;
        }
        uint8_t tmp[4 * KEEP_MAX_BLOCKS];
        keep_batch(isa, key, block0, thr, tmp);
        uint64_t lo = e0 > offset ? e0 : offset, hi = e0 + per_batch < end ? e0 + per_batch : end;
        if (words) widen_batch(isa, mask + (lo - offset), tmp + (lo - e0), (size_t)(hi - lo));
        else memcpy(bytes + (lo - offset), tmp + (lo - e0), (size_t)(hi - lo));
    }
}

/* Elements per thread's share of a parallel keep stream (a multiple of every batch). */
enum { KEEP_PARALLEL_CHUNK = 4 * RNG_BATCH * RNG_PARALLEL_BATCHES };

static void keep_stream(tr_rng_isa isa, void *out, int words, size_t n, float p, tr_rng_key key, uint64_t offset)
{
    if (n == 0) return;
    const uint32_t thr = keep_threshold(p);
    const size_t esz = words ? 4 : 1;
    const int64_t nchunk = (int64_t)((n + KEEP_PARALLEL_CHUNK - 1) / KEEP_PARALLEL_CHUNK);
    if (nchunk < 2 || !stream_parallel((int64_t)(n / (4 * RNG_BATCH)))) {
        keep_range(isa, out, words, n, thr, key, offset);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int64_t c = 0; c < nchunk; c++) {
        size_t start = (size_t)c * KEEP_PARALLEL_CHUNK, len = n - start < KEEP_PARALLEL_CHUNK ? n - start : KEEP_PARALLEL_CHUNK;
        keep_range(isa, (char *)out + start * esz, words, len, thr, key, offset + start);
    }
}

tr_rng_isa tr_rng_cpu_isa(void)
{
#ifdef RNG_HAVE_AVX2
    if (TR_ISA_AVX512_ALLOWED && __builtin_cpu_supports("avx512f")) return TR_RNG_ISA_AVX512;
    if (__builtin_cpu_supports("avx2")) return TR_RNG_ISA_AVX2;
#endif
    return TR_RNG_ISA_SCALAR;
}

int tr_dropout_mask_bits_isa(tr_rng_isa isa, uint8_t *keep, size_t n, float p, tr_rng_key key, uint64_t offset)
{
    if ((int)isa < 0 || isa > tr_rng_cpu_isa()) return -1;
    keep_stream(isa, keep, 0, n, p, key, offset);
    return 0;
}

int tr_dropout_mask_words_isa(tr_rng_isa isa, uint32_t *mask, size_t n, float p, tr_rng_key key, uint64_t offset)
{
    if ((int)isa < 0 || isa > tr_rng_cpu_isa()) return -1;
    keep_stream(isa, mask, 1, n, p, key, offset);
    return 0;
}

/* ------------------------------------------------------------ public streams */

void tr_rng_uniform(float *out, size_t n, tr_rng_key key, uint64_t offset)
{
    run_stream(STREAM_UNIFORM, out, n, key, offset);
}

void tr_rng_normal(float *out, size_t n, tr_rng_key key, uint64_t offset)
{
    run_stream(STREAM_NORMAL, out, n, key, offset);
}

void tr_dropout_mask_bits(uint8_t *keep, size_t n, float p, tr_rng_key key, uint64_t offset)
{
    keep_stream(tr_rng_cpu_isa(), keep, 0, n, p, key, offset);
}

void tr_dropout_mask_words(uint32_t *mask, size_t n, float p, tr_rng_key key, uint64_t offset)
{
    keep_stream(tr_rng_cpu_isa(), mask, 1, n, p, key, offset);
}
