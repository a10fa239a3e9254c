/* TODO */
#include "ops_nn.h"
#include "cpu_slot.h"
#include "cpu/bias_gelu.h"
#include "cpu/gelu.h"

int tr_cpu_bias_gelu(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *out = c->bias_gelu.out, *h = c->bias_gelu.h;
    const int64_t N = c->dim[0], I = c->dim[1];
    const int kind = c->i[0] == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF;
    const int64_t step = out->dtype == TR_F32 && h->dtype == TR_F32 ? (N > 0 ? N : 1) : tr_stage_block_rows(I);
    float *Bi = NULL;
    void *obi = NULL;
    int rc = TR_OK;
    if (N == 0 || I == 0) return TR_OK;
    if (c->bias_gelu.bias && (rc = tr_stage_load(ctx, c->bias_gelu.bias, 0, I, &Bi, &obi))) return rc;
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

int tr_cpu_bias_gelu_backward(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *dx = c->bias_gelu_backward.dx, *dbias = c->bias_gelu_backward.dbias, *dout = c->bias_gelu_backward.dout, *h = c->bias_gelu_backward.h;
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
