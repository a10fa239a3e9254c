/* activation_cuda.c — the CUDA slots of gelu, softmax and tanh, forward and backward (CPU
 * slots: core/cpu_ops/activation_cpu.c). Each tensor keeps its own dtype; softmax is over the last
 * dimension. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "ops_nn.h"

static int gelu_approx(const tr_op_call *c)
{
    return c->i[0] == TR_OP_ACT_RELU ? 2 : c->i[0] == TR_OP_GELU_TANH ? 1 : 0;
}

TR_CSLOT_DEFINE(gelu)
static int gelu_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->gelu.out, *x = c->gelu.x;
    return tr_k_gelu_fwd_cuda(out->data, out->dtype, x->data, x->dtype, x->numel, gelu_approx(c), s->stream, s->err);
}

/* dx (=) = dout * gelu'(x) */
TR_CSLOT_DEFINE(gelu_backward)
static int gelu_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dx = c->gelu_backward.dx, *dout = c->gelu_backward.dout, *x = c->gelu_backward.x;
    return tr_k_gelu_bwd_cuda(dx->data, dx->dtype, dout->data, dout->dtype, x->data, x->dtype, x->numel, gelu_approx(c),
                              s->stream, s->err);
}

TR_CSLOT_DEFINE(softmax)
static int softmax_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->softmax.out, *x = c->softmax.x;
    int64_t N, C;
    tr_op_rows(x, &N, &C);
    if (x->numel == 0) return TR_OK;
    return tr_k_softmax_fwd_cuda(out->data, out->dtype, x->data, x->dtype, N, C, s->stream, s->err);
}

/* dx (=) from dout and the forward's output y */
TR_CSLOT_DEFINE(softmax_backward)
static int softmax_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dx = c->softmax_backward.dx, *dout = c->softmax_backward.dout, *y = c->softmax_backward.y;
    int64_t N, C;
    tr_op_rows(y, &N, &C);
    if (y->numel == 0) return TR_OK;
    return tr_k_softmax_bwd_cuda(dx->data, dx->dtype, dout->data, dout->dtype, y->data, y->dtype, N, C, s->stream,
                                 s->err);
}

TR_CSLOT_DEFINE(tanh)
static int tanh_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->tanh.out, *x = c->tanh.x;
    return tr_k_tanh_fwd_cuda(out->data, out->dtype, x->data, x->dtype, x->numel, s->stream, s->err);
}

/* dx (=) = dout * (1 - y^2) */
TR_CSLOT_DEFINE(tanh_backward)
static int tanh_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dx = c->tanh_backward.dx, *dout = c->tanh_backward.dout, *y = c->tanh_backward.y;
    return tr_k_tanh_bwd_cuda(dx->data, dx->dtype, dout->data, dout->dtype, y->data, y->dtype, y->numel, s->stream,
                              s->err);
}

#endif
