/* loss.c — tensor-level cross-entropy over kernels/cpu/loss.c. The forward keeps
 * only the row log-sum-exp (f32 [N]); the backward recomputes the softmax from it and
 * recounts the rows that are not ignored. Targets are validated before any kernel runs. */
#include "ops_elem.h"

#include "cpu/loss.h"
#include "cpu/reduce.h"
#include "op_stage.h"
#include "op_cuda.h"
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

static int cross_entropy_impl(tr_ctx *ctx, int run, const tr_tensor *loss, const tr_tensor *lse, const tr_tensor *logits,
                        const tr_tensor *targets, int64_t ignore_index, float label_smoothing)
{
    const char *op = "cross_entropy";
    int64_t N, K;
    int rc;
    if ((rc = check_args(ctx, op, logits, targets, lse, label_smoothing, &N, &K)) ||
        (rc = tr_op_want_numel(ctx, op, "loss", loss, 1, "a scalar")))
        return rc;
    if (!run) return TR_OK;
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

static int cross_entropy_backward_impl(tr_ctx *ctx, int run, const tr_tensor *dlogits, float dloss, const tr_tensor *logits,
                                 const tr_tensor *lse, const tr_tensor *targets, int64_t ignore_index,
                                 float label_smoothing)
{
    const char *op = "cross_entropy_backward";
    int64_t N, K;
    int rc;
    if ((rc = check_args(ctx, op, logits, targets, lse, label_smoothing, &N, &K)) ||
        (rc = tr_op_want_numel(ctx, op, "dlogits", dlogits, logits->numel, "the logits' number of elements")))
        return rc;
    if (!run) return TR_OK;
    {
        const int64_t *t64;
        void *tws;
        int64_t count, rows = tr_stage_block_rows(K);
        int inplace = dlogits->data == logits->data;   /* same numel, so the same tensor */
        if ((rc = load_targets(ctx, op, targets, K, ignore_index, &t64, &tws, &count))) return rc;
        float g = count ? dloss / (float)count : 0.0f;
        for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += rows) {
            int64_t nr = N - r0 < rows ? N - r0 : rows, s = r0 * K;
            tr_stage vz, vd = { 0 };
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

/* ------------------------------------------------------------ the op table */

TR_OP_IMPL_SLOTS(cross_entropy, c->t[0], c->t[1], c->t[2], c->t[3], c->i[0], c->f[0])
TR_OP_IMPL_SLOTS(cross_entropy_backward, c->t[0], c->f[1], c->t[1], c->t[2], c->t[3], c->i[0], c->f[0])

const tr_op_desc tr_opd_cross_entropy = {
    "cross_entropy", 4,
    { { "loss", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "lse", TR_ARG_OUT, TR_DT_F32, 0 },
      { "logits", TR_ARG_IN, TR_DT_FLOAT, 0 }, { "targets", TR_ARG_IN, TR_DT_INDEX, 0 } },
    cross_entropy_check, { cross_entropy_cpu, TR_CUDA_SLOT(cross_entropy) } };
/* dlogits may alias logits. */
const tr_op_desc tr_opd_cross_entropy_backward = {
    "cross_entropy_backward", 4,
    { { "dlogits", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "logits", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "lse", TR_ARG_IN, TR_DT_F32, 0 }, { "targets", TR_ARG_IN, TR_DT_INDEX, 0 } },
    cross_entropy_backward_check, { cross_entropy_backward_cpu, TR_CUDA_SLOT(cross_entropy_backward) } };

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
