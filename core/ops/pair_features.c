/* pair_features.c — tensor-level column-block copies and |a - b| (core/ops/ops_pair_features.h) over
 * the kernels in kernels/cpu/pair_features.c. Feature matrices are small (a batch of
 * embeddings), so each operand is viewed whole as f32 (one workspace copy for a half
 * tensor, returned before the op returns).
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/pair_features_cpu.c, core/cuda_ops/pair_features_cuda.c. */
#include "ops_pair_features.h"

#include "cpu/pair_features.h"
#include "op_stage.h"
#include "op_table.h"

/* ------------------------------------------------------------ column blocks */

static int copy_cols_checks(tr_ctx *ctx, const tr_tensor *dst, int64_t dst_col, const tr_tensor *src, int64_t src_col,
                            int64_t ncols, int accumulate)
{
    const char *op = "copy_cols";
    char sd[160], ss[160];
    int64_t dN, dC, sN, sC;
    if (dst == src)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: dst and src are the same tensor; copy into a new one", op);
    tr_op_rows(dst, &dN, &dC);
    tr_op_rows(src, &sN, &sC);
    tr_op_describe(sd, sizeof sd, dst);
    tr_op_describe(ss, sizeof ss, src);
    if (dN != sN)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: dst %s has %lld rows but src %s has %lld; they must match",
                       op, sd, (long long)dN, ss, (long long)sN);
    if (ncols < 0 || dst_col < 0 || src_col < 0 || dst_col + ncols > dC || src_col + ncols > sC)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: %lld columns from column %lld of src %s into column %lld of dst %s do not fit; "
                       "each block must lie inside its tensor's last dimension",
                       op, (long long)ncols, (long long)src_col, ss, (long long)dst_col, sd);
    return TR_OK;
}

/* ------------------------------------------------------------ |a - b| */

static int abs_diff_checks(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *a, const tr_tensor *b)
{
    const char *op = "abs_diff";
    int rc;
    if ((rc = tr_op_want_numel(ctx, op, "b", b, a->numel, "a's number of elements")) ||
        (rc = tr_op_want_numel(ctx, op, "out", out, a->numel, "a's number of elements")))
        return rc;
    return TR_OK;
}

static int abs_diff_backward_checks(tr_ctx *ctx, const tr_tensor *da, const tr_tensor *db, const tr_tensor *dout,
                                    const tr_tensor *a, const tr_tensor *b)
{
    const char *op = "abs_diff_backward";
    int rc;
    if ((rc = tr_op_want_numel(ctx, op, "a", a, dout->numel, "dout's number of elements")) ||
        (rc = tr_op_want_numel(ctx, op, "b", b, dout->numel, "dout's number of elements")) ||
        (da && (rc = tr_op_want_numel(ctx, op, "da", da, dout->numel, "dout's number of elements"))) ||
        (db && (rc = tr_op_want_numel(ctx, op, "db", db, dout->numel, "dout's number of elements"))))
        return rc;
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

TR_OP_CHECK_BY(copy_cols, copy_cols_checks, c->copy_cols.dst, c->i[0], c->copy_cols.src, c->i[1], c->i[2], (int)c->i[3])
TR_OP_CHECK_BY(abs_diff, abs_diff_checks, c->abs_diff.out, c->abs_diff.a, c->abs_diff.b)
TR_OP_CHECK_BY(abs_diff_backward, abs_diff_backward_checks, c->abs_diff_backward.da, c->abs_diff_backward.db,
               c->abs_diff_backward.dout, c->abs_diff_backward.a, c->abs_diff_backward.b)

/* abs_diff: a's shape and dtype; its backward: a's and b's shapes, dout's dtype. */
TR_OP_INFER_LIKE(abs_diff, c->abs_diff.a, c->abs_diff.a->dtype | TR_INFER_CHOOSE)

int tr_infer_abs_diff_backward(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)
{
    const int dt = c->abs_diff_backward.dout->dtype;
    tr_op_infer_like(shape, ndim, dtype, 0, c->abs_diff_backward.a, dt);
    tr_op_infer_like(shape, ndim, dtype, 1, c->abs_diff_backward.b, dt);
    return TR_OK;
}

int tr_op_copy_cols(tr_ctx *ctx, tr_tensor *dst, int64_t dst_col, const tr_tensor *src, int64_t src_col,
                    int64_t ncols, int accumulate)
{
    return TR_OP_RUN_CALL(ctx, copy_cols, .t = { dst, src }, .i = { dst_col, src_col, ncols, accumulate });
}

int tr_op_abs_diff(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b)
{
    return TR_OP_RUN_CALL(ctx, abs_diff, .t = { out, a, b });
}

int tr_op_abs_diff_backward(tr_ctx *ctx, tr_tensor *da, tr_tensor *db, const tr_tensor *dout, const tr_tensor *a,
                            const tr_tensor *b)
{
    return TR_OP_RUN_CALL(ctx, abs_diff_backward, .t = { da, db, dout, a, b });
}
