/* ops_features.c — tensor-level column-block copies and |a - b| (core/ops_features.h) over
 * the kernels in kernels/cpu/features.c. Feature matrices are small (a batch of
 * embeddings), so each operand is viewed whole as f32 (one workspace copy for a half
 * tensor, returned before the op returns). */
#include "ops_features.h"

#include "cpu/features.h"
#include "ops_elem_common.h"

static void release_all(tr_ctx *ctx, tr_elem_view *v, int n)
{
    for (int i = 0; i < n; i++) tr_elem_view_release(ctx, &v[i]);
}

/* ------------------------------------------------------------ column blocks */

int tr_op_copy_cols(tr_ctx *ctx, tr_tensor *dst, int64_t dst_col, const tr_tensor *src, int64_t src_col,
                    int64_t ncols, int accumulate)
{
    const char *op = "copy_cols";
    char sd[160], ss[160];
    int rc, device = src ? src->device : TR_CPU;
    int64_t dN, dC, sN, sC;
    if ((rc = tr_elem_want_float(ctx, op, "src", src, device)) ||
        (rc = tr_elem_want_float(ctx, op, "dst", dst, device)))
        return rc;
    if (dst == src)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: dst and src are the same tensor; copy into a new one", op);
    tr_elem_rows(dst, &dN, &dC);
    tr_elem_rows(src, &sN, &sC);
    tr_elem_describe(sd, sizeof sd, dst);
    tr_elem_describe(ss, sizeof ss, src);
    if (dN != sN)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: dst %s has %lld rows but src %s has %lld; they must match",
                       op, sd, (long long)dN, ss, (long long)sN);
    if (ncols < 0 || dst_col < 0 || src_col < 0 || dst_col + ncols > dC || src_col + ncols > sC)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: %lld columns from column %lld of src %s into column %lld of dst %s do not fit; "
                       "each block must lie inside its tensor's last dimension",
                       op, (long long)ncols, (long long)src_col, ss, (long long)dst_col, sd);
    switch (device) {
    case TR_CPU: {
        tr_elem_view v[2] = { { 0 } };   /* src, dst */
        if (!(rc = tr_elem_view_in(ctx, &v[0], src)) && !(rc = tr_elem_view_out(ctx, &v[1], dst, 1))) {
            tr_k_copy_cols_fwd_f32(v[1].p, v[0].p, dN, dC, dst_col, sC, src_col, ncols, accumulate);
            tr_elem_view_finish(&v[1], dst);
        }
        release_all(ctx, v, 2);
        return rc;
    }
    default:
        return tr_elem_no_device(ctx, op, device);
    }
}

/* ------------------------------------------------------------ |a - b| */

int tr_op_abs_diff(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b)
{
    const char *op = "abs_diff";
    int rc, device = a ? a->device : TR_CPU;
    if ((rc = tr_elem_want_float(ctx, op, "a", a, device)) || (rc = tr_elem_want_float(ctx, op, "b", b, device)) ||
        (rc = tr_elem_want_float(ctx, op, "out", out, device)) ||
        (rc = tr_elem_want_numel(ctx, op, "b", b, a->numel, "a's number of elements")) ||
        (rc = tr_elem_want_numel(ctx, op, "out", out, a->numel, "a's number of elements")))
        return rc;
    switch (device) {
    case TR_CPU: {
        tr_elem_view v[3] = { { 0 } };   /* a, b, out */
        if (!(rc = tr_elem_view_in(ctx, &v[0], a)) && !(rc = tr_elem_view_in(ctx, &v[1], b)) &&
            !(rc = tr_elem_view_out(ctx, &v[2], out, 0))) {
            tr_k_abs_diff_fwd_f32(v[2].p, v[0].p, v[1].p, a->numel);
            tr_elem_view_finish(&v[2], out);
        }
        release_all(ctx, v, 3);
        return rc;
    }
    default:
        return tr_elem_no_device(ctx, op, device);
    }
}

int tr_op_abs_diff_backward(tr_ctx *ctx, tr_tensor *da, tr_tensor *db, const tr_tensor *dout, const tr_tensor *a,
                            const tr_tensor *b)
{
    const char *op = "abs_diff_backward";
    int rc, device = dout ? dout->device : TR_CPU;
    if ((rc = tr_elem_want_float(ctx, op, "dout", dout, device)) ||
        (rc = tr_elem_want_float(ctx, op, "a", a, device)) || (rc = tr_elem_want_float(ctx, op, "b", b, device)) ||
        (da && (rc = tr_elem_want_float(ctx, op, "da", da, device))) ||
        (db && (rc = tr_elem_want_float(ctx, op, "db", db, device))))
        return rc;
    if ((rc = tr_elem_want_numel(ctx, op, "a", a, dout->numel, "dout's number of elements")) ||
        (rc = tr_elem_want_numel(ctx, op, "b", b, dout->numel, "dout's number of elements")) ||
        (da && (rc = tr_elem_want_numel(ctx, op, "da", da, dout->numel, "dout's number of elements"))) ||
        (db && (rc = tr_elem_want_numel(ctx, op, "db", db, dout->numel, "dout's number of elements"))))
        return rc;
    switch (device) {
    case TR_CPU: {
        tr_elem_view v[5] = { { 0 } };   /* dout, a, b, da, db */
        if (!(rc = tr_elem_view_in(ctx, &v[0], dout)) && !(rc = tr_elem_view_in(ctx, &v[1], a)) &&
            !(rc = tr_elem_view_in(ctx, &v[2], b)) && !(rc = da ? tr_elem_view_out(ctx, &v[3], da, 0) : TR_OK) &&
            !(rc = db ? tr_elem_view_out(ctx, &v[4], db, 0) : TR_OK)) {
            tr_k_abs_diff_bwd_f32(v[3].p, v[4].p, v[0].p, v[1].p, v[2].p, dout->numel);
            if (da) tr_elem_view_finish(&v[3], da);
            if (db) tr_elem_view_finish(&v[4], db);
        }
        release_all(ctx, v, 5);
        return rc;
    }
    default:
        return tr_elem_no_device(ctx, op, device);
    }
}
