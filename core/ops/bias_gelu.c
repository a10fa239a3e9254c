/* bias_gelu.c — the FFN's up-projection bias and GELU fused (kernels/cpu/bias_gelu.c): the
 * op table's descriptions, shape checks and CPU slots, and the public wrappers.
 *   bias_gelu:          h (updated in place) = h + bias, out = gelu(h)
 *   bias_gelu_backward: dx = dout * gelu'(h), dbias (+=) = column sums of dx
 * The GEMM before it runs without its bias, and the bias gradient is summed in the pass that
 * makes dx instead of a second pass over it. The BERT layer does not use it on the CPU: with
 * OpenBLAS, a GEMM without its bias clears its output in a pass of its own (the pass the
 * fusion saves), and the bias gradient's GEMV is cheap; the 4096 x 384 -> 1536 up-projection,
 * forward and backward, measured 0.86-0.98x of the unfused ops (bench/fused_ops.lua). Half tensors are staged to f32 in blocks of rows; then out is the
 * GELU of the f32 pre-activation before it is rounded into h, and dbias sums the f32 dx
 * before it is rounded into dx (the unfused ops rounded first: about an ulp of the half
 * dtype apart). */
#include "ops_nn.h"

#include "op_table.h"

/* ------------------------------------------------------------ shapes */

/* h is [..., I], other (out or dout) has its shape, bias (bias or dbias) is [I] or NULL; a
 * known GELU kind. dim[0] = N rows, dim[1] = I. */
static int check_rows(tr_ctx *ctx, tr_op_call *c, const char *op, const tr_tensor *h, const tr_tensor *other,
                      const tr_tensor *bias)
{
    int backward = other == c->bias_gelu_backward.dout;
    int rc;
    if (h->ndim < 1) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: h is a scalar; it must be [..., I]", op);
    if (c->i[0] != TR_OP_GELU_ERF && c->i[0] != TR_OP_GELU_TANH)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: GELU kind %lld is unknown: use 0 (erf, BERT's \"gelu\") or 1 (tanh, \"gelu_new\" / "
                       "\"gelu_pytorch_tanh\")",
                       op, (long long)c->i[0]);
    int64_t I = h->shape[h->ndim - 1];
    if ((rc = tr_op_want_shape(ctx, op, backward ? "dout" : "out", other, h->ndim, h->shape))) return rc;
    if (bias && (rc = tr_op_want_shape(ctx, op, backward ? "dbias" : "bias", bias, 1, &I))) return rc;
    c->dim[0] = I > 0 ? h->numel / I : 0;
    c->dim[1] = I;
    return TR_OK;
}

/* ------------------------------------------------------------ forward */

int tr_check_bias_gelu(tr_ctx *ctx, tr_op_call *c)
{
    return check_rows(ctx, c, "bias_gelu", c->bias_gelu.h, c->bias_gelu.out, c->bias_gelu.bias);
}

/* out: h's shape and dtype. */
TR_OP_INFER_LIKE(bias_gelu, c->bias_gelu.h, c->bias_gelu.h->dtype | TR_INFER_CHOOSE)

int tr_op_bias_gelu(tr_ctx *ctx, tr_tensor *out, tr_tensor *h, const tr_tensor *bias, int kind)
{
    tr_op_call c = { .t = { out, h, bias }, .i = { kind } };
    return tr_op_run(ctx, &tr_opd_bias_gelu, &c);
}

/* ------------------------------------------------------------ backward */

int tr_check_bias_gelu_backward(tr_ctx *ctx, tr_op_call *c)
{
    int rc = check_rows(ctx, c, "bias_gelu_backward", c->bias_gelu_backward.h, c->bias_gelu_backward.dout,
                        c->bias_gelu_backward.dbias);
    if (rc) return rc;
    const tr_tensor *h = c->bias_gelu_backward.h;
    return tr_op_want_shape(ctx, "bias_gelu_backward", "dx", c->bias_gelu_backward.dx, h->ndim, h->shape);
}

int tr_op_bias_gelu_backward(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dbias, const tr_tensor *dout, const tr_tensor *h,
                             int kind)
{
    tr_op_call c = { .t = { dx, dbias, dout, h }, .i = { kind } };
    return tr_op_run(ctx, &tr_opd_bias_gelu_backward, &c);
}
