/* attention.h — the attention kernels (attention.cu), the device twin of
 * kernels/cpu/attention.h; host launchers with C linkage and no CUDA types, under launcher.h's
 * contract. */
#ifndef TR_KERNELS_CUDA_ATTENTION_H
#define TR_KERNELS_CUDA_ATTENTION_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* A relative-position bias for the launchers (kernels/cpu/attn_bucket.h's bucketing): the
 * score of query i and key j in head h gains table[bucket(j - i), h] after the scaling. */
typedef struct tr_k_attn_rel {
    const float *table;     /* [nbuckets, H] f32 on the device; NULL: no bias */
    float *dtable;          /* backward: [nbuckets, H] f32 (+=), or NULL */
    float *scratch;         /* tr_k_attention_rel_scratch_cuda(B, T, H) floats of device memory */
    int64_t nbuckets, max_distance;
    int bidirectional;
} tr_k_attn_rel;

/* The scratch (f32 elements) of a launch with a bias: each head's biases by relative
 * position, the buckets, and in the backward the scores' gradient summed per (b, h) and
 * relative position: (B*H + H + 1) * (2T - 1). */
int64_t tr_k_attention_rel_scratch_cuda(int64_t B, int64_t T, int64_t H);

/* q, k, v, out [B,T,H,D] of dtype dt; lse [B,H,T] (=, f32, -inf for a row whose keys are
 * all padded: its out is 0); mask [B,T] of mask_dt (TR_I32 or TR_F32, nonzero = keep) or
 * NULL; dropout p on the probabilities with the key (seed, step, layer, op) and stream
 * index ((b*H + h)*T + i)*T + j, as kernels/cpu/attention.h, so the masks are the CPU's.
 * Any D <= 128 (kernels for 32, 64 and 128 lanes of registers). rel: a relative-position
 * bias or NULL (the tensor-core kernels take no bias: such a launch runs the fp32-register
 * kernels in any dtype). 
 * Flash-style: one warp per query row, keys streamed through shared memory in tiles of
 * 32 with an online softmax in fp32; nothing of size T x T is ever stored. */
int tr_k_attention_fwd_cuda(void *out, float *lse, const void *q, const void *k, const void *v, int dt,
                            const void *mask, int mask_dt, float p, uint64_t seed, uint32_t step, uint32_t layer,
                            uint32_t op, const tr_k_attn_rel *rel, float scale, int64_t B, int64_t T, int64_t H,
                            int64_t D, void *stream, tr_error *err);
/* Scratch (f32 elements) of the backward: the row terms delta = dout . out, [B,H,T]. */
int64_t tr_k_attention_bwd_scratch_cuda(int64_t B, int64_t T, int64_t H);
/* dq, dk, dv [B,T,H,D] (=), dtype dt; out and lse are the forward's (the op recomputes out
 * into workspace when it was not kept). dK and dV: one warp per key row; dQ: one warp per
 * query row; no atomics, so the gradients repeat bit for bit. With rel->dtable, the table's
 * gradient (+=): the scores' gradient summed along each relative position by one warp per
 * (b, h, j - i), then per bucket and head by one thread each, in index order. */
int tr_k_attention_bwd_cuda(void *dq, void *dk, void *dv, const void *dout, const void *out, const void *q,
                            const void *k, const void *v, int dt, const float *lse, const void *mask, int mask_dt,
                            float p, uint64_t seed, uint32_t step, uint32_t layer, uint32_t op,
                            const tr_k_attn_rel *rel, float scale, int64_t B, int64_t T, int64_t H, int64_t D,
                            float *scratch, void *stream, tr_error *err);

/* The two launchers above with a window: query i sees keys j with |i - j| <= window (0 or
 * window >= T - 1: every key, the launchers above). A window narrower than the keys runs on the
 * fp32-register kernels (the tensor-core ones take none), as a bias does. query_rows n in
 * (0, T): only each sequence's queries 0 .. n-1 are computed (kernels/cpu/attention.h's
 * contract: the other rows' out 0 and lse -inf, their dq 0, their dout unread, and the kept
 * rows' bits the full launch's); 0 or T: every query. */
int tr_k_attention_fwd_win_cuda(void *out, float *lse, const void *q, const void *k, const void *v, int dt,
                                const void *mask, int mask_dt, float p, uint64_t seed, uint32_t step, uint32_t layer,
                                uint32_t op, const tr_k_attn_rel *rel, float scale, int64_t B, int64_t T, int64_t H,
                                int64_t D, int64_t window, int64_t query_rows, void *stream, tr_error *err);
int tr_k_attention_bwd_win_cuda(void *dq, void *dk, void *dv, const void *dout, const void *out, const void *q,
                                const void *k, const void *v, int dt, const float *lse, const void *mask, int mask_dt,
                                float p, uint64_t seed, uint32_t step, uint32_t layer, uint32_t op,
                                const tr_k_attn_rel *rel, float scale, int64_t B, int64_t T, int64_t H, int64_t D,
                                int64_t window, int64_t query_rows, float *scratch, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
