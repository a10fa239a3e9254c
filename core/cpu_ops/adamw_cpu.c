/* adamw_cpu.c — the CPU slots (checks and wrappers: core/ops/adamw.c): the fused AdamW step over kernels/cpu/adamw.c.
 * Works in chunks: a chunk of a half gradient is converted to f32 on the stack, the f32 master param and the moments
 * are updated in place, and the new param is written into the half copy the forward reads, in the same pass over
 * memory. */
#include "ops_elem.h"
#include "cpu_slot.h"
#include "cpu/adamw.h"
#include <math.h>

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

/* ------------------------------------------------------------ the slots */
TR_CPU_SLOT_BY(adamw, adamw_run, c->adamw.param, c->adamw.grad, c->adamw.m, c->adamw.v, c->adamw.half_copy, c->f[0],
               c->f[1], c->f[2], c->f[3], c->f[4], c->i[0], c->f[5])
