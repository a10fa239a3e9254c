/* rng.c — Philox-4x32-10 and the keyed streams built on it; rng.h documents the exact
 * stream layout that the CUDA kernels must reproduce.
 *
 * Invariant: a stream element depends only on (key, element index), never on n, the
 * offset, the thread count or the order of evaluation, so slices and parallel loops
 * give the same values as one sequential pass. */
#include "rng.h"

#include <math.h>

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

/* ------------------------------------------------------------ stream blocks */

static inline void stream_block(tr_rng_key key, uint64_t block, uint32_t w[4])
{
    const uint32_t ctr[4] = { key.step, key.layer, key.op, (uint32_t)block };
    const uint32_t k[2] = { (uint32_t)key.seed, (uint32_t)(key.seed >> 32) };
    tr_philox4x32_10(ctr, k, w);
}

static inline float word_to_uniform(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

/* Blocks are independent; big streams (dropout over an activation) are split across
 * threads. Below this many blocks the thread start-up costs more than it saves. */
enum { RNG_PARALLEL_BLOCKS = 8192 };

/* Each public function visits every block touched by elements [offset, offset + n)
 * and writes the lanes that fall in range. */
static inline int64_t first_block(uint64_t offset) { return (int64_t)(offset / 4); }
static inline int64_t last_block(uint64_t offset, size_t n) { return (int64_t)((offset + n - 1) / 4); }

/* ------------------------------------------------------------ public streams */

void tr_rng_uniform(float *out, size_t n, tr_rng_key key, uint64_t offset)
{
    if (n == 0) return;
    int64_t first = first_block(offset), last = last_block(offset, n);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (last - first > RNG_PARALLEL_BLOCKS)
#endif
    for (int64_t b = first; b <= last; b++) {
        uint32_t w[4];
        stream_block(key, (uint64_t)b, w);
        for (int lane = 0; lane < 4; lane++) {
            uint64_t e = (uint64_t)b * 4 + (uint64_t)lane;
            if (e >= offset && e - offset < n) out[e - offset] = word_to_uniform(w[lane]);
        }
    }
}

void tr_rng_normal(float *out, size_t n, tr_rng_key key, uint64_t offset)
{
    if (n == 0) return;
    const float two_pi = 6.28318530717958647692f;
    int64_t first = first_block(offset), last = last_block(offset, n);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (last - first > RNG_PARALLEL_BLOCKS)
#endif
    for (int64_t b = first; b <= last; b++) {
        uint32_t w[4];
        stream_block(key, (uint64_t)b, w);
        for (int j = 0; j < 2; j++) {
            float u1 = (float)((w[2 * j] >> 8) + 1) * (1.0f / 16777216.0f);
            float u2 = word_to_uniform(w[2 * j + 1]);
            float r = sqrtf(-2.0f * logf(u1));
            float t = two_pi * u2;
            float z[2] = { r * cosf(t), r * sinf(t) };
            for (int k = 0; k < 2; k++) {
                uint64_t e = (uint64_t)b * 4 + (uint64_t)(2 * j + k);
                if (e >= offset && e - offset < n) out[e - offset] = z[k];
            }
        }
    }
}

void tr_dropout_mask_bits(uint8_t *keep, size_t n, float p, tr_rng_key key, uint64_t offset)
{
    if (n == 0) return;
    int64_t first = first_block(offset), last = last_block(offset, n);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (last - first > RNG_PARALLEL_BLOCKS)
#endif
    for (int64_t b = first; b <= last; b++) {
        uint32_t w[4];
        stream_block(key, (uint64_t)b, w);
        for (int lane = 0; lane < 4; lane++) {
            uint64_t e = (uint64_t)b * 4 + (uint64_t)lane;
            if (e >= offset && e - offset < n) keep[e - offset] = word_to_uniform(w[lane]) >= p;
        }
    }
}
