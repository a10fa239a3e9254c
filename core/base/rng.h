/* rng.h — the counter-based random number generator: Philox-4x32-10 (Salmon, Moraes,
 * Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11), bit-compatible
 * with Random123's philox4x32_10.
 *
 * There is no generator state: every random number is a pure function of
 * (seed, step, layer, op, element index), so a dropout mask is recomputed identically
 * during checkpoint recomputation and in backward, on the CPU and on CUDA, and any
 * slice of a stream can be regenerated alone.
 *
 * The stream layout (the CUDA kernels reproduce it bit for bit):
 *   key     = { (uint32_t)seed, (uint32_t)(seed >> 32) }
 *   block b = tr_philox4x32_10(ctr = { step, layer, op, (uint32_t)b }, key) -> w[0..3]
 *   element e of the stream (e = offset + i for out[i]) is word w[e % 4] of block e / 4
 *   uniform(e) = (w >> 8) * 2^-24            in [0, 1), exact in a float
 *   keep(e)    = uniform(e) >= p             (float comparison; keep[i] is 1 or 0)
 *   normal(e)  : Box-Muller on the word pairs (w[0], w[1]) and (w[2], w[3]) of e's block:
 *                u1 = ((w[2j] >> 8) + 1) * 2^-24 in (0, 1], u2 = (w[2j+1] >> 8) * 2^-24,
 *                r = sqrtf(-2 logf(u1)), t = 2 pi u2;
 *                element 4b+2j = r cosf(t), element 4b+2j+1 = r sinf(t), in float.
 *                Uniforms and dropout bits are bit-exact across backends; normals agree
 *                to the accuracy of each backend's logf/cosf/sinf (a few ulps).
 * The block index is 32 bits: a stream repeats after 2^34 elements, so one
 * (step, layer, op) must not ask for more (any activation tensor is far smaller). */
#ifndef TR_RNG_H
#define TR_RNG_H

#include <stddef.h>
#include <stdint.h>

/* The Philox-4x32-10 bijection: out = 10 rounds of (ctr) under key. */
void tr_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Which stream: the seed of the run, the optimizer step, the layer and the op within
 * the layer (the caller numbers them; distinct ops that draw must use distinct ids). */
typedef struct tr_rng_key {
    uint64_t seed;
    uint32_t step;
    uint32_t layer;
    uint32_t op;
} tr_rng_key;

/* out[i] = uniform(offset + i), i < n. */
void tr_rng_uniform(float *out, size_t n, tr_rng_key key, uint64_t offset);
/* out[i] = normal(offset + i): mean 0, variance 1. */
void tr_rng_normal(float *out, size_t n, tr_rng_key key, uint64_t offset);
/* keep[i] = 1 when uniform(offset + i) >= p, else 0 (dropout keeps with probability 1-p). */
void tr_dropout_mask_bits(uint8_t *keep, size_t n, float p, tr_rng_key key, uint64_t offset);
/* The same decisions as 32-bit masks: mask[i] = 0xFFFFFFFF when kept, else 0, for a bit
 * select in a loop of 32-bit lanes (GCC vectorises a loop that mixes byte and float
 * elements at 16 bytes only, even under AVX-512). */
void tr_dropout_mask_words(uint32_t *mask, size_t n, float p, tr_rng_key key, uint64_t offset);

/* The instruction sets the keep bytes are made with: tr_dropout_mask_bits takes the widest
 * the CPU runs (AVX-512: 32 blocks a batch, AVX2: 16, else portable C); every path gives the
 * same bytes (and masks). The _isa forms run one chosen path, for tests and benchmarks: they
 * return -1 and write nothing when the CPU (or this build) lacks that path, else 0. */
typedef enum tr_rng_isa { TR_RNG_ISA_SCALAR = 0, TR_RNG_ISA_AVX2 = 1, TR_RNG_ISA_AVX512 = 2 } tr_rng_isa;
tr_rng_isa tr_rng_cpu_isa(void);
int tr_dropout_mask_bits_isa(tr_rng_isa isa, uint8_t *keep, size_t n, float p, tr_rng_key key, uint64_t offset);
int tr_dropout_mask_words_isa(tr_rng_isa isa, uint32_t *mask, size_t n, float p, tr_rng_key key, uint64_t offset);

#endif
