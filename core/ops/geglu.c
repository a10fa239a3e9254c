/* geglu.c — the gated GELU of a GeGLU feed-forward (kernels/cpu/geglu.c): the op table's
 * shape checks and infer step, and the public wrappers.
 *   geglu:          out[..., I] = gelu(h[..., :I]) * h[..., I:]   (h [..., 2I])
 *   geglu_backward: dh[..., :I] = dout * h[..., I:] * gelu'(h[..., :I]),
 *                   dh[..., I:] = dout * gelu(h[..., :I])
 * The first half is the activated input and the second the gate, as transformers' ModernBertMLP
 * chunks its Wi output. dim[0] = N rows, dim[1] = I. */
#include "ops_nn.h"

#include "op_table.h"

/* h is [..., 2I]; other (out or dout) is [..., I]; a known GELU kind. */
static int check_rows(tr_ctx *ctx, tr_op_call *c, const char *op, const tr_tensor *h, const tr_tensor *other,
                      const char *other_name)
{
    if (h->ndim < 1) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: h is a scalar; it must be [..., 2I]", op);
    if (c->i[0] != TR_OP_GELU_ERF && c->i[0] != TR_OP_GELU_TANH)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: GELU kind %lld is unknown: use 0 (erf, \"gelu\") or 1 (tanh, \"gelu_pytorch_tanh\")", op,
                       (long long)c->i[0]);
    const int64_t W = h->shape[h->ndim - 1];
    if (W % 2) {
        char b[160];
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: h has shape %s; its last dimension must be even (the input and the gate halves)", op,
                       tr_op_shape(h, b));
    }
    int64_t shape[8];
    for (int i = 0; i < h->ndim; i++) shape[i] = h->shape[i];
    shape[h->ndim - 1] = W / 2;
    int rc = tr_op_want_shape(ctx, op, other_name, other, h->ndim, shape);
    if (rc) return rc;
    c->dim[1] = W / 2;
    c->dim[0] = W > 0 ? h->numel / W : 0;
    return TR_OK;
}

int tr_check_geglu(tr_ctx *ctx, tr_op_call *c)
{
    return check_rows(ctx, c, "geglu", c->geglu.h, c->geglu.out, "out");
}

/* out: h's shape with the last dimension halved, h's dtype. */
int tr_infer_geglu(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)
{
    const tr_tensor *h = c->geglu.h;
    int64_t dims[8];
    for (int i = 0; i < h->ndim; i++) dims[i] = h->shape[i];
    if (h->ndim > 0) dims[h->ndim - 1] /= 2;
    tr_op_infer_dims(shape, ndim, dtype, 0, h->ndim, dims, h->dtype | TR_INFER_CHOOSE);
    return TR_OK;
}

int tr_op_geglu(tr_ctx *ctx, tr_tensor *out, const tr_tensor *h, int kind)
{
    return TR_OP_RUN_CALL(ctx, geglu, .t = {out, h}, .i = {kind});
}

int tr_check_geglu_backward(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *h = c->geglu_backward.h;
    int rc = check_rows(ctx, c, "geglu_backward", h, c->geglu_backward.dout, "dout");
    if (rc) return rc;
    return tr_op_want_shape(ctx, "geglu_backward", "dh", c->geglu_backward.dh, h->ndim, h->shape);
}

/* dh: h's shape, dout's dtype. */
TR_OP_INFER_LIKE(geglu_backward, c->geglu_backward.h, c->geglu_backward.dout->dtype)

int tr_op_geglu_backward(tr_ctx *ctx, tr_tensor *dh, const tr_tensor *dout, const tr_tensor *h, int kind)
{
    return TR_OP_RUN_CALL(ctx, geglu_backward, .t = {dh, dout, h}, .i = {kind});
}
