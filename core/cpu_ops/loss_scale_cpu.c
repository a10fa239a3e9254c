/* loss_scale_cpu.c — the CPU slots (checks and wrappers: core/ops/loss_scale.c): the CPU slots and table entries of the
 * device loss scale (ops_loss_scale.h): loss_scale_update and scale_by_scalar. On the CPU they are the eager scaler's
 * arithmetic with its state in tensors, so a CPU run through them is bitwise the eager one for the default factors
 * (powers of two: the f32 scale then holds exactly the double the host rule computes). The CUDA slots are in
 * core/cuda_ops/loss_scale_cuda.c. */
#include "ops_loss_scale.h"
#include "ops_elementwise.h"
#include "cpu_slot.h"
#include <math.h>

int tr_cpu_loss_scale_update(tr_ctx *ctx, tr_op_call *c)
{
    (void)ctx;
    float *scale = c->loss_scale_update.scale->data, *inv = c->loss_scale_update.inv_scale->data;
    int32_t *tracker = c->loss_scale_update.tracker->data, *skipped = c->loss_scale_update.skipped->data;
    const int32_t found = ((const int32_t *)c->loss_scale_update.found_inf->data)[0];
    if (found) {
        scale[0] *= c->f[1];
        tracker[0] = 0;
        skipped[0] += 1;
    } else {
        tracker[0] += 1;
        if (tracker[0] >= c->i[0]) {
            scale[0] *= c->f[0];
            tracker[0] = 0;
        }
    }
    inv[0] = 1.0f / scale[0];
    return TR_OK;
}

int tr_cpu_scale_by_scalar(tr_ctx *ctx, tr_op_call *c)
{
    const float coef = ((const float *)c->scale_by_scalar.s->data)[0] * c->f[0];
    return tr_op_scale(ctx, (tr_tensor *)c->scale_by_scalar.x, c->scale_by_scalar.x, coef);
}
