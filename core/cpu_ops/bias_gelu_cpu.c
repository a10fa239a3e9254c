/* bias_gelu_cpu.c — the CPU slots of bias_gelu and bias_gelu_backward over
 * kernels/cpu/bias_gelu.c, through the row-block staging loop (stage_rows.h). Half tensors
 * are staged to f32 in blocks of rows; then out is the GELU of the f32 pre-activation before
 * it is rounded into h, and dbias (f32, +=) sums the f32 dx before it is rounded into dx. The
 * shape check left N and I in call->dim. */
#include "ops_nn.h"
#include "cpu_slot.h"
#include "cpu/bias_gelu.h"
#include "cpu/activation.h"

#define FWD(name) TR_ARGI(bias_gelu, name)
#define BWD(name) TR_ARGI(bias_gelu_backward, name)

static int gelu_kind(const tr_op_call *c)
{
    return c->i[0] == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF;
}

static const unsigned char fwd_layout[TR_OP_MAX_TENSORS] = {
    [FWD(out)] = TR_ROWS_BLOCK,
    [FWD(h)] = TR_ROWS_BLOCK,
    [FWD(bias)] = TR_ROWS_WHOLE,
};

static int fwd_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t I, void *work)
{
    tr_k_bias_gelu_fwd_f32(p[FWD(out)], p[FWD(h)], p[FWD(bias)], nr, I, gelu_kind(c));
    return TR_OK;
}

int tr_cpu_bias_gelu(tr_ctx *ctx, tr_op_call *c)
{
    if (c->dim[0] == 0 || c->dim[1] == 0) return TR_OK;
    return tr_stage_rows(ctx, &tr_opd_bias_gelu, c, fwd_layout, c->dim[0], c->dim[1], fwd_rows, NULL);
}

static const unsigned char bwd_layout[TR_OP_MAX_TENSORS] = {
    [BWD(dx)] = TR_ROWS_BLOCK,
    [BWD(dbias)] = TR_ROWS_DIRECT,
    [BWD(dout)] = TR_ROWS_BLOCK,
    [BWD(h)] = TR_ROWS_BLOCK,
};

static int bwd_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t I, void *scratch)
{
    tr_k_bias_gelu_bwd_f32(p[BWD(dx)], p[BWD(dbias)], p[BWD(dout)], p[BWD(h)], nr, I, gelu_kind(c), scratch);
    return TR_OK;
}

int tr_cpu_bias_gelu_backward(tr_ctx *ctx, tr_op_call *c)
{
    const tr_op_desc *d = &tr_opd_bias_gelu_backward;
    const int64_t N = c->dim[0], I = c->dim[1];
    void *scratch = NULL;
    int rc;
    if (N == 0 || I == 0) return TR_OK;
    if (c->bias_gelu_backward.dbias) {
        const int64_t step = tr_stage_rows_step(d, c, bwd_layout, N, I);
        if ((rc = tr_stage_scratch(ctx, sizeof(float) * (size_t)tr_k_bias_gelu_bwd_scratch(step, I), &scratch)))
            return rc;
    }
    rc = tr_stage_rows(ctx, d, c, bwd_layout, N, I, bwd_rows, scratch);
    tr_stage_scratch_free(ctx, scratch);
    return rc;
}
