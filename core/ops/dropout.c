/* dropout.c — tensor-level dropout from the keyed counter-based RNG (core/base/rng.h).
 * Nothing is stored between forward and backward: each chunk of elements regenerates its
 * keep bits from (key, offset + index), so the forward, the backward and a checkpoint
 * recomputation see the same mask, on any number of threads. Works in chunks with
 * stack buffers: no workspace, any float dtype in and out. */
#include "ops_elem.h"

#include "cpu/dropout.h"
#include "op_stage.h"
#include "op_cuda.h"
#include "op_table.h"

#include <string.h>

enum { CHUNK = 4096 };

/* out = in * keep / (1 - p), chunk by chunk (the forward and the backward). */
static int apply(tr_ctx *ctx, int run, const char *op, const tr_tensor *out, const tr_tensor *in, const char *in_name, float p,
                 const tr_rng_key *key, uint64_t offset)
{
    int rc;
    if ((rc = tr_op_want_numel(ctx, op, in_name[0] == 'x' ? "out" : "dx", out, in->numel,
                                 "the input's number of elements")))
        return rc;
    if (!(p >= 0 && p <= 1))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: p = %g; the dropout probability must be in [0, 1]", op,
                       (double)p);
    if (!key && p > 0) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: key is NULL; pass the rng key", op);
    if (!run) return TR_OK;
    {
        int64_t n = in->numel, nchunks = (n + CHUNK - 1) / CHUNK;
        size_t os = tr_dtype_size(out->dtype), is = tr_dtype_size(in->dtype);
        if (p == 0) {
            if (out->data != in->data) tr_stage_convert(out->data, out->dtype, in->data, in->dtype, (size_t)n);
            return TR_OK;
        }
        float scale = p < 1 ? 1 / (1 - p) : 0;
        const int f32 = in->dtype == TR_F32 && out->dtype == TR_F32;
#pragma omp parallel for if (n > 65536)
        for (int64_t c = 0; c < nchunks; c++) {
            float buf[CHUNK];
            uint32_t keep[CHUNK];   /* 32-bit masks: the apply loop vectorises at full width */
            int64_t start = c * CHUNK, len = n - start < CHUNK ? n - start : CHUNK;
            if (p < 1) tr_dropout_mask_words(keep, (size_t)len, p, *key, offset + (uint64_t)start);
            else memset(keep, 0, (size_t)len * sizeof keep[0]);
            if (f32) {   /* f32 in and out: no staging copies through buf */
                tr_k_dropout_fwd_f32((float *)out->data + start, (const float *)in->data + start, keep, scale, len);
                continue;
            }
            tr_convert(buf, TR_F32, (const char *)in->data + start * is, in->dtype, (size_t)len);
            tr_k_dropout_fwd_f32(buf, buf, keep, scale, len);
            tr_convert((char *)out->data + start * os, out->dtype, buf, TR_F32, (size_t)len);
        }
        return TR_OK;
    }
}

static int dropout_impl(tr_ctx *ctx, int run, const tr_tensor *out, const tr_tensor *x, float p, const tr_rng_key *key, uint64_t offset)
{
    return apply(ctx, run, "dropout", out, x, "x", p, key, offset);
}

static int dropout_backward_impl(tr_ctx *ctx, int run, const tr_tensor *dx, const tr_tensor *dout, float p, const tr_rng_key *key,
                           uint64_t offset)
{
    return apply(ctx, run, "dropout_backward", dx, dout, "dout", p, key, offset);
}

/* ------------------------------------------------------------ the op table */

TR_OP_IMPL_SLOTS(dropout, c->t[0], c->t[1], c->f[0], c->p, c->u)
TR_OP_IMPL_SLOTS(dropout_backward, c->t[0], c->t[1], c->f[0], c->p, c->u)

const tr_op_desc tr_opd_dropout = {
    "dropout", 2, { { "out", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "x", TR_ARG_IN, TR_DT_FLOAT, 0 } },
    dropout_check, { dropout_cpu, TR_CUDA_SLOT(dropout) } };
const tr_op_desc tr_opd_dropout_backward = {
    "dropout_backward", 2, { { "dx", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "dout", TR_ARG_IN, TR_DT_FLOAT, 0 } },
    dropout_backward_check, { dropout_backward_cpu, TR_CUDA_SLOT(dropout_backward) } };

int tr_op_dropout(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float p, const tr_rng_key *key, uint64_t offset)
{
    tr_op_call c = { .t = { out, x }, .f = { p }, .p = key, .u = offset };
    return tr_op_run(ctx, &tr_opd_dropout, &c);
}

int tr_op_dropout_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, float p, const tr_rng_key *key,
                           uint64_t offset)
{
    tr_op_call c = { .t = { dx, dout }, .f = { p }, .p = key, .u = offset };
    return tr_op_run(ctx, &tr_opd_dropout_backward, &c);
}
