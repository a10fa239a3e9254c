/* layernorm_cuda.c — the CUDA slots of layernorm and layernorm_backward (CPU slots:
 * core/cpu_ops/layernorm_cpu.c): mean and rstd in f32, the parameter gradients (+=, f32) through
 * per-chunk column partials (no atomics). The shape check left N and C in call->dim. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"

TR_CSLOT_DEFINE(layernorm)
static int layernorm_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->layernorm.out, *mean = c->layernorm.mean, *rstd = c->layernorm.rstd, *x = c->layernorm.x,
                    *w = c->layernorm.weight, *b = c->layernorm.bias;
    const void *bias = NULL;
    /* the kernel reads weight and bias in one dtype: the weight's */
    int rc = tr_cslot_in(s, b, w->dtype, &bias);
    if (rc) return rc;
    return tr_k_layernorm_fwd_cuda(out->data, out->dtype, mean->data, rstd->data, x->data, x->dtype, w->data, bias,
                                   w->dtype, c->dim[0], c->dim[1], c->f[0], s->stream, s->err);
}

/* dx (=) may be NULL; dweight, dbias (+=, f32) may be NULL */
TR_CSLOT_DEFINE(layernorm_backward)
static int layernorm_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dx = c->layernorm_backward.dx, *dw = c->layernorm_backward.dweight,
                    *db = c->layernorm_backward.dbias, *dout = c->layernorm_backward.dout, *x = c->layernorm_backward.x,
                    *w = c->layernorm_backward.weight, *mean = c->layernorm_backward.mean,
                    *rstd = c->layernorm_backward.rstd;
    const int64_t N = c->dim[0], C = c->dim[1];
    if (!dx && !dw && !db) return TR_OK;
    void *scratch = NULL;
    int rc;
    if ((dw || db) && (rc = tr_cslot_ws(s, tr_k_layernorm_bwd_scratch_cuda(N, C), TR_F32, &scratch))) return rc;
    return tr_k_layernorm_bwd_cuda(dx ? dx->data : NULL, dx ? dx->dtype : TR_F32, dw ? dw->data : NULL,
                                   db ? db->data : NULL, dout->data, dout->dtype, x->data, x->dtype, w->data, w->dtype,
                                   mean->data, rstd->data, N, C, scratch, s->stream, s->err);
}

#endif
