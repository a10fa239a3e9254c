/* geglu_cuda.c — the CUDA slots of geglu and geglu_backward (CPU slots:
 * core/cpu_ops/geglu_cpu.c; kernels: kernels/cuda/geglu.cu). The shape check left N and I in
 * call->dim and checked the GELU kind. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "ops_nn.h"

TR_CSLOT_DEFINE(geglu)
static int geglu_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->geglu.out, *h = c->geglu.h;
    return tr_k_geglu_fwd_cuda(out->data, out->dtype, h->data, h->dtype, c->dim[0], c->dim[1],
                               c->i[0] == TR_OP_GELU_TANH, s->stream, s->err);
}

TR_CSLOT_DEFINE(geglu_backward)
static int geglu_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dh = c->geglu_backward.dh, *dout = c->geglu_backward.dout, *h = c->geglu_backward.h;
    return tr_k_geglu_bwd_cuda(dh->data, dh->dtype, dout->data, dout->dtype, h->data, h->dtype, c->dim[0], c->dim[1],
                               c->i[0] == TR_OP_GELU_TANH, s->stream, s->err);
}

#endif
