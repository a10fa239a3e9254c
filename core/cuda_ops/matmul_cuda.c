/* matmul_cuda.c — the CUDA slots of matmul, linear, linear_backward, linear_backward_acc (CPU
 * slots: core/cpu_ops/matmul_cpu.c) and linear_backward_dgelu (core/cpu_ops/linear_gelu_cpu.c) through
 * cuBLASLt (tr_cslot_gemm). Linear's bias rides in the GEMM's
 * epilogue (BIAS); its backward's bias gradient rides in the weight gradient's product (BGRADB),
 * or is a deterministic column sum of dout where that product is not made (a frozen weight) or
 * cuBLASLt has no kernel for the epilogue. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "ops_nn.h"

/* out[..., M, N] = alpha op(a) op(b) + beta out + bias */
TR_CSLOT_DEFINE(matmul)
static int matmul_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->matmul.out, *a = c->matmul.a, *b = c->matmul.b, *bias = c->matmul.bias;
    const int trans_a = (int)c->i[0], trans_b = (int)c->i[1], na = a->ndim, nbd = b->ndim;
    const int64_t M = trans_a ? a->shape[na - 1] : a->shape[na - 2];
    const int64_t K = trans_a ? a->shape[na - 2] : a->shape[na - 1];
    const int64_t N = trans_b ? b->shape[nbd - 2] : b->shape[nbd - 1];
    int64_t batch = 1;
    for (int i = 0; i < na - 2; i++) batch *= a->shape[i];
    const int b_shared = nbd == 2;
    tr_cuda_gemm_desc d = {.m = M,
                           .n = N,
                           .k = K,
                           .batch = batch,
                           .trans_a = trans_a,
                           .trans_b = trans_b,
                           .alpha = c->f[0],
                           .beta = c->f[1]};
    if (b_shared && !trans_a) {
        /* one matrix b for every batch item and a stored row-major: one product of batch*M rows */
        d.m = batch * M;
        d.batch = 1;
    } else {
        d.stride_a = M * K;
        d.stride_b = b_shared ? 0 : K * N;
        d.stride_c = M * N;
    }
    if (K == 0) {
        /* no inner dimension: out = beta out + bias, which the CPU path gives too */
        return tr_fail(s->err, TR_EUSER, "matmul: the inner dimension is 0; cuBLASLt needs k >= 1");
    }
    const void *A, *B;
    int a_dt, b_dt, rc;
    if ((rc = tr_cslot_product_operand(s, a, b->dtype, &A, &a_dt)) ||
        (rc = tr_cslot_product_operand(s, b, a->dtype, &B, &b_dt)))
        return rc;
    return tr_cslot_gemm(s, out->data, out->dtype, out->numel, A, a_dt, a->numel, B, b_dt, b->numel,
                         bias ? bias->data : NULL, bias ? bias->dtype : TR_F32, d);
}

/* out[N, O] = x[N, I] w[O, I]^T + bias[O] (bias in the epilogue) */
TR_CSLOT_DEFINE(linear)
static int linear_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->linear.out, *x = c->linear.x, *w = c->linear.w, *bias = c->linear.bias;
    const int64_t O = w->shape[0], I = w->shape[1], N = O > 0 ? out->numel / O : 0;
    if (I == 0) return tr_fail(s->err, TR_EUSER, "linear: in_features is 0; cuBLASLt needs k >= 1");
    tr_cuda_gemm_desc d = {.m = N, .n = O, .k = I, .batch = 1, .trans_b = 1, .alpha = 1, .beta = 0};
    const void *W;
    int w_dt, rc;
    if ((rc = tr_cslot_product_operand(s, w, x->dtype, &W, &w_dt))) return rc;
    return tr_cslot_gemm(s, out->data, out->dtype, out->numel, x->data, x->dtype, x->numel, W, w_dt, w->numel,
                         bias ? bias->data : NULL, bias ? bias->dtype : TR_F32, d);
}

/* dw (+=, f32) += dout^T x and dbias (+=, f32) += column sums of dout, for dout [N, O] and x
 * [N, I]: the bias gradient in the weight gradient's product (BGRADB), which reads dout anyway;
 * a column sum where that product is not made (dw NULL) or cuBLASLt has no kernel for it. */
static int weight_grads(tr_cslot *s, const tr_tensor *dw, const tr_tensor *dbias, const tr_tensor *dout,
                        const tr_tensor *x, int64_t N, int64_t O, int64_t I)
{
    int rc = TR_OK, bias_done = 0;
    if (dw && N > 0) {
        tr_cuda_gemm_desc d = {.m = O, .n = I, .k = N, .batch = 1, .trans_a = 1, .alpha = 1, .beta = 1};
        if (dbias) {
            d.epilogue = TR_GEMM_EPI_BGRAD_A;
            rc = tr_cslot_gemm_fused(s, dw->data, TR_F32, dout->data, dout->dtype, dout->numel, x->data, x->dtype,
                                     x->numel, NULL, TR_F32, dbias->data, d, &bias_done);
            d.epilogue = TR_GEMM_EPI_NONE;
        }
        if (rc == TR_OK && !bias_done)
            rc = tr_cslot_gemm(s, dw->data, TR_F32, dw->numel, dout->data, dout->dtype, dout->numel, x->data,
                               x->dtype, x->numel, NULL, TR_F32, d);
    }
    if (rc == TR_OK && dbias && !bias_done)
        rc = tr_k_colsum_acc_cuda(dbias->data, dout->data, dout->dtype, N, O, s->stream, s->err);
    return rc;
}

/* dx = dout w + beta dx (beta 0: =, never read; 1: +=, the sum in the product's own beta, so
 * dx rounds once); dw, dbias: weight_grads. linear_backward and linear_backward_acc take their
 * tensors in one order (matmul_cpu.c asserts it), so the call's t[] serves both. */
static int linear_backward_cuda(tr_cslot *s, tr_op_call *c, float dx_beta)
{
    const tr_tensor *dx = c->linear_backward.dx, *dw = c->linear_backward.dw, *dbias = c->linear_backward.dbias,
                    *dout = c->linear_backward.dout, *x = c->linear_backward.x, *w = c->linear_backward.w;
    const int64_t O = dout->shape[dout->ndim - 1], N = O > 0 ? dout->numel / O : 0;
    /* in_features from w or x: either may be NULL when only the gradients that need the other are asked for */
    const int64_t I = w ? w->shape[1] : x ? x->shape[x->ndim - 1] : 0;
    int rc = TR_OK;
    if (dx && O > 0) {
        tr_cuda_gemm_desc d = {.m = N, .n = I, .k = O, .batch = 1, .alpha = 1, .beta = dx_beta};
        const void *W;
        int w_dt;
        if ((rc = tr_cslot_product_operand(s, w, dout->dtype, &W, &w_dt))) return rc;
        rc = tr_cslot_gemm(s, dx->data, dx->dtype, dx->numel, dout->data, dout->dtype, dout->numel, W, w_dt, w->numel,
                           NULL, TR_F32, d);
    } else if (dx && dx_beta == 0) { /* no inner dimension: dx = 0, and dx += 0 leaves it */
        rc = tr_k_fill_fwd_cuda(dx->data, 0.0f, dx->dtype, dx->numel, s->stream, s->err);
    }
    return rc == TR_OK ? weight_grads(s, dw, dbias, dout, x, N, O, I) : rc;
}

TR_CSLOT_BY(linear_backward, linear_backward_cuda, c, 0.0f)

/* linear_backward with dx (+=) */
TR_CSLOT_BY(linear_backward_acc, linear_backward_cuda, c, 1.0f)

/* dh (=) = (dout w) * gelu'(h); dhbias (+=, f32) += column sums of dh; dw, dbias: weight_grads.
 * The tanh form's derivative rides in the dh product's epilogue where dh and h share a dtype
 * and I is a multiple of 8: DGELU without dhbias (the layer before is frozen, as under LoRA),
 * DGELU_BGRAD with it for an f32 dh. A half dh with dhbias is not fused: the epilogue rounds dh
 * once where the CPU rounds the product and then dh (an ulp apart), and cuBLASLt would write
 * the bias gradient in dh's dtype, so its column sums would leave the CPU's f32 sums by more
 * than f32 rounding. Otherwise: the product, the derivative's pass in place, a column sum.
 * The check left O, I, N in call->dim. */
TR_CSLOT_DEFINE(linear_backward_dgelu)
static int linear_backward_dgelu_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dh = c->linear_backward_dgelu.dh, *dw = c->linear_backward_dgelu.dw,
                    *dbias = c->linear_backward_dgelu.dbias, *dhbias = c->linear_backward_dgelu.dhbias,
                    *dout = c->linear_backward_dgelu.dout, *x = c->linear_backward_dgelu.x,
                    *w = c->linear_backward_dgelu.w, *h = c->linear_backward_dgelu.h;
    const int64_t O = c->dim[0], I = c->dim[1], N = c->dim[2];
    const int tanh_form = c->i[0] == TR_OP_GELU_TANH;
    int rc = TR_OK, fused = 0;
    if (N > 0 && I > 0 && O > 0) {
        tr_cuda_gemm_desc d = {.m = N, .n = I, .k = O, .batch = 1, .alpha = 1, .beta = 0};
        const void *W;
        int w_dt;
        if ((rc = tr_cslot_product_operand(s, w, dout->dtype, &W, &w_dt))) return rc;
        if (tanh_form && dh->dtype == h->dtype && (!dhbias || dh->dtype == TR_F32)) {
            d.epilogue = TR_GEMM_EPI_DGELU;
            d.aux = h->data;
            d.aux_ld = I;
            rc = tr_cslot_gemm_fused(s, dh->data, dh->dtype, dout->data, dout->dtype, dout->numel, W, w_dt, w->numel,
                                     NULL, TR_F32, dhbias ? dhbias->data : NULL, d, &fused);
            d.epilogue = TR_GEMM_EPI_NONE;
            d.aux = NULL;
            d.aux_ld = 0;
        }
        if (rc == TR_OK && !fused)
            rc = tr_cslot_gemm(s, dh->data, dh->dtype, dh->numel, dout->data, dout->dtype, dout->numel, W, w_dt,
                               w->numel, NULL, TR_F32, d);
    } else if (N > 0 && I > 0) {
        rc = tr_k_fill_fwd_cuda(dh->data, 0.0f, dh->dtype, dh->numel, s->stream, s->err);
    }
    if (rc == TR_OK && !fused && N > 0 && I > 0)
        rc = tr_k_gelu_bwd_cuda(dh->data, dh->dtype, dh->data, dh->dtype, h->data, h->dtype, dh->numel, tanh_form,
                                s->stream, s->err);
    if (rc == TR_OK && dhbias && !fused)
        rc = tr_k_colsum_acc_cuda(dhbias->data, dh->data, dh->dtype, N, I, s->stream, s->err);
    return rc == TR_OK ? weight_grads(s, dw, dbias, dout, x, N, O, I) : rc;
}

#endif
