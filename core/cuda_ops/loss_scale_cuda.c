/* loss_scale_cuda.c — the CUDA slots of loss_scale_update and scale_by_scalar (CPU slots:
 * core/ops/loss_scale.c). Neither reads anything back: the scale, its inverse, the tracker
 * and the skip count stay in device memory, updated from the device found-inf flag.
 * Kernels: loss_scale.cu. */
#ifdef TR_HAVE_CUDA

#include "cuda/loss_scale.h"
#include "cuda_slot.h"

TR_CSLOT_DEFINE(loss_scale_update)
static int loss_scale_update_body(tr_cslot *s, tr_op_call *c)
{
    return tr_k_loss_scale_update_cuda(c->t[0]->data, c->t[1]->data, c->t[2]->data, c->t[3]->data, c->t[4]->data,
                                       c->f[0], c->f[1], c->i[0], s->stream, s->err);
}

TR_CSLOT_DEFINE(scale_by_scalar)
static int scale_by_scalar_body(tr_cslot *s, tr_op_call *c)
{
    return tr_k_scale_by_scalar_cuda(c->t[0]->data, c->t[0]->dtype, c->t[0]->numel, c->t[1]->data, c->f[0], s->stream,
                                     s->err);
}

#endif
