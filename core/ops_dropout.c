/* ops_dropout.c — tensor-level dropout from the keyed counter-based RNG (core/rng.h).
 * Nothing is stored between forward and backward: each chunk of elements regenerates its
 * keep bits from (key, offset + index), so the forward, the backward and a checkpoint
 * recomputation see the same mask, on any number of threads. Works in chunks with
 * stack buffers: no workspace, any float dtype in and out. */
#include "ops_elem.h"

#include "cpu/dropout.h"
#include "ops_elem_common.h"

#include <string.h>

enum { CHUNK = 4096 };

/* out = in * keep / (1 - p), chunk by chunk (the forward and the backward). */
static int apply(tr_ctx *ctx, const char *op, tr_tensor *out, const tr_tensor *in, const char *in_name, float p,
                 const tr_rng_key *key, uint64_t offset)
{
    int rc, device = in ? in->device : TR_CPU;
    if ((rc = tr_elem_want_float(ctx, op, in_name, in, device)) ||
        (rc = tr_elem_want_float(ctx, op, in_name[0] == 'x' ? "out" : "dx", out, device)) ||
        (rc = tr_elem_want_numel(ctx, op, in_name[0] == 'x' ? "out" : "dx", out, in->numel,
                                 "the input's number of elements")))
        return rc;
    if (!(p >= 0 && p <= 1))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: p = %g; the dropout probability must be in [0, 1]", op,
                       (double)p);
    if (!key && p > 0) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: key is NULL; pass the rng key", op);
    switch (device) {
    case TR_CPU: {
        int64_t n = in->numel, nchunks = (n + CHUNK - 1) / CHUNK;
        size_t os = tr_dtype_size(out->dtype), is = tr_dtype_size(in->dtype);
        if (p == 0) {
            if (out->data != in->data) tr_elem_convert_parallel(out->data, out->dtype, in->data, in->dtype, (size_t)n);
            return TR_OK;
        }
        float scale = p < 1 ? 1 / (1 - p) : 0;
#pragma omp parallel for if (n > 65536)
        for (int64_t c = 0; c < nchunks; c++) {
            float buf[CHUNK];
            uint8_t keep[CHUNK];
            int64_t start = c * CHUNK, len = n - start < CHUNK ? n - start : CHUNK;
            tr_convert(buf, TR_F32, (const char *)in->data + start * is, in->dtype, (size_t)len);
            if (p < 1) tr_dropout_mask_bits(keep, (size_t)len, p, *key, offset + (uint64_t)start);
            else memset(keep, 0, (size_t)len);
            tr_k_dropout_fwd_f32(buf, buf, keep, scale, len);
            tr_convert((char *)out->data + start * os, out->dtype, buf, TR_F32, (size_t)len);
        }
        return TR_OK;
    }
    default:
        return tr_elem_no_device(ctx, op, device);
    }
}

int tr_op_dropout(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float p, const tr_rng_key *key, uint64_t offset)
{
    return apply(ctx, "dropout", out, x, "x", p, key, offset);
}

int tr_op_dropout_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, float p, const tr_rng_key *key,
                           uint64_t offset)
{
    return apply(ctx, "dropout_backward", dx, dout, "dout", p, key, offset);
}
