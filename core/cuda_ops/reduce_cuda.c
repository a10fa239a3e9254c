/* reduce_cuda.c — the CUDA slots of sum, mean, global_norm and scale_check_finite (CPU
 * slots: core/cpu_ops/reduce_cpu.c). Sums run in fp32 in a fixed tree per launch shape (the CPU
 * combines its chunks in f64: the two agree to f32 rounding, not bit for bit).
 *
 * global_norm and scale_check_finite work on a list of tensors in one multi-tensor launch
 * (the list goes to the device as tr_k_tensor_ref records). Their contracts return a host
 * value (the norm's float, found_inf's int), so these two slots SYNCHRONISE the stream
 * to read it back; the device-resident path (the clip coefficient and the loss scaler's
 * flag kept on the device, tr_k_clip_coef_cuda / tr_k_scale_by_device_cuda) is in the files of those ops. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"

#include <math.h>
#include <stdlib.h>

static int reduce(tr_cslot *s, tr_op_call *c, int mean)
{
    const tr_tensor *out = c->sum.out, *x = c->sum.x; /* mean: the same arguments */
    int64_t N, C;
    tr_op_rows(x, &N, &C);
    void *acc, *scratch;
    int rc;
    if (!c->i[0]) {
        /* the whole tensor: a device f32, then scaled (mean) and rounded once into out */
        if ((rc = tr_cslot_ws(s, 1, TR_F32, &acc)) ||
            (rc = tr_cslot_ws(s, tr_k_reduce_scratch_cuda(x->numel), TR_F32, &scratch)) ||
            (rc = tr_k_sum_cuda(acc, x->data, x->dtype, x->numel, 0, scratch, s->stream, s->err)))
            return rc;
        float k = mean ? (x->numel ? 1.0f / (float)x->numel : NAN) : 1.0f;
        return tr_k_scale_mixed_cuda(out->data, out->dtype, acc, TR_F32, k, 1, 0, s->stream, s->err);
    }
    if (N == 0) return TR_OK;
    if (!mean) return tr_k_sum_lastdim_cuda(out->data, out->dtype, x->data, x->dtype, N, C, s->stream, s->err);
    if ((rc = tr_cslot_ws(s, N, TR_F32, &acc)) ||
        (rc = tr_k_sum_lastdim_cuda(acc, TR_F32, x->data, x->dtype, N, C, s->stream, s->err)))
        return rc;
    return tr_k_scale_mixed_cuda(out->data, out->dtype, acc, TR_F32, C ? 1.0f / (float)C : NAN, N, 0, s->stream,
                                 s->err);
}

TR_CSLOT_BY(sum, reduce, c, 0)
TR_CSLOT_BY(mean, reduce, c, 1)

/* *res (float, host) = sqrt(sum of squares of every listed tensor): one launch, then a
 * synchronising read of the one float. */
TR_CSLOT_DEFINE(global_norm)
static int global_norm_body(tr_cslot *s, tr_op_call *c)
{
    const tr_k_tensor_ref *list = NULL;
    int64_t max_n;
    void *acc, *scratch;
    float ss = 0;
    int rc;
    if ((rc = tr_cslot_tensor_list(s, c->list, c->nlist, &list, &max_n)) || (rc = tr_cslot_ws(s, 1, TR_F32, &acc)) ||
        (rc = tr_cslot_ws(s, tr_k_global_sumsq_scratch_cuda(c->nlist, max_n), TR_F32, &scratch)) ||
        (rc = tr_k_global_sumsq_cuda(acc, list, c->nlist, max_n, scratch, s->stream, s->err)) ||
        (rc = tr_cslot_to_host(s, &ss, acc, sizeof ss)))
        return rc;
    *(float *)c->res = sqrtf(ss);
    return TR_OK;
}

/* every listed tensor *= scale in place; *res (int, host) = 1 when a result is inf or NaN.
 * The flag is set on the device; reading it back synchronises. */
TR_CSLOT_DEFINE(scale_check_finite)
static int scale_check_finite_body(tr_cslot *s, tr_op_call *c)
{
    const tr_k_tensor_ref *list = NULL;
    int64_t max_n;
    void *found;
    int32_t bad = 0;
    int rc;
    if ((rc = tr_cslot_tensor_list(s, c->list, c->nlist, &list, &max_n)) || (rc = tr_cslot_ws(s, 1, TR_I32, &found)) ||
        (rc = tr_cslot_memset(s, found, 0, sizeof(int32_t))) ||
        (rc = tr_k_scale_check_cuda(list, c->nlist, max_n, c->f[0], found, s->stream, s->err)) ||
        (rc = tr_cslot_to_host(s, &bad, found, sizeof bad)))
        return rc;
    *(int *)c->res = bad != 0;
    return TR_OK;
}

#endif
