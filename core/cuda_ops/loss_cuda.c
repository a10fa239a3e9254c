/* loss_cuda.c — the CUDA slots of cross_entropy and cross_entropy_backward (CPU slots:
 * core/ops/loss.c). The targets are checked on the host as the CPU does (each a class in
 * [0, K) or ignore_index), so a bad label is the same user error naming its row: that
 * copies them to the host and synchronises (one int per row). The mean's divisor, the rows
 * not ignored, comes from that check; the loss itself never leaves the device. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"

#include <stdlib.h>

/* *t64 = the targets as int64 on the device, checked; *count = the rows not ignored. */
static int device_targets(tr_cslot *s, const tr_tensor *targets, int64_t K, int64_t ignore_index, const int64_t **t64,
                          int64_t *count)
{
    int64_t *host;
    int rc = tr_cslot_indices_to_host(s, targets, "targets", &host);
    *count = 0;
    for (int64_t i = 0; rc == TR_OK && i < targets->numel; i++) {
        int64_t t = host[i];
        if (t == ignore_index) continue;
        if (t < 0 || t >= K)
            rc = tr_fail(s->err, TR_EUSER,
                         "%s: target %lld at row %lld is not a class index in [0, %lld) nor the ignore_index "
                         "%lld; check the label column and the number of labels",
                         s->op, (long long)t, (long long)i, (long long)K, (long long)ignore_index);
        (*count)++;
    }
    if (rc == TR_OK) rc = tr_cslot_indices_to_device(s, targets, host, t64);
    free(host);
    return rc;
}

/* loss (=, one element) = mean over the rows not ignored; lse (=, f32) per row */
TR_CSLOT_DEFINE(cross_entropy)
static int cross_entropy_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *loss = c->t[0], *lse = c->t[1], *logits = c->t[2], *targets = c->t[3];
    int64_t N, K, count;
    tr_op_rows(logits, &N, &K);
    const int64_t *t64 = NULL;
    void *losses, *dcount, *sum, *scratch;
    int rc;
    if ((rc = device_targets(s, targets, K, c->i[0], &t64, &count)) || (rc = tr_cslot_ws(s, N, TR_F32, &losses)) ||
        (rc = tr_cslot_ws(s, 1, TR_I64, &dcount)) || (rc = tr_cslot_ws(s, 1, TR_F32, &sum)) ||
        (rc = tr_cslot_ws(s, tr_k_reduce_scratch_cuda(N), TR_F32, &scratch)))
        return rc;
    if ((rc = tr_k_cross_entropy_fwd_cuda(losses, lse->data, dcount, logits->data, logits->dtype, t64, N, K, c->i[0],
                                          c->f[0], s->stream, s->err)) ||
        (rc = tr_k_sum_cuda(sum, losses, TR_F32, N, 0, scratch, s->stream, s->err)))
        return rc;
    /* all rows ignored gives 0, as on the CPU */
    return tr_k_scale_mixed_cuda(loss->data, loss->dtype, sum, TR_F32, count ? 1.0f / (float)count : 0.0f, 1, 0,
                                 s->stream, s->err);
}

/* dlogits (=), may alias logits (each element is read before it is written, by the same thread) */
TR_CSLOT_DEFINE(cross_entropy_backward)
static int cross_entropy_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dlogits = c->t[0], *logits = c->t[1], *lse = c->t[2], *targets = c->t[3];
    int64_t N, K, count;
    tr_op_rows(logits, &N, &K);
    const int64_t *t64 = NULL;
    void *dcount;
    int rc;
    if ((rc = device_targets(s, targets, K, c->i[0], &t64, &count)) || (rc = tr_cslot_ws(s, 1, TR_I64, &dcount)) ||
        (rc = tr_cslot_to_device(s, dcount, &count, sizeof count)))
        return rc;
    return tr_k_cross_entropy_bwd_cuda(dlogits->data, dlogits->dtype, logits->data, logits->dtype, lse->data, t64,
                                       dcount, c->f[1], N, K, c->i[0], c->f[0], s->stream, s->err);
}

#endif
