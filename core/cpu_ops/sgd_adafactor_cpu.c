/* sgd_adafactor_cpu.c — the CPU slots (checks and wrappers: core/ops/sgd_adafactor.c): the SGD and Adafactor steps over
 * kernels/cpu/sgd_adafactor.c. A half gradient is converted to f32 through a workspace view (returned before the call
 * returns); the Adafactor factors take a workspace of (rows + cols) doubles. Nothing is allocated that outlives the
 * call. */
#include "ops_sgd_adafactor.h"
#include "cpu_slot.h"
#include "cpu/sgd_adafactor.h"
#include <math.h>

/* On the CPU slot (run): *skip = whether skip_if is set, *eff = the step the update uses
 * (step less the skips the host has not read yet), refused below 1. */
static int effective_step(tr_ctx *ctx, const char *op, const tr_tensor *skip_if, const tr_tensor *skipped, int64_t step,
                          int64_t skipped_known, int *skip, int64_t *eff)
{
    *skip = skip_if && ((const int32_t *)skip_if->data)[0] != 0;
    *eff = skipped ? step - ((int64_t)((const int32_t *)skipped->data)[0] - skipped_known) : step;
    if (!*skip && *eff < 1)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: step %lld less the %lld skips not yet known (skipped %d, skipped_known %lld) is %lld; "
                       "the effective step counts from 1",
                       op, (long long)step, (long long)(step - *eff), ((const int32_t *)skipped->data)[0],
                       (long long)skipped_known, (long long)*eff);
    return TR_OK;
}

/* Writes the f32 master param into the half copy the forward reads. */
static void refresh_half(const tr_tensor *half_copy, const tr_tensor *param)
{
    if (half_copy) tr_stage_convert(half_copy->data, half_copy->dtype, param->data, TR_F32, (size_t)param->numel);
}

/* ------------------------------------------------------------ sgd */

static int sgd_run(tr_ctx *ctx, const tr_tensor *param, const tr_tensor *grad, const tr_tensor *momentum_buf,
                   const tr_tensor *half_copy, const tr_tensor *skip_if, const tr_tensor *skipped, float lr,
                   float momentum, float dampening, float weight_decay, int32_t nesterov, int64_t step,
                   int64_t skipped_known, float grad_scale)
{
    const char *op = "sgd";
    int rc, skip;
    int64_t eff;
    if ((rc = effective_step(ctx, op, skip_if, skipped, step, skipped_known, &skip, &eff))) return rc;
    if (skip) return TR_OK;
    tr_stage g = {0};
    if ((rc = tr_stage_in_all(ctx, &g, grad))) return rc;
    tr_k_sgd_step_f32(param->data, momentum != 0 ? momentum_buf->data : NULL, g.p, param->numel, lr, momentum,
                      dampening, weight_decay, nesterov != 0, eff == 1, grad_scale);
    tr_stage_release(ctx, &g);
    refresh_half(half_copy, param);
    return TR_OK;
}

static int adafactor_run(tr_ctx *ctx, const tr_tensor *param, const tr_tensor *grad, const tr_tensor *exp_avg,
                         const tr_tensor *row, const tr_tensor *col, const tr_tensor *v, const tr_tensor *half_copy,
                         const tr_tensor *skip_if, const tr_tensor *skipped, const tr_adafactor_config *cfg,
                         int64_t step, int64_t skipped_known, float grad_scale, float *lr_used)
{
    const char *op = "adafactor";
    int rc, skip;
    const int factored = param->ndim >= 2;
    int64_t C = factored ? param->shape[param->ndim - 1] : param->numel;
    int64_t R = factored ? param->shape[param->ndim - 2] : 1;
    int64_t B = factored && R * C > 0 ? param->numel / (R * C) : 1;
    int64_t eff;
    if ((rc = effective_step(ctx, op, skip_if, skipped, step, skipped_known, &skip, &eff))) return rc;
    if (skip) {
        if (lr_used) *lr_used = 0;
        return TR_OK;
    }
    if (param->numel == 0) return TR_OK;

    tr_stage g = {0};
    void *work = NULL;
    if ((rc = tr_stage_in_all(ctx, &g, grad))) return rc;
    if (factored && (rc = tr_stage_scratch(ctx, (size_t)(B * (R + C)) * sizeof(double), &work))) {
        tr_stage_release(ctx, &g);
        return rc;
    }
    adafactor_hparams hp = {
        .lr = cfg->lr,
        .eps1 = cfg->eps1,
        .eps2 = cfg->eps2,
        .clip_threshold = cfg->clip_threshold,
        .decay_rate = cfg->decay_rate,
        .beta1 = cfg->beta1 >= 0 ? cfg->beta1 : 0,
        .weight_decay = cfg->weight_decay,
        .relative_step = cfg->relative_step != 0,
        .scale_parameter = cfg->scale_parameter != 0,
        .warmup_init = cfg->warmup_init != 0,
        .step = eff,
        .grad_scale = grad_scale,
    };
    double lr =
        tr_k_adafactor_step_f32(param->data, exp_avg ? exp_avg->data : NULL, factored ? row->data : NULL,
                                factored ? col->data : NULL, factored ? NULL : v->data, work, g.p, B, R, C, &hp);
    tr_stage_scratch_free(ctx, work);
    tr_stage_release(ctx, &g);
    refresh_half(half_copy, param);
    if (lr_used) *lr_used = (float)lr;
    return TR_OK;
}

/* ------------------------------------------------------------ the slots */
TR_CPU_SLOT_BY(sgd, sgd_run, c->sgd.param, c->sgd.grad, c->sgd.momentum_buf, c->sgd.half_copy, c->sgd.skip_if,
               c->sgd.skipped, c->f[0], c->f[1], c->f[2], c->f[3], (int32_t)c->i[0], c->i[1], c->i[2], c->f[4])
TR_CPU_SLOT_BY(adafactor, adafactor_run, c->adafactor.param, c->adafactor.grad, c->adafactor.exp_avg, c->adafactor.row,
               c->adafactor.col, c->adafactor.v, c->adafactor.half_copy, c->adafactor.skip_if, c->adafactor.skipped,
               c->p, c->i[0], c->i[1], c->f[0], c->res)
