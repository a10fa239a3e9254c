/* pooling.c — tensor-level masked pooling [B, T, C] -> [B, C] over
 * kernels/cpu/pooling.c. The mask (i32, i64 or float, or NULL for "all real") becomes
 * an int32 workspace copy; hidden and the outputs may be any float dtype and are
 * processed in blocks of whole sequences. */
#include "ops_elem.h"

#include "cpu/pooling.h"
#include "op_stage.h"
#include "op_cuda.h"
#include "op_table.h"

/* ------------------------------------------------------------ checks and mask */

static int check_args(tr_ctx *ctx, const char *op, const tr_tensor *hidden, const tr_tensor *mask,
                      const tr_tensor *pooled, const char *pooled_name, int mode)
{
    char b[160], b2[160];
    if (mode < TR_POOL_MEAN || mode > TR_POOL_MEAN_SQRT_LEN)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: mode %d is not a pooling mode (0 mean, 1 cls, 2 max, 3 mean_sqrt_len)", op, mode);
    if (hidden->ndim != 3)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: hidden has shape %s but must be [batch, tokens, dim]", op,
                       tr_op_describe(b, sizeof b, hidden));
    int64_t B = hidden->shape[0], T = hidden->shape[1], C = hidden->shape[2];
    if (mask) {
        if (mask->numel != B * T)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: mask has shape %s but hidden %s: one entry per token", op,
                           tr_op_describe(b, sizeof b, mask), tr_op_describe(b2, sizeof b2, hidden));
    }
    return tr_op_want_numel(ctx, op, pooled_name, pooled, B * C, "batch * dim");
}

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

static int pool_impl(tr_ctx *ctx, int run, const tr_tensor *out, const tr_tensor *hidden, const tr_tensor *mask, int mode)
{
    const char *op = "pool";
    int rc;
    if ((rc = check_args(ctx, op, hidden, mask, out, "out", mode))) return rc;
    if (!run) return TR_OK;
    {
        int64_t B = hidden->shape[0], T = hidden->shape[1], C = hidden->shape[2];
        int32_t *m32;
        if ((rc = load_mask(ctx, mask, B * T, &m32))) return rc;
        int64_t bs = tr_stage_block_rows(T * C);   /* sequences per block */
        for (int64_t b0 = 0; b0 < B && rc == TR_OK; b0 += bs) {
            int64_t nb = B - b0 < bs ? B - b0 : bs;
            tr_stage vh, vo = { 0 };
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

static int pool_backward_impl(tr_ctx *ctx, int run, const tr_tensor *dhidden, const tr_tensor *dout, const tr_tensor *hidden,
                        const tr_tensor *mask, int mode)
{
    const char *op = "pool_backward";
    int rc;
    if ((rc = check_args(ctx, op, hidden, mask, dout, "dout", mode)) ||
        (rc = tr_op_want_numel(ctx, op, "dhidden", dhidden, hidden->numel, "hidden's number of elements")))
        return rc;
    if (!run) return TR_OK;
    {
        int64_t B = hidden->shape[0], T = hidden->shape[1], C = hidden->shape[2];
        int32_t *m32;
        if ((rc = load_mask(ctx, mask, B * T, &m32))) return rc;
        int64_t bs = tr_stage_block_rows(T * C);   /* sequences per block */
        for (int64_t b0 = 0; b0 < B && rc == TR_OK; b0 += bs) {
            int64_t nb = B - b0 < bs ? B - b0 : bs;
            tr_stage v[3] = { { 0 } };   /* hidden (max only reads it), dout, dhidden */
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

/* ------------------------------------------------------------ the op table */

TR_OP_IMPL_SLOTS(pool, c->t[0], c->t[1], c->t[2], (int)c->i[0])
TR_OP_IMPL_SLOTS(pool_backward, c->t[0], c->t[1], c->t[2], c->t[3], (int)c->i[0])

const tr_op_desc tr_opd_pool = {
    "pool", 3,
    { { "out", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "hidden", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "mask", TR_ARG_IN, TR_DT_MASK, 1 } },
    pool_check, { pool_cpu, TR_CUDA_SLOT(pool) } };
const tr_op_desc tr_opd_pool_backward = {
    "pool_backward", 4,
    { { "dhidden", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "dout", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "hidden", TR_ARG_IN, TR_DT_FLOAT, 0 }, { "mask", TR_ARG_IN, TR_DT_MASK, 1 } },
    pool_backward_check, { pool_backward_cpu, TR_CUDA_SLOT(pool_backward) } };

int tr_op_pool(tr_ctx *ctx, tr_tensor *out, const tr_tensor *hidden, const tr_tensor *mask, int mode)
{
    tr_op_call c = { .t = { out, hidden, mask }, .i = { mode } };
    return tr_op_run(ctx, &tr_opd_pool, &c);
}

int tr_op_pool_backward(tr_ctx *ctx, tr_tensor *dhidden, const tr_tensor *dout, const tr_tensor *hidden,
                        const tr_tensor *mask, int mode)
{
    tr_op_call c = { .t = { dhidden, dout, hidden, mask }, .i = { mode } };
    return tr_op_run(ctx, &tr_opd_pool_backward, &c);
}
