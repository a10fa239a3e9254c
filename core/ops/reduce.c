/* reduce.c — tensor-level sums and means, the global L2 norm over a list of tensors
 * (gradient clipping) and scale-and-check-finite over a list (the loss scaler's unscale).
 * Inputs of any float dtype are read in chunks converted to f32 on the stack; each chunk
 * is summed pairwise in f32 and chunk totals are added in order in f64, so results do not
 * depend on the thread count and 1e6 bf16 elements sum to f32 accuracy.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/reduce_cpu.c, core/cuda_ops/reduce_cuda.c. */
#include "ops_reduce.h"

#include "cpu/elementwise.h"
#include "cpu/reduce.h"
#include "op_stage.h"
#include "op_table.h"

#include <math.h>
#include <stdio.h>

/* ------------------------------------------------------------ whole-tensor sums */

static int reduce_checks(tr_ctx *ctx, const char *op, const tr_tensor *out, const tr_tensor *x, int lastdim, int mean)
{
    int rc;
    int64_t N, C;
    tr_op_rows(x, &N, &C);
    if ((rc = tr_op_want_numel(ctx, op, "out", out, lastdim ? N : 1,
                                 lastdim ? "x's elements / its last dimension" : "a scalar")))
        return rc;
    return TR_OK;
}

/* ------------------------------------------------------------ lists of tensors */

/* The op table's rules for the tensors of a list: each non-NULL, float, on ts[0]'s device. */
static int check_list(tr_ctx *ctx, const char *op, tr_tensor **ts, int n)
{
    if (n < 0 || (n > 0 && !ts))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: the list of %d tensors is NULL or negative", op, n);
    for (int i = 0; i < n; i++) {
        if (!ts[i]) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: tensor %d is NULL; pass a tensor", op, i);
        if (ts[i]->device != ts[0]->device)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "%s: tensor %d is on another device than tensor 0; move every tensor of one op to one "
                           "device",
                           op, i);
        if (!tr_stage_is_float(ts[i]->dtype))
            return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: tensor %d has dtype %s but must be a floating dtype (f32, "
                           "bf16 or f16)", op, i, tr_dtype_name(ts[i]->dtype));
    }
    return TR_OK;
}

static int global_norm_checks(tr_ctx *ctx, float *out, tr_tensor **ts, int n)
{
    int rc;
    if ((rc = check_list(ctx, "global_norm", ts, n))) return rc;
    return TR_OK;
}

static int scale_check_finite_checks(tr_ctx *ctx, int *found_inf, tr_tensor **ts, int n, float scale)
{
    int rc;
    if ((rc = check_list(ctx, "scale_check_finite", ts, n))) return rc;
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

TR_OP_CHECK_BY(sum, reduce_checks, "sum", c->sum.out, c->sum.x, (int)c->i[0], 0)
TR_OP_CHECK_BY(mean, reduce_checks, "mean", c->mean.out, c->mean.x, (int)c->i[0], 1)
TR_OP_CHECK_BY(global_norm, global_norm_checks, c->res, c->list, c->nlist)
TR_OP_CHECK_BY(scale_check_finite, scale_check_finite_checks, c->res, c->list, c->nlist, c->f[0])

int tr_op_sum(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, int lastdim)
{
    return TR_OP_RUN_CALL(ctx, sum, .t = { out, x }, .i = { lastdim });
}

int tr_op_mean(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, int lastdim)
{
    return TR_OP_RUN_CALL(ctx, mean, .t = { out, x }, .i = { lastdim });
}

int tr_op_global_norm(tr_ctx *ctx, float *out, tr_tensor **ts, int n)
{
    return TR_OP_RUN_CALL(ctx, global_norm, .res = out, .list = ts, .nlist = n);
}

int tr_op_scale_check_finite(tr_ctx *ctx, int *found_inf, tr_tensor **ts, int n, float scale)
{
    return TR_OP_RUN_CALL(ctx, scale_check_finite, .res = found_inf, .list = ts, .nlist = n, .f = { scale });
}
