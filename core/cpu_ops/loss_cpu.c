/* loss_cpu.c — the CPU slots (checks and wrappers: core/ops/loss.c): tensor-level cross-entropy over
 * kernels/cpu/loss.c. The forward keeps only the row log-sum-exp (f32 [N]); the backward recomputes the softmax from it
 * and recounts the rows that are not ignored. Targets are validated before any kernel runs. */
#include "ops_elem.h"
#include "cpu_slot.h"
#include "cpu/loss.h"
#include "cpu/reduce.h"

/* *t64 = the targets as int64 (their data or a workspace copy in *ws), each checked to be
 * in [0, K) or ignore_index; *count = the rows not ignored. */
static int load_targets(tr_ctx *ctx, const char *op, const tr_tensor *targets, int64_t K, int64_t ignore_index,
                        const int64_t **t64, void **ws, int64_t *count)
{
    *ws = NULL;
    if (targets->dtype == TR_I64) {
        *t64 = targets->data;
    } else {
        int rc = tr_stage_scratch(ctx, (size_t)targets->numel * sizeof(int64_t), ws);
        if (rc) return rc;
        tr_convert(*ws, TR_I64, targets->data, targets->dtype, (size_t)targets->numel);
        *t64 = *ws;
    }
    *count = 0;
    for (int64_t n = 0; n < targets->numel; n++) {
        int64_t t = (*t64)[n];
        if (t == ignore_index) continue;
        if (t < 0 || t >= K) {
            tr_stage_scratch_free(ctx, *ws);
            *ws = NULL;
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "%s: target %lld at row %lld is not a class index in [0, %lld) nor the "
                           "ignore_index %lld; check the label column and the number of labels",
                           op, (long long)t, (long long)n, (long long)K, (long long)ignore_index);
        }
        (*count)++;
    }
    return TR_OK;
}

/* ------------------------------------------------------------ ops */

static int cross_entropy_run(tr_ctx *ctx, const tr_tensor *loss, const tr_tensor *lse, const tr_tensor *logits,
                             const tr_tensor *targets, int64_t ignore_index, float label_smoothing)
{
    const char *op = "cross_entropy";
    int64_t N, K;
    int rc;
    tr_op_rows(logits, &N, &K);
    {
        const int64_t *t64;
        void *tws, *losses = NULL;
        int64_t count, rows = tr_stage_block_rows(K);
        if ((rc = load_targets(ctx, op, targets, K, ignore_index, &t64, &tws, &count))) return rc;
        if ((rc = tr_stage_scratch(ctx, (size_t)N * sizeof(float), &losses)) == TR_OK) {
            for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += rows) {
                int64_t nr = N - r0 < rows ? N - r0 : rows;
                tr_stage vz;
                if ((rc = tr_stage_in(ctx, &vz, logits, r0 * K, nr * K))) break;
                tr_k_cross_entropy_fwd_f32((float *)losses + r0, (float *)lse->data + r0, vz.p, t64 + r0, nr, K,
                                           ignore_index, label_smoothing);
                tr_stage_release(ctx, &vz);
            }
            float mean = count ? tr_k_sum_all_fwd_f32(losses, N) / (float)count : 0.0f;
            if (rc == TR_OK) tr_convert(loss->data, loss->dtype, &mean, TR_F32, 1);
        }
        tr_stage_scratch_free(ctx, losses);
        tr_stage_scratch_free(ctx, tws);
        return rc;
    }
}

static int cross_entropy_backward_run(tr_ctx *ctx, const tr_tensor *dlogits, float dloss, const tr_tensor *logits,
                                      const tr_tensor *lse, const tr_tensor *targets, int64_t ignore_index,
                                      float label_smoothing)
{
    const char *op = "cross_entropy_backward";
    int64_t N, K;
    int rc;
    tr_op_rows(logits, &N, &K);
    {
        const int64_t *t64;
        void *tws;
        int64_t count, rows = tr_stage_block_rows(K);
        int inplace = dlogits->data == logits->data; /* same numel, so the same tensor */
        if ((rc = load_targets(ctx, op, targets, K, ignore_index, &t64, &tws, &count))) return rc;
        float g = count ? dloss / (float)count : 0.0f;
        for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += rows) {
            int64_t nr = N - r0 < rows ? N - r0 : rows, s = r0 * K;
            tr_stage vz, vd = {0};
            if ((rc = tr_stage_in(ctx, &vz, logits, s, nr * K))) break;
            /* in place, the block's f32 view of the logits receives the gradient */
            if (!inplace && (rc = tr_stage_out(ctx, &vd, dlogits, s, nr * K, 0))) {
                tr_stage_release(ctx, &vz);
                break;
            }
            tr_stage *out = inplace ? &vz : &vd;
            tr_k_cross_entropy_bwd_f32(out->p, vz.p, (const float *)lse->data + r0, t64 + r0, g, nr, K, ignore_index,
                                       label_smoothing);
            tr_stage_store(out, dlogits, s);
            tr_stage_release(ctx, &vd);
            tr_stage_release(ctx, &vz);
        }
        tr_stage_scratch_free(ctx, tws);
        return rc;
    }
}

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(cross_entropy, cross_entropy_run, c->cross_entropy.loss, c->cross_entropy.lse, c->cross_entropy.logits,
               c->cross_entropy.targets, c->i[0], c->f[0])
TR_CPU_SLOT_BY(cross_entropy_backward, cross_entropy_backward_run, c->cross_entropy_backward.dlogits, c->f[1],
               c->cross_entropy_backward.logits, c->cross_entropy_backward.lse, c->cross_entropy_backward.targets,
               c->i[0], c->f[0])
