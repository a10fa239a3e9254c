/* layernorm_cpu.c — the CPU slots of layernorm and layernorm_backward over
 * kernels/cpu/layernorm.c. f32 activations run in one kernel call; half ones (rows of at most
 * HALF_BLOCK) in blocks of rows in parallel, each converted into its thread's stack buffers
 * and written back from them (one pass over memory, where staging blocks of 4 MiB through
 * workspace made three); longer rows through the row-block staging loop (stage_rows.h). mean,
 * rstd and the parameter gradients are f32; dweight/dbias accumulate across the staging loop's
 * blocks through the kernel's +=, the same blocks whichever path computes dx (their bits).
 * The shape check left N and C in call->dim. */
#include "cpu_slot.h"
#include "cpu/layernorm.h"

enum { HALF_BLOCK = 8192 };

/* fn over the N rows of C in blocks of at most HALF_BLOCK elements (whole row groups of the
 * kernel), in parallel. */
static void half_blocks(const tr_op_call *c, tr_stack_block_fn fn, const float *W, const float *Bi)
{
    const int64_t N = c->dim[0], C = c->dim[1];
    tr_stage_stack_blocks(c, N, tr_k_layernorm_block_rows(HALF_BLOCK, C), N * C, fn, W, Bi);
}

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

/* Rows [r0, r0 + nr) of half activations through the thread's stack. */
static void fwd_half_block(const tr_op_call *c, int64_t r0, int64_t nr, const float *W, const float *Bi)
{
    const tr_args_layernorm *a = &c->layernorm;
    const int64_t C = c->dim[1], off = r0 * C, n = nr * C;
    float X[HALF_BLOCK], Y[HALF_BLOCK];
    tr_convert(X, TR_F32, tr_stage_elem(a->x, off), a->x->dtype, (size_t)n);
    tr_k_layernorm_fwd_f32(Y, (float *)a->mean->data + r0, (float *)a->rstd->data + r0, X, W, Bi, nr, C, c->f[0]);
    tr_convert(tr_stage_elem(a->out, off), a->out->dtype, Y, TR_F32, (size_t)n);
}

/* The half path reads the activations itself: the staging loop stages the weights. */
static const unsigned char fwd_params[TR_OP_MAX_TENSORS] = {[FWD(weight)] = TR_ROWS_WHOLE, [FWD(bias)] = TR_ROWS_WHOLE};

static int fwd_half_whole(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused, void *work)
{
    half_blocks(c, fwd_half_block, p[FWD(weight)], p[FWD(bias)]);
    return TR_OK;
}

int tr_cpu_layernorm(tr_ctx *ctx, tr_op_call *c)
{
    const tr_args_layernorm *a = &c->layernorm;
    if (c->dim[0] > 0 && c->dim[1] > 0 && c->dim[1] <= HALF_BLOCK && (a->x->dtype != TR_F32 || a->out->dtype != TR_F32))
        return tr_stage_rows(ctx, &tr_opd_layernorm, c, fwd_params, 1, 1, fwd_half_whole, NULL);
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

/* dx of rows [r0, r0 + nr) of half activations through the thread's stack. */
static void bwd_half_block(const tr_op_call *c, int64_t r0, int64_t nr, const float *W, const float *unused)
{
    const tr_args_layernorm_backward *a = &c->layernorm_backward;
    const int64_t C = c->dim[1], off = r0 * C, n = nr * C;
    float D[HALF_BLOCK], X[HALF_BLOCK], DX[HALF_BLOCK];
    tr_convert(D, TR_F32, tr_stage_elem(a->dout, off), a->dout->dtype, (size_t)n);
    tr_convert(X, TR_F32, tr_stage_elem(a->x, off), a->x->dtype, (size_t)n);
    tr_k_layernorm_bwd_f32(DX, NULL, NULL, D, X, W, (const float *)a->mean->data + r0,
                           (const float *)a->rstd->data + r0, nr, C);
    tr_convert(tr_stage_elem(a->dx, off), a->dx->dtype, DX, TR_F32, (size_t)n);
}

static const unsigned char bwd_params[TR_OP_MAX_TENSORS] = {[BWD(weight)] = TR_ROWS_WHOLE};

static int bwd_half_whole(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused, void *work)
{
    half_blocks(c, bwd_half_block, p[BWD(weight)], NULL);
    return TR_OK;
}

/* dweight, dbias (+=) alone, over the staging loop's blocks. */
static const unsigned char dwb_layout[TR_OP_MAX_TENSORS] = {
    [BWD(dweight)] = TR_ROWS_DIRECT, [BWD(dbias)] = TR_ROWS_DIRECT, [BWD(dout)] = TR_ROWS_BLOCK,
    [BWD(x)] = TR_ROWS_BLOCK,        [BWD(weight)] = TR_ROWS_WHOLE, [BWD(mean)] = TR_ROWS_ONE,
    [BWD(rstd)] = TR_ROWS_ONE,
};

int tr_cpu_layernorm_backward(tr_ctx *ctx, tr_op_call *c)
{
    const tr_args_layernorm_backward *a = &c->layernorm_backward;
    const tr_op_desc *d = &tr_opd_layernorm_backward;
    const int64_t N = c->dim[0], C = c->dim[1];
    if (!a->dx && !a->dweight && !a->dbias) return TR_OK;
    if (N > 0 && C > 0 && C <= HALF_BLOCK && a->dx &&
        (a->dx->dtype != TR_F32 || a->dout->dtype != TR_F32 || a->x->dtype != TR_F32)) {
        int rc = tr_stage_rows(ctx, d, c, bwd_params, 1, 1, bwd_half_whole, NULL);
        if (rc == TR_OK && (a->dweight || a->dbias))
            rc = tr_stage_rows(ctx, d, c, dwb_layout, N, C, bwd_rows, NULL);
        return rc;
    }
    return tr_stage_rows(ctx, d, c, bwd_layout, N, C, bwd_rows, NULL);
}
