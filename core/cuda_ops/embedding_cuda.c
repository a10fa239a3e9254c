/* embedding_cuda.c — the CUDA slots of embedding and embedding_backward (CPU slots:
 * core/ops/embedding.c). The ids are checked against the vocabulary on the host, as the
 * CPU does, so a bad id is the same user error naming the id and its position: that
 * copies them to the host and synchronises (a batch's ids are a few KiB, and they came
 * from the host). The backward's scatter-add is deterministic: one thread per column walks
 * the tokens in order, no atomics. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"

#include <stdlib.h>

/* *ids64 = the ids as int64 on the device, each checked to lie in [0, V). */
static int device_ids(tr_cslot *s, const tr_tensor *ids, int64_t V, const int64_t **ids64)
{
    int64_t *host;
    int rc = tr_cslot_indices_to_host(s, ids, "ids", &host);
    for (int64_t i = 0; rc == TR_OK && i < ids->numel; i++)
        if (host[i] < 0 || host[i] >= V)
            rc = tr_fail(s->err, TR_EUSER,
                         "%s: id %lld at position %lld is outside the vocabulary of %lld rows; check that the "
                         "tokenizer belongs to the model (its vocabulary size must not exceed the embedding's "
                         "rows)",
                         s->op, (long long)host[i], (long long)i, (long long)V);
    if (rc == TR_OK) rc = tr_cslot_indices_to_device(s, ids, host, ids64);
    free(host);
    return rc;
}

TR_CSLOT_DEFINE(embedding)
static int embedding_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->t[0], *ids = c->t[1], *table = c->t[2];
    const int64_t V = table->shape[0], C = table->shape[1];
    const int64_t *id64 = NULL;
    int rc = device_ids(s, ids, V, &id64);
    if (rc || ids->numel == 0 || C == 0) return rc;
    return tr_k_embedding_fwd_cuda(out->data, out->dtype, id64, table->data, table->dtype, ids->numel, C, s->stream,
                                   s->err);
}

/* dtable (+=) rows ids[n] += dout[n, :], padding_idx skipped; a half dtable is staged to f32 */
TR_CSLOT_DEFINE(embedding_backward)
static int embedding_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dtable = c->t[0], *dout = c->t[1], *ids = c->t[2];
    const int64_t V = dtable->shape[0], C = dtable->shape[1];
    const int64_t *id64 = NULL;
    void *acc;
    int rc = device_ids(s, ids, V, &id64);
    if (rc || ids->numel == 0 || C == 0) return rc;
    if ((rc = tr_cslot_out(s, dtable, TR_F32, 1, &acc)) ||
        (rc = tr_k_embedding_bwd_cuda(acc, dout->data, dout->dtype, id64, ids->numel, C, c->i[0], s->stream, s->err)))
        return rc;
    return tr_cslot_store(s, dtable, TR_F32, acc);
}

#endif
