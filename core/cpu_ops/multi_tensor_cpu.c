/* multi_tensor_cpu.c — the CPU slots (checks and wrappers: core/ops/multi_tensor.c): the CPU slots and table entries of
 * the list ops whose results stay in tensors (ops_multi_tensor.h): global_norm_into, clip_by_norm,
 * scale_check_finite_into, adamw_multi. On the CPU nothing waits for anything, so each is the host-result op it
 * replaces on a device (global_norm, scale, scale_check_finite, adamw per parameter) with
 * its result stored in a tensor: the same bits as the eager path, which is what lets the
 * training loop use one code path on every device. The CUDA slots are in
 * core/cuda_ops/multi_tensor_cuda.c. */
#include "ops_multi_tensor.h"
#include "ops_elementwise.h"
#include "ops_reduce.h"
#include "ops_optim.h"
#include "cpu_slot.h"
#include "multi_tensor_args.h"
#include <math.h>

static void flag_set(const tr_tensor *f)
{
    if (f) ((int32_t *)f->data)[0] = 1;
}

int tr_cpu_global_norm_into(tr_ctx *ctx, tr_op_call *c)
{
    float norm = 0;
    int rc = tr_op_global_norm(ctx, &norm, c->list, c->nlist);
    if (rc == TR_OK) ((float *)c->global_norm_into.norm->data)[0] = norm;
    return rc;
}

int tr_cpu_clip_by_norm(tr_ctx *ctx, tr_op_call *c)
{
    const float norm = ((const float *)c->clip_by_norm.norm->data)[0];
    if (!isfinite(norm)) {
        flag_set(c->clip_by_norm.found_inf);
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

int tr_cpu_scale_check_finite_into(tr_ctx *ctx, tr_op_call *c)
{
    int bad = 0;
    const float scale =
        c->scale_check_finite_into.scale ? ((const float *)c->scale_check_finite_into.scale->data)[0] : c->f[0];
    int rc = tr_op_scale_check_finite(ctx, &bad, c->list, c->nlist, scale);
    if (rc == TR_OK && bad) flag_set(c->scale_check_finite_into.found_inf);
    return rc;
}

/* Each parameter through tr_op_adamw: the per-parameter op's bits exactly. */
int tr_cpu_adamw_multi(tr_ctx *ctx, tr_op_call *c)
{
    const tr_adamw_lists *L = c->p;
    if (c->adamw_multi.skip_if && ((const int32_t *)c->adamw_multi.skip_if->data)[0] != 0) return TR_OK;
    /* the true step: the host's count less the skips it has not read yet */
    const int64_t step = c->adamw_multi.skipped
                             ? c->i[0] - ((int64_t)((const int32_t *)c->adamw_multi.skipped->data)[0] - c->i[1])
                             : c->i[0];
    int rc = TR_OK;
    for (int i = 0; i < c->nlist && rc == TR_OK; i++) {
        const float wd = !L->decay || L->decay[i] ? c->f[4] : 0.0f;
        rc = tr_op_adamw(ctx, L->params[i], L->grads[i], L->m[i], L->v[i], L->half ? L->half[i] : NULL, c->f[0],
                         c->f[1], c->f[2], c->f[3], wd, step, c->f[5]);
    }
    return rc;
}
