/* pair_features_cpu.c — the CPU slots (checks and wrappers: core/ops/pair_features.c): tensor-level column-block copies
 * and |a - b| (core/ops/ops_pair_features.h) over the kernels in kernels/cpu/pair_features.c. Feature matrices are
 * small (a batch of embeddings), so each operand is viewed whole as f32 (one workspace copy for a half tensor, returned
 * before the op returns); a plain column copy between tensors of one dtype moves bytes instead. */
#include "ops_pair_features.h"
#include "cpu_slot.h"
#include "cpu/pair_features.h"
#include <string.h>

/* Each operand whole (one row for the staging loop). */
static const unsigned char whole[TR_OP_MAX_TENSORS] = {TR_ROWS_WHOLE, TR_ROWS_WHOLE, TR_ROWS_WHOLE, TR_ROWS_WHOLE,
                                                       TR_ROWS_WHOLE};

/* ------------------------------------------------------------ column blocks */

/* dst (dst_col, src_col, ncols, accumulate: call->i) from src. */
static int copy_cols_whole(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused, void *work)
{
    int64_t dN, dC, sN, sC;
    tr_op_rows(c->copy_cols.dst, &dN, &dC);
    tr_op_rows(c->copy_cols.src, &sN, &sC);
    tr_k_copy_cols_fwd_f32(p[TR_ARGI(copy_cols, dst)], p[TR_ARGI(copy_cols, src)], dN, dC, c->i[0], sC, c->i[1],
                           c->i[2], (int)c->i[3]);
    return TR_OK;
}

/* dst's columns from src's as bytes, row by row: a copy (no accumulation) between tensors of
 * one dtype needs no f32 staging, which for half tensors converted both whole, there and
 * back, for each block of columns (q, k and v out of ModernBERT's [N, 3C], and their
 * gradients into it). */
static void copy_cols_bytes(const tr_op_call *c)
{
    const tr_tensor *dst = c->copy_cols.dst, *src = c->copy_cols.src;
    int64_t dN, dC, sN, sC;
    tr_op_rows(dst, &dN, &dC);
    tr_op_rows(src, &sN, &sC);
    const size_t es = tr_dtype_size(dst->dtype), row = (size_t)c->i[2] * es;
    char *d0 = (char *)dst->data + (size_t)c->i[0] * es;
    const char *s0 = (const char *)src->data + (size_t)c->i[1] * es;
#pragma omp parallel for if (dN * c->i[2] > 65536)
    for (int64_t r = 0; r < dN; r++) memcpy(d0 + (size_t)r * (size_t)dC * es, s0 + (size_t)r * (size_t)sC * es, row);
}

/* ------------------------------------------------------------ |a - b| */

static int abs_diff_whole(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused, void *work)
{
    tr_k_abs_diff_fwd_f32(p[TR_ARGI(abs_diff, out)], p[TR_ARGI(abs_diff, a)], p[TR_ARGI(abs_diff, b)],
                          c->abs_diff.a->numel);
    return TR_OK;
}

static int abs_diff_backward_whole(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused,
                                   void *work)
{
#define B(name) p[TR_ARGI(abs_diff_backward, name)]
    tr_k_abs_diff_bwd_f32(B(da), B(db), B(dout), B(a), B(b), c->abs_diff_backward.dout->numel);
#undef B
    return TR_OK;
}

static int whole_run(tr_ctx *ctx, const tr_op_desc *d, tr_op_call *c, tr_rows_fn fn)
{
    return tr_stage_rows(ctx, d, c, whole, 1, 1, fn, NULL);
}

/* ------------------------------------------------------------ the slots */

int tr_cpu_copy_cols(tr_ctx *ctx, tr_op_call *c)
{
    if (!c->i[3] && c->copy_cols.dst->dtype == c->copy_cols.src->dtype) {
        copy_cols_bytes(c);
        return TR_OK;
    }
    return whole_run(ctx, &tr_opd_copy_cols, c, copy_cols_whole);
}
TR_CPU_SLOT_BY(abs_diff, whole_run, &tr_opd_abs_diff, c, abs_diff_whole)
TR_CPU_SLOT_BY(abs_diff_backward, whole_run, &tr_opd_abs_diff_backward, c, abs_diff_backward_whole)
