/* multi_tensor.c — the CPU slots and table entries of the list ops whose results stay in
 * tensors (ops_multi_tensor.h): global_norm_into, clip_by_norm, scale_check_finite_into,
 * adamw_multi. On the CPU nothing waits for anything, so each is the host-result op it
 * replaces on a device (global_norm, scale, scale_check_finite, adamw per parameter) with
 * its result stored in a tensor: the same bits as the eager path, which is what lets the
 * training loop use one code path on every device. The CUDA slots are in
 * core/cuda_ops/multi_tensor_cuda.c. */
#include "ops_multi_tensor.h"

#include "multi_tensor_args.h"
#include "op_cuda.h"
#include "op_stage.h"
#include "op_table.h"
#include "ops_elem.h"

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

static void flag_set(const tr_tensor *f)
{
    if (f) ((int32_t *)f->data)[0] = 1;
}

/* ------------------------------------------------------------ global_norm_into */

static int global_norm_into_check(tr_ctx *ctx, tr_op_call *c)
{
    int rc;
    if ((rc = tr_op_want_numel(ctx, "global_norm_into", "norm", c->t[0], 1, "a scalar"))) return rc;
    return check_list(ctx, "global_norm_into", "tensor", c->list, c->nlist, c->device, 0);
}

static int global_norm_into_cpu(tr_ctx *ctx, tr_op_call *c)
{
    float norm = 0;
    int rc = tr_op_global_norm(ctx, &norm, c->list, c->nlist);
    if (rc == TR_OK) ((float *)c->t[0]->data)[0] = norm;
    return rc;
}

/* ------------------------------------------------------------ clip_by_norm */

static int clip_by_norm_check(tr_ctx *ctx, tr_op_call *c)
{
    int rc;
    if ((rc = tr_op_want_numel(ctx, "clip_by_norm", "norm", c->t[0], 1, "a scalar")) ||
        (rc = check_flag(ctx, "clip_by_norm", "found_inf", c->t[1])) ||
        (rc = check_list(ctx, "clip_by_norm", "tensor", c->list, c->nlist, c->device, 0)))
        return rc;
    if (!(c->f[0] > 0 && isfinite(c->f[0])) || !(c->f[1] >= 0 && isfinite(c->f[1])))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "clip_by_norm: max_norm = %g must be finite and > 0 (grad_clip in the recipe) and eps = %g "
                       "finite and >= 0",
                       (double)c->f[0], (double)c->f[1]);
    return TR_OK;
}

static int clip_by_norm_cpu(tr_ctx *ctx, tr_op_call *c)
{
    const float norm = ((const float *)c->t[0]->data)[0];
    if (!isfinite(norm)) {
        flag_set(c->t[1]);
        return TR_OK;
    }
    /* in f32 as torch (and trainer.train.clip's eager path): max_norm / (norm + eps) */
    const float denom = norm + c->f[1];
    const float coef = c->f[0] / denom;
    int rc = TR_OK;
    if (coef < 1.0f)
        for (int i = 0; i < c->nlist && rc == TR_OK; i++) rc = tr_op_scale(ctx, c->list[i], c->list[i], coef);
    return rc;
}

/* ------------------------------------------------------------ scale_check_finite_into */

static int scale_check_finite_into_check(tr_ctx *ctx, tr_op_call *c)
{
    int rc;
    if ((rc = check_flag(ctx, "scale_check_finite_into", "found_inf", c->t[0])) ||
        (rc = check_list(ctx, "scale_check_finite_into", "tensor", c->list, c->nlist, c->device, 0)))
        return rc;
    if (c->t[1]) return tr_op_want_numel(ctx, "scale_check_finite_into", "scale", c->t[1], 1, "1 / the loss scale");
    return TR_OK;
}

static int scale_check_finite_into_cpu(tr_ctx *ctx, tr_op_call *c)
{
    int bad = 0;
    const float scale = c->t[1] ? ((const float *)c->t[1]->data)[0] : c->f[0];
    int rc = tr_op_scale_check_finite(ctx, &bad, c->list, c->nlist, scale);
    if (rc == TR_OK && bad) flag_set(c->t[0]);
    return rc;
}

/* ------------------------------------------------------------ adamw_multi */

static int adamw_multi_check(tr_ctx *ctx, tr_op_call *c)
{
    const char *op = "adamw_multi";
    const tr_adamw_lists *L = c->p;
    const int n = c->nlist;
    int rc;
    if ((rc = check_flag(ctx, op, "skip_if", c->t[0]))) return rc;
    if (c->t[1] && (c->t[1]->dtype != TR_I32 || c->t[1]->numel != 1))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "adamw_multi: skipped has dtype %s and %lld elements but must be one i32 element (the device "
                       "loss scale's skip count)",
                       tr_dtype_name(c->t[1]->dtype), (long long)c->t[1]->numel);
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
    const float lr = c->f[0], b1 = c->f[1], b2 = c->f[2], eps = c->f[3], wd = c->f[4], gs = c->f[5];
    if (c->i[0] < 1)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "adamw_multi: step = %lld; steps count from 1", (long long)c->i[0]);
    if (!(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1 && eps >= 0 && lr >= 0 && wd >= 0))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "adamw_multi: lr %g, betas (%g, %g), eps %g, weight_decay %g: betas must be in [0, 1), the "
                       "others >= 0",
                       (double)lr, (double)b1, (double)b2, (double)eps, (double)wd);
    if (!(gs > 0 && isfinite(gs)))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "adamw_multi: grad_scale = %g must be finite and > 0 (1 when unscaled)", (double)gs);
    return TR_OK;
}

/* Each parameter through tr_op_adamw: the per-parameter op's bits exactly. */
static int adamw_multi_cpu(tr_ctx *ctx, tr_op_call *c)
{
    const tr_adamw_lists *L = c->p;
    if (c->t[0] && ((const int32_t *)c->t[0]->data)[0] != 0) return TR_OK;
    /* the true step: the host's count less the skips it has not read yet */
    const int64_t step = c->t[1] ? c->i[0] - ((int64_t)((const int32_t *)c->t[1]->data)[0] - c->i[1]) : c->i[0];
    int rc = TR_OK;
    for (int i = 0; i < c->nlist && rc == TR_OK; i++) {
        const float wd = !L->decay || L->decay[i] ? c->f[4] : 0.0f;
        rc = tr_op_adamw(ctx, L->params[i], L->grads[i], L->m[i], L->v[i], L->half ? L->half[i] : NULL, c->f[0],
                         c->f[1], c->f[2], c->f[3], wd, step, c->f[5]);
    }
    return rc;
}

/* ------------------------------------------------------------ the op table */

/* The list ops take their tensors as call->list; the device comes from their tensor
 * arguments (checked against every listed tensor). */
const tr_op_desc tr_opd_global_norm_into = {"global_norm_into",
                                            1,
                                            {{"norm", TR_ARG_OUT, TR_DT_F32, 0}},
                                            global_norm_into_check,
                                            {global_norm_into_cpu, TR_CUDA_SLOT(global_norm_into)}};
const tr_op_desc tr_opd_clip_by_norm = {"clip_by_norm",
                                        2,
                                        {{"norm", TR_ARG_IN, TR_DT_F32, 0}, {"found_inf", TR_ARG_ACC, TR_DT_ANY, 1}},
                                        clip_by_norm_check,
                                        {clip_by_norm_cpu, TR_CUDA_SLOT(clip_by_norm)}};
const tr_op_desc tr_opd_scale_check_finite_into = {
    "scale_check_finite_into",
    2,
    {{"found_inf", TR_ARG_ACC, TR_DT_ANY, 0}, {"scale", TR_ARG_IN, TR_DT_F32, 1}},
    scale_check_finite_into_check,
    {scale_check_finite_into_cpu, TR_CUDA_SLOT(scale_check_finite_into)}};
const tr_op_desc tr_opd_adamw_multi = {"adamw_multi",
                                       2,
                                       {{"skip_if", TR_ARG_IN, TR_DT_ANY, 1}, {"skipped", TR_ARG_IN, TR_DT_ANY, 1}},
                                       adamw_multi_check,
                                       {adamw_multi_cpu, TR_CUDA_SLOT(adamw_multi)}};

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
