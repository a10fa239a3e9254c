/* pair_features.c — tensor-level column-block copies and |a - b| (core/ops/ops_pair_features.h) over
 * the kernels in kernels/cpu/pair_features.c. Feature matrices are small (a batch of
 * embeddings), so each operand is viewed whole as f32 (one workspace copy for a half
 * tensor, returned before the op returns). */
#include "ops_pair_features.h"

#include "cpu/pair_features.h"
#include "op_stage.h"
#include "op_cuda.h"
#include "op_table.h"

static void release_all(tr_ctx *ctx, tr_stage *v, int n)
{
    for (int i = 0; i < n; i++) tr_stage_release(ctx, &v[i]);
}

/* ------------------------------------------------------------ column blocks */

static int copy_cols_impl(tr_ctx *ctx, int run, const tr_tensor *dst, int64_t dst_col, const tr_tensor *src, int64_t src_col,
                    int64_t ncols, int accumulate)
{
    const char *op = "copy_cols";
    char sd[160], ss[160];
    int rc;
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
    if (!run) return TR_OK;
    {
        tr_stage v[2] = { { 0 } };   /* src, dst */
        if (!(rc = tr_stage_in_all(ctx, &v[0], src)) && !(rc = tr_stage_out_all(ctx, &v[1], dst, 1))) {
            tr_k_copy_cols_fwd_f32(v[1].p, v[0].p, dN, dC, dst_col, sC, src_col, ncols, accumulate);
            tr_stage_store_all(&v[1], dst);
        }
        release_all(ctx, v, 2);
        return rc;
    }
}

/* ------------------------------------------------------------ |a - b| */

static int abs_diff_impl(tr_ctx *ctx, int run, const tr_tensor *out, const tr_tensor *a, const tr_tensor *b)
{
    const char *op = "abs_diff";
    int rc;
    if ((rc = tr_op_want_numel(ctx, op, "b", b, a->numel, "a's number of elements")) ||
        (rc = tr_op_want_numel(ctx, op, "out", out, a->numel, "a's number of elements")))
        return rc;
    if (!run) return TR_OK;
    {
        tr_stage v[3] = { { 0 } };   /* a, b, out */
        if (!(rc = tr_stage_in_all(ctx, &v[0], a)) && !(rc = tr_stage_in_all(ctx, &v[1], b)) &&
            !(rc = tr_stage_out_all(ctx, &v[2], out, 0))) {
            tr_k_abs_diff_fwd_f32(v[2].p, v[0].p, v[1].p, a->numel);
            tr_stage_store_all(&v[2], out);
        }
        release_all(ctx, v, 3);
        return rc;
    }
}

static int abs_diff_backward_impl(tr_ctx *ctx, int run, const tr_tensor *da, const tr_tensor *db, const tr_tensor *dout, const tr_tensor *a,
                            const tr_tensor *b)
{
    const char *op = "abs_diff_backward";
    int rc;
    if ((rc = tr_op_want_numel(ctx, op, "a", a, dout->numel, "dout's number of elements")) ||
        (rc = tr_op_want_numel(ctx, op, "b", b, dout->numel, "dout's number of elements")) ||
        (da && (rc = tr_op_want_numel(ctx, op, "da", da, dout->numel, "dout's number of elements"))) ||
        (db && (rc = tr_op_want_numel(ctx, op, "db", db, dout->numel, "dout's number of elements"))))
        return rc;
    if (!run) return TR_OK;
    {
        tr_stage v[5] = { { 0 } };   /* dout, a, b, da, db */
        if (!(rc = tr_stage_in_all(ctx, &v[0], dout)) && !(rc = tr_stage_in_all(ctx, &v[1], a)) &&
            !(rc = tr_stage_in_all(ctx, &v[2], b)) && !(rc = da ? tr_stage_out_all(ctx, &v[3], da, 0) : TR_OK) &&
            !(rc = db ? tr_stage_out_all(ctx, &v[4], db, 0) : TR_OK)) {
            tr_k_abs_diff_bwd_f32(v[3].p, v[4].p, v[0].p, v[1].p, v[2].p, dout->numel);
            if (da) tr_stage_store_all(&v[3], da);
            if (db) tr_stage_store_all(&v[4], db);
        }
        release_all(ctx, v, 5);
        return rc;
    }
}

/* ------------------------------------------------------------ the op table */

TR_OP_IMPL_SLOTS(copy_cols, c->t[0], c->i[0], c->t[1], c->i[1], c->i[2], (int)c->i[3])
TR_OP_IMPL_SLOTS(abs_diff, c->t[0], c->t[1], c->t[2])
TR_OP_IMPL_SLOTS(abs_diff_backward, c->t[0], c->t[1], c->t[2], c->t[3], c->t[4])

#define F(n, r) { n, r, TR_DT_FLOAT, 0 }
#define F_OPT(n, r) { n, r, TR_DT_FLOAT, 1 }

const tr_op_desc tr_opd_copy_cols = { "copy_cols", 2, { F("dst", TR_ARG_ACC), F("src", TR_ARG_IN) },
                                      copy_cols_check, { copy_cols_cpu, TR_CUDA_SLOT(copy_cols) } };
const tr_op_desc tr_opd_abs_diff = { "abs_diff", 3, { F("out", TR_ARG_OUT), F("a", TR_ARG_IN), F("b", TR_ARG_IN) },
                                     abs_diff_check, { abs_diff_cpu, TR_CUDA_SLOT(abs_diff) } };
const tr_op_desc tr_opd_abs_diff_backward = {
    "abs_diff_backward", 5,
    { F_OPT("da", TR_ARG_OUT), F_OPT("db", TR_ARG_OUT), F("dout", TR_ARG_IN), F("a", TR_ARG_IN), F("b", TR_ARG_IN) },
    abs_diff_backward_check, { abs_diff_backward_cpu, TR_CUDA_SLOT(abs_diff_backward) } };

int tr_op_copy_cols(tr_ctx *ctx, tr_tensor *dst, int64_t dst_col, const tr_tensor *src, int64_t src_col,
                    int64_t ncols, int accumulate)
{
    tr_op_call c = { .t = { dst, src }, .i = { dst_col, src_col, ncols, accumulate } };
    return tr_op_run(ctx, &tr_opd_copy_cols, &c);
}

int tr_op_abs_diff(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b)
{
    tr_op_call c = { .t = { out, a, b } };
    return tr_op_run(ctx, &tr_opd_abs_diff, &c);
}

int tr_op_abs_diff_backward(tr_ctx *ctx, tr_tensor *da, tr_tensor *db, const tr_tensor *dout, const tr_tensor *a,
                            const tr_tensor *b)
{
    tr_op_call c = { .t = { da, db, dout, a, b } };
    return tr_op_run(ctx, &tr_opd_abs_diff_backward, &c);
}
