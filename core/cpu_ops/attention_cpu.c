/* attention_cpu.c — the CPU slots (checks and wrappers: core/ops/attention.c): tensor-level scaled-dot-product
 * attention (kernels/cpu/attention.c).
 *
 * The kernel's per-thread scratch (threads x (3 x 64 x Tp + 2 x D x Tp + Tp + 64) floats,
 * Tp = T rounded up to 16: the block buffers and the head's packed k^T and v^T;
 * tr_k_attention_scratch_elems) comes from the allocator with tag workspace, so it is
 * visible in the memory ledger. f32 tensors run
 * in one kernel call over the whole batch; half tensors are staged to f32 a group of
 * batch elements at a time (attention is independent per batch element), with the
 * dropout stream offset by the group's first element so that element (b, h, i, j) always
 * draws element ((b*H + h)*T + i)*T + j of the key's stream. */
#include "ops_nn.h"
#include "cpu_slot.h"
#include "cpu/attention.h"
#include <math.h>

/* ------------------------------------------------------------ dropout stream */

typedef struct attn_stream {
    tr_rng_key key;
    uint64_t base; /* stream index of the first element of this batch group */
} attn_stream;

typedef struct attn_dims {
    int64_t B, T, H, D;
} attn_dims;

static float default_scale(float scale, int64_t D)
{
    return scale > 0 ? scale : 1.0f / sqrtf((float)D);
}

/* Batch elements per group when staging half tensors: about 1 Mi elements per tensor. */
static int64_t group_size(const attn_dims *d, int all_f32)
{
    if (all_f32) return d->B > 0 ? d->B : 1;
    int64_t per = d->T * d->H * d->D;
    int64_t g = per > 0 ? ((int64_t)1 << 20) / per : d->B;
    return g > 0 ? g : 1;
}

static void attn_keep(uint32_t *mask, size_t n, float p, const void *key, uint64_t offset)
{
    const attn_stream *s = key;
    tr_dropout_mask_words(mask, n, p, s->key, s->base + offset);
}

/* ------------------------------------------------------------ forward */

static int attention_run(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *lse, const tr_tensor *q,
                         const tr_tensor *k, const tr_tensor *v, const tr_tensor *mask, float scale, float dropout_p,
                         const tr_rng_key *key)
{
    const attn_dims d = {q->shape[0], q->shape[1], q->shape[2], q->shape[3]};
    int rc = TR_OK;
    scale = default_scale(scale, d.D);
    {
        int nthreads = tr_k_attention_threads();
        float *scratch = NULL;
        if ((rc = tr_stage_scratch(ctx, tr_k_attention_scratch_elems(d.T, d.D, nthreads) * sizeof(float),
                                   (void **)&scratch)))
            return rc;
        int all_f32 = q->dtype == TR_F32 && k->dtype == TR_F32 && v->dtype == TR_F32 && out->dtype == TR_F32;
        int64_t g = group_size(&d, all_f32), per = d.T * d.H * d.D;
        attn_stream stream = {key ? *key : (tr_rng_key){0, 0, 0, 0}, 0};
        tr_attn_dropout drop = {dropout_p, attn_keep, &stream};
        for (int64_t b0 = 0; b0 < d.B && rc == TR_OK; b0 += g) {
            int64_t nb = d.B - b0 < g ? d.B - b0 : g;
            float *Q = NULL, *K = NULL, *V = NULL, *O = NULL;
            void *oq = NULL, *ok = NULL, *ov = NULL, *oo = NULL;
            rc = tr_stage_load(ctx, q, b0 * per, nb * per, &Q, &oq);
            if (rc == TR_OK) rc = tr_stage_load(ctx, k, b0 * per, nb * per, &K, &ok);
            if (rc == TR_OK) rc = tr_stage_load(ctx, v, b0 * per, nb * per, &V, &ov);
            if (rc == TR_OK) rc = tr_stage_buf(ctx, out, b0 * per, nb * per, 0, &O, &oo);
            if (rc == TR_OK) {
                stream.base = (uint64_t)(b0 * d.H * d.T * d.T);
                tr_k_attention_fwd_f32(O, (float *)lse->data + b0 * d.H * d.T, Q, K, V,
                                       mask ? (const char *)mask->data + b0 * d.T * 4 : NULL,
                                       mask ? mask->dtype : TR_I32, dropout_p > 0 ? &drop : NULL, scale, nb, d.T, d.H,
                                       d.D, scratch, nthreads);
                tr_stage_put(out, b0 * per, O, nb * per);
            }
            tr_stage_scratch_free(ctx, oq);
            tr_stage_scratch_free(ctx, ok);
            tr_stage_scratch_free(ctx, ov);
            tr_stage_scratch_free(ctx, oo);
        }
        tr_stage_scratch_free(ctx, scratch);
        return rc;
    }
}

/* ------------------------------------------------------------ backward */

static int attention_backward_run(tr_ctx *ctx, const tr_tensor *dq, const tr_tensor *dk, const tr_tensor *dv,
                                  const tr_tensor *dout, const tr_tensor *q, const tr_tensor *k, const tr_tensor *v,
                                  const tr_tensor *lse, const tr_tensor *mask, float scale, float dropout_p,
                                  const tr_rng_key *key)
{
    const attn_dims d = {q->shape[0], q->shape[1], q->shape[2], q->shape[3]};
    int rc = TR_OK;
    scale = default_scale(scale, d.D);
    {
        int nthreads = tr_k_attention_threads();
        float *scratch = NULL;
        if ((rc = tr_stage_scratch(ctx, tr_k_attention_scratch_elems(d.T, d.D, nthreads) * sizeof(float),
                                   (void **)&scratch)))
            return rc;
        const tr_tensor *ts[] = {q, k, v, dout, dq, dk, dv};
        int all_f32 = 1;
        for (int i = 0; i < 7; i++) all_f32 &= ts[i]->dtype == TR_F32;
        int64_t g = group_size(&d, all_f32), per = d.T * d.H * d.D;
        attn_stream stream = {key ? *key : (tr_rng_key){0, 0, 0, 0}, 0};
        tr_attn_dropout drop = {dropout_p, attn_keep, &stream};
        for (int64_t b0 = 0; b0 < d.B && rc == TR_OK; b0 += g) {
            int64_t nb = d.B - b0 < g ? d.B - b0 : g, off = b0 * per, n = nb * per;
            float *Q = NULL, *K = NULL, *V = NULL, *DO = NULL, *DQ = NULL, *DK = NULL, *DV = NULL;
            void *o[7] = {NULL};
            rc = tr_stage_load(ctx, q, off, n, &Q, &o[0]);
            if (rc == TR_OK) rc = tr_stage_load(ctx, k, off, n, &K, &o[1]);
            if (rc == TR_OK) rc = tr_stage_load(ctx, v, off, n, &V, &o[2]);
            if (rc == TR_OK) rc = tr_stage_load(ctx, dout, off, n, &DO, &o[3]);
            if (rc == TR_OK) rc = tr_stage_buf(ctx, dq, off, n, 0, &DQ, &o[4]);
            if (rc == TR_OK) rc = tr_stage_buf(ctx, dk, off, n, 0, &DK, &o[5]);
            if (rc == TR_OK) rc = tr_stage_buf(ctx, dv, off, n, 0, &DV, &o[6]);
            if (rc == TR_OK) {
                stream.base = (uint64_t)(b0 * d.H * d.T * d.T);
                tr_k_attention_bwd_f32(DQ, DK, DV, DO, Q, K, V, (const float *)lse->data + b0 * d.H * d.T,
                                       mask ? (const char *)mask->data + b0 * d.T * 4 : NULL,
                                       mask ? mask->dtype : TR_I32, dropout_p > 0 ? &drop : NULL, scale, nb, d.T, d.H,
                                       d.D, scratch, nthreads);
                tr_stage_put(dq, off, DQ, n);
                tr_stage_put(dk, off, DK, n);
                tr_stage_put(dv, off, DV, n);
            }
            for (int i = 0; i < 7; i++) tr_stage_scratch_free(ctx, o[i]);
        }
        tr_stage_scratch_free(ctx, scratch);
        return rc;
    }
}

int tr_cpu_attention(tr_ctx *ctx, tr_op_call *c)
{
    return attention_run(ctx, c->attention.out, c->attention.lse, c->attention.q, c->attention.k, c->attention.v,
                         c->attention.mask, c->f[0], c->f[1], c->p);
}

int tr_cpu_attention_backward(tr_ctx *ctx, tr_op_call *c)
{
    return attention_backward_run(ctx, c->attention_backward.dq, c->attention_backward.dk, c->attention_backward.dv,
                                  c->attention_backward.dout, c->attention_backward.q, c->attention_backward.k,
                                  c->attention_backward.v, c->attention_backward.lse, c->attention_backward.mask,
                                  c->f[0], c->f[1], c->p);
}
