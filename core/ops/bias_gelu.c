/* bias_gelu.c — the FFN's up-projection bias and GELU fused (kernels/cpu/bias_gelu.c): the
 * op table's descriptions, shape checks and CPU slots, and the public wrappers.
 *   bias_gelu:          h (updated in place) = h + bias, out = gelu(h)
 *   bias_gelu_backward: dx = dout * gelu'(h), dbias (+=) = column sums of dx
 * The GEMM before it runs without its bias, and the bias gradient is summed in the pass that
 * makes dx instead of a second pass over it. The BERT layer does not use it on the CPU: with
 * OpenBLAS, a GEMM without its bias clears its output in a pass of its own (the pass the
 * fusion saves), and the bias gradient's GEMV is cheap; the 4096 x 384 -> 1536 up-projection,
 * forward and backward, measured 0.86-0.98x of the unfused ops (bench/fused_ops.lua). Half tensors are staged to f32 in blocks of rows; then out is the
 * GELU of the f32 pre-activation before it is rounded into h, and dbias sums the f32 dx
 * before it is rounded into dx (the unfused ops rounded first: about an ulp of the half
 * dtype apart). */
#include "ops_nn.h"

#include "cpu/bias_gelu.h"
#include "cpu/gelu.h"
#include "op_cuda.h"
#include "op_stage.h"
#include "op_table.h"

/* ------------------------------------------------------------ shapes */

/* h = t[hi] is [..., I], t[other] (out or dout) has its shape, t[bias] (bias or dbias) is
 * [I] or NULL; a known GELU kind. dim[0] = N rows, dim[1] = I. */
static int check_rows(tr_ctx *ctx, tr_op_call *c, const char *op, int hi, int other, int bias)
{
    const tr_tensor *h = c->t[hi];
    int rc;
    if (h->ndim < 1) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: h is a scalar; it must be [..., I]", op);
    if (c->i[0] != TR_OP_GELU_ERF && c->i[0] != TR_OP_GELU_TANH)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: GELU kind %lld is unknown: use 0 (erf, BERT's \"gelu\") or 1 (tanh, \"gelu_new\" / "
                       "\"gelu_pytorch_tanh\")",
                       op, (long long)c->i[0]);
    int64_t I = h->shape[h->ndim - 1];
    if ((rc = tr_op_want_shape(ctx, op, other == 0 ? "out" : "dout", c->t[other], h->ndim, h->shape))) return rc;
    if (c->t[bias] && (rc = tr_op_want_shape(ctx, op, bias == 2 ? "bias" : "dbias", c->t[bias], 1, &I))) return rc;
    c->dim[0] = I > 0 ? h->numel / I : 0;
    c->dim[1] = I;
    return TR_OK;
}

/* ------------------------------------------------------------ forward */

enum { F_OUT, F_H, F_BIAS };

static int fwd_check(tr_ctx *ctx, tr_op_call *c) { return check_rows(ctx, c, "bias_gelu", F_H, F_OUT, F_BIAS); }

static int fwd_cpu(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *out = c->t[F_OUT], *h = c->t[F_H];
    const int64_t N = c->dim[0], I = c->dim[1];
    const int kind = c->i[0] == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF;
    const int64_t step = out->dtype == TR_F32 && h->dtype == TR_F32 ? (N > 0 ? N : 1) : tr_stage_block_rows(I);
    float *Bi = NULL;
    void *obi = NULL;
    int rc = TR_OK;
    if (N == 0 || I == 0) return TR_OK;
    if (c->t[F_BIAS] && (rc = tr_stage_load(ctx, c->t[F_BIAS], 0, I, &Bi, &obi))) return rc;
    for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += step) {
        int64_t nr = N - r0 < step ? N - r0 : step;
        float *H = NULL, *Y = NULL;
        void *oh = NULL, *oy = NULL;
        rc = tr_stage_load(ctx, h, r0 * I, nr * I, &H, &oh);
        if (rc == TR_OK) rc = tr_stage_buf(ctx, out, r0 * I, nr * I, 0, &Y, &oy);
        if (rc == TR_OK) {
            tr_k_bias_gelu_fwd_f32(Y, H, Bi, nr, I, kind);
            tr_stage_put(h, r0 * I, H, nr * I);
            tr_stage_put(out, r0 * I, Y, nr * I);
        }
        tr_stage_scratch_free(ctx, oh);
        tr_stage_scratch_free(ctx, oy);
    }
    tr_stage_scratch_free(ctx, obi);
    return rc;
}

const tr_op_desc tr_opd_bias_gelu = {
    "bias_gelu", 3,
    { { "out", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "h", TR_ARG_ACC, TR_DT_FLOAT, 0 },
      { "bias", TR_ARG_IN, TR_DT_FLOAT, 1 } },
    fwd_check, { fwd_cpu, TR_CUDA_SLOT(bias_gelu) },
};

int tr_op_bias_gelu(tr_ctx *ctx, tr_tensor *out, tr_tensor *h, const tr_tensor *bias, int kind)
{
    tr_op_call c = { .t = { out, h, bias }, .i = { kind } };
    return tr_op_run(ctx, &tr_opd_bias_gelu, &c);
}

/* ------------------------------------------------------------ backward */

enum { B_DX, B_DBIAS, B_DOUT, B_H };

static int bwd_check(tr_ctx *ctx, tr_op_call *c)
{
    int rc = check_rows(ctx, c, "bias_gelu_backward", B_H, B_DOUT, B_DBIAS);
    if (rc) return rc;
    const tr_tensor *h = c->t[B_H];
    return tr_op_want_shape(ctx, "bias_gelu_backward", "dx", c->t[B_DX], h->ndim, h->shape);
}

static int bwd_cpu(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *dx = c->t[B_DX], *dbias = c->t[B_DBIAS], *dout = c->t[B_DOUT], *h = c->t[B_H];
    const int64_t N = c->dim[0], I = c->dim[1];
    const int kind = c->i[0] == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF;
    const int all_f32 = dx->dtype == TR_F32 && dout->dtype == TR_F32 && h->dtype == TR_F32;
    const int64_t step = all_f32 ? (N > 0 ? N : 1) : tr_stage_block_rows(I);
    void *scratch = NULL;
    int rc = TR_OK;
    if (N == 0 || I == 0) return TR_OK;
    if (dbias && (rc = tr_stage_scratch(ctx, sizeof(float) * (size_t)tr_k_bias_gelu_bwd_scratch(step, I), &scratch)))
        return rc;
    for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += step) {
        int64_t nr = N - r0 < step ? N - r0 : step;
        float *D = NULL, *H = NULL, *DX = NULL;
        void *od = NULL, *oh = NULL, *odx = NULL;
        rc = tr_stage_load(ctx, dout, r0 * I, nr * I, &D, &od);
        if (rc == TR_OK) rc = tr_stage_load(ctx, h, r0 * I, nr * I, &H, &oh);
        if (rc == TR_OK) rc = tr_stage_buf(ctx, dx, r0 * I, nr * I, 0, &DX, &odx);
        if (rc == TR_OK) {
            tr_k_bias_gelu_bwd_f32(DX, dbias ? dbias->data : NULL, D, H, nr, I, kind, scratch);
            tr_stage_put(dx, r0 * I, DX, nr * I);
        }
        tr_stage_scratch_free(ctx, od);
        tr_stage_scratch_free(ctx, oh);
        tr_stage_scratch_free(ctx, odx);
    }
    tr_stage_scratch_free(ctx, scratch);
    return rc;
}

const tr_op_desc tr_opd_bias_gelu_backward = {
    "bias_gelu_backward", 4,
    { { "dx", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "dbias", TR_ARG_ACC, TR_DT_F32, 1 },
      { "dout", TR_ARG_IN, TR_DT_FLOAT, 0 }, { "h", TR_ARG_IN, TR_DT_FLOAT, 0 } },
    bwd_check, { bwd_cpu, TR_CUDA_SLOT(bias_gelu_backward) },
};

int tr_op_bias_gelu_backward(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dbias, const tr_tensor *dout, const tr_tensor *h,
                             int kind)
{
    tr_op_call c = { .t = { dx, dbias, dout, h }, .i = { kind } };
    return tr_op_run(ctx, &tr_opd_bias_gelu_backward, &c);
}
