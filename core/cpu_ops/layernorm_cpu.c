/* layernorm_cpu.c — the CPU slots of layernorm and layernorm_backward over
 * kernels/cpu/layernorm.c, through the row-block staging loop (stage_rows.h): half
 * activations are staged to f32 in blocks of rows; mean, rstd and the parameter gradients are
 * f32; dweight/dbias accumulate across blocks through the kernel's +=. The shape check left
 * N and C in call->dim. */
#include "cpu_slot.h"
#include "cpu/layernorm.h"

#define FWD(name) TR_ARGI(layernorm, name)
#define BWD(name) TR_ARGI(layernorm_backward, name)

static const unsigned char fwd_layout[TR_OP_MAX_TENSORS] = {
    [FWD(out)] = TR_ROWS_BLOCK, [FWD(mean)] = TR_ROWS_ONE,     [FWD(rstd)] = TR_ROWS_ONE,
    [FWD(x)] = TR_ROWS_BLOCK,   [FWD(weight)] = TR_ROWS_WHOLE, [FWD(bias)] = TR_ROWS_WHOLE,
};

static int fwd_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *work)
{
    tr_k_layernorm_fwd_f32(p[FWD(out)], p[FWD(mean)], p[FWD(rstd)], p[FWD(x)], p[FWD(weight)], p[FWD(bias)], nr, C,
                           c->f[0]);
    return TR_OK;
}

int tr_cpu_layernorm(tr_ctx *ctx, tr_op_call *c)
{
    return tr_stage_rows(ctx, &tr_opd_layernorm, c, fwd_layout, c->dim[0], c->dim[1], fwd_rows, NULL);
}

static const unsigned char bwd_layout[TR_OP_MAX_TENSORS] = {
    [BWD(dx)] = TR_ROWS_BLOCK,   [BWD(dweight)] = TR_ROWS_DIRECT, [BWD(dbias)] = TR_ROWS_DIRECT,
    [BWD(dout)] = TR_ROWS_BLOCK, [BWD(x)] = TR_ROWS_BLOCK,        [BWD(weight)] = TR_ROWS_WHOLE,
    [BWD(mean)] = TR_ROWS_ONE,   [BWD(rstd)] = TR_ROWS_ONE,
};

static int bwd_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *work)
{
    tr_k_layernorm_bwd_f32(p[BWD(dx)], p[BWD(dweight)], p[BWD(dbias)], p[BWD(dout)], p[BWD(x)], p[BWD(weight)],
                           p[BWD(mean)], p[BWD(rstd)], nr, C);
    return TR_OK;
}

int tr_cpu_layernorm_backward(tr_ctx *ctx, tr_op_call *c)
{
    const tr_args_layernorm_backward *a = &c->layernorm_backward;
    if (!a->dx && !a->dweight && !a->dbias) return TR_OK;
    return tr_stage_rows(ctx, &tr_opd_layernorm_backward, c, bwd_layout, c->dim[0], c->dim[1], bwd_rows, NULL);
}
