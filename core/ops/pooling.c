/* pooling.c — tensor-level masked pooling [B, T, C] -> [B, C] over
 * kernels/cpu/pooling.c. The mask (i32, i64 or float, or NULL for "all real") becomes
 * an int32 workspace copy; hidden and the outputs may be any float dtype and are
 * processed in blocks of whole sequences.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/pooling_cpu.c, core/cuda_ops/pooling_cuda.c. */
#include "ops_pooling.h"

#include "cpu/pooling.h"
#include "op_stage.h"
#include "op_table.h"

/* ------------------------------------------------------------ checks and mask */

static int check_args(tr_ctx *ctx, const char *op, const tr_tensor *hidden, const tr_tensor *mask,
                      const tr_tensor *pooled, const char *pooled_name, int mode)
{
    char b[160], b2[160];
    if (mode < TR_POOL_MEAN || mode > TR_POOL_MEAN_SQRT_LEN)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: mode %d is not a pooling mode (0 mean, 1 cls, 2 max, 3 mean_sqrt_len)", op, mode);
    if (hidden->ndim != 3)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: hidden has shape %s but must be [batch, tokens, dim]", op,
                       tr_op_describe(b, sizeof b, hidden));
    int64_t B = hidden->shape[0], T = hidden->shape[1], C = hidden->shape[2];
    if (mask) {
        if (mask->numel != B * T)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: mask has shape %s but hidden %s: one entry per token", op,
                           tr_op_describe(b, sizeof b, mask), tr_op_describe(b2, sizeof b2, hidden));
    }
    return tr_op_want_numel(ctx, op, pooled_name, pooled, B * C, "batch * dim");
}

/* ------------------------------------------------------------ ops */

static int pool_checks(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *hidden, const tr_tensor *mask, int mode)
{
    const char *op = "pool";
    int rc;
    if ((rc = check_args(ctx, op, hidden, mask, out, "out", mode))) return rc;
    return TR_OK;
}

static int pool_backward_checks(tr_ctx *ctx, const tr_tensor *dhidden, const tr_tensor *dout, const tr_tensor *hidden,
                                const tr_tensor *mask, int mode)
{
    const char *op = "pool_backward";
    int rc;
    if ((rc = check_args(ctx, op, hidden, mask, dout, "dout", mode)) ||
        (rc = tr_op_want_numel(ctx, op, "dhidden", dhidden, hidden->numel, "hidden's number of elements")))
        return rc;
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

TR_OP_CHECK_BY(pool, pool_checks, c->pool.out, c->pool.hidden, c->pool.mask, (int)c->i[0])
TR_OP_CHECK_BY(pool_backward, pool_backward_checks, c->pool_backward.dhidden, c->pool_backward.dout,
               c->pool_backward.hidden, c->pool_backward.mask, (int)c->i[0])

/* pool: [B, C] of hidden [B, T, C], hidden's dtype; its backward: hidden's shape, dout's dtype. */
int tr_infer_pool(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)
{
    const tr_tensor *h = c->pool.hidden;
    int64_t dims[2] = {h->ndim == 3 ? h->shape[0] : 0, h->ndim == 3 ? h->shape[2] : 0};
    tr_op_infer_dims(shape, ndim, dtype, 0, 2, dims, h->dtype | TR_INFER_CHOOSE);
    return TR_OK;
}

TR_OP_INFER_LIKE(pool_backward, c->pool_backward.hidden, c->pool_backward.dout->dtype)

int tr_op_pool(tr_ctx *ctx, tr_tensor *out, const tr_tensor *hidden, const tr_tensor *mask, int mode)
{
    tr_op_call c = { .t = { out, hidden, mask }, .i = { mode } };
    return tr_op_run(ctx, &tr_opd_pool, &c);
}

int tr_op_pool_backward(tr_ctx *ctx, tr_tensor *dhidden, const tr_tensor *dout, const tr_tensor *hidden,
                        const tr_tensor *mask, int mode)
{
    tr_op_call c = { .t = { dhidden, dout, hidden, mask }, .i = { mode } };
    return tr_op_run(ctx, &tr_opd_pool_backward, &c);
}
