/* rotary_cuda.c — the CUDA slots of rotary and rotary_backward (CPU slots:
 * core/cpu_ops/rotary_cpu.c; kernel: kernels/cuda/rotary.cu). The shape check left B, T, H, D
 * in call->dim. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "ops_nn.h"

TR_CSLOT_DEFINE(rotary)
static int rotary_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->rotary.out, *x = c->rotary.x;
    return tr_k_rotary_cuda(out->data, out->dtype, x->data, x->dtype, c->dim[0], c->dim[1], c->dim[2], c->dim[3],
                            c->f[0], 0, s->stream, s->err);
}

TR_CSLOT_DEFINE(rotary_backward)
static int rotary_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dx = c->rotary_backward.dx, *dout = c->rotary_backward.dout;
    return tr_k_rotary_cuda(dx->data, dx->dtype, dout->data, dout->dtype, c->dim[0], c->dim[1], c->dim[2], c->dim[3],
                            c->f[0], 1, s->stream, s->err);
}

#endif
