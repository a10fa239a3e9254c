/* linear_gelu.c — the op linear_gelu (ops_linear_gelu.h): its shape check, infer step and
 * public wrapper (arguments in op_list.h). The shapes are linear's with h beside out; the
 * check leaves O, I and the rows N in call->dim (dim[0..2], as linear's). */
#include "ops_linear_gelu.h"

#include "op_table.h"

int tr_check_linear_gelu(tr_ctx *ctx, tr_op_call *c)
{
    static const char *op = "linear_gelu";
    const tr_tensor *out = c->linear_gelu.out, *h = c->linear_gelu.h, *x = c->linear_gelu.x, *w = c->linear_gelu.w,
                    *bias = c->linear_gelu.bias;
    char s1[160], s2[160];
    int rc;
    if (c->i[0] != TR_OP_GELU_ERF && c->i[0] != TR_OP_GELU_TANH)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: GELU kind %lld is unknown: use 0 (erf, BERT's \"gelu\") or 1 (tanh, \"gelu_new\" / "
                       "\"gelu_pytorch_tanh\")",
                       op, (long long)c->i[0]);
    if (x->ndim < 1 || x->ndim > 8 || w->ndim != 2 || w->shape[1] != x->shape[x->ndim - 1])
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: x has shape %s but w has shape %s; w must be [out_features, %lld]", op, tr_op_shape(x, s1),
                       tr_op_shape(w, s2), (long long)(x->ndim ? x->shape[x->ndim - 1] : 0));
    const int64_t O = w->shape[0], I = w->shape[1];
    int64_t want[8], N = 1;
    for (int i = 0; i < x->ndim - 1; i++) want[i] = x->shape[i], N *= x->shape[i];
    want[x->ndim - 1] = O;
    if ((rc = tr_op_want_shape(ctx, op, "out", out, x->ndim, want)) ||
        (rc = tr_op_want_shape(ctx, op, "h", h, x->ndim, want)) ||
        (bias && (rc = tr_op_want_shape(ctx, op, "bias", bias, 1, &O))))
        return rc;
    if (N > INT32_MAX || O > INT32_MAX || I > INT32_MAX)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: a dimension exceeds 2^31-1 (rows %lld, O %lld, I %lld)", op,
                       (long long)N, (long long)O, (long long)I);
    c->dim[0] = O, c->dim[1] = I, c->dim[2] = N;
    return TR_OK;
}

/* out and h: x's shape with its last dim w's rows, x's dtype. */
int tr_infer_linear_gelu(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)
{
    const tr_tensor *x = c->linear_gelu.x, *w = c->linear_gelu.w;
    int64_t dims[8];
    const int n = x->ndim > 0 && x->ndim <= 8 ? x->ndim : 1;
    for (int i = 0; i < n - 1; i++) dims[i] = x->shape[i];
    dims[n - 1] = w->ndim > 0 ? w->shape[0] : 0;
    for (int a = 0; a < 2; a++) tr_op_infer_dims(shape, ndim, dtype, a, n, dims, x->dtype | TR_INFER_CHOOSE);
    return TR_OK;
}

int tr_op_linear_gelu(tr_ctx *ctx, tr_tensor *out, tr_tensor *h, const tr_tensor *x, const tr_tensor *w,
                      const tr_tensor *bias, int kind)
{
    tr_op_call c = {.t = {out, h, x, w, bias}, .i = {kind}};
    return tr_op_run(ctx, &tr_opd_linear_gelu, &c);
}
