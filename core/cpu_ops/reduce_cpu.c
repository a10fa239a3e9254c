/* reduce_cpu.c — the CPU slots (checks and wrappers: core/ops/reduce.c): tensor-level sums and means, the global L2
 * norm over a list of tensors (gradient clipping) and scale-and-check-finite over a list (the loss scaler's unscale).
 * Inputs of any float dtype are read in chunks converted to f32 on the stack; each chunk
 * is summed pairwise in f32 and chunk totals are added in order in f64, so results do not
 * depend on the thread count and 1e6 bf16 elements sum to f32 accuracy. */
#include "ops_reduce.h"
#include "cpu_slot.h"
#include "cpu/elementwise.h"
#include "cpu/reduce.h"
#include <math.h>
#include <stdio.h>

enum { CHUNK = 4096 };

/* Sum (squares = 0) or sum of squares (squares = 1) of every element of t. */
static double chunked_sum(const tr_tensor *t, int squares)
{
    int64_t n = t->numel, nchunks = (n + CHUNK - 1) / CHUNK;
    size_t es = tr_dtype_size(t->dtype);
    double total = 0;
    /* groups of 1024 chunks (4 Mi elements): parallel inside a group, chunk totals
     * summed in order after it */
    for (int64_t b0 = 0; b0 < nchunks; b0 += 1024) {
        double part[1024];
        int64_t nb = nchunks - b0 < 1024 ? nchunks - b0 : 1024;
#pragma omp parallel for if (n > 65536)
        for (int64_t c = 0; c < nb; c++) {
            float buf[CHUNK];
            int64_t start = (b0 + c) * CHUNK, len = n - start < CHUNK ? n - start : CHUNK;
            const float *p = (const float *)t->data + start;
            if (t->dtype != TR_F32) {
                tr_convert(buf, TR_F32, (const char *)t->data + start * (int64_t)es, t->dtype, (size_t)len);
                p = buf;
            }
            part[c] = squares ? tr_k_sumsq_all_fwd_f32(p, len) : tr_k_sum_all_fwd_f32(p, len);
        }
        for (int64_t c = 0; c < nb; c++) total += part[c];
    }
    return total;
}

/* Over the last dim: x in blocks of rows of C, out one element a row. */
static const unsigned char lastdim_layout[TR_OP_MAX_TENSORS] = {TR_ROWS_BLOCK, TR_ROWS_BLOCK};

static int lastdim_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *mean)
{
    tr_k_sum_lastdim_fwd_f32(p[0], p[1], nr, C);
    if (*(const int *)mean) tr_k_scale_fwd_f32(p[0], p[0], C ? 1.0f / (float)C : NAN, nr);
    return TR_OK;
}

/* sum and mean (their arguments alike: out, x). */
static int reduce_run(tr_ctx *ctx, const tr_op_desc *d, tr_op_call *c, int mean)
{
    const tr_tensor *out = c->sum.out, *x = c->sum.x;
    if (!c->i[0]) {
        double s = chunked_sum(x, 0);
        float v = (float)(mean ? (x->numel ? s / (double)x->numel : NAN) : s);
        tr_convert(out->data, out->dtype, &v, TR_F32, 1);
        return TR_OK;
    }
    int64_t N, C;
    tr_op_rows(x, &N, &C);
    return tr_stage_rows_by(ctx, d, c, lastdim_layout, N, C, tr_stage_block_rows(C), lastdim_rows, &mean);
}

static int global_norm_run(tr_ctx *ctx, float *out, tr_tensor **ts, int n)
{
    {
        double ss = 0;
        for (int i = 0; i < n; i++) ss += chunked_sum(ts[i], 1);
        *out = (float)sqrt(ss);
        return TR_OK;
    }
}

static int scale_check_finite_run(tr_ctx *ctx, int *found_inf, tr_tensor **ts, int n, float scale)
{
    {
        int bad = 0;
        for (int i = 0; i < n; i++) {
            tr_tensor *t = ts[i];
            if (t->dtype == TR_F32) {
                bad |= tr_k_scale_check_finite_fwd_f32(t->data, t->numel, scale);
                continue;
            }
            int64_t nchunks = (t->numel + CHUNK - 1) / CHUNK;
            size_t es = tr_dtype_size(t->dtype);
#pragma omp parallel for reduction(| : bad) if (t->numel > 65536)
            for (int64_t c = 0; c < nchunks; c++) {
                float buf[CHUNK];
                int64_t start = c * CHUNK, len = t->numel - start < CHUNK ? t->numel - start : CHUNK;
                char *p = (char *)t->data + start * (int64_t)es;
                tr_convert(buf, TR_F32, p, t->dtype, (size_t)len);
                bad |= tr_k_scale_check_finite_fwd_f32(buf, len, scale);
                tr_convert(p, t->dtype, buf, TR_F32, (size_t)len);
                /* a finite f32 may still overflow the half dtype: check what was stored */
                tr_convert(buf, TR_F32, p, t->dtype, (size_t)len);
                for (int64_t k = 0; k < len; k++) bad |= !isfinite(buf[k]);
            }
        }
        *found_inf = bad;
        return TR_OK;
    }
}

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(sum, reduce_run, &tr_opd_sum, c, 0)
TR_CPU_SLOT_BY(mean, reduce_run, &tr_opd_mean, c, 1)
TR_CPU_SLOT_BY(global_norm, global_norm_run, c->res, c->list, c->nlist)
TR_CPU_SLOT_BY(scale_check_finite, scale_check_finite_run, c->res, c->list, c->nlist, c->f[0])
