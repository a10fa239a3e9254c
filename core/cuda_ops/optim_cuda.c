/* optim_cuda.c — the CUDA slots of adamw, sgd and adafactor (CPU slots: core/cpu_ops/optim_cpu.c).
 * AdamW and SGD run the multi-tensor kernels of kernels/cuda/optim.cu (one launch for a whole list of parameters: the fp32 master, its
 * moments and the optional half copy refreshed in the same pass); the op table's ops name
 * one parameter, so the list holds one record here, and a fused step over all parameters
 * calls the same kernel with the full list. A half gradient is converted to f32 workspace
 * first (the kernels read f32 gradients). Adafactor: optim.cu's Adafactor kernels, its
 * learning rate and clip computed on the device. SGD and Adafactor take the found-inf flag
 * and the loss scale's skip count as device pointers (skipped, and the step from the count,
 * on the device), as AdamW's multi-tensor step does. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "ops_optim.h"

#include <math.h>

/* One parameter's record, uploaded to workspace. */
static int one_param(tr_cslot *s, const tr_tensor *param, const tr_tensor *grad, const tr_tensor *m, const tr_tensor *v,
                     const tr_tensor *half, const tr_k_param_ref **out)
{
    const void *g;
    void *dev;
    int rc;
    if ((rc = tr_cslot_in(s, grad, TR_F32, &g))) return rc;
    tr_k_param_ref r = {.param = param->data,
                        .grad = g,
                        .m = m ? m->data : NULL,
                        .v = v ? v->data : NULL,
                        .half = half ? half->data : NULL,
                        .n = param->numel,
                        .half_dt = half ? half->dtype : TR_F32,
                        .decay = 1};
    if ((rc = tr_cslot_ws(s, (int64_t)((sizeof r + 7) / 8), TR_I64, &dev)) ||
        (rc = tr_cslot_to_device(s, dev, &r, sizeof r)))
        return rc;
    *out = dev;
    return TR_OK;
}

TR_CSLOT_DEFINE(adamw)
static int adamw_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *param = c->adamw.param, *grad = c->adamw.grad, *m = c->adamw.m, *v = c->adamw.v,
                    *half = c->adamw.half_copy;
    const tr_k_param_ref *list = NULL;
    if (param->numel == 0) return TR_OK;
    int rc = one_param(s, param, grad, m, v, half, &list);
    if (rc) return rc;
    const tr_k_adamw_args a = tr_cslot_adamw_args(c);
    return tr_k_adamw_cuda(list, 1, param->numel, &a, s->stream, s->err);
}

TR_CSLOT_DEFINE(sgd)
static int sgd_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *param = c->sgd.param, *grad = c->sgd.grad, *buf = c->sgd.momentum_buf, *half = c->sgd.half_copy;
    const float momentum = c->f[1];
    const tr_k_param_ref *list = NULL;
    if (param->numel == 0) return TR_OK;
    int rc = one_param(s, param, grad, momentum != 0 ? buf : NULL, NULL, half, &list);
    if (rc) return rc;
    tr_k_sgd_args a = {
        .lr = c->f[0],
        .momentum = momentum,
        .dampening = c->f[2],
        .weight_decay = c->f[3],
        .inv_grad_scale = 1.0f / c->f[4],
        .nesterov = c->i[0] != 0,
        .first_step = c->i[1] == 1,
        .skip = c->sgd.skip_if ? c->sgd.skip_if->data : NULL,
        .skipped = c->sgd.skipped ? c->sgd.skipped->data : NULL,
        .step = c->i[1],
        .skipped_known = c->i[2],
    };
    return tr_k_sgd_cuda(list, 1, param->numel, &a, s->stream, s->err);
}

/* *res (float, host; may be NULL) = the learning rate used: reading it back synchronises
 * (a training step passes NULL). skip_if and the skip count are read by the kernels. */
TR_CSLOT_DEFINE(adafactor)
static int adafactor_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *param = c->adafactor.param, *grad = c->adafactor.grad, *exp_avg = c->adafactor.exp_avg,
                    *row = c->adafactor.row, *col = c->adafactor.col, *v = c->adafactor.v,
                    *half = c->adafactor.half_copy;
    const tr_adafactor_config *cfg = c->p;
    const int factored = param->ndim >= 2;
    const int64_t C = factored ? param->shape[param->ndim - 1] : param->numel;
    const int64_t R = factored ? param->shape[param->ndim - 2] : 1;
    const int64_t B = factored && R * C > 0 ? param->numel / (R * C) : 1;
    if (param->numel == 0) return TR_OK;
    const double t = (double)c->i[0];
    double rel = cfg->lr;
    if (cfg->relative_step) rel = fmin(cfg->warmup_init ? 1e-6 * t : 1e-2, 1 / sqrt(t));
    tr_k_adafactor_args a = {
        .rel = rel,
        .eps1 = cfg->eps1,
        .eps2 = cfg->eps2,
        .clip_threshold = cfg->clip_threshold,
        .beta1 = cfg->beta1 >= 0 ? cfg->beta1 : 0,
        .weight_decay = cfg->weight_decay,
        .beta2t = (float)(1 - pow(t, cfg->decay_rate)),
        .grad_scale = c->f[0],
        .scale_parameter = cfg->scale_parameter != 0,
        .skip = c->adafactor.skip_if ? c->adafactor.skip_if->data : NULL,
        .skipped = c->adafactor.skipped ? c->adafactor.skipped->data : NULL,
        .step = c->i[0],
        .skipped_known = c->i[1],
        .decay_rate = cfg->decay_rate,
        .relative_step = cfg->relative_step != 0,
        .warmup_init = cfg->warmup_init != 0,
    };
    const void *g;
    void *scratch, *lr_dev;
    int rc;
    if ((rc = tr_cslot_in(s, grad, TR_F32, &g)) ||
        (rc = tr_cslot_ws(s, tr_k_adafactor_scratch_cuda(B, R, C), TR_F32, &scratch)) ||
        (rc = tr_cslot_ws(s, 1, TR_F32, &lr_dev)) ||
        (rc = tr_k_adafactor_cuda(param->data, exp_avg ? exp_avg->data : NULL, factored ? row->data : NULL,
                                  factored ? col->data : NULL, factored ? NULL : v->data, half ? half->data : NULL,
                                  half ? half->dtype : TR_F32, g, B, R, C, &a, scratch, lr_dev, s->stream, s->err)))
        return rc;
    if (c->res) {
        float lr = 0;
        if ((rc = tr_cslot_to_host(s, &lr, lr_dev, sizeof lr))) return rc;
        *(float *)c->res = lr;
    }
    return TR_OK;
}

#endif
