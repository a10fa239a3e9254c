/* optim_cpu.c — the CPU slots (checks and wrappers: core/ops/optim.c) of the optimizer steps over
 * kernels/cpu/optim.c. AdamW works in chunks: a chunk of a half gradient is converted to f32 on the stack, the f32
 * master param and the moments are updated in place, and the new param is written into the half copy the forward
 * reads, in the same pass over memory. SGD and Adafactor: a half gradient is converted to f32 through a workspace
 * view (returned before the call returns); the Adafactor factors take a workspace of (rows + cols) doubles. Nothing
 * is allocated that outlives the call. */
#include "ops_optim.h"
#include "cpu_slot.h"
#include "cpu/optim.h"
#include <math.h>

/* ------------------------------------------------------------ adamw */

enum { CHUNK = 4096 };

static int adamw_run(tr_ctx *ctx, const tr_tensor *param, const tr_tensor *grad, const tr_tensor *m, const tr_tensor *v,
                     const tr_tensor *half_copy, float lr, float beta1, float beta2, float eps, float weight_decay,
                     int64_t step, float grad_scale)
{
    {
        int64_t n = param->numel, nchunks = (n + CHUNK - 1) / CHUNK;
        size_t gs = tr_dtype_size(grad->dtype), hs = half_copy ? tr_dtype_size(half_copy->dtype) : 0;
        float *p = param->data, *mm = m->data, *vv = v->data;
#pragma omp parallel for if (n > 65536)
        for (int64_t c = 0; c < nchunks; c++) {
            float buf[CHUNK];
            int64_t start = c * CHUNK, len = n - start < CHUNK ? n - start : CHUNK;
            const float *g = (const float *)grad->data + start;
            if (grad->dtype != TR_F32) {
                tr_convert(buf, TR_F32, (const char *)grad->data + start * (int64_t)gs, grad->dtype, (size_t)len);
                g = buf;
            }
            tr_k_adamw_step_f32(p + start, mm + start, vv + start, g, len, lr, beta1, beta2, eps, weight_decay, step,
                                grad_scale);
            if (half_copy)
                tr_convert((char *)half_copy->data + start * (int64_t)hs, half_copy->dtype, p + start, TR_F32,
                           (size_t)len);
        }
        return TR_OK;
    }
}

TR_CPU_SLOT_BY(adamw, adamw_run, c->adamw.param, c->adamw.grad, c->adamw.m, c->adamw.v, c->adamw.half_copy, c->f[0],
               c->f[1], c->f[2], c->f[3], c->f[4], c->i[0], c->f[5])

/* ------------------------------------------------------------ sgd and adafactor: the step a skip leaves */

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

/* The gradient whole (one row for the staging loop); the f32 param and state in place. */
#define SGD(name) TR_ARGI(sgd, name)
#define ADA(name) TR_ARGI(adafactor, name)

/* ------------------------------------------------------------ sgd */

static const unsigned char sgd_layout[TR_OP_MAX_TENSORS] = {
    [SGD(param)] = TR_ROWS_DIRECT, [SGD(grad)] = TR_ROWS_WHOLE, [SGD(momentum_buf)] = TR_ROWS_DIRECT};

static int sgd_whole(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused, void *eff)
{
    const float momentum = c->f[1];
    tr_k_sgd_step_f32(p[SGD(param)], momentum != 0 ? p[SGD(momentum_buf)] : NULL, p[SGD(grad)], c->sgd.param->numel,
                      c->f[0], momentum, c->f[2], c->f[3], (int32_t)c->i[0] != 0, *(const int64_t *)eff == 1, c->f[4]);
    return TR_OK;
}

/* sgd: i = nesterov, step, skipped_known; f = lr, momentum, dampening, weight_decay,
 * grad_scale. */
int tr_cpu_sgd(tr_ctx *ctx, tr_op_call *c)
{
    int rc, skip;
    int64_t eff;
    if ((rc = effective_step(ctx, "sgd", c->sgd.skip_if, c->sgd.skipped, c->i[1], c->i[2], &skip, &eff))) return rc;
    if (skip) return TR_OK;
    if ((rc = tr_stage_rows(ctx, &tr_opd_sgd, c, sgd_layout, 1, 1, sgd_whole, &eff))) return rc;
    refresh_half(c->sgd.half_copy, c->sgd.param);
    return TR_OK;
}

/* ------------------------------------------------------------ adafactor */

static const unsigned char ada_layout[TR_OP_MAX_TENSORS] = {
    [ADA(param)] = TR_ROWS_DIRECT, [ADA(grad)] = TR_ROWS_WHOLE, [ADA(exp_avg)] = TR_ROWS_DIRECT,
    [ADA(row)] = TR_ROWS_DIRECT,   [ADA(col)] = TR_ROWS_DIRECT, [ADA(v)] = TR_ROWS_DIRECT};

/* The step's hyperparameters and factor workspace in, the step size it used out. */
typedef struct ada_work {
    adafactor_hparams hp;
    void *factors;
    double lr;
} ada_work;

static int ada_whole(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused, void *work)
{
    ada_work *w = work;
    const int factored = c->adafactor.param->ndim >= 2;
    w->lr = tr_k_adafactor_step_f32(p[ADA(param)], p[ADA(exp_avg)], factored ? p[ADA(row)] : NULL,
                                    factored ? p[ADA(col)] : NULL, factored ? NULL : p[ADA(v)], w->factors,
                                    p[ADA(grad)], c->dim[0], c->dim[1], c->dim[2], &w->hp);
    return TR_OK;
}

/* adafactor: i = step, skipped_known; f = grad_scale; p = the config; res = lr_used; the
 * check left B, R, C in dim. */
int tr_cpu_adafactor(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *param = c->adafactor.param;
    const tr_adafactor_config *cfg = c->p;
    float *lr_used = c->res;
    const int64_t B = c->dim[0], R = c->dim[1], C = c->dim[2];
    int rc, skip;
    int64_t eff;
    if ((rc = effective_step(ctx, "adafactor", c->adafactor.skip_if, c->adafactor.skipped, c->i[0], c->i[1], &skip,
                             &eff)))
        return rc;
    if (skip) {
        if (lr_used) *lr_used = 0;
        return TR_OK;
    }
    if (param->numel == 0) return TR_OK;
    ada_work w = {
        .hp =
            {
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
                .grad_scale = c->f[0],
            },
        .factors = NULL,
        .lr = 0,
    };
    if (param->ndim >= 2 && (rc = tr_stage_scratch(ctx, (size_t)(B * (R + C)) * sizeof(double), &w.factors))) return rc;
    rc = tr_stage_rows(ctx, &tr_opd_adafactor, c, ada_layout, 1, 1, ada_whole, &w);
    tr_stage_scratch_free(ctx, w.factors);
    if (rc) return rc;
    refresh_half(c->adafactor.half_copy, param);
    if (lr_used) *lr_used = (float)w.lr;
    return TR_OK;
}
