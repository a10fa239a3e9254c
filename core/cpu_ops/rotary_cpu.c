/* rotary_cpu.c — the CPU slots of rotary and rotary_backward over kernels/cpu/rotary.c,
 * through the row-block staging loop (stage_rows.h): a row is one position's H*D elements,
 * the kernel told the first row of each block (its position is the row's index mod T). The
 * shape check left B, T, H, D in call->dim. */
#include "ops_nn.h"
#include "cpu_slot.h"
#include "cpu/rotary.h"

static const unsigned char layout[TR_OP_MAX_TENSORS] = {TR_ROWS_BLOCK, TR_ROWS_BLOCK};

static int rows_fwd(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *work)
{
    tr_k_rotary_f32(p[0], p[1], r0, nr, c->dim[1], c->dim[2], c->dim[3], c->f[0], 0);
    return TR_OK;
}

static int rows_bwd(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *work)
{
    tr_k_rotary_f32(p[0], p[1], r0, nr, c->dim[1], c->dim[2], c->dim[3], c->f[0], 1);
    return TR_OK;
}

static int run(tr_ctx *ctx, tr_op_call *c, const tr_op_desc *d, tr_rows_fn fn)
{
    const int64_t N = c->dim[0] * c->dim[1], C = c->dim[2] * c->dim[3];
    if (N == 0 || C == 0) return TR_OK;
    return tr_stage_rows(ctx, d, c, layout, N, C, fn, NULL);
}

TR_CPU_SLOT_BY(rotary, run, c, &tr_opd_rotary, rows_fwd)
TR_CPU_SLOT_BY(rotary_backward, run, c, &tr_opd_rotary_backward, rows_bwd)
