/* dropout_linear_cuda.c — the CUDA slots of dropout_linear and dropout_linear_backward (CPU
 * slots: core/cpu_ops/dropout_linear_cpu.c) over kernels/cuda/dropout_linear.cu: one pass over x
 * (or dx) each, the keep bits drawn where x is read, nothing of x's size written but dx. Any
 * float dtypes (w may be the f32 master of a LoRA factor: the kernels read it as it is). */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "ops_dropout_linear.h"
#include "rng.h"

static tr_rng_key key_of(const tr_op_call *c)
{
    return c->p ? *(const tr_rng_key *)c->p : (tr_rng_key){0, 0, 0, 0};
}

TR_CSLOT_DEFINE(dropout_linear)
static int dropout_linear_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->dropout_linear.out, *x = c->dropout_linear.x, *w = c->dropout_linear.w;
    const int64_t I = w->shape[1], R = w->shape[0], N = I > 0 ? x->numel / I : 0;
    const tr_rng_key k = key_of(c);
    return tr_k_dropout_linear_fwd_cuda(out->data, out->dtype, x->data, x->dtype, w->data, w->dtype, N, I, R, c->f[0],
                                        k.seed, k.step, k.layer, k.op, c->u, s->stream, s->err);
}

TR_CSLOT_DEFINE(dropout_linear_backward)
static int dropout_linear_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dx = c->dropout_linear_backward.dx, *dw = c->dropout_linear_backward.dw,
                    *dout = c->dropout_linear_backward.dout, *x = c->dropout_linear_backward.x,
                    *w = c->dropout_linear_backward.w;
    const int64_t I = w->shape[1], R = w->shape[0], N = I > 0 ? x->numel / I : 0;
    if (!dx && !dw) return TR_OK;
    void *scratch = NULL;
    int rc;
    if (dw && (rc = tr_cslot_ws(s, tr_k_dropout_linear_bwd_scratch_cuda(N, I, R), TR_F32, &scratch))) return rc;
    const tr_rng_key k = key_of(c);
    return tr_k_dropout_linear_bwd_cuda(dx ? dx->data : NULL, dx ? dx->dtype : TR_F32, dw ? dw->data : NULL,
                                        dout->data, dout->dtype, x->data, x->dtype, w->data, w->dtype, N, I, R,
                                        c->f[0], k.seed, k.step, k.layer, k.op, c->u, scratch, s->stream, s->err);
}

#endif
