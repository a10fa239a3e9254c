/* rng.c — Philox-4x32-10 and the keyed streams built on it; rng.h documents the exact
 * stream layout that the CUDA kernels must reproduce.
 *
 * Invariant: a stream element depends only on (key, element index), never on n, the
 * offset, the thread count or the order of evaluation, so slices and parallel loops
 * give the same values as one sequential pass. */
#include "rng.h"

#include <math.h>
#include <string.h>

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

static inline float word_to_uniform(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

typedef enum stream_kind { STREAM_UNIFORM, STREAM_NORMAL, STREAM_KEEP } stream_kind;

/* v[4k + lane] = the value of element 4 (block0 + k) + lane. */
static void batch_values(stream_kind kind, float p, tr_rng_key key, uint64_t block0, float v[4 * RNG_BATCH])
{
    uint32_t w[4][RNG_BATCH];
    philox_batch(key, block0, w);
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
    if (kind == STREAM_KEEP)
        for (int i = 0; i < 4 * RNG_BATCH; i++) v[i] = v[i] >= p ? 1.0f : 0.0f;
}

/* Batches are independent; big streams (dropout over an activation) are split across
 * threads. Below this many batches the thread start-up costs more than it saves. */
enum { RNG_PARALLEL_BATCHES = 2048 };

/* Writes elements [offset, offset + n) of the stream: floats, or 0/1 bytes for KEEP. */
static void run_stream(stream_kind kind, void *out, size_t n, float p, tr_rng_key key, uint64_t offset)
{
    if (n == 0) return;
    const uint64_t per_batch = 4 * RNG_BATCH;
    uint64_t first = offset / 4, last = (offset + n - 1) / 4;
    int64_t nbatch = (int64_t)((last - first) / RNG_BATCH + 1);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nbatch > RNG_PARALLEL_BATCHES)
#endif
    for (int64_t g = 0; g < nbatch; g++) {
        uint64_t block0 = first + (uint64_t)g * RNG_BATCH;
        float v[4 * RNG_BATCH];
        batch_values(kind, p, key, block0, v);
        /* the part of this batch's elements [e0, e0 + per_batch) inside the request */
        uint64_t e0 = block0 * 4;
        uint64_t lo = e0 > offset ? e0 : offset;
        uint64_t hi = e0 + per_batch < offset + n ? e0 + per_batch : offset + n;
        if (kind == STREAM_KEEP) {
            uint8_t *keep = out;
            for (uint64_t e = lo; e < hi; e++) keep[e - offset] = (uint8_t)v[e - e0];
        } else {
            memcpy((float *)out + (lo - offset), v + (lo - e0), (size_t)(hi - lo) * sizeof(float));
        }
    }
}

/* ------------------------------------------------------------ public streams */

void tr_rng_uniform(float *out, size_t n, tr_rng_key key, uint64_t offset)
{
    run_stream(STREAM_UNIFORM, out, n, 0.0f, key, offset);
}

void tr_rng_normal(float *out, size_t n, tr_rng_key key, uint64_t offset)
{
    run_stream(STREAM_NORMAL, out, n, 0.0f, key, offset);
}

void tr_dropout_mask_bits(uint8_t *keep, size_t n, float p, tr_rng_key key, uint64_t offset)
{
    run_stream(STREAM_KEEP, keep, n, p, key, offset);
}
