/* pooling_cuda.c — the CUDA slots of pool and pool_backward (CPU slots: core/cpu_ops/pooling_cpu.c):
 * mean, CLS, max and mean_sqrt_len over [B, T, C] with the attention mask. The kernels read
 * the mask as i32; any other mask (i64, a float dtype, or none) is converted on the device
 * first, a float's nonzero meaning a kept token as on the CPU. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"

static int mask_i32(tr_cslot *s, const tr_tensor *mask, int64_t BT, const int32_t **out)
{
    if (mask && mask->dtype == TR_I32) {
        *out = mask->data;
        return TR_OK;
    }
    void *m;
    int rc = tr_cslot_ws(s, BT, TR_I32, &m);
    if (rc == TR_OK)
        rc = tr_k_mask_i32_cuda(m, mask ? mask->data : NULL, mask ? mask->dtype : TR_I32, BT, s->stream, s->err);
    *out = m;
    return rc;
}

TR_CSLOT_DEFINE(pool)
static int pool_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->pool.out, *hidden = c->pool.hidden, *mask = c->pool.mask;
    const int64_t B = hidden->shape[0], T = hidden->shape[1], C = hidden->shape[2];
    const int32_t *m = NULL;
    int rc = mask_i32(s, mask, B * T, &m);
    if (rc) return rc;
    return tr_k_pool_fwd_cuda(out->data, out->dtype, hidden->data, hidden->dtype, m, B, T, C, (int)c->i[0], s->stream,
                              s->err);
}

/* dhidden (=); padding positions get 0 */
TR_CSLOT_DEFINE(pool_backward)
static int pool_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dh = c->pool_backward.dhidden, *dout = c->pool_backward.dout, *hidden = c->pool_backward.hidden,
                    *mask = c->pool_backward.mask;
    const int64_t B = hidden->shape[0], T = hidden->shape[1], C = hidden->shape[2];
    const int32_t *m = NULL;
    int rc = mask_i32(s, mask, B * T, &m);
    if (rc) return rc;
    return tr_k_pool_bwd_cuda(dh->data, dh->dtype, dout->data, dout->dtype, hidden->data, hidden->dtype, m, B, T, C,
                              (int)c->i[0], s->stream, s->err);
}

#endif
