/* layernorm.c — layernorm over the last dim: the shape checks of its op-table entries
 * (arguments in op_list.h) and the public wrappers. Slots: core/cpu_ops/layernorm_cpu.c,
 * core/cuda_ops/layernorm_cuda.c. */
#include "ops_nn.h"
#include "layernorm_check.h"
#include "op_table.h"

/* ------------------------------------------------------------ shapes */

int tr_check_layernorm_rows(tr_ctx *ctx, const char *op, tr_op_call *c, const tr_tensor *x, const tr_tensor *weight,
                            const tr_tensor *mean, const tr_tensor *rstd, int empty_rows_when_c0)
{
    char s1[160], s2[160], s3[160];
    if (x->ndim < 1) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: x is a scalar; it must be [..., C]", op);
    int64_t C = x->shape[x->ndim - 1], N = 1;
    for (int i = 0; i < x->ndim - 1; i++) N *= x->shape[i];
    if (C == 0 && empty_rows_when_c0) N = 0;
    if (weight->ndim != 1 || weight->shape[0] != C)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: x has shape %s but weight has shape %s; weight must be [%lld] (the "
                       "normalised last dim of x)",
                       op, tr_op_shape(x, s1), tr_op_shape(weight, s2), (long long)C);
    if ((mean || rstd) && (!mean || !rstd || mean->numel != N || rstd->numel != N))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: x has shape %s so mean and rstd need %lld elements (one per row), "
                       "but mean has shape %s and rstd %s",
                       op, tr_op_shape(x, s1), (long long)N, tr_op_shape(mean, s2), tr_op_shape(rstd, s3));
    c->dim[0] = N;
    c->dim[1] = C;
    return TR_OK;
}

int tr_check_layernorm_params(tr_ctx *ctx, const char *op, const tr_op_call *c, const char *const *names,
                              const tr_tensor *const *ts, int n)
{
    return tr_op_want_shapes(ctx, op, names, ts, n, 1, &c->dim[1]);
}

/* ------------------------------------------------------------ forward */

int tr_check_layernorm(tr_ctx *ctx, tr_op_call *c)
{
    const char *op = "layernorm";
    const tr_tensor *x = c->layernorm.x;
    int rc;
    static const char *const like_x[] = { "out" }, *const params[] = { "bias" };
    if ((rc = tr_check_layernorm_rows(ctx, op, c, x, c->layernorm.weight, c->layernorm.mean, c->layernorm.rstd, 0)) ||
        (rc = tr_op_want_shapes(ctx, op, like_x, &c->layernorm.out, 1, x->ndim, x->shape)))
        return rc;
    return tr_check_layernorm_params(ctx, op, c, params, &c->layernorm.bias, 1);
}

/* out: x's shape and dtype; mean, rstd: one f32 per row of x. */
int tr_infer_layernorm(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)
{
    const tr_tensor *x = c->layernorm.x;
    int64_t N, C;
    tr_op_rows(x, &N, &C);
    tr_op_infer_like(shape, ndim, dtype, 0, x, x->dtype | TR_INFER_CHOOSE);
    tr_op_infer_dims(shape, ndim, dtype, 1, 1, &N, TR_F32);
    tr_op_infer_dims(shape, ndim, dtype, 2, 1, &N, TR_F32);
    return TR_OK;
}

int tr_op_layernorm(tr_ctx *ctx, tr_tensor *out, tr_tensor *mean, tr_tensor *rstd, const tr_tensor *x,
                    const tr_tensor *weight, const tr_tensor *bias, float eps)
{
    tr_op_call c = { .t = { out, mean, rstd, x, weight, bias }, .f = { eps } };
    return tr_op_run(ctx, &tr_opd_layernorm, &c);
}

/* ------------------------------------------------------------ backward */

int tr_check_layernorm_backward(tr_ctx *ctx, tr_op_call *c)
{
    const char *op = "layernorm_backward";
    const tr_tensor *x = c->layernorm_backward.x;
    int rc;
    static const char *const like_x[] = { "dout", "dx" }, *const params[] = { "dweight", "dbias" };
    const tr_tensor *const acts[] = { c->layernorm_backward.dout, c->layernorm_backward.dx },
                           *const grads[] = { c->layernorm_backward.dweight, c->layernorm_backward.dbias };
    if ((rc = tr_check_layernorm_rows(ctx, op, c, x, c->layernorm_backward.weight, c->layernorm_backward.mean,
                                      c->layernorm_backward.rstd, 0)) ||
        (rc = tr_op_want_shapes(ctx, op, like_x, acts, 2, x->ndim, x->shape)))
        return rc;
    return tr_check_layernorm_params(ctx, op, c, params, grads, 2);
}

int tr_op_layernorm_backward(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dweight, tr_tensor *dbias,
                             const tr_tensor *dout, const tr_tensor *x, const tr_tensor *weight,
                             const tr_tensor *mean, const tr_tensor *rstd)
{
    tr_op_call c = { .t = { dx, dweight, dbias, dout, x, weight, mean, rstd } };
    return tr_op_run(ctx, &tr_opd_layernorm_backward, &c);
}
