/* rotary.c — rotary position embedding (kernels/cpu/rotary.c): the op table's shape checks
 * and infer steps, and the public wrappers.
 *   rotary:          out[B, T, H, D] = x rotated by position t = its sequence index, base theta
 *   rotary_backward: dx = dout rotated back (the transpose of the forward's rotation)
 * ModernBERT rotates its queries and keys with this (theta global_rope_theta or
 * local_rope_theta by layer). dim[0..3] = B, T, H, D. */
#include "ops_nn.h"

#include "op_table.h"

#include <math.h>

enum { ROTARY_MAX_D = 1024 }; /* kernels/cpu/rotary.c keeps a row's D/2 angles on the stack */

static int check(tr_ctx *ctx, tr_op_call *c, const char *op, const tr_tensor *out, const char *out_name,
                 const tr_tensor *x, const char *x_name)
{
    char b[160];
    if (x->ndim != 4)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s has shape %s; it must be [B, T, H, D]", op, x_name,
                       tr_op_shape(x, b));
    const int64_t D = x->shape[3];
    if (D % 2 || D > ROTARY_MAX_D)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s has shape %s; its head size D must be even and at most %d",
                       op, x_name, tr_op_shape(x, b), ROTARY_MAX_D);
    if (!(c->f[0] > 0) || !isfinite(c->f[0]))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: theta is %g; it must be a positive number (rope_theta)", op,
                       (double)c->f[0]);
    int rc = tr_op_want_shape(ctx, op, out_name, out, 4, x->shape);
    if (rc) return rc;
    for (int i = 0; i < 4; i++) c->dim[i] = x->shape[i];
    return TR_OK;
}

int tr_check_rotary(tr_ctx *ctx, tr_op_call *c)
{
    return check(ctx, c, "rotary", c->rotary.out, "out", c->rotary.x, "x");
}

TR_OP_INFER_LIKE(rotary, c->rotary.x, c->rotary.x->dtype | TR_INFER_CHOOSE)

int tr_op_rotary(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float theta)
{
    return TR_OP_RUN_CALL(ctx, rotary, .t = {out, x}, .f = {theta});
}

int tr_check_rotary_backward(tr_ctx *ctx, tr_op_call *c)
{
    return check(ctx, c, "rotary_backward", c->rotary_backward.dx, "dx", c->rotary_backward.dout, "dout");
}

TR_OP_INFER_LIKE(rotary_backward, c->rotary_backward.dout, c->rotary_backward.dout->dtype)

int tr_op_rotary_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, float theta)
{
    return TR_OP_RUN_CALL(ctx, rotary_backward, .t = {dx, dout}, .f = {theta});
}
