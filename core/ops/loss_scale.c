/* loss_scale.c — the table entries of the device loss scale
 * (ops_loss_scale.h): loss_scale_update and scale_by_scalar. On the CPU they are the eager
 * scaler's arithmetic with its state in tensors, so a CPU run through them is bitwise the
 * eager one for the default factors (powers of two: the f32 scale then holds exactly the
 * double the host rule computes). The CUDA slots are in core/cuda_ops/loss_scale_cuda.c.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/loss_scale_cpu.c, core/cuda_ops/loss_scale_cuda.c. */
#include "ops_loss_scale.h"

#include "op_table.h"

#include <math.h>

/* ------------------------------------------------------------ loss_scale_update */

static int want_i32_scalar(tr_ctx *ctx, const char *name, const tr_tensor *t, const char *what)
{
    if (t->dtype != TR_I32 || t->numel != 1)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "loss_scale_update: %s has dtype %s and %lld elements but must be one i32 element (%s)", name,
                       tr_dtype_name(t->dtype), (long long)t->numel, what);
    return TR_OK;
}

int tr_check_loss_scale_update(tr_ctx *ctx, tr_op_call *c)
{
    int rc;
    if ((rc = tr_op_want_numel(ctx, "loss_scale_update", "scale", c->loss_scale_update.scale, 1, "the loss scale")) ||
        (rc = tr_op_want_numel(ctx, "loss_scale_update", "inv_scale", c->loss_scale_update.inv_scale, 1,
                               "1 / the loss scale")) ||
        (rc = want_i32_scalar(ctx, "tracker", c->loss_scale_update.tracker, "clean steps since the last change")) ||
        (rc = want_i32_scalar(ctx, "skipped", c->loss_scale_update.skipped, "skipped steps")) ||
        (rc = want_i32_scalar(ctx, "found_inf", c->loss_scale_update.found_inf, "this step's found-inf flag")))
        return rc;
    if (!(c->f[0] > 0 && isfinite(c->f[0])) || !(c->f[1] > 0 && isfinite(c->f[1])) || c->i[0] < 1)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "loss_scale_update: growth_factor = %g and backoff_factor = %g must be finite and > 0 and "
                       "growth_interval = %lld at least 1 (the fp16 scaler's options)",
                       (double)c->f[0], (double)c->f[1], (long long)c->i[0]);
    return TR_OK;
}

/* ------------------------------------------------------------ scale_by_scalar */

int tr_check_scale_by_scalar(tr_ctx *ctx, tr_op_call *c)
{
    int rc = tr_op_want_numel(ctx, "scale_by_scalar", "s", c->scale_by_scalar.s, 1,
                              "a device scalar such as the loss scale");
    if (rc) return rc;
    if (!isfinite(c->f[0]))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "scale_by_scalar: factor = %g must be finite", (double)c->f[0]);
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

int tr_op_loss_scale_update(tr_ctx *ctx, tr_tensor *scale, tr_tensor *inv_scale, tr_tensor *tracker, tr_tensor *skipped,
                            const tr_tensor *found_inf, float growth_factor, float backoff_factor,
                            int64_t growth_interval)
{
    tr_op_call c = {.t = {scale, inv_scale, tracker, skipped, found_inf},
                    .f = {growth_factor, backoff_factor},
                    .i = {growth_interval}};
    return tr_op_run(ctx, &tr_opd_loss_scale_update, &c);
}

int tr_op_scale_by_scalar(tr_ctx *ctx, tr_tensor *x, const tr_tensor *s, float factor)
{
    tr_op_call c = {.t = {x, s}, .f = {factor}};
    return tr_op_run(ctx, &tr_opd_scale_by_scalar, &c);
}
