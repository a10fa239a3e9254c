/* rotary_cpu.c — the CPU slots of rotary and rotary_backward over kernels/cpu/rotary.c: a row
 * is one position's H*D elements, its position the row's index mod T. f32 tensors run in one
 * kernel call; half ones (rows of at most HALF_BLOCK) in blocks of rows through each thread's
 * stack (tr_stage_stack_blocks: one pass over memory), the positions' cos and sin made once per
 * call; longer rows through the row-block staging loop (stage_rows.h). Every path applies the
 * same angles to the same converted values: the same bits. The shape check left B, T, H, D in
 * call->dim. */
#include "ops_nn.h"
#include "cpu_slot.h"
#include "cpu/rotary.h"

enum { HALF_BLOCK = 8192 }; /* floats of each stack buffer of the half path */

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

/* Rows [r0, r0 + nr) of half tensors (t[0] out, t[1] in) through the thread's stack; table:
 * the positions' cos and sin (tr_k_rotary_table_f32). */
static void half_block(const tr_op_call *c, int64_t r0, int64_t nr, const float *table, const float *unused)
{
    const tr_tensor *out = c->t[0], *x = c->t[1];
    const int64_t C = c->dim[2] * c->dim[3];
    float X[HALF_BLOCK];
    tr_convert(X, TR_F32, tr_stage_elem(x, r0 * C), x->dtype, (size_t)(nr * C));
    tr_k_rotary_rows_f32(X, X, table, r0, nr, c->dim[1], c->dim[2], c->dim[3]);
    tr_convert(tr_stage_elem(out, r0 * C), out->dtype, X, TR_F32, (size_t)(nr * C));
}

/* inverse: rotary_backward (the inverse rotation), whose rows are fn = rows_bwd. */
static int run(tr_ctx *ctx, tr_op_call *c, const tr_op_desc *d, tr_rows_fn fn, int inverse)
{
    const int64_t N = c->dim[0] * c->dim[1], T = c->dim[1], D = c->dim[3], C = c->dim[2] * D;
    if (N == 0 || C == 0) return TR_OK;
    if (C <= HALF_BLOCK && (c->t[0]->dtype != TR_F32 || c->t[1]->dtype != TR_F32)) {
        void *table = NULL;
        int rc = tr_stage_scratch(ctx, (size_t)(T * D) * sizeof(float), &table);
        if (rc) return rc;
        tr_k_rotary_table_f32(table, T, D, c->f[0], inverse);
        tr_stage_stack_blocks(c, N, HALF_BLOCK / C, N * C, half_block, table, NULL);
        tr_stage_scratch_free(ctx, table);
        return TR_OK;
    }
    return tr_stage_rows(ctx, d, c, layout, N, C, fn, NULL);
}

TR_CPU_SLOT_BY(rotary, run, c, &tr_opd_rotary, rows_fwd, 0)
TR_CPU_SLOT_BY(rotary_backward, run, c, &tr_opd_rotary_backward, rows_bwd, 1)
