/* attention_packed_cpu.c — the CPU slots (checks and wrappers: core/ops/attention_packed.c): attention over sequences
 * stored back to back (the packed rows of trainer.nn.packing), forward only: `attention_packed`.
 *
 * Why: the encoder skips padding in every per-row op, but `attention` reads the padded
 * [B, T, H, D] layout, so a forward without gradients scattered q, k and v to it and gathered
 * the output back: four copies a layer, 4 % of an encode pass. Here sequence b is rows
 * off[b] .. off[b+1]-1 of q, k, v and out [N, H, D] and attends over its own rows; no mask,
 * no dropout (the padded op keeps both, and the backward).
 *
 * Bits: for a padded batch of length T whose mask keeps a prefix of each row (what
 * tokenizers give) the result equals `attention` on the scattered layout, bit for bit, so a
 * forward without gradients (`trainer encode`, the first pass of checkpointing or GradCache)
 * matches its replay with gradients, which runs the padded op. The op makes the padded op's
 * choice for that T:
 *   - T <= 32 (8 on AVX2), head dim 32 or 64: the short-row kernel per head
 *     (kernels/cpu/attn_short.h), reading the packed rows in place;
 *   - otherwise the op scatters to a padded [B, T] workspace with that prefix mask and runs
 *     the padded kernel itself.
 * lse (=) is f32 [H * N]: sequence b, head h, query i at H*off[b] + h*n_b + i (the padded
 * op's [1, H, n_b] block of each sequence, back to back). Half tensors are staged to f32. */
#include "ops_nn.h"
#include "cpu_slot.h"
#include "cpu/attention.h"
#include "cpu/attn_short.h"
#include "cpu/attn_tile.h"
#include <math.h>
#include <string.h>

/* The padded computation: rows to [B, T, H, D] with zero padding rows and a prefix mask,
 * the padded kernel, the real rows and their lse back. */
static void run_padded(float *O, float *lse, const float *Q, const float *K, const float *V, const int64_t *off,
                       int64_t B, int64_t T, int64_t H, int64_t D, float scale, float *ws, int32_t *mask,
                       float *scratch, int nthreads)
{
    const int64_t row = H * D, per = T * row;
    float *pq = ws, *pk = pq + B * per, *pv = pk + B * per, *po = pv + B * per, *pl = po + B * per;
    memset(ws, 0, (size_t)(3 * B * per) * sizeof *ws);
    for (int64_t b = 0; b < B; b++) {
        int64_t n = off[b + 1] - off[b];
        memcpy(pq + b * per, Q + off[b] * row, (size_t)(n * row) * sizeof *Q);
        memcpy(pk + b * per, K + off[b] * row, (size_t)(n * row) * sizeof *K);
        memcpy(pv + b * per, V + off[b] * row, (size_t)(n * row) * sizeof *V);
        for (int64_t j = 0; j < T; j++) mask[b * T + j] = j < n;
    }
    tr_k_attention_fwd_f32(po, pl, pq, pk, pv, mask, TR_I32, NULL, scale, B, T, H, D, scratch, nthreads);
    for (int64_t b = 0; b < B; b++) {
        int64_t n = off[b + 1] - off[b];
        memcpy(O + off[b] * row, po + b * per, (size_t)(n * row) * sizeof *O);
        for (int64_t h = 0; h < H; h++) memcpy(lse + H * off[b] + h * n, pl + (b * H + h) * T, (size_t)n * sizeof *lse);
    }
}

int tr_cpu_attention_packed(tr_ctx *ctx, tr_op_call *c)
{
    const int64_t H = c->dim[0], D = c->dim[1], T = c->dim[2]; /* recorded by the check */
    int rc = TR_OK;
    const tr_tensor *out = c->attention_packed.out, *lse = c->attention_packed.lse, *q = c->attention_packed.q,
                    *k = c->attention_packed.k, *v = c->attention_packed.v;
    const tr_attn_lengths *L = c->p;
    const int64_t B = L->B, N = q->shape[0];
    const float scale = c->f[0] > 0 ? c->f[0] : 1.0f / sqrtf((float)D);
    if (N == 0 || B == 0) return TR_OK;
    const int nthreads = tr_k_attention_threads();
    int64_t *off = NULL;
    float *Q = NULL, *K = NULL, *V = NULL, *O = NULL, *ws = NULL, *scratch = NULL;
    int32_t *mask = NULL;
    void *oq = NULL, *ok = NULL, *ov = NULL, *oo = NULL;
    if ((rc = tr_stage_scratch(ctx, (size_t)(B + 1) * sizeof *off, (void **)&off))) return rc;
    off[0] = 0;
    for (int64_t b = 0; b < B; b++) off[b + 1] = off[b] + L->len[b];
    rc = tr_stage_load(ctx, q, 0, q->numel, &Q, &oq);
    if (rc == TR_OK) rc = tr_stage_load(ctx, k, 0, k->numel, &K, &ok);
    if (rc == TR_OK) rc = tr_stage_load(ctx, v, 0, v->numel, &V, &ov);
    if (rc == TR_OK) rc = tr_stage_buf(ctx, out, 0, out->numel, 0, &O, &oo);
    /* the padded op's choice for its [B, T] layout, so that the bits are its bits */
    const int isa = tr_attn_tile_isa();
    if (rc == TR_OK && tr_attn_short_usable(isa, T, D, 0)) {
        tr_attn_short_packed_fwd_f32(isa, O, (float *)lse->data, Q, K, V, off, B, H, D, scale, nthreads);
    } else if (rc == TR_OK) {
        size_t per = (size_t)(T * H * D), elems = 4 * (size_t)B * per + (size_t)(B * H * T);
        rc = tr_stage_scratch(ctx, elems * sizeof(float), (void **)&ws);
        if (rc == TR_OK) rc = tr_stage_scratch(ctx, (size_t)(B * T) * sizeof *mask, (void **)&mask);
        if (rc == TR_OK)
            rc = tr_stage_scratch(ctx, tr_k_attention_scratch_elems(T, D, nthreads) * sizeof(float), (void **)&scratch);
        if (rc == TR_OK)
            run_padded(O, (float *)lse->data, Q, K, V, off, B, T, H, D, scale, ws, mask, scratch, nthreads);
    }
    if (rc == TR_OK) tr_stage_put(out, 0, O, out->numel);
    tr_stage_scratch_free(ctx, scratch);
    tr_stage_scratch_free(ctx, mask);
    tr_stage_scratch_free(ctx, ws);
    tr_stage_scratch_free(ctx, oq);
    tr_stage_scratch_free(ctx, ok);
    tr_stage_scratch_free(ctx, ov);
    tr_stage_scratch_free(ctx, oo);
    tr_stage_scratch_free(ctx, off);
    return rc;
}
