/* linear_gelu.c — the ops linear_gelu and linear_backward_dgelu (ops_linear_gelu.h): their
 * shape checks, linear_gelu's infer step and the public wrappers (arguments in op_list.h).
 * linear_gelu's shapes are linear's with h beside out; linear_backward_dgelu's are
 * linear_backward's with h, dh (and x) of the input's shape and dhbias [I]. Each check
 * leaves O, I and the rows N in call->dim (dim[0..2], as linear's). */
#include "ops_linear_gelu.h"

#include "op_table.h"

/* O, I, N into call->dim, each within int32 (cuBLASLt's sizes). */
static int leave_dims(tr_ctx *ctx, const char *op, tr_op_call *c, int64_t O, int64_t I, int64_t N)
{
    if (N > INT32_MAX || O > INT32_MAX || I > INT32_MAX)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: a dimension exceeds 2^31-1 (rows %lld, O %lld, I %lld)", op,
                       (long long)N, (long long)O, (long long)I);
    c->dim[0] = O, c->dim[1] = I, c->dim[2] = N;
    return TR_OK;
}

static int check_kind(tr_ctx *ctx, const char *op, int64_t kind)
{
    if (kind == TR_OP_GELU_ERF || kind == TR_OP_GELU_TANH) return TR_OK;
    return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                   "%s: GELU kind %lld is unknown: use 0 (erf, BERT's \"gelu\") or 1 (tanh, \"gelu_new\" / "
                   "\"gelu_pytorch_tanh\")",
                   op, (long long)kind);
}

int tr_check_linear_gelu(tr_ctx *ctx, tr_op_call *c)
{
    static const char *op = "linear_gelu";
    const tr_tensor *out = c->linear_gelu.out, *h = c->linear_gelu.h, *x = c->linear_gelu.x, *w = c->linear_gelu.w,
                    *bias = c->linear_gelu.bias;
    char s1[160], s2[160];
    int rc;
    if ((rc = check_kind(ctx, op, c->i[0]))) return rc;
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
    return leave_dims(ctx, op, c, O, I, N);
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

int tr_check_linear_backward_dgelu(tr_ctx *ctx, tr_op_call *c)
{
    static const char *op = "linear_backward_dgelu";
    const tr_tensor *dh = c->linear_backward_dgelu.dh, *dw = c->linear_backward_dgelu.dw,
                    *dbias = c->linear_backward_dgelu.dbias, *dhbias = c->linear_backward_dgelu.dhbias,
                    *dout = c->linear_backward_dgelu.dout, *x = c->linear_backward_dgelu.x,
                    *w = c->linear_backward_dgelu.w, *h = c->linear_backward_dgelu.h;
    char s1[160], s2[160];
    int rc;
    if ((rc = check_kind(ctx, op, c->i[0]))) return rc;
    if (dw && !x) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: dw needs x, which is NULL", op);
    if (dout->ndim < 1 || dout->ndim > 8 || w->ndim != 2 || w->shape[0] != dout->shape[dout->ndim - 1])
        return tr_fail(
            tr_ctx_err(ctx), TR_EUSER, "%s: dout has shape %s but w has shape %s; w must be [%lld, in_features]", op,
            tr_op_shape(dout, s1), tr_op_shape(w, s2), (long long)(dout->ndim ? dout->shape[dout->ndim - 1] : 0));
    const int64_t O = w->shape[0], I = w->shape[1];
    int64_t want[8], N = 1;
    for (int i = 0; i < dout->ndim - 1; i++) want[i] = dout->shape[i], N *= dout->shape[i];
    want[dout->ndim - 1] = I;
    int64_t wshape[2] = {O, I};
    if ((rc = tr_op_want_shape(ctx, op, "h", h, dout->ndim, want)) ||
        (rc = tr_op_want_shape(ctx, op, "dh", dh, dout->ndim, want)) ||
        (x && (rc = tr_op_want_shape(ctx, op, "x", x, dout->ndim, want))) ||
        (dw && (rc = tr_op_want_shape(ctx, op, "dw", dw, 2, wshape))) ||
        (dbias && (rc = tr_op_want_shape(ctx, op, "dbias", dbias, 1, &O))) ||
        (dhbias && (rc = tr_op_want_shape(ctx, op, "dhbias", dhbias, 1, &I))))
        return rc;
    return leave_dims(ctx, op, c, O, I, N);
}

int tr_op_linear_backward_dgelu(tr_ctx *ctx, tr_tensor *dh, tr_tensor *dw, tr_tensor *dbias, tr_tensor *dhbias,
                                const tr_tensor *dout, const tr_tensor *x, const tr_tensor *w, const tr_tensor *h,
                                int kind)
{
    tr_op_call c = {.t = {dh, dw, dbias, dhbias, dout, x, w, h}, .i = {kind}};
    return tr_op_run(ctx, &tr_opd_linear_backward_dgelu, &c);
}
