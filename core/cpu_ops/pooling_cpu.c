/* pooling_cpu.c — the CPU slots (checks and wrappers: core/ops/pooling.c): tensor-level masked pooling [B, T, C] -> [B,
 * C] over kernels/cpu/pooling.c. The mask (i32, i64 or float, or NULL for "all real") becomes an int32 workspace copy;
 * hidden and the outputs may be any float dtype and are processed in blocks of whole sequences. */
#include "ops_elem.h"
#include "cpu_slot.h"
#include "cpu/pooling.h"

/* *m32 = the mask as int32 in a workspace block (all ones when mask is NULL). */
static int load_mask(tr_ctx *ctx, const tr_tensor *mask, int64_t BT, int32_t **m32)
{
    int rc = tr_stage_scratch(ctx, (size_t)BT * sizeof(int32_t), (void **)m32);
    if (rc) return rc;
    if (!mask) {
        for (int64_t i = 0; i < BT; i++) (*m32)[i] = 1;
    } else if (mask->dtype == TR_I32 || mask->dtype == TR_I64) {
        tr_convert(*m32, TR_I32, mask->data, mask->dtype, (size_t)BT);
    } else {
        /* a float mask: any non-zero value is a real token (0.5 must not truncate to 0) */
        float f[256];
        for (int64_t s = 0; s < BT; s += 256) {
            int64_t len = BT - s < 256 ? BT - s : 256;
            tr_convert(f, TR_F32, (const char *)mask->data + s * tr_dtype_size(mask->dtype), mask->dtype, (size_t)len);
            for (int64_t i = 0; i < len; i++) (*m32)[s + i] = f[i] != 0;
        }
    }
    return TR_OK;
}

/* ------------------------------------------------------------ ops */

static int pool_run(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *hidden, const tr_tensor *mask, int mode)
{
    int rc;
    {
        int64_t B = hidden->shape[0], T = hidden->shape[1], C = hidden->shape[2];
        int32_t *m32;
        if ((rc = load_mask(ctx, mask, B * T, &m32))) return rc;
        int64_t bs = tr_stage_block_rows(T * C); /* sequences per block */
        for (int64_t b0 = 0; b0 < B && rc == TR_OK; b0 += bs) {
            int64_t nb = B - b0 < bs ? B - b0 : bs;
            tr_stage vh, vo = {0};
            if (!(rc = tr_stage_in(ctx, &vh, hidden, b0 * T * C, nb * T * C)) &&
                !(rc = tr_stage_out(ctx, &vo, out, b0 * C, nb * C, 0))) {
                tr_k_pool_fwd_f32(vo.p, vh.p, m32 + b0 * T, nb, T, C, mode);
                tr_stage_store(&vo, out, b0 * C);
            }
            tr_stage_release(ctx, &vo);
            tr_stage_release(ctx, &vh);
        }
        tr_stage_scratch_free(ctx, m32);
        return rc;
    }
}

static int pool_backward_run(tr_ctx *ctx, const tr_tensor *dhidden, const tr_tensor *dout, const tr_tensor *hidden,
                             const tr_tensor *mask, int mode)
{
    int rc;
    {
        int64_t B = hidden->shape[0], T = hidden->shape[1], C = hidden->shape[2];
        int32_t *m32;
        if ((rc = load_mask(ctx, mask, B * T, &m32))) return rc;
        int64_t bs = tr_stage_block_rows(T * C); /* sequences per block */
        for (int64_t b0 = 0; b0 < B && rc == TR_OK; b0 += bs) {
            int64_t nb = B - b0 < bs ? B - b0 : bs;
            tr_stage v[3] = {{0}}; /* hidden (max only reads it), dout, dhidden */
            int64_t s = b0 * T * C, len = nb * T * C;
            if (!(rc = mode == TR_POOL_MAX ? tr_stage_in(ctx, &v[0], hidden, s, len) : TR_OK) &&
                !(rc = tr_stage_in(ctx, &v[1], dout, b0 * C, nb * C)) &&
                !(rc = tr_stage_out(ctx, &v[2], dhidden, s, len, 0))) {
                tr_k_pool_bwd_f32(v[2].p, v[1].p, v[0].p, m32 + b0 * T, nb, T, C, mode);
                tr_stage_store(&v[2], dhidden, s);
            }
            for (int i = 0; i < 3; i++) tr_stage_release(ctx, &v[i]);
        }
        tr_stage_scratch_free(ctx, m32);
        return rc;
    }
}

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(pool, pool_run, c->pool.out, c->pool.hidden, c->pool.mask, (int)c->i[0])
TR_CPU_SLOT_BY(pool_backward, pool_backward_run, c->pool_backward.dhidden, c->pool_backward.dout,
               c->pool_backward.hidden, c->pool_backward.mask, (int)c->i[0])
