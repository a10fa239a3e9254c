/* adamw.c — the fused AdamW step over kernels/cpu/adamw.c. Works in chunks: a chunk
 * of a half gradient is converted to f32 on the stack, the f32 master param and the
 * moments are updated in place, and the new param is written into the half copy the
 * forward reads, in the same pass over memory.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/adamw_cpu.c. */
#include "ops_elem.h"

#include "adamw_check.h"
#include "cpu/adamw.h"
#include "op_stage.h"
#include "op_table.h"

#include <math.h>

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
