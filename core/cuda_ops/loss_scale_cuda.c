/* loss_scale_cuda.c — the CUDA slots of loss_scale_update and scale_by_scalar (CPU slots:
 * core/cpu_ops/loss_scale_cpu.c). Neither reads anything back: the scale, its inverse, the tracker
 * and the skip count stay in device memory, updated from the device found-inf flag.
 * Kernels: loss_scale.cu. */
#ifdef TR_HAVE_CUDA

#include "cuda/loss_scale.h"
#include "cuda_slot.h"

TR_CSLOT_DEFINE(loss_scale_update)
static int loss_scale_update_body(tr_cslot *s, tr_op_call *c)
{
    return tr_k_loss_scale_update_cuda(c->loss_scale_update.scale->data, c->loss_scale_update.inv_scale->data,
                                       c->loss_scale_update.tracker->data, c->loss_scale_update.skipped->data,
                                       c->loss_scale_update.found_inf->data, c->f[0], c->f[1], c->i[0], s->stream,
                                       s->err);
}

TR_CSLOT_DEFINE(scale_by_scalar)
static int scale_by_scalar_body(tr_cslot *s, tr_op_call *c)
{
    return tr_k_scale_by_scalar_cuda(c->scale_by_scalar.x->data, c->scale_by_scalar.x->dtype,
                                     c->scale_by_scalar.x->numel, c->scale_by_scalar.s->data, c->f[0], s->stream,
                                     s->err);
}

#endif
