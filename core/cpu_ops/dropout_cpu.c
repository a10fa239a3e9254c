/* dropout_cpu.c — the CPU slots (checks and wrappers: core/ops/dropout.c): tensor-level dropout from the keyed
 * counter-based RNG (core/base/rng.h). Nothing is stored between forward and backward: each chunk of elements
 * regenerates its keep bits from (key, offset + index), so the forward, the backward and a checkpoint recomputation see
 * the same mask, on any number of threads. Works in chunks with stack buffers: no workspace, any float dtype in and
 * out. */
#include "ops_dropout.h"
#include "cpu_slot.h"
#include "cpu/dropout.h"
#include <string.h>

enum { CHUNK = 4096 };

/* out = in * keep / (1 - p), chunk by chunk (the forward and the backward). */
static int apply_run(tr_ctx *ctx, const char *op, const tr_tensor *out, const tr_tensor *in, const char *in_name,
                     float p, const tr_rng_key *key, uint64_t offset)
{
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
            uint32_t keep[CHUNK]; /* 32-bit masks: the apply loop vectorises at full width */
            int64_t start = c * CHUNK, len = n - start < CHUNK ? n - start : CHUNK;
            if (p < 1)
                tr_dropout_mask_words(keep, (size_t)len, p, *key, offset + (uint64_t)start);
            else
                memset(keep, 0, (size_t)len * sizeof keep[0]);
            if (f32) { /* f32 in and out: no staging copies through buf */
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

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(dropout, apply_run, "dropout", c->dropout.out, c->dropout.x, "x", c->f[0], c->p, c->u)
TR_CPU_SLOT_BY(dropout_backward, apply_run, "dropout_backward", c->dropout_backward.dx, c->dropout_backward.dout,
               "dout", c->f[0], c->p, c->u)
