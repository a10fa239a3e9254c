/* linear_gelu_cuda.c — the CUDA slot of linear_gelu (CPU slot: core/cpu_ops/linear_gelu_cpu.c).
 * The tanh form is cuBLASLt's GELU epilogue: one product writes h (aux) and out (GELU_AUX_BIAS),
 * where out and h share a dtype that cuBLASLt writes from the operands' and O (h's row stride)
 * is a multiple of 8. Otherwise, and for the erf form (cuBLASLt has only the tanh one, up to
 * 4.7e-4 away from erf), and where cuBLASLt has no kernel for the epilogue: the product with
 * its bias epilogue into h, then the GELU pass. The check left O, I, N in call->dim. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "ops_nn.h"

TR_CSLOT_DEFINE(linear_gelu)
static int linear_gelu_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->linear_gelu.out, *h = c->linear_gelu.h, *x = c->linear_gelu.x, *w = c->linear_gelu.w,
                    *bias = c->linear_gelu.bias;
    const int64_t O = c->dim[0], I = c->dim[1], N = c->dim[2];
    const int tanh_form = c->i[0] == TR_OP_GELU_TANH;
    if (I == 0) return tr_fail(s->err, TR_EUSER, "linear_gelu: in_features is 0; cuBLASLt needs k >= 1");
    if (N == 0 || O == 0) return TR_OK;
    tr_cuda_gemm_desc d = {.m = N, .n = O, .k = I, .batch = 1, .trans_b = 1, .alpha = 1, .beta = 0};
    const void *W;
    int w_dt, fused = 0, rc;
    if ((rc = tr_cslot_product_operand(s, w, x->dtype, &W, &w_dt))) return rc;
    if (tanh_form && out->dtype == h->dtype) {
        d.epilogue = TR_GEMM_EPI_GELU_AUX;
        d.aux = h->data;
        d.aux_ld = O;
        rc = tr_cslot_gemm_fused(s, out->data, out->dtype, x->data, x->dtype, x->numel, W, w_dt, w->numel,
                                 bias ? bias->data : NULL, bias ? bias->dtype : TR_F32, NULL, d, &fused);
        d.epilogue = TR_GEMM_EPI_NONE;
        d.aux = NULL;
        d.aux_ld = 0;
    }
    if (rc == TR_OK && !fused) {
        rc = tr_cslot_gemm(s, h->data, h->dtype, h->numel, x->data, x->dtype, x->numel, W, w_dt, w->numel,
                           bias ? bias->data : NULL, bias ? bias->dtype : TR_F32, d);
        if (rc == TR_OK)
            rc = tr_k_gelu_fwd_cuda(out->data, out->dtype, h->data, h->dtype, h->numel, tanh_form, s->stream, s->err);
    }
    return rc;
}

#endif
