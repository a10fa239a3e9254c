/* dropout_add_layernorm_cuda.c — the CUDA slots of dropout_add_layernorm and its backward
 * (CPU slots: core/ops/dropout_add_layernorm.c). The keep bits are core/base/rng.h's for
 * the same key and offset (kernels/cuda/dropout_add_layernorm.cu draws the same Philox
 * words as dropout.cu); nothing is stored, the backward regenerates them. The shape check
 * left N and C in call->dim. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "rng.h"

static tr_rng_key key_of(const tr_op_call *c)
{
    return c->p ? *(const tr_rng_key *)c->p : (tr_rng_key){ 0, 0, 0, 0 };
}

TR_CSLOT_DEFINE(dropout_add_layernorm)
static int dropout_add_layernorm_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->t[0], *sum = c->t[1], *mean = c->t[2], *rstd = c->t[3], *x = c->t[4], *res = c->t[5],
                    *w = c->t[6], *b = c->t[7];
    const tr_rng_key k = key_of(c);
    const void *bias = NULL;
    /* the kernel reads weight and bias in one dtype: the weight's */
    int rc = tr_cslot_in(s, b, w->dtype, &bias);
    if (rc) return rc;
    return tr_k_dropout_add_layernorm_fwd_cuda(out->data, out->dtype, sum->data, sum->dtype, mean->data, rstd->data,
                                               x->data, x->dtype, res->data, res->dtype, w->data, bias, w->dtype,
                                               c->dim[0], c->dim[1], c->f[0], c->f[1], k.seed, k.step, k.layer, k.op,
                                               c->u, s->stream, s->err);
}

/* dx, dresidual (=) may be NULL; dweight, dbias (+=, f32) may be NULL */
TR_CSLOT_DEFINE(dropout_add_layernorm_backward)
static int dropout_add_layernorm_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dx = c->t[0], *dres = c->t[1], *dw = c->t[2], *db = c->t[3], *dout = c->t[4], *sum = c->t[5],
                    *w = c->t[6], *mean = c->t[7], *rstd = c->t[8];
    const int64_t N = c->dim[0], C = c->dim[1];
    const tr_rng_key k = key_of(c);
    if (!dx && !dres && !dw && !db) return TR_OK;
    void *scratch = NULL;
    int rc;
    if ((dw || db) && (rc = tr_cslot_ws(s, tr_k_layernorm_bwd_scratch_cuda(N, C), TR_F32, &scratch))) return rc;
    /* without dresidual, the residual gradient is rounded to dout's dtype (the unfused
     * layernorm_backward's output dtype) before the dropout */
    return tr_k_dropout_add_layernorm_bwd_cuda(dx ? dx->data : NULL, dx ? dx->dtype : TR_F32,
                                               dres ? dres->data : NULL, dres ? dres->dtype : dout->dtype,
                                               dw ? dw->data : NULL, db ? db->data : NULL, dout->data, dout->dtype,
                                               sum->data, sum->dtype, w->data, w->dtype, mean->data, rstd->data, N, C,
                                               c->f[0], k.seed, k.step, k.layer, k.op, c->u, scratch, s->stream,
                                               s->err);
}

#endif
