/* ops_pooling.c — tensor-level masked pooling [B, T, C] -> [B, C] over
 * kernels/cpu/pooling.c. The mask (i32, i64 or float, or NULL for "all real") becomes
 * an int32 workspace copy; hidden and the outputs may be any float dtype and are
 * processed in blocks of whole sequences. */
#include "ops_elem.h"

#include "cpu/pooling.h"
#include "ops_elem_common.h"

/* ------------------------------------------------------------ checks and mask */

static int check_args(tr_ctx *ctx, const char *op, const tr_tensor *hidden, const tr_tensor *mask,
                      const tr_tensor *pooled, const char *pooled_name, int mode)
{
    int rc, device = hidden ? hidden->device : TR_CPU;
    char b[160], b2[160];
    if ((rc = tr_elem_want_float(ctx, op, "hidden", hidden, device)) ||
        (rc = tr_elem_want_float(ctx, op, pooled_name, pooled, device)))
        return rc;
    if (mode < TR_POOL_MEAN || mode > TR_POOL_MEAN_SQRT_LEN)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: mode %d is not a pooling mode (0 mean, 1 cls, 2 max, 3 mean_sqrt_len)", op, mode);
    if (hidden->ndim != 3)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: hidden has shape %s but must be [batch, tokens, dim]", op,
                       tr_elem_describe(b, sizeof b, hidden));
    int64_t B = hidden->shape[0], T = hidden->shape[1], C = hidden->shape[2];
    if (mask) {
        if (mask->device != device)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: mask is on another device than hidden", op);
        if (mask->numel != B * T)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: mask has shape %s but hidden %s: one entry per token", op,
                           tr_elem_describe(b, sizeof b, mask), tr_elem_describe(b2, sizeof b2, hidden));
    }
    return tr_elem_want_numel(ctx, op, pooled_name, pooled, B * C, "batch * dim");
}

/* *m32 = the mask as int32 in a workspace block (all ones when mask is NULL). */
static int load_mask(tr_ctx *ctx, const tr_tensor *mask, int64_t BT, int32_t **m32)
{
    int rc = tr_elem_ws_alloc(ctx, (size_t)BT * sizeof(int32_t), (void **)m32);
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

int tr_op_pool(tr_ctx *ctx, tr_tensor *out, const tr_tensor *hidden, const tr_tensor *mask, int mode)
{
    const char *op = "pool";
    int rc, device = hidden ? hidden->device : TR_CPU;
    if ((rc = check_args(ctx, op, hidden, mask, out, "out", mode))) return rc;
    switch (device) {
    case TR_CPU: {
        int64_t B = hidden->shape[0], T = hidden->shape[1], C = hidden->shape[2];
        int32_t *m32;
        if ((rc = load_mask(ctx, mask, B * T, &m32))) return rc;
        int64_t bs = tr_elem_block_rows(T * C);   /* sequences per block */
        for (int64_t b0 = 0; b0 < B && rc == TR_OK; b0 += bs) {
            int64_t nb = B - b0 < bs ? B - b0 : bs;
            tr_elem_view vh, vo = { 0 };
            if (!(rc = tr_elem_view_in_range(ctx, &vh, hidden, b0 * T * C, nb * T * C)) &&
                !(rc = tr_elem_view_out_range(ctx, &vo, out, b0 * C, nb * C, 0))) {
                tr_k_pool_fwd_f32(vo.p, vh.p, m32 + b0 * T, nb, T, C, mode);
                tr_elem_view_finish_range(&vo, out, b0 * C);
            }
            tr_elem_view_release(ctx, &vo);
            tr_elem_view_release(ctx, &vh);
        }
        tr_elem_ws_free(ctx, m32);
        return rc;
    }
    default:
        return tr_elem_no_device(ctx, op, device);
    }
}

int tr_op_pool_backward(tr_ctx *ctx, tr_tensor *dhidden, const tr_tensor *dout, const tr_tensor *hidden,
                        const tr_tensor *mask, int mode)
{
    const char *op = "pool_backward";
    int rc, device = hidden ? hidden->device : TR_CPU;
    if ((rc = check_args(ctx, op, hidden, mask, dout, "dout", mode)) ||
        (rc = tr_elem_want_float(ctx, op, "dhidden", dhidden, device)) ||
        (rc = tr_elem_want_numel(ctx, op, "dhidden", dhidden, hidden->numel, "hidden's number of elements")))
        return rc;
    switch (device) {
    case TR_CPU: {
        int64_t B = hidden->shape[0], T = hidden->shape[1], C = hidden->shape[2];
        int32_t *m32;
        if ((rc = load_mask(ctx, mask, B * T, &m32))) return rc;
        int64_t bs = tr_elem_block_rows(T * C);   /* sequences per block */
        for (int64_t b0 = 0; b0 < B && rc == TR_OK; b0 += bs) {
            int64_t nb = B - b0 < bs ? B - b0 : bs;
            tr_elem_view v[3] = { { 0 } };   /* hidden (max only reads it), dout, dhidden */
            int64_t s = b0 * T * C, len = nb * T * C;
            if (!(rc = mode == TR_POOL_MAX ? tr_elem_view_in_range(ctx, &v[0], hidden, s, len) : TR_OK) &&
                !(rc = tr_elem_view_in_range(ctx, &v[1], dout, b0 * C, nb * C)) &&
                !(rc = tr_elem_view_out_range(ctx, &v[2], dhidden, s, len, 0))) {
                tr_k_pool_bwd_f32(v[2].p, v[1].p, v[0].p, m32 + b0 * T, nb, T, C, mode);
                tr_elem_view_finish_range(&v[2], dhidden, s);
            }
            for (int i = 0; i < 3; i++) tr_elem_view_release(ctx, &v[i]);
        }
        tr_elem_ws_free(ctx, m32);
        return rc;
    }
    default:
        return tr_elem_no_device(ctx, op, device);
    }
}
