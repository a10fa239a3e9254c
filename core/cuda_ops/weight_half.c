/* weight_half.c — the bf16 copy of an f32 weight that CUDA products read beside bf16
 * operands (cuda_slot.h: tr_cslot_product_operand).
 *
 * Under bf16 training a trainable weight (a LoRA factor, every Linear of a full fine-tune)
 * stays f32 while the activations are bf16, and the product runs in bf16 (cuda_slot.c's
 * pair rule), so the weight must be cast. It is read several times between two optimizer
 * steps (the forward, a checkpointed segment's recompute, the input gradient), so the cast
 * is made once and kept beside the weight's storage (tensor_version.h's derived copy, tag
 * workspace, as the CPU keeps its packed weights), and made again only when the weight's
 * bytes were written since (its storage version moved) or another view of the storage is
 * asked for. The copy is freed with the weight. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "tensor_version.h"

#include <stdlib.h>

typedef struct weight_half {
    tr_tensor *copy;   /* bf16, the weight's shape, on its device */
    const void *src;   /* the f32 bytes it was made from */
    int64_t numel;
    uint64_t version;  /* the storage version it was made from */
} weight_half;

static void weight_half_free(void *p)
{
    weight_half *h = p;
    tr_tensor_free(h->copy);
    free(h);
}

/* The kept copy of w (f32, tag weights), made or refreshed on s's stream. */
static int half_copy_of(tr_cslot *s, const tr_tensor *w, const void **out)
{
    weight_half *h = tr_tensor_derived(w);
    if (!h) {
        h = calloc(1, sizeof *h);
        if (!h) return tr_fail(s->err, TR_EOOM, "%s: out of host memory for a weight's bf16 copy record", s->op);
        if (tr_tensor_set_derived(w, h, weight_half_free) != 0) {
            free(h);   /* no storage to keep a copy beside: the caller casts into workspace */
            return TR_OK;
        }
    }
    const uint64_t version = tr_tensor_version(w);
    if (h->copy && h->src == w->data && h->numel == w->numel && h->version == version) {
        *out = h->copy->data;
        return TR_OK;
    }
    if (h->copy && h->copy->numel != w->numel) {
        tr_tensor_free(h->copy);
        h->copy = NULL;
    }
    if (!h->copy) {
        h->copy = tr_tensor_new(s->ctx, w->ndim, w->shape, TR_BF16, s->device, TR_TAG_WORKSPACE);
        if (!h->copy) return tr_ctx_err(s->ctx)->status;
    }
    h->src = NULL;   /* invalid until the cast below has been queued */
    int rc = tr_k_cast_any_cuda(h->copy->data, TR_BF16, w->data, TR_F32, w->numel, s->stream, s->err);
    if (rc != TR_OK) return rc;
    *h = (weight_half){ h->copy, w->data, w->numel, version };
    *out = h->copy->data;
    return TR_OK;
}

int tr_cslot_product_operand(tr_cslot *s, const tr_tensor *t, int other_dt, const void **data, int *dtype)
{
    *data = t ? t->data : NULL;
    *dtype = t ? t->dtype : TR_F32;
    if (!t || t->dtype != TR_F32 || other_dt != TR_BF16 || t->tag != TR_TAG_WEIGHTS || t->numel == 0) return TR_OK;
    const void *copy = NULL;
    int rc = half_copy_of(s, t, &copy);
    if (rc == TR_OK && copy) {
        *data = copy;
        *dtype = TR_BF16;
    }
    return rc;
}

#endif
