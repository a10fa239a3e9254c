/* attn_short.h — the attention forward for short sequences (T <= 32 keys on AVX-512, 8 on
 * AVX2; head dim 32 or 64; no attention dropout) in registers: one (b, h) at a time, its
 * scores, softmax and P v never leave the registers and a few KiB of stack (q^T, the
 * probabilities).
 *
 * Why: `trainer encode` and short-text fine-tunes run T of 5 to 30. There the tiled path of
 * attention.c paid per row (a mask fill, a max, an exp loop, a sum, a log: five calls
 * per 16 scores) and per head (a zeroed scratch, a key-select row, two tile products of one
 * or two vectors a row), a cost out of proportion to the few FLOPs of a short head. A row of
 * T <= 32 scores is one or two vectors, so the whole head fits the register file, and this
 * path is faster than the tiled one at every such length (the figures:
 * docs/BENCHMARKS.md, "Figures behind choices in the code"; bench/attention_short.lua).
 *
 * Same contract as tr_k_attention_fwd_f32 (attention.h): out [B,T,H,D] (=), lse [B,H,T] (=),
 * mask [B,T] i32 or f32 or NULL, a row whose keys are all masked gives out 0 and lse -inf.
 * The scores are summed over d in order with fused multiply-adds, as the tile products do,
 * and P v is normalised on the output row (1/rowsum), so results agree with the tiled path
 * to rounding (the tests hold both to the double kernels). */
#ifndef TR_KERNELS_CPU_ATTN_SHORT_H
#define TR_KERNELS_CPU_ATTN_SHORT_H

#include <stdint.h>

enum { TR_ATTN_SHORT_MAX_T = 32, TR_ATTN_SHORT_MAX_T_AVX2 = 8 };

/* 1 when tr_attn_short_fwd_f32 runs this call: product path isa (attn_tile.h) is AVX-512 (and
 * 1 <= T <= TR_ATTN_SHORT_MAX_T) or AVX2 (T <= TR_ATTN_SHORT_MAX_T_AVX2), the CPU has it, D is
 * 32 or 64, and there is no dropout. */
int tr_attn_short_usable(int isa, int64_t T, int64_t D, int use_dropout);

/* The forward above over every (b, h), on nthreads OpenMP threads (a head's result does not
 * depend on the thread that runs it). Only for calls tr_attn_short_usable accepts. */
void tr_attn_short_fwd_f32(int isa, float *out, float *lse, const float *q, const float *k, const float *v,
                           const void *mask, int mask_dtype, float scale, int64_t B, int64_t T,
                           int64_t H, int64_t D, int nthreads);

/* The packed form (core/ops/attention_packed.c): B sequences stored back to back, row r of
 * [N, H, D] with N = off[B], sequence b its rows off[b] .. off[b+1]-1, each attending over
 * its own rows only (no mask); lse of sequence b, head h, query i at H*off[b] + h*n_b + i.
 * Per head this is the padded kernel above with the sequence's keys kept, so a prefix-masked
 * padded batch gives the same bits on the same isa. For calls tr_attn_short_usable accepts
 * with T = the padded length (every sequence at most that long). */
void tr_attn_short_packed_fwd_f32(int isa, float *out, float *lse, const float *q, const float *k, const float *v,
                                  const int64_t *off, int64_t B, int64_t H, int64_t D, float scale, int nthreads);

#endif
