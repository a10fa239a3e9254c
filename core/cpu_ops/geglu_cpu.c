/* geglu_cpu.c — the CPU slots of geglu and geglu_backward over kernels/cpu/geglu.c, through the
 * row-block staging loop (stage_rows.h): a row is 2I elements of h and dh, I of out and dout.
 * The shape check left N and I in call->dim. */
#include "ops_nn.h"
#include "cpu_slot.h"
#include "cpu/geglu.h"
#include "cpu/activation.h"

#define FWD(name) TR_ARGI(geglu, name)
#define BWD(name) TR_ARGI(geglu_backward, name)

static int gelu_kind(const tr_op_call *c)
{
    return c->i[0] == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF;
}

static const unsigned char fwd_layout[TR_OP_MAX_TENSORS] = {
    [FWD(out)] = TR_ROWS_BLOCK,
    [FWD(h)] = TR_ROWS_BLOCK,
};

static int fwd_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t I, void *work)
{
    tr_k_geglu_fwd_f32(p[FWD(out)], p[FWD(h)], nr, I, gelu_kind(c));
    return TR_OK;
}

int tr_cpu_geglu(tr_ctx *ctx, tr_op_call *c)
{
    if (c->dim[0] == 0 || c->dim[1] == 0) return TR_OK;
    return tr_stage_rows(ctx, &tr_opd_geglu, c, fwd_layout, c->dim[0], c->dim[1], fwd_rows, NULL);
}

static const unsigned char bwd_layout[TR_OP_MAX_TENSORS] = {
    [BWD(dh)] = TR_ROWS_BLOCK,
    [BWD(dout)] = TR_ROWS_BLOCK,
    [BWD(h)] = TR_ROWS_BLOCK,
};

static int bwd_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t I, void *work)
{
    tr_k_geglu_bwd_f32(p[BWD(dh)], p[BWD(dout)], p[BWD(h)], nr, I, gelu_kind(c));
    return TR_OK;
}

int tr_cpu_geglu_backward(tr_ctx *ctx, tr_op_call *c)
{
    if (c->dim[0] == 0 || c->dim[1] == 0) return TR_OK;
    return tr_stage_rows(ctx, &tr_opd_geglu_backward, c, bwd_layout, c->dim[0], c->dim[1], bwd_rows, NULL);
}
