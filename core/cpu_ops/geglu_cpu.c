/* geglu_cpu.c — the CPU slots of geglu and geglu_backward over kernels/cpu/geglu.c: a row is 2I
 * elements of h and dh, I of out and dout. f32 tensors run in one kernel call; half ones (rows
 * of 2I <= HALF_BLOCK) in blocks of rows through each thread's stack (tr_stage_stack_blocks:
 * one pass over memory), longer rows through the row-block staging loop (stage_rows.h). Every
 * path runs the f32 kernel on the same converted values: the same bits. The shape check left
 * N and I in call->dim. */
#include "ops_nn.h"
#include "cpu_slot.h"
#include "cpu/geglu.h"
#include "cpu/activation.h"

enum { HALF_BLOCK = 8192 }; /* floats of each stack buffer of the half path */

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

/* Rows [r0, r0 + nr) of half tensors through the thread's stack. */
static void fwd_half_block(const tr_op_call *c, int64_t r0, int64_t nr, const float *W, const float *Bi)
{
    const tr_args_geglu *a = &c->geglu;
    const int64_t I = c->dim[1];
    float H[HALF_BLOCK], Y[HALF_BLOCK / 2];
    tr_convert(H, TR_F32, tr_stage_elem(a->h, r0 * 2 * I), a->h->dtype, (size_t)(nr * 2 * I));
    tr_k_geglu_fwd_f32(Y, H, nr, I, gelu_kind(c));
    tr_convert(tr_stage_elem(a->out, r0 * I), a->out->dtype, Y, TR_F32, (size_t)(nr * I));
}

/* Whether the half path takes the call: a half tensor among ts, rows of 2I that fit a block. */
static int half_path(const tr_op_call *c, const tr_tensor *const *ts, int n)
{
    if (2 * c->dim[1] > HALF_BLOCK) return 0;
    for (int i = 0; i < n; i++)
        if (ts[i]->dtype != TR_F32) return 1;
    return 0;
}

int tr_cpu_geglu(tr_ctx *ctx, tr_op_call *c)
{
    const int64_t N = c->dim[0], I = c->dim[1];
    if (N == 0 || I == 0) return TR_OK;
    const tr_tensor *ts[2] = { c->geglu.out, c->geglu.h };
    if (half_path(c, ts, 2)) {
        tr_stage_stack_blocks(c, N, HALF_BLOCK / (2 * I), N * I, fwd_half_block, NULL, NULL);
        return TR_OK;
    }
    return tr_stage_rows(ctx, &tr_opd_geglu, c, fwd_layout, N, I, fwd_rows, NULL);
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

/* dh of rows [r0, r0 + nr) of half tensors through the thread's stack; dh may be h (the in-place
 * op): the block's h is read before its dh is written, and blocks are disjoint. */
static void bwd_half_block(const tr_op_call *c, int64_t r0, int64_t nr, const float *W, const float *Bi)
{
    const tr_args_geglu_backward *a = &c->geglu_backward;
    const int64_t I = c->dim[1];
    float D[HALF_BLOCK / 2], H[HALF_BLOCK], DH[HALF_BLOCK];
    tr_convert(D, TR_F32, tr_stage_elem(a->dout, r0 * I), a->dout->dtype, (size_t)(nr * I));
    tr_convert(H, TR_F32, tr_stage_elem(a->h, r0 * 2 * I), a->h->dtype, (size_t)(nr * 2 * I));
    tr_k_geglu_bwd_f32(DH, D, H, nr, I, gelu_kind(c));
    tr_convert(tr_stage_elem(a->dh, r0 * 2 * I), a->dh->dtype, DH, TR_F32, (size_t)(nr * 2 * I));
}

int tr_cpu_geglu_backward(tr_ctx *ctx, tr_op_call *c)
{
    const int64_t N = c->dim[0], I = c->dim[1];
    if (N == 0 || I == 0) return TR_OK;
    const tr_tensor *ts[3] = { c->geglu_backward.dh, c->geglu_backward.dout, c->geglu_backward.h };
    if (half_path(c, ts, 3)) {
        tr_stage_stack_blocks(c, N, HALF_BLOCK / (2 * I), N * I, bwd_half_block, NULL, NULL);
        return TR_OK;
    }
    return tr_stage_rows(ctx, &tr_opd_geglu_backward, c, bwd_layout, N, I, bwd_rows, NULL);
}
