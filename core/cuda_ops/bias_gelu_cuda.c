/* bias_gelu_cuda.c — the CUDA slots of bias_gelu and bias_gelu_backward (CPU slots:
 * core/cpu_ops/bias_gelu_cpu.c; kernels: kernels/cuda/bias_gelu.cu). The shape check left N and I
 * in call->dim and checked the GELU kind. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "ops_nn.h"

TR_CSLOT_DEFINE(bias_gelu)
static int bias_gelu_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->bias_gelu.out, *h = c->bias_gelu.h, *b = c->bias_gelu.bias;
    return tr_k_bias_gelu_fwd_cuda(out->data, out->dtype, h->data, h->dtype, b ? b->data : NULL,
                                   b ? b->dtype : TR_F32, c->dim[0], c->dim[1], c->i[0] == TR_OP_GELU_TANH, s->stream,
                                   s->err);
}

TR_CSLOT_DEFINE(bias_gelu_backward)
static int bias_gelu_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dx = c->bias_gelu_backward.dx, *db = c->bias_gelu_backward.dbias,
                    *dout = c->bias_gelu_backward.dout, *h = c->bias_gelu_backward.h;
    return tr_k_bias_gelu_bwd_cuda(dx->data, dx->dtype, db ? db->data : NULL, dout->data, dout->dtype, h->data,
                                   h->dtype, c->dim[0], c->dim[1], c->i[0] == TR_OP_GELU_TANH, s->stream, s->err);
}

#endif
