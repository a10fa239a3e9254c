/* loss_cpu.c — the CPU slots (checks and wrappers: core/ops/loss.c): tensor-level cross-entropy over
 * kernels/cpu/loss.c. The forward keeps only the row log-sum-exp (f32 [N]); the backward recomputes the softmax from it
 * and recounts the rows that are not ignored. Targets are validated before any kernel runs. */
#include "ops_loss.h"
#include "cpu_slot.h"
#include "cpu/loss.h"
#include "cpu/reduce.h"

#define FWD(name) TR_ARGI(cross_entropy, name)
#define BWD(name) TR_ARGI(cross_entropy_backward, name)

/* The targets as int64 (their data or a workspace copy), each checked to be in [0, K) or
 * ignore_index, and the rows not ignored. */
typedef struct targets64 {
    const int64_t *t;
    void *ws;
    int64_t count;
} targets64;

static int load_targets(tr_ctx *ctx, const char *op, const tr_tensor *targets, int64_t K, int64_t ignore_index,
                        targets64 *out)
{
    int rc = tr_stage_index(ctx, targets, &out->t, &out->ws);
    if (rc) return rc;
    out->count = 0;
    for (int64_t n = 0; n < targets->numel; n++) {
        int64_t t = out->t[n];
        if (t == ignore_index) continue;
        if (t < 0 || t >= K) {
            tr_stage_scratch_free(ctx, out->ws);
            out->ws = NULL;
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "%s: target %lld at row %lld is not a class index in [0, %lld) nor the "
                           "ignore_index %lld; check the label column and the number of labels",
                           op, (long long)t, (long long)n, (long long)K, (long long)ignore_index);
        }
        out->count++;
    }
    return TR_OK;
}

/* ------------------------------------------------------------ ops */

/* What a block of rows needs beside the staged logits: the targets and the per-row losses
 * (forward) or the gradient's scale (backward). */
typedef struct ce_work {
    targets64 tg;
    float *losses, g;
} ce_work;

static const unsigned char fwd_layout[TR_OP_MAX_TENSORS] = {[FWD(lse)] = TR_ROWS_ONE, [FWD(logits)] = TR_ROWS_BLOCK};

static int fwd_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t K, void *work)
{
    const ce_work *w = work;
    tr_k_cross_entropy_fwd_f32(w->losses + r0, p[FWD(lse)], p[FWD(logits)], w->tg.t + r0, nr, K, c->i[0], c->f[0]);
    return TR_OK;
}

int tr_cpu_cross_entropy(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *loss = c->cross_entropy.loss;
    int64_t N, K;
    tr_op_rows(c->cross_entropy.logits, &N, &K);
    ce_work w = {{NULL, NULL, 0}, NULL, 0};
    int rc = load_targets(ctx, "cross_entropy", c->cross_entropy.targets, K, c->i[0], &w.tg);
    if (rc) return rc;
    if ((rc = tr_stage_scratch(ctx, (size_t)N * sizeof(float), (void **)&w.losses)) == TR_OK)
        rc = tr_stage_rows_by(ctx, &tr_opd_cross_entropy, c, fwd_layout, N, K, tr_stage_block_rows(K), fwd_rows, &w);
    if (rc == TR_OK) {
        float mean = w.tg.count ? tr_k_sum_all_fwd_f32(w.losses, N) / (float)w.tg.count : 0.0f;
        tr_convert(loss->data, loss->dtype, &mean, TR_F32, 1);
    }
    tr_stage_scratch_free(ctx, w.losses);
    tr_stage_scratch_free(ctx, w.tg.ws);
    return rc;
}

/* dlogits may be logits itself (same numel, so the same tensor): the kernel reads each
 * element before it writes its place. */
static const unsigned char bwd_layout[TR_OP_MAX_TENSORS] = {
    [BWD(dlogits)] = TR_ROWS_BLOCK, [BWD(logits)] = TR_ROWS_BLOCK, [BWD(lse)] = TR_ROWS_ONE};

static int bwd_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t K, void *work)
{
    const ce_work *w = work;
    tr_k_cross_entropy_bwd_f32(p[BWD(dlogits)], p[BWD(logits)], p[BWD(lse)], w->tg.t + r0, w->g, nr, K, c->i[0],
                               c->f[0]);
    return TR_OK;
}

int tr_cpu_cross_entropy_backward(tr_ctx *ctx, tr_op_call *c)
{
    int64_t N, K;
    tr_op_rows(c->cross_entropy_backward.logits, &N, &K);
    ce_work w = {{NULL, NULL, 0}, NULL, 0};
    int rc = load_targets(ctx, "cross_entropy_backward", c->cross_entropy_backward.targets, K, c->i[0], &w.tg);
    if (rc) return rc;
    w.g = w.tg.count ? c->f[1] / (float)w.tg.count : 0.0f;
    rc = tr_stage_rows_by(ctx, &tr_opd_cross_entropy_backward, c, bwd_layout, N, K, tr_stage_block_rows(K), bwd_rows,
                          &w);
    tr_stage_scratch_free(ctx, w.tg.ws);
    return rc;
}
