/* philox.cuh — Philox-4x32-10 on the device, bit-identical to core/base/rng.c (whose header
 * documents the stream layout): element e of the stream keyed (seed, step, layer, op) is
 * word e % 4 of block e / 4, block b = philox(ctr = {step, layer, op, b}, key = seed), and
 * uniform(e) = (w >> 8) * 2^-24. Dropout keeps e when uniform(e) >= p. Private to
 * kernels/cuda. */
#ifndef TR_KERNELS_CUDA_PHILOX_CUH
#define TR_KERNELS_CUDA_PHILOX_CUH

#include <stdint.h>

typedef struct tr_k_rng {
    uint32_t k0, k1;            /* the seed's low and high words */
    uint32_t step, layer, op;
} tr_k_rng;

static inline tr_k_rng tr_k_rng_make(uint64_t seed, uint32_t step, uint32_t layer, uint32_t op)
{
    tr_k_rng r = { (uint32_t)seed, (uint32_t)(seed >> 32), step, layer, op };
    return r;
}

/* Word `lane` (0..3) of block `block`. Each call runs the 10 rounds; callers that need the
 * four words of one block use tr_k_philox_block. */
__device__ __forceinline__ void tr_k_philox_block(const tr_k_rng &r, uint32_t block, uint32_t w[4])
{
    uint32_t x0 = r.step, x1 = r.layer, x2 = r.op, x3 = block;
    uint32_t k0 = r.k0, k1 = r.k1;
#pragma unroll
    for (int i = 0; i < 10; i++) {
        const uint32_t hi0 = __umulhi(0xD2511F53u, x0), lo0 = 0xD2511F53u * x0;
        const uint32_t hi1 = __umulhi(0xCD9E8D57u, x2), lo1 = 0xCD9E8D57u * x2;
        const uint32_t y0 = hi1 ^ x1 ^ k0;
        const uint32_t y2 = hi0 ^ x3 ^ k1;
        x0 = y0;
        x1 = lo1;
        x2 = y2;
        x3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    w[0] = x0;
    w[1] = x1;
    w[2] = x2;
    w[3] = x3;
}

__device__ __forceinline__ float tr_k_word_uniform(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

/* uniform(e) of the stream. */
__device__ __forceinline__ float tr_k_uniform(const tr_k_rng &r, uint64_t e)
{
    uint32_t w[4];
    tr_k_philox_block(r, (uint32_t)(e >> 2), w);
    return tr_k_word_uniform(w[e & 3]);
}

#endif
