/* adamw.c — the fused AdamW step over kernels/cpu/adamw.c. Works in chunks: a chunk
 * of a half gradient is converted to f32 on the stack, the f32 master param and the
 * moments are updated in place, and the new param is written into the half copy the
 * forward reads, in the same pass over memory. */
#include "ops_elem.h"

#include "cpu/adamw.h"
#include "op_stage.h"
#include "op_cuda.h"
#include "op_table.h"

#include <math.h>

enum { CHUNK = 4096 };

static int want_f32(tr_ctx *ctx, const char *name, const tr_tensor *t, const tr_tensor *param)
{
    return tr_op_want_numel(ctx, "adamw", name, t, param->numel, "param's number of elements");
}

static int adamw_impl(tr_ctx *ctx, int run, const tr_tensor *param, const tr_tensor *grad, const tr_tensor *m, const tr_tensor *v,
                const tr_tensor *half_copy, float lr, float beta1, float beta2, float eps, float weight_decay,
                int64_t step, float grad_scale)
{
    const char *op = "adamw";
    int rc;
    if ((rc = want_f32(ctx, "param", param, param)) || (rc = want_f32(ctx, "m", m, param)) ||
        (rc = want_f32(ctx, "v", v, param)) || (rc = tr_op_want_numel(ctx, op, "grad", grad, param->numel, "param's number of elements")) ||
        (half_copy && ((rc = tr_op_want_numel(ctx, op, "half_copy", half_copy, param->numel,
                                                "param's number of elements")))))
        return rc;
    if (step < 1)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "adamw: step = %lld; steps count from 1", (long long)step);
    if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && eps >= 0 && lr >= 0 && weight_decay >= 0))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "adamw: lr %g, betas (%g, %g), eps %g, weight_decay %g: betas must be in [0, 1), the others "
                       ">= 0",
                       (double)lr, (double)beta1, (double)beta2, (double)eps, (double)weight_decay);
    if (!(grad_scale > 0 && isfinite(grad_scale)))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "adamw: grad_scale = %g must be finite and > 0 (1 when unscaled)",
                       (double)grad_scale);
    if (!run) return TR_OK;
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

/* ------------------------------------------------------------ the op table */

TR_OP_IMPL_SLOTS(adamw, c->t[0], c->t[1], c->t[2], c->t[3], c->t[4], c->f[0], c->f[1], c->f[2], c->f[3], c->f[4],
                 c->i[0], c->f[5])

const tr_op_desc tr_opd_adamw = {
    "adamw", 5,
    { { "param", TR_ARG_ACC, TR_DT_F32, 0 }, { "grad", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "m", TR_ARG_ACC, TR_DT_F32, 0 }, { "v", TR_ARG_ACC, TR_DT_F32, 0 },
      { "half_copy", TR_ARG_OUT, TR_DT_FLOAT, 1 } },
    adamw_check, { adamw_cpu, TR_CUDA_SLOT(adamw) } };

int tr_op_adamw(tr_ctx *ctx, tr_tensor *param, const tr_tensor *grad, tr_tensor *m, tr_tensor *v,
                tr_tensor *half_copy, float lr, float beta1, float beta2, float eps, float weight_decay,
                int64_t step, float grad_scale)
{
    tr_op_call c = { .t = { param, grad, m, v, half_copy }, .f = { lr, beta1, beta2, eps, weight_decay, grad_scale },
                     .i = { step } };
    return tr_op_run(ctx, &tr_opd_adamw, &c);
}
