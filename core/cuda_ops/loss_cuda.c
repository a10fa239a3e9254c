/* loss_cuda.c — the CUDA slots of cross_entropy and cross_entropy_backward (CPU slots:
 * core/cpu_ops/loss_cpu.c). The targets are checked on the device (each a class in [0, K) or
 * ignore_index; tr_cslot_indices_checked), so no step waits for the host: a bad label's row
 * counts as ignored, and the CPU's user error naming it and its row comes from
 * tr_device_errors_check at the next point where the host synchronises. The mean's divisor,
 * the rows not ignored, is counted by that check and read on the device; the loss itself
 * never leaves the device. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"

/* *t64 = the targets as int64 on the device, checked there (each a class in [0, K) or the
 * ignore index; a bad one becomes the ignore index, and the device's error word names it);
 * *count (device) = the rows neither ignored nor bad. */
static int device_targets(tr_cslot *s, const tr_tensor *targets, int64_t K, int64_t ignore_index, int op,
                          const int64_t **t64, int64_t **count)
{
    return tr_cslot_indices_checked(s, targets, K, ignore_index, 1, op, t64, count);
}

/* loss (=, one element) = mean over the rows not ignored; lse (=, f32) per row */
TR_CSLOT_DEFINE(cross_entropy)
static int cross_entropy_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *loss = c->cross_entropy.loss, *lse = c->cross_entropy.lse, *logits = c->cross_entropy.logits,
                    *targets = c->cross_entropy.targets;
    int64_t N, K;
    tr_op_rows(logits, &N, &K);
    const int64_t *t64 = NULL;
    int64_t *count = NULL;
    void *losses, *dcount, *sum, *scratch;
    int rc;
    if ((rc = device_targets(s, targets, K, c->i[0], TR_K_INDEX_CROSS_ENTROPY, &t64, &count)) ||
        (rc = tr_cslot_ws(s, N, TR_F32, &losses)) || (rc = tr_cslot_ws(s, 1, TR_I64, &dcount)) ||
        (rc = tr_cslot_ws(s, 1, TR_F32, &sum)) ||
        (rc = tr_cslot_ws(s, tr_k_reduce_scratch_cuda(N), TR_F32, &scratch)))
        return rc;
    if ((rc = tr_k_cross_entropy_fwd_cuda(losses, lse->data, dcount, logits->data, logits->dtype, t64, N, K, c->i[0],
                                          c->f[0], s->stream, s->err)) ||
        (rc = tr_k_sum_cuda(sum, losses, TR_F32, N, 0, scratch, s->stream, s->err)))
        return rc;
    /* the mean over the rows not ignored, its divisor read on the device; all rows ignored
     * gives 0, as on the CPU */
    return tr_k_mean_by_count_cuda(loss->data, loss->dtype, sum, count, s->stream, s->err);
}

/* dlogits (=), may alias logits (each element is read before it is written, by the same thread) */
TR_CSLOT_DEFINE(cross_entropy_backward)
static int cross_entropy_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dlogits = c->cross_entropy_backward.dlogits, *logits = c->cross_entropy_backward.logits,
                    *lse = c->cross_entropy_backward.lse, *targets = c->cross_entropy_backward.targets;
    int64_t N, K;
    tr_op_rows(logits, &N, &K);
    const int64_t *t64 = NULL;
    int64_t *count = NULL;
    int rc;
    if ((rc = device_targets(s, targets, K, c->i[0], TR_K_INDEX_CROSS_ENTROPY_BACKWARD, &t64, &count))) return rc;
    return tr_k_cross_entropy_bwd_cuda(dlogits->data, dlogits->dtype, logits->data, logits->dtype, lse->data, t64,
                                       count, c->f[1], N, K, c->i[0], c->f[0], s->stream, s->err);
}

#endif
