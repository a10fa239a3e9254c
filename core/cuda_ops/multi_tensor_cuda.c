/* multi_tensor_cuda.c — the CUDA slots of global_norm_into, clip_by_norm,
 * scale_check_finite_into and adamw_multi (CPU slots: core/cpu_ops/multi_tensor_cpu.c). None reads
 * anything back: the norm, the clip coefficient and the found-inf flag stay in device
 * memory, so an optimizer step (unscale, clip, AdamW over every parameter) is a handful of
 * launches and no synchronisation. The lists travel as kernel arguments (tr_cslot_to_device,
 * up to 16 KiB: 682 tensor records, 292 AdamW records per launch; a longer tensor list goes
 * by a copy from pageable memory, which may wait for the host's staging). Kernels: reduce.cu (multi-tensor
 * sumsq, clip_coef, scale, scale_by_device), multi_tensor.cu (the coefficient from a device
 * norm), optim.cu (multi-tensor AdamW, skipped on a device flag). */
#ifdef TR_HAVE_CUDA

#include "cuda/multi_tensor.h"
#include "cuda_slot.h"
#include "multi_tensor_args.h"

#include <stdlib.h>

/* norm (device f32) = sqrt(sum of squares): reduce.cu's multi-tensor sumsq, then its
 * clip_coef kernel, which writes the norm (its coefficient goes to workspace unused). */
TR_CSLOT_DEFINE(global_norm_into)
static int global_norm_into_body(tr_cslot *s, tr_op_call *c)
{
    const tr_k_tensor_ref *list = NULL;
    int64_t max_n;
    void *acc, *scratch, *coef;
    int rc;
    if ((rc = tr_cslot_tensor_list(s, c->list, c->nlist, &list, &max_n)) || (rc = tr_cslot_ws(s, 1, TR_F32, &acc)) ||
        (rc = tr_cslot_ws(s, 1, TR_F32, &coef)) ||
        (rc = tr_cslot_ws(s, tr_k_global_sumsq_scratch_cuda(c->nlist, max_n), TR_F32, &scratch)) ||
        (rc = tr_k_global_sumsq_cuda(acc, list, c->nlist, max_n, scratch, s->stream, s->err)))
        return rc;
    return tr_k_clip_coef_cuda(coef, c->global_norm_into.norm->data, acc, 1.0f, s->stream, s->err);
}

/* coef on the device from the device norm, then every listed tensor *= coef. */
TR_CSLOT_DEFINE(clip_by_norm)
static int clip_by_norm_body(tr_cslot *s, tr_op_call *c)
{
    const tr_k_tensor_ref *list = NULL;
    int64_t max_n;
    void *coef;
    int rc;
    if ((rc = tr_cslot_tensor_list(s, c->list, c->nlist, &list, &max_n)) || (rc = tr_cslot_ws(s, 1, TR_F32, &coef)) ||
        (rc = tr_k_clip_coef_from_norm_cuda(coef, c->clip_by_norm.norm->data, c->f[0], c->f[1],
                                            c->clip_by_norm.found_inf ? c->clip_by_norm.found_inf->data : NULL,
                                            s->stream, s->err)))
        return rc;
    return tr_k_scale_by_device_cuda(list, c->nlist, max_n, coef, s->stream, s->err);
}

/* every listed tensor *= scale; the flag tensor is set on the device, never read here. */
TR_CSLOT_DEFINE(scale_check_finite_into)
static int scale_check_finite_into_body(tr_cslot *s, tr_op_call *c)
{
    const tr_k_tensor_ref *list = NULL;
    int64_t max_n;
    int rc;
    if (c->nlist == 0) return TR_OK;
    if ((rc = tr_cslot_tensor_list(s, c->list, c->nlist, &list, &max_n))) return rc;
    if (c->scale_check_finite_into.scale) /* 1 / the device loss scale, read where it lives */
        return tr_k_scale_by_device_check_cuda(list, c->nlist, max_n, c->scale_check_finite_into.scale->data,
                                               c->scale_check_finite_into.found_inf->data, s->stream, s->err);
    return tr_k_scale_check_cuda(list, c->nlist, max_n, c->f[0], c->scale_check_finite_into.found_inf->data, s->stream,
                                 s->err);
}

/* optim.cu's AdamW over every parameter: one launch per 292 parameters (the records that
 * travel as kernel arguments), so BERT-large's LoRA is one launch and its full fine-tune
 * two. Gradients are f32 (the op's check), read in place. */
TR_CSLOT_DEFINE(adamw_multi)
static int adamw_multi_body(tr_cslot *s, tr_op_call *c)
{
    const tr_adamw_lists *L = c->p;
    const int n = c->nlist;
    if (n == 0) return TR_OK;
    tr_k_adamw_args a = tr_cslot_adamw_args(c);
    a.skip = c->adamw_multi.skip_if ? c->adamw_multi.skip_if->data : NULL;
    a.skipped = c->adamw_multi.skipped ? c->adamw_multi.skipped->data : NULL;
    a.skipped_known = c->i[1];
    tr_k_param_ref *host = calloc((size_t)n, sizeof *host);
    if (!host) return tr_fail(s->err, TR_EOOM, "adamw_multi: out of host memory for a list of %d parameters", n);
    for (int k = 0; k < n; k++) {
        const tr_tensor *h = L->half ? L->half[k] : NULL;
        host[k] = (tr_k_param_ref){.param = L->params[k]->data,
                                   .grad = L->grads[k]->data,
                                   .m = L->m[k]->data,
                                   .v = L->v[k]->data,
                                   .half = h ? h->data : NULL,
                                   .n = L->params[k]->numel,
                                   .half_dt = h ? h->dtype : TR_F32,
                                   .decay = !L->decay || L->decay[k] ? 1 : 0};
    }
    /* one workspace for every record; each launch takes as many as travel as kernel
     * arguments (16 KiB, tr_cslot_to_device: no wait for the stream) */
    enum { PER_LAUNCH = 16384 / sizeof(tr_k_param_ref) };
    void *dev = NULL;
    const size_t bytes = (size_t)n * sizeof *host;
    int rc = tr_cslot_ws(s, (int64_t)((bytes + 7) / 8), TR_I64, &dev);
    for (int b0 = 0; b0 < n && rc == TR_OK; b0 += PER_LAUNCH) {
        const int nb = n - b0 < PER_LAUNCH ? n - b0 : PER_LAUNCH;
        int64_t max_n = 0;
        for (int i = b0; i < b0 + nb; i++)
            if (host[i].n > max_n) max_n = host[i].n;
        tr_k_param_ref *part = (tr_k_param_ref *)dev + b0;
        rc = tr_cslot_to_device(s, part, host + b0, (size_t)nb * sizeof *host);
        if (rc == TR_OK) rc = tr_k_adamw_cuda(part, nb, max_n, &a, s->stream, s->err);
    }
    free(host);
    return rc;
}

#endif
