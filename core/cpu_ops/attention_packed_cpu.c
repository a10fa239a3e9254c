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

#define P(name) TR_ARGI(attention_packed, name)

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

/* The call's context, sequence offsets and scratch, for the kernel over the staged tensors. */
typedef struct packed_run {
    tr_ctx *ctx;
    const int64_t *off;
    int64_t B, H, D, T;
    float scale;
} packed_run;

/* Each operand whole (one row for the staging loop); lse f32 in place. */
static const unsigned char whole[TR_OP_MAX_TENSORS] = {
    [P(out)] = TR_ROWS_WHOLE, [P(lse)] = TR_ROWS_DIRECT, [P(q)] = TR_ROWS_WHOLE,
    [P(k)] = TR_ROWS_WHOLE,   [P(v)] = TR_ROWS_WHOLE,
};

static int packed_whole(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused, void *work)
{
    const packed_run *r = work;
    const int64_t B = r->B, H = r->H, D = r->D, T = r->T;
    const int nthreads = tr_k_attention_threads();
    /* the padded op's choice for its [B, T] layout, so that the bits are its bits */
    const int isa = tr_attn_tile_isa();
    if (tr_attn_short_usable(isa, T, D, 0)) {
        tr_attn_short_packed_fwd_f32(isa, p[P(out)], p[P(lse)], p[P(q)], p[P(k)], p[P(v)], r->off, B, H, D, r->scale,
                                     nthreads);
        return TR_OK;
    }
    float *ws = NULL, *scratch = NULL;
    int32_t *mask = NULL;
    size_t per = (size_t)(T * H * D), elems = 4 * (size_t)B * per + (size_t)(B * H * T);
    int rc = tr_stage_scratch(r->ctx, elems * sizeof(float), (void **)&ws);
    if (rc == TR_OK) rc = tr_stage_scratch(r->ctx, (size_t)(B * T) * sizeof *mask, (void **)&mask);
    if (rc == TR_OK)
        rc = tr_stage_scratch(r->ctx, tr_k_attention_scratch_elems(T, D, nthreads) * sizeof(float), (void **)&scratch);
    if (rc == TR_OK)
        run_padded(p[P(out)], p[P(lse)], p[P(q)], p[P(k)], p[P(v)], r->off, B, T, H, D, r->scale, ws, mask, scratch,
                   nthreads);
    tr_stage_scratch_free(r->ctx, scratch);
    tr_stage_scratch_free(r->ctx, mask);
    tr_stage_scratch_free(r->ctx, ws);
    return rc;
}

int tr_cpu_attention_packed(tr_ctx *ctx, tr_op_call *c)
{
    const tr_attn_lengths *L = c->p;
    const int64_t B = L->B, N = c->attention_packed.q->shape[0];
    /* H, D and T recorded by the check */
    packed_run r = {ctx, NULL, B, c->dim[0], c->dim[1], c->dim[2], 0};
    r.scale = c->f[0] > 0 ? c->f[0] : 1.0f / sqrtf((float)r.D);
    if (N == 0 || B == 0) return TR_OK;
    int64_t *off = NULL;
    int rc = tr_stage_scratch(ctx, (size_t)(B + 1) * sizeof *off, (void **)&off);
    if (rc) return rc;
    off[0] = 0;
    for (int64_t b = 0; b < B; b++) off[b + 1] = off[b] + L->len[b];
    r.off = off;
    rc = tr_stage_rows(ctx, &tr_opd_attention_packed, c, whole, 1, 1, packed_whole, &r);
    tr_stage_scratch_free(ctx, off);
    return rc;
}
