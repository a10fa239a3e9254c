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

/* sim whole (one row for the staging loop); the same argument places in both ops. */
static const unsigned char sim_whole[TR_OP_MAX_TENSORS] = {[TR_ARGI(cosent_loss, sim)] = TR_ROWS_WHOLE};

typedef struct score_work {
    int kind; /* 0: CoSENT (k = scale), 1: cosine MSE (k = score_scale) */
    double *cos;
} score_work;

static int score_whole(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused, void *work)
{
    const score_work *w = work;
    const int64_t B = c->cosent_loss.sim->shape[0];
    const float *scores = c->p, *sim = p[TR_ARGI(cosent_loss, sim)];
    double *cos = w->cos, *y = cos + B, *dcos = y + B, l = 0;
    for (int64_t i = 0; i < B; i++) {
        cos[i] = sim[i * B + i];
        y[i] = scores[i];
    }
    if (w->kind)
        tr_k_cosine_mse_loss_f64(&l, dcos, cos, y, c->f[0], B);
    else
        tr_k_cosent_loss_f64(&l, dcos, cos, y, c->f[0], B);
    float *d = c->cosent_loss.dsim->data;
    memset(d, 0, (size_t)(B * B) * sizeof(float));
    for (int64_t i = 0; i < B; i++) d[i * B + i] = (float)dcos[i];
    *(float *)c->cosent_loss.loss->data = (float)l;
    return TR_OK;
}

static int score_loss_run(tr_ctx *ctx, const tr_op_desc *d, tr_op_call *c, int kind)
{
    const int64_t B = c->cosent_loss.sim->shape[0];
    score_work w = {kind, malloc((size_t)(B > 0 ? B : 1) * 3 * sizeof(double))};
    if (!w.cos)
        return tr_fail(tr_ctx_err(ctx), TR_EOOM, "%s: out of host memory for %lld pairs", d->name, (long long)B);
    int rc = tr_stage_rows(ctx, d, c, sim_whole, 1, 1, score_whole, &w);
    free(w.cos);
    return rc;
}

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(cosent_loss, score_loss_run, &tr_opd_cosent_loss, c, 0)
TR_CPU_SLOT_BY(cosine_mse_loss, score_loss_run, &tr_opd_cosine_mse_loss, c, 1)
