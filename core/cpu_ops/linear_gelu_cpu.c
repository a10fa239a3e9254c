/* linear_gelu_cpu.c — the CPU slot of linear_gelu: linear into h, then gelu of h into out, each
 * through its own op (the same kernels, so the same values as the two ops called apart; the
 * CPU measured no gain from fusing them: core/ops/bias_gelu.c). */
#include "cpu_slot.h"
#include "ops_linear_gelu.h"

int tr_cpu_linear_gelu(tr_ctx *ctx, tr_op_call *c)
{
    /* the call's outputs, which the slot writes */
    tr_tensor *out = (tr_tensor *)c->linear_gelu.out, *h = (tr_tensor *)c->linear_gelu.h;
    int rc = tr_op_linear(ctx, h, c->linear_gelu.x, c->linear_gelu.w, c->linear_gelu.bias);
    return rc ? rc : tr_op_gelu(ctx, out, h, (int)c->i[0]);
}
