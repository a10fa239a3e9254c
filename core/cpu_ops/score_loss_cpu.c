/* score_loss_cpu.c — the CPU slots (checks and wrappers: core/ops/score_loss.c): the scored-pair losses
 * (core/ops/ops_score_loss.h) over the kernels in kernels/cpu/score_loss.c. The CPU slot takes sim's diagonal and the
 * scores to double and runs the _f64 kernel (the host code of lua/trainer/losses computes in double too); the results
 * are rounded once into the f32 loss and dsim. */
#include "ops_score_loss.h"
#include "cpu_slot.h"
#include "cpu/score_loss.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* kind 0: CoSENT (k = scale), 1: cosine MSE (k = score_scale). */
static int score_loss_run(tr_ctx *ctx, int kind, const tr_tensor *loss, const tr_tensor *dsim, const tr_tensor *sim,
                          const float *scores, float k)
{
    const char *op = kind ? "cosine_mse_loss" : "cosent_loss";
    const int64_t B = sim->shape[0];
    int rc;
    double *cos = malloc((size_t)(B > 0 ? B : 1) * 3 * sizeof(double));
    if (!cos) return tr_fail(tr_ctx_err(ctx), TR_EOOM, "%s: out of host memory for %lld pairs", op, (long long)B);
    double *y = cos + B, *dcos = y + B, l = 0;
    tr_stage v = {0};
    if ((rc = tr_stage_in_all(ctx, &v, sim))) {
        free(cos);
        return rc;
    }
    for (int64_t i = 0; i < B; i++) {
        cos[i] = v.p[i * B + i];
        y[i] = scores[i];
    }
    tr_stage_release(ctx, &v);
    if (kind)
        tr_k_cosine_mse_loss_f64(&l, dcos, cos, y, k, B);
    else
        tr_k_cosent_loss_f64(&l, dcos, cos, y, k, B);
    float *d = dsim->data;
    memset(d, 0, (size_t)(B * B) * sizeof(float));
    for (int64_t i = 0; i < B; i++) d[i * B + i] = (float)dcos[i];
    *(float *)loss->data = (float)l;
    free(cos);
    return TR_OK;
}

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(cosent_loss, score_loss_run, 0, c->cosent_loss.loss, c->cosent_loss.dsim, c->cosent_loss.sim, c->p,
               c->f[0])
TR_CPU_SLOT_BY(cosine_mse_loss, score_loss_run, 1, c->cosine_mse_loss.loss, c->cosine_mse_loss.dsim,
               c->cosine_mse_loss.sim, c->p, c->f[0])
