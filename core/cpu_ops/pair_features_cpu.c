/* pair_features_cpu.c — the CPU slots (checks and wrappers: core/ops/pair_features.c): tensor-level column-block copies
 * and |a - b| (core/ops/ops_pair_features.h) over the kernels in kernels/cpu/pair_features.c. Feature matrices are
 * small (a batch of embeddings), so each operand is viewed whole as f32 (one workspace copy for a half tensor, returned
 * before the op returns). */
#include "ops_pair_features.h"
#include "cpu_slot.h"
#include "cpu/pair_features.h"

static void release_all(tr_ctx *ctx, tr_stage *v, int n)
{
    for (int i = 0; i < n; i++) tr_stage_release(ctx, &v[i]);
}

/* ------------------------------------------------------------ column blocks */

static int copy_cols_run(tr_ctx *ctx, const tr_tensor *dst, int64_t dst_col, const tr_tensor *src, int64_t src_col,
                         int64_t ncols, int accumulate)
{
    int rc;
    int64_t dN, dC, sN, sC;
    tr_op_rows(dst, &dN, &dC);
    tr_op_rows(src, &sN, &sC);
    {
        tr_stage v[2] = {{0}}; /* src, dst */
        if (!(rc = tr_stage_in_all(ctx, &v[0], src)) && !(rc = tr_stage_out_all(ctx, &v[1], dst, 1))) {
            tr_k_copy_cols_fwd_f32(v[1].p, v[0].p, dN, dC, dst_col, sC, src_col, ncols, accumulate);
            tr_stage_store_all(&v[1], dst);
        }
        release_all(ctx, v, 2);
        return rc;
    }
}

/* ------------------------------------------------------------ |a - b| */

static int abs_diff_run(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *a, const tr_tensor *b)
{
    int rc;
    {
        tr_stage v[3] = {{0}}; /* a, b, out */
        if (!(rc = tr_stage_in_all(ctx, &v[0], a)) && !(rc = tr_stage_in_all(ctx, &v[1], b)) &&
            !(rc = tr_stage_out_all(ctx, &v[2], out, 0))) {
            tr_k_abs_diff_fwd_f32(v[2].p, v[0].p, v[1].p, a->numel);
            tr_stage_store_all(&v[2], out);
        }
        release_all(ctx, v, 3);
        return rc;
    }
}

static int abs_diff_backward_run(tr_ctx *ctx, const tr_tensor *da, const tr_tensor *db, const tr_tensor *dout,
                                 const tr_tensor *a, const tr_tensor *b)
{
    int rc;
    {
        tr_stage v[5] = {{0}}; /* dout, a, b, da, db */
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

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(copy_cols, copy_cols_run, c->copy_cols.dst, c->i[0], c->copy_cols.src, c->i[1], c->i[2], (int)c->i[3])
TR_CPU_SLOT_BY(abs_diff, abs_diff_run, c->abs_diff.out, c->abs_diff.a, c->abs_diff.b)
TR_CPU_SLOT_BY(abs_diff_backward, abs_diff_backward_run, c->abs_diff_backward.da, c->abs_diff_backward.db,
               c->abs_diff_backward.dout, c->abs_diff_backward.a, c->abs_diff_backward.b)
