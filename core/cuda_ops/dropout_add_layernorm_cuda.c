/* dropout_add_layernorm_cuda.c — the CUDA slots of dropout_add_layernorm and its backward
 * (CPU slots: core/cpu_ops/dropout_add_layernorm_cpu.c). The keep bits are core/base/rng.h's for
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
    const tr_tensor *out = c->dropout_add_layernorm.out, *sum = c->dropout_add_layernorm.sum,
                    *mean = c->dropout_add_layernorm.mean, *rstd = c->dropout_add_layernorm.rstd,
                    *x = c->dropout_add_layernorm.x, *res = c->dropout_add_layernorm.residual,
                    *w = c->dropout_add_layernorm.weight, *b = c->dropout_add_layernorm.bias;
    const tr_rng_key k = key_of(c);
    const void *bias = NULL;
    /* the kernel reads weight and bias in one dtype: the weight's */
    int rc = tr_cslot_in(s, b, w->dtype, &bias);
    if (rc) return rc;
    /* no statistics wanted: the row's sum goes through out (when it has x's dtype, the sum's
     * rounding) or a workspace row block, never to a tensor of its own */
    void *sum_p = sum ? sum->data : NULL;
    int sum_dt = sum ? sum->dtype : x->dtype;
    if (!sum) {
        if (out->dtype == x->dtype) sum_p = out->data;
        else if ((rc = tr_cslot_ws(s, x->numel, x->dtype, &sum_p))) return rc;
    }
    return tr_k_dropout_add_layernorm_fwd_cuda(out->data, out->dtype, sum_p, sum_dt, mean ? mean->data : NULL,
                                               rstd ? rstd->data : NULL,
                                               x->data, x->dtype, res->data, res->dtype, w->data, bias, w->dtype,
                                               c->dim[0], c->dim[1], c->f[0], c->f[1], k.seed, k.step, k.layer, k.op,
                                               c->u, s->stream, s->err);
}

/* dx, dresidual (=) may be NULL; dweight, dbias (+=, f32) may be NULL */
TR_CSLOT_DEFINE(dropout_add_layernorm_backward)
static int dropout_add_layernorm_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dx = c->dropout_add_layernorm_backward.dx, *dres = c->dropout_add_layernorm_backward.dresidual,
                    *dw = c->dropout_add_layernorm_backward.dweight, *db = c->dropout_add_layernorm_backward.dbias,
                    *dout = c->dropout_add_layernorm_backward.dout, *sum = c->dropout_add_layernorm_backward.sum,
                    *w = c->dropout_add_layernorm_backward.weight, *mean = c->dropout_add_layernorm_backward.mean,
                    *rstd = c->dropout_add_layernorm_backward.rstd;
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
