/* embedding_cuda.c — the CUDA slots of embedding and embedding_backward (CPU slots:
 * core/cpu_ops/embedding_cpu.c). The ids are checked against the vocabulary on the device
 * (tr_cslot_indices_checked), so no step waits for the host: a bad id gives a zero row and no
 * gradient, and the CPU's user error naming the id and its position comes from
 * tr_device_errors_check at the next point where the host synchronises. The backward's scatter-add is deterministic:
 * one thread per column walks the tokens in order, no atomics. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"

/* *ids64 = the ids as int64 on the device, checked there to lie in [0, V) (a bad one is -1,
 * which the kernels skip, and the device's error word names it). */
static int device_ids(tr_cslot *s, const tr_tensor *ids, int64_t V, int op, const int64_t **ids64)
{
    return tr_cslot_indices_checked(s, ids, V, 0, 0, op, ids64, NULL);
}

TR_CSLOT_DEFINE(embedding)
static int embedding_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->embedding.out, *ids = c->embedding.ids, *table = c->embedding.table;
    const int64_t V = table->shape[0], C = table->shape[1];
    const int64_t *id64 = NULL;
    int rc = device_ids(s, ids, V, TR_K_INDEX_EMBEDDING, &id64);
    if (rc || ids->numel == 0 || C == 0) return rc;
    return tr_k_embedding_fwd_cuda(out->data, out->dtype, id64, table->data, table->dtype, ids->numel, C, s->stream,
                                   s->err);
}

/* dtable (+=) rows ids[n] += dout[n, :], padding_idx skipped; a half dtable is staged to f32 */
TR_CSLOT_DEFINE(embedding_backward)
static int embedding_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dtable = c->embedding_backward.dtable, *dout = c->embedding_backward.dout,
                    *ids = c->embedding_backward.ids;
    const int64_t V = dtable->shape[0], C = dtable->shape[1];
    const int64_t *id64 = NULL;
    void *acc;
    int rc = device_ids(s, ids, V, TR_K_INDEX_EMBEDDING_BACKWARD, &id64);
    if (rc || ids->numel == 0 || C == 0) return rc;
    if ((rc = tr_cslot_out(s, dtable, TR_F32, 1, &acc)) ||
        (rc = tr_k_embedding_bwd_cuda(acc, dout->data, dout->dtype, id64, ids->numel, C, c->i[0], s->stream, s->err)))
        return rc;
    return tr_cslot_store(s, dtable, TR_F32, acc);
}

#endif
