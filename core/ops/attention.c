/* attention.c — tensor-level scaled-dot-product attention (kernels/cpu/attention.c).
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
#include "op_stage.h"
#include "op_cuda.h"
#include "op_table.h"
#include "cpu/attention.h"

#include <limits.h>
#include <math.h>

/* ------------------------------------------------------------ dropout stream */

typedef struct attn_stream {
    tr_rng_key key;
    uint64_t base;    /* stream index of the first element of this batch group */
} attn_stream;

static void attn_keep(uint32_t *mask, size_t n, float p, const void *key, uint64_t offset)
{
    const attn_stream *s = key;
    tr_dropout_mask_words(mask, n, p, s->key, s->base + offset);
}

/* ------------------------------------------------------------ checks */

typedef struct attn_dims {
    int64_t B, T, H, D;
} attn_dims;

static int check_args(tr_ctx *ctx, const char *op, const tr_tensor *const *bthd,
                      const char *const *names, int n, const tr_tensor *lse, const tr_tensor *mask,
                      float dropout_p, const tr_rng_key *key, attn_dims *d)
{
    char s1[160], s2[160];
    int rc;
    const tr_tensor *q = bthd[0];
    if (q->ndim != 4)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: %s has shape %s but must be [B, T, H, D]; reshape the [B, T, H*D] "
                       "projection output to 4 dims (a free view)",
                       op, names[0], tr_op_shape(q, s1));
    for (int i = 1; i < n; i++)
        if ((rc = tr_op_want_shape(ctx, op, names[i], bthd[i], 4, q->shape))) return rc;
    *d = (attn_dims){ q->shape[0], q->shape[1], q->shape[2], q->shape[3] };
    int64_t want[3] = { d->B, d->H, d->T };
    if ((rc = tr_op_want_shape(ctx, op, "lse", lse, 3, want))) return rc;
    if (mask) {
        if (mask->dtype != TR_I32 && mask->dtype != TR_F32)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "%s: mask has dtype %s but must be i32 or f32 (1 = keep, 0 = pad)", op,
                           tr_dtype_name(mask->dtype));
        int64_t bt[2] = { d->B, d->T };
        if ((rc = tr_op_want_shape(ctx, op, "mask", mask, 2, bt))) return rc;
    }
    if (!(dropout_p >= 0 && dropout_p < 1))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: dropout_p = %g must be in [0, 1) (attention_probs_dropout_prob)", op,
                       (double)dropout_p);
    if (dropout_p > 0 && !key)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: dropout_p = %g needs an RNG key, which is NULL", op, (double)dropout_p);
    if (d->T > INT_MAX / 64 || d->H * d->D > INT_MAX)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: %s has shape %s, beyond the BLAS index limit; shorten T or H*D", op,
                       names[0], tr_op_shape(q, s2));
    return TR_OK;
}

static float default_scale(float scale, int64_t D) { return scale > 0 ? scale : 1.0f / sqrtf((float)D); }

/* Batch elements per group when staging half tensors: about 1 Mi elements per tensor. */
static int64_t group_size(const attn_dims *d, int all_f32)
{
    if (all_f32) return d->B > 0 ? d->B : 1;
    int64_t per = d->T * d->H * d->D;
    int64_t g = per > 0 ? ((int64_t)1 << 20) / per : d->B;
    return g > 0 ? g : 1;
}

/* ------------------------------------------------------------ forward */

static int attention_impl(tr_ctx *ctx, int run, const tr_tensor *out, const tr_tensor *lse, const tr_tensor *q,
                    const tr_tensor *k, const tr_tensor *v, const tr_tensor *mask, float scale,
                    float dropout_p, const tr_rng_key *key)
{
    static const char *op = "attention";
    const tr_tensor *ts[] = { q, k, v, out, lse, mask };
    const char *names[] = { "q", "k", "v", "out", "lse", "mask" };
    int rc;
    attn_dims d;
    if ((rc = check_args(ctx, op, ts, names, 4, lse, mask, dropout_p, key, &d))) return rc;
    scale = default_scale(scale, d.D);

    if (!run) return TR_OK;
    {
        int nthreads = tr_k_attention_threads();
        float *scratch = NULL;
        if ((rc = tr_stage_scratch(ctx, tr_k_attention_scratch_elems(d.T, d.D, nthreads) * sizeof(float),
                                (void **)&scratch)))
            return rc;
        int all_f32 = q->dtype == TR_F32 && k->dtype == TR_F32 && v->dtype == TR_F32 &&
                      out->dtype == TR_F32;
        int64_t g = group_size(&d, all_f32), per = d.T * d.H * d.D;
        attn_stream stream = { key ? *key : (tr_rng_key){ 0, 0, 0, 0 }, 0 };
        tr_attn_dropout drop = { dropout_p, attn_keep, &stream };
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
                                         mask ? mask->dtype : TR_I32, dropout_p > 0 ? &drop : NULL,
                                         scale, nb, d.T, d.H, d.D, scratch, nthreads);
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

static int attention_backward_impl(tr_ctx *ctx, int run, const tr_tensor *dq, const tr_tensor *dk, const tr_tensor *dv,
                             const tr_tensor *dout, const tr_tensor *q, const tr_tensor *k,
                             const tr_tensor *v, const tr_tensor *lse, const tr_tensor *mask,
                             float scale, float dropout_p, const tr_rng_key *key)
{
    static const char *op = "attention_backward";
    const tr_tensor *ts[] = { q, k, v, dout, dq, dk, dv, lse, mask };
    const char *names[] = { "q", "k", "v", "dout", "dq", "dk", "dv", "lse", "mask" };
    int rc;
    attn_dims d;
    if ((rc = check_args(ctx, op, ts, names, 7, lse, mask, dropout_p, key, &d))) return rc;
    scale = default_scale(scale, d.D);

    if (!run) return TR_OK;
    {
        int nthreads = tr_k_attention_threads();
        float *scratch = NULL;
        if ((rc = tr_stage_scratch(ctx, tr_k_attention_scratch_elems(d.T, d.D, nthreads) * sizeof(float),
                                (void **)&scratch)))
            return rc;
        int all_f32 = 1;
        for (int i = 0; i < 7; i++) all_f32 &= ts[i]->dtype == TR_F32;
        int64_t g = group_size(&d, all_f32), per = d.T * d.H * d.D;
        attn_stream stream = { key ? *key : (tr_rng_key){ 0, 0, 0, 0 }, 0 };
        tr_attn_dropout drop = { dropout_p, attn_keep, &stream };
        for (int64_t b0 = 0; b0 < d.B && rc == TR_OK; b0 += g) {
            int64_t nb = d.B - b0 < g ? d.B - b0 : g, off = b0 * per, n = nb * per;
            float *Q = NULL, *K = NULL, *V = NULL, *DO = NULL, *DQ = NULL, *DK = NULL, *DV = NULL;
            void *o[7] = { NULL };
            rc = tr_stage_load(ctx, q, off, n, &Q, &o[0]);
            if (rc == TR_OK) rc = tr_stage_load(ctx, k, off, n, &K, &o[1]);
            if (rc == TR_OK) rc = tr_stage_load(ctx, v, off, n, &V, &o[2]);
            if (rc == TR_OK) rc = tr_stage_load(ctx, dout, off, n, &DO, &o[3]);
            if (rc == TR_OK) rc = tr_stage_buf(ctx, dq, off, n, 0, &DQ, &o[4]);
            if (rc == TR_OK) rc = tr_stage_buf(ctx, dk, off, n, 0, &DK, &o[5]);
            if (rc == TR_OK) rc = tr_stage_buf(ctx, dv, off, n, 0, &DV, &o[6]);
            if (rc == TR_OK) {
                stream.base = (uint64_t)(b0 * d.H * d.T * d.T);
                tr_k_attention_bwd_f32(DQ, DK, DV, DO, Q, K, V,
                                          (const float *)lse->data + b0 * d.H * d.T,
                                          mask ? (const char *)mask->data + b0 * d.T * 4 : NULL,
                                          mask ? mask->dtype : TR_I32,
                                          dropout_p > 0 ? &drop : NULL, scale, nb, d.T, d.H, d.D,
                                          scratch, nthreads);
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

/* ------------------------------------------------------------ the op table */

/* The shape check and the CPU slot are each op's _impl without and with the run. */
static int attention_check(tr_ctx *ctx, tr_op_call *c)
{
    return attention_impl(ctx, 0, c->t[0], c->t[1], c->t[2], c->t[3], c->t[4], c->t[5], c->f[0], c->f[1], c->p);
}
static int attention_cpu(tr_ctx *ctx, tr_op_call *c)
{
    return attention_impl(ctx, 1, c->t[0], c->t[1], c->t[2], c->t[3], c->t[4], c->t[5], c->f[0], c->f[1], c->p);
}
static int attention_backward_check(tr_ctx *ctx, tr_op_call *c)
{
    return attention_backward_impl(ctx, 0, c->t[0], c->t[1], c->t[2], c->t[3], c->t[4], c->t[5], c->t[6], c->t[7],
                                   c->t[8], c->f[0], c->f[1], c->p);
}
static int attention_backward_cpu(tr_ctx *ctx, tr_op_call *c)
{
    return attention_backward_impl(ctx, 1, c->t[0], c->t[1], c->t[2], c->t[3], c->t[4], c->t[5], c->t[6], c->t[7],
                                   c->t[8], c->f[0], c->f[1], c->p);
}

/* mask: i32 or f32, checked with the shapes (the message says what the values mean). */
const tr_op_desc tr_opd_attention = {
    "attention", 6,
    { { "out", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "lse", TR_ARG_OUT, TR_DT_F32, 0 },
      { "q", TR_ARG_IN, TR_DT_FLOAT, 0 }, { "k", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "v", TR_ARG_IN, TR_DT_FLOAT, 0 }, { "mask", TR_ARG_IN, TR_DT_ANY, 1 } },
    attention_check, { attention_cpu, TR_CUDA_SLOT(attention) },
};
const tr_op_desc tr_opd_attention_backward = {
    "attention_backward", 9,
    { { "dq", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "dk", TR_ARG_OUT, TR_DT_FLOAT, 0 },
      { "dv", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "dout", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "q", TR_ARG_IN, TR_DT_FLOAT, 0 }, { "k", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "v", TR_ARG_IN, TR_DT_FLOAT, 0 }, { "lse", TR_ARG_IN, TR_DT_F32, 0 },
      { "mask", TR_ARG_IN, TR_DT_ANY, 1 } },
    attention_backward_check, { attention_backward_cpu, TR_CUDA_SLOT(attention_backward) },
};

int tr_op_attention(tr_ctx *ctx, tr_tensor *out, tr_tensor *lse, const tr_tensor *q, const tr_tensor *k,
                    const tr_tensor *v, const tr_tensor *mask, float scale, float dropout_p, const tr_rng_key *key)
{
    tr_op_call c = { .t = { out, lse, q, k, v, mask }, .f = { scale, dropout_p }, .p = key };
    return tr_op_run(ctx, &tr_opd_attention, &c);
}

int tr_op_attention_backward(tr_ctx *ctx, tr_tensor *dq, tr_tensor *dk, tr_tensor *dv, const tr_tensor *dout,
                             const tr_tensor *q, const tr_tensor *k, const tr_tensor *v, const tr_tensor *lse,
                             const tr_tensor *mask, float scale, float dropout_p, const tr_rng_key *key)
{
    tr_op_call c = { .t = { dq, dk, dv, dout, q, k, v, lse, mask }, .f = { scale, dropout_p }, .p = key };
    return tr_op_run(ctx, &tr_opd_attention_backward, &c);
}
