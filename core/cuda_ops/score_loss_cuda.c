/* score_loss_cuda.c — the CUDA slots of cosent_loss and cosine_mse_loss (CPU slots:
 * core/cpu_ops/score_loss_cpu.c). The scores travel as kernel arguments (tr_cslot_to_device: no wait
 * up to 16 KiB, 4096 pairs), the loss and the gradient are written on the device. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"

static int score_loss(tr_cslot *s, tr_op_call *c, int kind)
{
    /* cosine_mse_loss: the same arguments */
    const tr_tensor *loss = c->cosent_loss.loss, *dsim = c->cosent_loss.dsim, *sim = c->cosent_loss.sim;
    const int64_t B = sim->shape[0];
    void *y;
    int rc;
    if ((rc = tr_cslot_ws(s, B > 0 ? B : 1, TR_F32, &y)) ||
        (rc = tr_cslot_to_device(s, y, c->p, (size_t)B * sizeof(float))))
        return rc;
    return tr_k_score_loss_cuda(loss->data, dsim->data, sim->data, sim->dtype, y, c->f[0], B, kind, s->stream,
                                s->err);
}

/* loss (=), dsim (=) */
TR_CSLOT_BY(cosent_loss, score_loss, c, 0)
TR_CSLOT_BY(cosine_mse_loss, score_loss, c, 1)

#endif
