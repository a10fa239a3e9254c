/* loss.c — tensor-level cross-entropy over kernels/cpu/loss.c. The forward keeps
 * only the row log-sum-exp (f32 [N]); the backward recomputes the softmax from it and
 * recounts the rows that are not ignored. Targets are validated before any kernel runs.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/loss_cpu.c, core/cuda_ops/loss_cuda.c. */
#include "ops_loss.h"

#include "cpu/loss.h"
#include "cpu/reduce.h"
#include "op_stage.h"
#include "op_table.h"

/* ------------------------------------------------------------ checks and targets */

static int check_args(tr_ctx *ctx, const char *op, const tr_tensor *logits, const tr_tensor *targets,
                      const tr_tensor *lse, float label_smoothing, int64_t *N, int64_t *K)
{
    int rc;
    char b[160], b2[160];
    tr_op_rows(logits, N, K);
    if (*K < 1 || logits->ndim < 1)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: logits have shape %s; they need a class dimension (last)", op,
                       tr_op_describe(b, sizeof b, logits));
    if (targets->numel != *N)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: targets have shape %s but logits %s: one target per row", op,
                       tr_op_describe(b, sizeof b, targets), tr_op_describe(b2, sizeof b2, logits));
    if ((rc = tr_op_want_numel(ctx, op, "lse", lse, *N, "one per logits row"))) return rc;
    if (!(label_smoothing >= 0 && label_smoothing <= 1))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: label_smoothing = %g must be in [0, 1]", op,
                       (double)label_smoothing);
    return TR_OK;
}

/* ------------------------------------------------------------ ops */

static int cross_entropy_checks(tr_ctx *ctx, const tr_tensor *loss, const tr_tensor *lse, const tr_tensor *logits,
                                const tr_tensor *targets, int64_t ignore_index, float label_smoothing)
{
    const char *op = "cross_entropy";
    int64_t N, K;
    int rc;
    if ((rc = check_args(ctx, op, logits, targets, lse, label_smoothing, &N, &K)) ||
        (rc = tr_op_want_numel(ctx, op, "loss", loss, 1, "a scalar")))
        return rc;
    return TR_OK;
}

static int cross_entropy_backward_checks(tr_ctx *ctx, const tr_tensor *dlogits, float dloss, const tr_tensor *logits,
                                         const tr_tensor *lse, const tr_tensor *targets, int64_t ignore_index,
                                         float label_smoothing)
{
    const char *op = "cross_entropy_backward";
    int64_t N, K;
    int rc;
    if ((rc = check_args(ctx, op, logits, targets, lse, label_smoothing, &N, &K)) ||
        (rc = tr_op_want_numel(ctx, op, "dlogits", dlogits, logits->numel, "the logits' number of elements")))
        return rc;
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

TR_OP_CHECK_BY(cross_entropy, cross_entropy_checks, c->cross_entropy.loss, c->cross_entropy.lse,
               c->cross_entropy.logits, c->cross_entropy.targets, c->i[0], c->f[0])
TR_OP_CHECK_BY(cross_entropy_backward, cross_entropy_backward_checks, c->cross_entropy_backward.dlogits, c->f[1],
               c->cross_entropy_backward.logits, c->cross_entropy_backward.lse, c->cross_entropy_backward.targets,
               c->i[0], c->f[0])

int tr_op_cross_entropy(tr_ctx *ctx, tr_tensor *loss, tr_tensor *lse, const tr_tensor *logits,
                        const tr_tensor *targets, int64_t ignore_index, float label_smoothing)
{
    tr_op_call c = { .t = { loss, lse, logits, targets }, .i = { ignore_index }, .f = { label_smoothing } };
    return tr_op_run(ctx, &tr_opd_cross_entropy, &c);
}

int tr_op_cross_entropy_backward(tr_ctx *ctx, tr_tensor *dlogits, float dloss, const tr_tensor *logits,
                                 const tr_tensor *lse, const tr_tensor *targets, int64_t ignore_index,
                                 float label_smoothing)
{
    tr_op_call c = { .t = { dlogits, logits, lse, targets }, .i = { ignore_index }, .f = { label_smoothing, dloss } };
    return tr_op_run(ctx, &tr_opd_cross_entropy_backward, &c);
}
