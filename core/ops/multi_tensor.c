/* multi_tensor.c — the table entries of the list ops whose results stay in
 * tensors (ops_multi_tensor.h): global_norm_into, clip_by_norm, scale_check_finite_into,
 * adamw_multi. On the CPU nothing waits for anything, so each is the host-result op it
 * replaces on a device (global_norm, scale, scale_check_finite, adamw per parameter) with
 * its result stored in a tensor: the same bits as the eager path, which is what lets the
 * training loop use one code path on every device. The CUDA slots are in
 * core/cuda_ops/multi_tensor_cuda.c.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/multi_tensor_cpu.c, core/cuda_ops/multi_tensor_cuda.c. */
#include "ops_multi_tensor.h"

#include "adamw_check.h"
#include "multi_tensor_args.h"
#include "op_stage.h"
#include "op_table.h"

#include <math.h>

/* ------------------------------------------------------------ shared checks */

/* Every tensor of ts: not NULL, on the op's device, of a floating dtype (f32 when want_f32). */
static int check_list(tr_ctx *ctx, const char *op, const char *what, tr_tensor **ts, int n, int device, int want_f32)
{
    if (n < 0 || (n > 0 && !ts))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: the list of %d %s is NULL or negative", op, n, what);
    for (int i = 0; i < n; i++) {
        if (!ts[i]) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s %d is NULL; pass a tensor", op, what, i);
        if (ts[i]->device != device)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "%s: %s %d is on another device than the op's other tensors; move every tensor of one "
                           "op to one device",
                           op, what, i);
        if (want_f32 ? ts[i]->dtype != TR_F32 : !tr_stage_is_float(ts[i]->dtype))
            return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s %d has dtype %s but must be %s", op, what, i,
                           tr_dtype_name(ts[i]->dtype), want_f32 ? "f32" : "a floating dtype (f32, bf16 or f16)");
    }
    return TR_OK;
}

/* A found-inf flag: one i32 element (NULL passes when the argument is optional). */
static int check_flag(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *f)
{
    if (!f) return TR_OK;
    if (f->dtype != TR_I32 || f->numel != 1)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: %s has dtype %s and %lld elements but must be one i32 element (a found-inf flag, "
                       "zeroed by the caller once per step)",
                       op, name, tr_dtype_name(f->dtype), (long long)f->numel);
    return TR_OK;
}

/* ------------------------------------------------------------ global_norm_into */

int tr_check_global_norm_into(tr_ctx *ctx, tr_op_call *c)
{
    int rc;
    if ((rc = tr_op_want_numel(ctx, "global_norm_into", "norm", c->global_norm_into.norm, 1, "a scalar"))) return rc;
    return check_list(ctx, "global_norm_into", "tensor", c->list, c->nlist, c->device, 0);
}

/* ------------------------------------------------------------ clip_by_norm */

int tr_check_clip_by_norm(tr_ctx *ctx, tr_op_call *c)
{
    int rc;
    if ((rc = tr_op_want_numel(ctx, "clip_by_norm", "norm", c->clip_by_norm.norm, 1, "a scalar")) ||
        (rc = check_flag(ctx, "clip_by_norm", "found_inf", c->clip_by_norm.found_inf)) ||
        (rc = check_list(ctx, "clip_by_norm", "tensor", c->list, c->nlist, c->device, 0)))
        return rc;
    if (!(c->f[0] > 0 && isfinite(c->f[0])) || !(c->f[1] >= 0 && isfinite(c->f[1])))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "clip_by_norm: max_norm = %g must be finite and > 0 (grad_clip in the recipe) and eps = %g "
                       "finite and >= 0",
                       (double)c->f[0], (double)c->f[1]);
    return TR_OK;
}

/* ------------------------------------------------------------ scale_check_finite_into */

int tr_check_scale_check_finite_into(tr_ctx *ctx, tr_op_call *c)
{
    int rc;
    if ((rc = check_flag(ctx, "scale_check_finite_into", "found_inf", c->scale_check_finite_into.found_inf)) ||
        (rc = check_list(ctx, "scale_check_finite_into", "tensor", c->list, c->nlist, c->device, 0)))
        return rc;
    if (c->scale_check_finite_into.scale)
        return tr_op_want_numel(ctx, "scale_check_finite_into", "scale", c->scale_check_finite_into.scale, 1,
                                "1 / the loss scale");
    return TR_OK;
}

/* ------------------------------------------------------------ adamw_multi */

int tr_check_adamw_multi(tr_ctx *ctx, tr_op_call *c)
{
    const char *op = "adamw_multi";
    const tr_adamw_lists *L = c->p;
    const int n = c->nlist;
    int rc;
    if ((rc = check_flag(ctx, op, "skip_if", c->adamw_multi.skip_if))) return rc;
    if (c->adamw_multi.skipped && (c->adamw_multi.skipped->dtype != TR_I32 || c->adamw_multi.skipped->numel != 1))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "adamw_multi: skipped has dtype %s and %lld elements but must be one i32 element (the device "
                       "loss scale's skip count)",
                       tr_dtype_name(c->adamw_multi.skipped->dtype), (long long)c->adamw_multi.skipped->numel);
    if (n > 0 && (!L || !L->params || !L->grads || !L->m || !L->v))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "adamw_multi: the params, grads, m and v lists must all be given");
    if ((rc = check_list(ctx, op, "param", L ? L->params : NULL, n, c->device, 1)) ||
        (rc = check_list(ctx, op, "grad", L ? L->grads : NULL, n, c->device, 1)) ||
        (rc = check_list(ctx, op, "m", L ? L->m : NULL, n, c->device, 1)) ||
        (rc = check_list(ctx, op, "v", L ? L->v : NULL, n, c->device, 1)))
        return rc;
    for (int i = 0; i < n; i++) {
        const int64_t numel = L->params[i]->numel;
        const tr_tensor *h = L->half ? L->half[i] : NULL;
        if (L->grads[i]->numel != numel || L->m[i]->numel != numel || L->v[i]->numel != numel ||
            (h && h->numel != numel))
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "adamw_multi: parameter %d has %lld elements but its grad, m, v or half copy does not; "
                           "each must have the parameter's number of elements",
                           i, (long long)numel);
        if (h && (h->device != c->device || (h->dtype != TR_BF16 && h->dtype != TR_F16)))
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "adamw_multi: half copy %d must be bf16 or f16 on the parameters' device", i);
    }
    return tr_check_adamw_hparams(ctx, op, c->f[0], c->f[1], c->f[2], c->f[3], c->f[4], c->i[0], c->f[5]);
}

/* ------------------------------------------------------------ the op table */

/* The list ops take their tensors as call->list; the device comes from their tensor
 * arguments (checked against every listed tensor). */

int tr_op_global_norm_into(tr_ctx *ctx, tr_tensor *norm, tr_tensor **ts, int n)
{
    tr_op_call c = {.t = {norm}, .list = ts, .nlist = n};
    return tr_op_run(ctx, &tr_opd_global_norm_into, &c);
}

int tr_op_clip_by_norm(tr_ctx *ctx, tr_tensor **ts, int n, const tr_tensor *norm, tr_tensor *found_inf, float max_norm,
                       float eps)
{
    tr_op_call c = {.t = {norm, found_inf}, .list = ts, .nlist = n, .f = {max_norm, eps}};
    return tr_op_run(ctx, &tr_opd_clip_by_norm, &c);
}

int tr_op_scale_check_finite_into(tr_ctx *ctx, tr_tensor *found_inf, tr_tensor **ts, int n, float scale)
{
    tr_op_call c = {.t = {found_inf}, .list = ts, .nlist = n, .f = {scale}};
    return tr_op_run(ctx, &tr_opd_scale_check_finite_into, &c);
}

int tr_op_scale_check_finite_by_into(tr_ctx *ctx, tr_tensor *found_inf, tr_tensor **ts, int n, const tr_tensor *scale)
{
    tr_op_call c = {.t = {found_inf, scale}, .list = ts, .nlist = n, .f = {1.0f}};
    return tr_op_run(ctx, &tr_opd_scale_check_finite_into, &c);
}

int tr_op_adamw_multi(tr_ctx *ctx, tr_tensor **params, tr_tensor **grads, tr_tensor **m, tr_tensor **v,
                      tr_tensor **half_copies, const int32_t *decay, int n, const tr_tensor *skip_if, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale)
{
    return tr_op_adamw_multi_steps(ctx, params, grads, m, v, half_copies, decay, n, skip_if, lr, beta1, beta2, eps,
                                   weight_decay, step, grad_scale, NULL, 0);
}

int tr_op_adamw_multi_steps(tr_ctx *ctx, tr_tensor **params, tr_tensor **grads, tr_tensor **m, tr_tensor **v,
                            tr_tensor **half_copies, const int32_t *decay, int n, const tr_tensor *skip_if, float lr,
                            float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale,
                            const tr_tensor *skipped, int64_t skipped_known)
{
    const tr_adamw_lists L = {params, grads, m, v, half_copies, decay};
    tr_op_call c = {.t = {skip_if, skipped},
                    .list = params,
                    .nlist = n,
                    .p = &L,
                    .f = {lr, beta1, beta2, eps, weight_decay, grad_scale},
                    .i = {step, skipped_known}};
    return tr_op_run(ctx, &tr_opd_adamw_multi, &c);
}
