/* reduce.c — tensor-level sums and means, the global L2 norm over a list of tensors
 * (gradient clipping) and scale-and-check-finite over a list (the loss scaler's unscale).
 * Inputs of any float dtype are read in chunks converted to f32 on the stack; each chunk
 * is summed pairwise in f32 and chunk totals are added in order in f64, so results do not
 * depend on the thread count and 1e6 bf16 elements sum to f32 accuracy. */
#include "ops_elem.h"

#include "cpu/elementwise.h"
#include "cpu/reduce.h"
#include "op_stage.h"
#include "op_cuda.h"
#include "op_table.h"

#include <math.h>
#include <stdio.h>

enum { CHUNK = 4096 };

/* ------------------------------------------------------------ whole-tensor sums */

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

static int reduce(tr_ctx *ctx, int run, const char *op, const tr_tensor *out, const tr_tensor *x, int lastdim,
                  int mean)
{
    int rc;
    int64_t N, C;
    tr_op_rows(x, &N, &C);
    if ((rc = tr_op_want_numel(ctx, op, "out", out, lastdim ? N : 1,
                                 lastdim ? "x's elements / its last dimension" : "a scalar")))
        return rc;
    if (!run) return TR_OK;
    {
        if (!lastdim) {
            double s = chunked_sum(x, 0);
            float v = (float)(mean ? (x->numel ? s / (double)x->numel : NAN) : s);
            tr_convert(out->data, out->dtype, &v, TR_F32, 1);
            return TR_OK;
        }
        int64_t rows = tr_stage_block_rows(C);
        for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += rows) {
            int64_t nr = N - r0 < rows ? N - r0 : rows;
            tr_stage vx, vo = { 0 };
            if (!(rc = tr_stage_in(ctx, &vx, x, r0 * C, nr * C)) &&
                !(rc = tr_stage_out(ctx, &vo, out, r0, nr, 0))) {
                tr_k_sum_lastdim_fwd_f32(vo.p, vx.p, nr, C);
                if (mean) tr_k_scale_fwd_f32(vo.p, vo.p, C ? 1.0f / (float)C : NAN, nr);
                tr_stage_store(&vo, out, r0);
            }
            tr_stage_release(ctx, &vo);
            tr_stage_release(ctx, &vx);
        }
        return rc;
    }
}

static int sum_impl(tr_ctx *ctx, int run, const tr_tensor *out, const tr_tensor *x, int lastdim)
{
    return reduce(ctx, run, "sum", out, x, lastdim, 0);
}

static int mean_impl(tr_ctx *ctx, int run, const tr_tensor *out, const tr_tensor *x, int lastdim)
{
    return reduce(ctx, run, "mean", out, x, lastdim, 1);
}

/* ------------------------------------------------------------ lists of tensors */

/* The op table's rules for the tensors of a list: each non-NULL, float, on ts[0]'s device. */
static int check_list(tr_ctx *ctx, const char *op, tr_tensor **ts, int n)
{
    if (n < 0 || (n > 0 && !ts))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: the list of %d tensors is NULL or negative", op, n);
    for (int i = 0; i < n; i++) {
        if (!ts[i]) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: tensor %d is NULL; pass a tensor", op, i);
        if (ts[i]->device != ts[0]->device)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "%s: tensor %d is on another device than tensor 0; move every tensor of one op to one "
                           "device",
                           op, i);
        if (!tr_stage_is_float(ts[i]->dtype))
            return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: tensor %d has dtype %s but must be a floating dtype (f32, "
                           "bf16 or f16)", op, i, tr_dtype_name(ts[i]->dtype));
    }
    return TR_OK;
}

static int global_norm_impl(tr_ctx *ctx, int run, float *out, tr_tensor **ts, int n)
{
    int rc;
    if ((rc = check_list(ctx, "global_norm", ts, n))) return rc;
    if (!run) return TR_OK;
    {
        double ss = 0;
        for (int i = 0; i < n; i++) ss += chunked_sum(ts[i], 1);
        *out = (float)sqrt(ss);
        return TR_OK;
    }
}

static int scale_check_finite_impl(tr_ctx *ctx, int run, int *found_inf, tr_tensor **ts, int n, float scale)
{
    int rc;
    if ((rc = check_list(ctx, "scale_check_finite", ts, n))) return rc;
    if (!run) return TR_OK;
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

/* ------------------------------------------------------------ the op table */

TR_OP_IMPL_SLOTS(sum, c->t[0], c->t[1], (int)c->i[0])
TR_OP_IMPL_SLOTS(mean, c->t[0], c->t[1], (int)c->i[0])
TR_OP_IMPL_SLOTS(global_norm, c->res, c->list, c->nlist)
TR_OP_IMPL_SLOTS(scale_check_finite, c->res, c->list, c->nlist, c->f[0])

const tr_op_desc tr_opd_sum = {
    "sum", 2, { { "out", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "x", TR_ARG_IN, TR_DT_FLOAT, 0 } },
    sum_check, { sum_cpu, TR_CUDA_SLOT(sum) } };
const tr_op_desc tr_opd_mean = {
    "mean", 2, { { "out", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "x", TR_ARG_IN, TR_DT_FLOAT, 0 } },
    mean_check, { mean_cpu, TR_CUDA_SLOT(mean) } };
/* The list ops take their tensors as call->list (checked by check_list). */
const tr_op_desc tr_opd_global_norm = { "global_norm", 0, { { 0 } }, global_norm_check, { global_norm_cpu, TR_CUDA_SLOT(global_norm) } };
const tr_op_desc tr_opd_scale_check_finite = { "scale_check_finite", 0, { { 0 } }, scale_check_finite_check,
                                               { scale_check_finite_cpu, TR_CUDA_SLOT(scale_check_finite) } };

int tr_op_sum(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, int lastdim)
{
    tr_op_call c = { .t = { out, x }, .i = { lastdim } };
    return tr_op_run(ctx, &tr_opd_sum, &c);
}

int tr_op_mean(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, int lastdim)
{
    tr_op_call c = { .t = { out, x }, .i = { lastdim } };
    return tr_op_run(ctx, &tr_opd_mean, &c);
}

int tr_op_global_norm(tr_ctx *ctx, float *out, tr_tensor **ts, int n)
{
    tr_op_call c = { .res = out, .list = ts, .nlist = n };
    return tr_op_run(ctx, &tr_opd_global_norm, &c);
}

int tr_op_scale_check_finite(tr_ctx *ctx, int *found_inf, tr_tensor **ts, int n, float scale)
{
    tr_op_call c = { .res = found_inf, .list = ts, .nlist = n, .f = { scale } };
    return tr_op_run(ctx, &tr_opd_scale_check_finite, &c);
}
