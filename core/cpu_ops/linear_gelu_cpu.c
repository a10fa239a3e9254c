/* linear_gelu_cpu.c — the CPU slots of linear_gelu (linear into h, then gelu of h into out) and
 * linear_backward_dgelu (linear_backward into dh, gelu_backward of dh in place, then dhbias by
 * linear_backward's bias sum over dh), each step through its own op: the same kernels, so the
 * same values as the ops called apart (the CPU measured no gain from fusing them:
 * core/ops/bias_gelu.c). */
#include "cpu_slot.h"
#include "ops_linear_gelu.h"

int tr_cpu_linear_gelu(tr_ctx *ctx, tr_op_call *c)
{
    /* the call's outputs, which the slot writes */
    tr_tensor *out = (tr_tensor *)c->linear_gelu.out, *h = (tr_tensor *)c->linear_gelu.h;
    int rc = tr_op_linear(ctx, h, c->linear_gelu.x, c->linear_gelu.w, c->linear_gelu.bias);
    return rc ? rc : tr_op_gelu(ctx, out, h, (int)c->i[0]);
}

int tr_cpu_linear_backward_dgelu(tr_ctx *ctx, tr_op_call *c)
{
    /* the call's outputs, which the slot writes */
    tr_tensor *dh = (tr_tensor *)c->linear_backward_dgelu.dh, *dw = (tr_tensor *)c->linear_backward_dgelu.dw,
              *dbias = (tr_tensor *)c->linear_backward_dgelu.dbias,
              *dhbias = (tr_tensor *)c->linear_backward_dgelu.dhbias;
    const tr_tensor *dout = c->linear_backward_dgelu.dout;
    int rc = tr_op_linear_backward(ctx, dh, dw, dbias, dout, c->linear_backward_dgelu.x, c->linear_backward_dgelu.w);
    if (rc == TR_OK) rc = tr_op_gelu_backward(ctx, dh, dh, c->linear_backward_dgelu.h, (int)c->i[0]);
    if (rc == TR_OK && dhbias) rc = tr_op_linear_backward(ctx, NULL, NULL, dhbias, dh, NULL, NULL);
    return rc;
}
