/* score_loss.c — the scored-pair losses (core/ops/ops_score_loss.h) over the kernels in
 * kernels/cpu/score_loss.c. The CPU slot takes sim's diagonal and the scores to double and
 * runs the _f64 kernel (the host code of lua/trainer/losses computes in double too); the
 * results are rounded once into the f32 loss and dsim.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/score_loss_cpu.c, core/cuda_ops/score_loss_cuda.c. */
#include "ops_score_loss.h"

#include "cpu/score_loss.h"
#include "op_stage.h"
#include "op_table.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* kind 0: CoSENT (k = scale), 1: cosine MSE (k = score_scale). */
static int score_loss_checks(tr_ctx *ctx, int kind, const tr_tensor *loss, const tr_tensor *dsim, const tr_tensor *sim,
                             const float *scores, float k)
{
    const char *op = kind ? "cosine_mse_loss" : "cosent_loss";
    char buf[160];
    int rc;
    if (sim->ndim != 2 || sim->shape[0] != sim->shape[1])
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: sim has shape %s but must be square [B, B] (cosine_sim(u, v))",
                       op, tr_op_shape(sim, buf));
    const int64_t B = sim->shape[0];
    if ((rc = tr_op_want_numel(ctx, op, "loss", loss, 1, "one element")) ||
        (rc = tr_op_want_shape(ctx, op, "dsim", dsim, 2, sim->shape)))
        return rc;
    if (!scores && B > 0) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: scores is NULL; pass B = %lld floats", op,
                                         (long long)B);
    if (!isfinite(k) || (kind == 1 && !(k > 0)))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s = %g must be finite%s", op, kind ? "score_scale" : "scale",
                       (double)k, kind ? " and > 0" : "");
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

TR_OP_CHECK_BY(cosent_loss, score_loss_checks, 0, c->cosent_loss.loss, c->cosent_loss.dsim, c->cosent_loss.sim, c->p,
               c->f[0])
TR_OP_CHECK_BY(cosine_mse_loss, score_loss_checks, 1, c->cosine_mse_loss.loss, c->cosine_mse_loss.dsim,
               c->cosine_mse_loss.sim, c->p, c->f[0])

#define ARGS                                                                                                   \
    { { "loss", TR_ARG_OUT, TR_DT_F32, 0 }, { "dsim", TR_ARG_OUT, TR_DT_F32, 0 }, { "sim", TR_ARG_IN, TR_DT_FLOAT, 0 } }

int tr_op_cosent_loss(tr_ctx *ctx, tr_tensor *loss, tr_tensor *dsim, const tr_tensor *sim, const float *scores,
                      float scale)
{
    tr_op_call c = { .t = { loss, dsim, sim }, .f = { scale }, .p = scores };
    return tr_op_run(ctx, &tr_opd_cosent_loss, &c);
}

int tr_op_cosine_mse_loss(tr_ctx *ctx, tr_tensor *loss, tr_tensor *dsim, const tr_tensor *sim, const float *scores,
                          float score_scale)
{
    tr_op_call c = { .t = { loss, dsim, sim }, .f = { score_scale }, .p = scores };
    return tr_op_run(ctx, &tr_opd_cosine_mse_loss, &c);
}
