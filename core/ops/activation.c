/* activation.c — GELU (erf and tanh forms), softmax over the last dim and tanh: the shape
 * checks of their op-table entries (arguments in op_list.h) and the public wrappers. Slots:
 * core/cpu_ops/activation_cpu.c, core/cuda_ops/activation_cuda.c. tanh's backward reads the
 * forward's output y, so callers keep y rather than x. */
#include "ops_nn.h"
#include "op_table.h"

/* ------------------------------------------------------------ shape checks */

/* t[0] = y, t[1] = a, t[2] = b (backward only): one shape. */
static int same_shapes(tr_ctx *ctx, tr_op_call *c, const tr_op_desc *d)
{
    const tr_tensor *a = c->t[1];
    int rc;
    for (int i = 0; i < d->nargs; i++)
        if (i != 1 && (rc = tr_op_want_shape(ctx, d->name, d->args[i].name, c->t[i], a->ndim, a->shape))) return rc;
    return TR_OK;
}

static int gelu_kind_check(tr_ctx *ctx, tr_op_call *c, const tr_op_desc *d)
{
    if (c->i[0] != TR_OP_GELU_ERF && c->i[0] != TR_OP_GELU_TANH && c->i[0] != TR_OP_ACT_RELU)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: GELU kind %lld is unknown: use 0 (erf, BERT's \"gelu\"), 1 (tanh, "
                       "\"gelu_new\" / \"gelu_pytorch_tanh\") or 2 (ReLU)",
                       d->name, (long long)c->i[0]);
    return same_shapes(ctx, c, d);
}

/* ------------------------------------------------------------ the op table */

#define ACT_CHECK(name, check_fn)                                                                                      \
    int tr_check_##name(tr_ctx *ctx, tr_op_call *c)                                                                    \
    {                                                                                                                  \
        return check_fn(ctx, c, &tr_opd_##name);                                                                       \
    }

ACT_CHECK(gelu, gelu_kind_check)
ACT_CHECK(gelu_backward, gelu_kind_check)
ACT_CHECK(softmax, same_shapes)
ACT_CHECK(softmax_backward, same_shapes)
ACT_CHECK(tanh, same_shapes)
ACT_CHECK(tanh_backward, same_shapes)

/* ------------------------------------------------------------ infer steps */

/* The forward's out has x's shape and dtype; the backward's dx has the shape of its second
 * input (x or y) and dout's dtype. gelu, softmax and tanh lay their arguments out alike. */
static int infer_forward(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)
{
    tr_op_infer_like(shape, ndim, dtype, 0, c->gelu.x, c->gelu.x->dtype | TR_INFER_CHOOSE);
    return TR_OK;
}

static int infer_backward(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)
{
    tr_op_infer_like(shape, ndim, dtype, 0, c->gelu_backward.x, c->gelu_backward.dout->dtype);
    return TR_OK;
}

#define ACT_INFER(name, fn)                                                                                            \
    int tr_infer_##name(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)                   \
    {                                                                                                                  \
        return fn(ctx, c, shape, ndim, dtype);                                                                         \
    }

ACT_INFER(gelu, infer_forward)
ACT_INFER(gelu_backward, infer_backward)
ACT_INFER(softmax, infer_forward)
ACT_INFER(softmax_backward, infer_backward)
ACT_INFER(tanh, infer_forward)
ACT_INFER(tanh_backward, infer_backward)

/* ------------------------------------------------------------ public wrappers */

static int call2(tr_ctx *ctx, const tr_op_desc *d, const tr_tensor *y, const tr_tensor *a, int kind)
{
    tr_op_call c = { .t = { y, a }, .i = { kind } };
    return tr_op_run(ctx, d, &c);
}

static int call3(tr_ctx *ctx, const tr_op_desc *d, const tr_tensor *y, const tr_tensor *a, const tr_tensor *b,
                 int kind)
{
    tr_op_call c = { .t = { y, a, b }, .i = { kind } };
    return tr_op_run(ctx, d, &c);
}

int tr_op_gelu(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, int kind)
{
    return call2(ctx, &tr_opd_gelu, out, x, kind);
}

int tr_op_gelu_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *x, int kind)
{
    return call3(ctx, &tr_opd_gelu_backward, dx, dout, x, kind);
}

int tr_op_softmax(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x) { return call2(ctx, &tr_opd_softmax, out, x, 0); }

int tr_op_softmax_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *y)
{
    return call3(ctx, &tr_opd_softmax_backward, dx, dout, y, 0);
}

int tr_op_tanh(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x) { return call2(ctx, &tr_opd_tanh, out, x, 0); }

int tr_op_tanh_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *y)
{
    return call3(ctx, &tr_opd_tanh_backward, dx, dout, y, 0);
}
