/* optim.c — the optimizer steps over kernels/cpu/optim.c: AdamW, SGD and Adafactor.
 * Here: the shape checks of their op-table entries (arguments in op_list.h), AdamW's
 * hyper-parameter check (adamw_check.h, shared with adamw_multi) and the public wrappers;
 * slots: core/cpu_ops/optim_cpu.c, core/cuda_ops/optim_cuda.c. */
#include "ops_optim.h"

#include "adamw_check.h"
#include "cpu/optim.h"
#include "op_stage.h"
#include "op_table.h"

#include <math.h>

/* ------------------------------------------------------------ adamw */

static int want_f32(tr_ctx *ctx, const char *name, const tr_tensor *t, const tr_tensor *param)
{
    return tr_op_want_numel(ctx, "adamw", name, t, param->numel, "param's number of elements");
}

static int adamw_checks(tr_ctx *ctx, const tr_tensor *param, const tr_tensor *grad, const tr_tensor *m,
                        const tr_tensor *v, const tr_tensor *half_copy, float lr, float beta1, float beta2, float eps,
                        float weight_decay, int64_t step, float grad_scale)
{
    const char *op = "adamw";
    int rc;
    if ((rc = want_f32(ctx, "param", param, param)) || (rc = want_f32(ctx, "m", m, param)) ||
        (rc = want_f32(ctx, "v", v, param)) || (rc = tr_op_want_numel(ctx, op, "grad", grad, param->numel, "param's number of elements")) ||
        (half_copy && ((rc = tr_op_want_numel(ctx, op, "half_copy", half_copy, param->numel,
                                                "param's number of elements")))))
        return rc;
    return tr_check_adamw_hparams(ctx, op, lr, beta1, beta2, eps, weight_decay, step, grad_scale);
}

int tr_check_adamw_hparams(tr_ctx *ctx, const char *op, float lr, float beta1, float beta2, float eps,
                           float weight_decay, int64_t step, float grad_scale)
{
    if (step < 1) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: step = %lld; steps count from 1", op, (long long)step);
    if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && eps >= 0 && lr >= 0 && weight_decay >= 0))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: lr %g, betas (%g, %g), eps %g, weight_decay %g: betas must be in [0, 1), the others "
                       ">= 0",
                       op, (double)lr, (double)beta1, (double)beta2, (double)eps, (double)weight_decay);
    if (!(grad_scale > 0 && isfinite(grad_scale)))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: grad_scale = %g must be finite and > 0 (1 when unscaled)", op,
                       (double)grad_scale);
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

TR_OP_CHECK_BY(adamw, adamw_checks, c->adamw.param, c->adamw.grad, c->adamw.m, c->adamw.v, c->adamw.half_copy, c->f[0],
               c->f[1], c->f[2], c->f[3], c->f[4], c->i[0], c->f[5])

int tr_op_adamw(tr_ctx *ctx, tr_tensor *param, const tr_tensor *grad, tr_tensor *m, tr_tensor *v,
                tr_tensor *half_copy, float lr, float beta1, float beta2, float eps, float weight_decay,
                int64_t step, float grad_scale)
{
    tr_op_call c = { .t = { param, grad, m, v, half_copy }, .f = { lr, beta1, beta2, eps, weight_decay, grad_scale },
                     .i = { step } };
    return tr_op_run(ctx, &tr_opd_adamw, &c);
}

/* ------------------------------------------------------------ sgd and adafactor: argument checks */

static int want_state(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, const tr_tensor *param,
                      int64_t numel, const char *what)
{
    /* the description allows NULL state (what a step needs depends on its settings) */
    if (!t) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s is NULL; pass a tensor", op, name);
    return tr_op_want_numel(ctx, op, name, t, numel, what);
}

static int want_common(tr_ctx *ctx, const char *op, const tr_tensor *param, const tr_tensor *grad,
                       const tr_tensor *half_copy, int64_t step, float grad_scale)
{
    int rc;
    if ((rc = want_state(ctx, op, "param", param, param, param->numel, "param's number of elements")) ||
        (rc = tr_op_want_numel(ctx, op, "grad", grad, param->numel, "param's number of elements")) ||
        (half_copy && ((rc = tr_op_want_numel(ctx, op, "half_copy", half_copy, param->numel,
                                                "param's number of elements")))))
        return rc;
    if (step < 1)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: step = %lld; steps count from 1", op, (long long)step);
    if (!(grad_scale > 0 && isfinite(grad_scale)))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: grad_scale = %g must be finite and > 0 (1 when unscaled)", op,
                       (double)grad_scale);
    return TR_OK;
}

static int no_extra(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, const char *why)
{
    if (!t) return TR_OK;
    return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s was given but %s; pass NULL", op, name, why);
}

/* skip_if and skipped: one i32 element each when given (a found-inf flag, the device loss
 * scale's skip count). */
static int want_skip_args(tr_ctx *ctx, const char *op, const tr_tensor *skip_if, const tr_tensor *skipped)
{
    if (skip_if && (skip_if->dtype != TR_I32 || skip_if->numel != 1))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: skip_if has dtype %s and %lld elements but must be one i32 element (a found-inf flag, "
                       "zeroed by the caller once per step)",
                       op, tr_dtype_name(skip_if->dtype), (long long)skip_if->numel);
    if (skipped && (skipped->dtype != TR_I32 || skipped->numel != 1))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: skipped has dtype %s and %lld elements but must be one i32 element (the device loss "
                       "scale's skip count)",
                       op, tr_dtype_name(skipped->dtype), (long long)skipped->numel);
    return TR_OK;
}

/* ------------------------------------------------------------ sgd */

static int sgd_checks(tr_ctx *ctx, const tr_tensor *param, const tr_tensor *grad, const tr_tensor *momentum_buf,
                      const tr_tensor *half_copy, const tr_tensor *skip_if, const tr_tensor *skipped, float lr,
                      float momentum, float dampening, float weight_decay, int32_t nesterov, int64_t step,
                      int64_t skipped_known, float grad_scale)
{
    const char *op = "sgd";
    int rc;
    if ((rc = want_common(ctx, op, param, grad, half_copy, step, grad_scale)) ||
        (rc = want_skip_args(ctx, op, skip_if, skipped)))
        return rc;
    if (!(lr >= 0 && momentum >= 0 && momentum < 1 && dampening >= 0 && dampening <= 1 && weight_decay >= 0))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "sgd: lr %g, momentum %g, dampening %g, weight_decay %g: momentum must be in [0, 1), "
                       "dampening in [0, 1], the others >= 0",
                       (double)lr, (double)momentum, (double)dampening, (double)weight_decay);
    if (nesterov && (momentum <= 0 || dampening != 0))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "sgd: nesterov needs momentum > 0 and dampening 0 (got momentum %g, dampening %g), as "
                       "torch.optim.SGD requires",
                       (double)momentum, (double)dampening);
    if (momentum != 0) {
        if (!momentum_buf)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER, "sgd: momentum %g needs a momentum_buf (f32, param's size)",
                           (double)momentum);
        if ((rc = want_state(ctx, op, "momentum_buf", momentum_buf, param, param->numel, "param's number of elements")))
            return rc;
    }
    return TR_OK;
}

/* ------------------------------------------------------------ adafactor */

static int check_config(tr_ctx *ctx, const tr_adafactor_config *c)
{
    if (!c) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "adafactor: cfg is NULL; pass a tr_adafactor_config");
    if (c->relative_step && c->lr > 0)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "adafactor: lr %g with relative_step: the step size is relative; set lr to 0 or relative_step "
                       "to false (transformers refuses the combination too)",
                       (double)c->lr);
    if (c->warmup_init && !c->relative_step)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "adafactor: warmup_init needs relative_step");
    if (!c->relative_step && !(c->lr >= 0))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "adafactor: lr %g: give lr >= 0 or turn relative_step on",
                       (double)c->lr);
    if (!(c->eps1 >= 0 && c->eps2 >= 0 && c->clip_threshold > 0 && c->decay_rate < 0 && c->beta1 < 1 &&
          c->weight_decay >= 0))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "adafactor: eps (%g, %g), clip_threshold %g, decay_rate %g, beta1 %g, weight_decay %g: eps and "
                       "weight_decay must be >= 0, clip_threshold > 0, decay_rate < 0 (-0.8), beta1 < 1 (< 0: none)",
                       (double)c->eps1, (double)c->eps2, (double)c->clip_threshold, (double)c->decay_rate,
                       (double)c->beta1, (double)c->weight_decay);
    return TR_OK;
}

static int adafactor_checks(tr_ctx *ctx, const tr_tensor *param, const tr_tensor *grad, const tr_tensor *exp_avg,
                            const tr_tensor *row, const tr_tensor *col, const tr_tensor *v, const tr_tensor *half_copy,
                            const tr_tensor *skip_if, const tr_tensor *skipped, const tr_adafactor_config *cfg,
                            int64_t step, int64_t skipped_known, float grad_scale, float *lr_used, int64_t *dim)
{
    const char *op = "adafactor";
    int rc;
    if ((rc = want_common(ctx, op, param, grad, half_copy, step, grad_scale)) || (rc = check_config(ctx, cfg)) ||
        (rc = want_skip_args(ctx, op, skip_if, skipped)))
        return rc;
    const int factored = param->ndim >= 2;
    int64_t C = factored ? param->shape[param->ndim - 1] : param->numel;
    int64_t R = factored ? param->shape[param->ndim - 2] : 1;
    int64_t B = factored && R * C > 0 ? param->numel / (R * C) : 1;
    dim[0] = B, dim[1] = R, dim[2] = C; /* the slots' matrices: B of R x C (1 x numel for a vector) */
    if (cfg->beta1 >= 0) {
        if (!exp_avg)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER, "adafactor: beta1 %g needs exp_avg (f32, param's size)",
                           (double)cfg->beta1);
        if ((rc = want_state(ctx, op, "exp_avg", exp_avg, param, param->numel, "param's number of elements")))
            return rc;
    } else if ((rc = no_extra(ctx, op, "exp_avg", exp_avg, "beta1 < 0 means no first moment"))) {
        return rc;
    }
    if (factored) {
        if ((rc = want_state(ctx, op, "row", row, param, B * R, "param's numel / its last dim")) ||
            (rc = want_state(ctx, op, "col", col, param, B * C, "param's numel / its second-to-last dim")) ||
            (rc = no_extra(ctx, op, "v", v, "a parameter of 2 or more dims keeps factored moments (row, col)")))
            return rc;
    } else if ((rc = want_state(ctx, op, "v", v, param, param->numel, "param's number of elements")) ||
               (rc = no_extra(ctx, op, "row", row, "a vector keeps an unfactored v")) ||
               (rc = no_extra(ctx, op, "col", col, "a vector keeps an unfactored v"))) {
        return rc;
    }
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

/* sgd: i = nesterov, step, skipped_known; adafactor: i = step, skipped_known. */
TR_OP_CHECK_BY(sgd, sgd_checks, c->sgd.param, c->sgd.grad, c->sgd.momentum_buf, c->sgd.half_copy, c->sgd.skip_if,
               c->sgd.skipped, c->f[0], c->f[1], c->f[2], c->f[3], (int32_t)c->i[0], c->i[1], c->i[2], c->f[4])
TR_OP_CHECK_BY(adafactor, adafactor_checks, c->adafactor.param, c->adafactor.grad, c->adafactor.exp_avg,
               c->adafactor.row, c->adafactor.col, c->adafactor.v, c->adafactor.half_copy, c->adafactor.skip_if,
               c->adafactor.skipped, c->p, c->i[0], c->i[1], c->f[0], c->res, c->dim)

/* State tensors may be NULL in the description: which ones a step needs depends on its
 * settings (momentum, beta1, the param's rank), checked with the shapes. skip_if and
 * skipped (optional, one i32 element each, checked there too) are read where they live.
 * half_copy is updated in place (ACC): a skipped step leaves it as it was. */

int tr_op_sgd(tr_ctx *ctx, tr_tensor *param, const tr_tensor *grad, tr_tensor *momentum_buf, tr_tensor *half_copy,
              float lr, float momentum, float dampening, float weight_decay, int32_t nesterov, int64_t step,
              float grad_scale, const tr_tensor *skip_if, const tr_tensor *skipped, int64_t skipped_known)
{
    tr_op_call c = { .t = { param, grad, momentum_buf, half_copy, skip_if, skipped },
                     .f = { lr, momentum, dampening, weight_decay, grad_scale },
                     .i = { nesterov, step, skipped_known } };
    return tr_op_run(ctx, &tr_opd_sgd, &c);
}

int tr_op_adafactor(tr_ctx *ctx, tr_tensor *param, const tr_tensor *grad, tr_tensor *exp_avg, tr_tensor *row,
                    tr_tensor *col, tr_tensor *v, tr_tensor *half_copy, const tr_adafactor_config *cfg,
                    int64_t step, float grad_scale, float *lr_used, const tr_tensor *skip_if,
                    const tr_tensor *skipped, int64_t skipped_known)
{
    tr_op_call c = { .t = { param, grad, exp_avg, row, col, v, half_copy, skip_if, skipped }, .p = cfg,
                     .i = { step, skipped_known },
                     .f = { grad_scale }, .res = lr_used };
    return tr_op_run(ctx, &tr_opd_adafactor, &c);
}
