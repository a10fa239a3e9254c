/* pooling_cpu.c — the CPU slots (checks and wrappers: core/ops/pooling.c): tensor-level masked pooling [B, T, C] -> [B,
 * C] over kernels/cpu/pooling.c. The mask (i32, i64 or float, or NULL for "all real") becomes an int32 workspace copy;
 * hidden and the outputs may be any float dtype and are processed in blocks of whole sequences. */
#include "ops_pooling.h"
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

/* A sequence is a row for the staging loop (hidden [B, T, C] in rows of T*C, the pooled
 * [B, C] in rows of C), in blocks of sequences of about TR_STAGE_BLOCK elements. */
#define FWD(name) TR_ARGI(pool, name)
#define BWD(name) TR_ARGI(pool_backward, name)

static const unsigned char fwd_layout[TR_OP_MAX_TENSORS] = {[FWD(out)] = TR_ROWS_BLOCK, [FWD(hidden)] = TR_ROWS_BLOCK};

static int fwd_rows(const tr_op_call *c, float *const *p, int64_t b0, int64_t nb, int64_t TC, void *m32)
{
    const tr_tensor *h = c->pool.hidden;
    tr_k_pool_fwd_f32(p[FWD(out)], p[FWD(hidden)], (const int32_t *)m32 + b0 * h->shape[1], nb, h->shape[1],
                      h->shape[2], (int)c->i[0]);
    return TR_OK;
}

static int bwd_rows(const tr_op_call *c, float *const *p, int64_t b0, int64_t nb, int64_t TC, void *m32)
{
    const tr_tensor *h = c->pool_backward.hidden;
    tr_k_pool_bwd_f32(p[BWD(dhidden)], p[BWD(dout)], p[BWD(hidden)], (const int32_t *)m32 + b0 * h->shape[1], nb,
                      h->shape[1], h->shape[2], (int)c->i[0]);
    return TR_OK;
}

/* The mask as int32, then fn over blocks of sequences of hidden. */
static int pool_rows(tr_ctx *ctx, const tr_op_desc *d, tr_op_call *c, const tr_tensor *hidden, const tr_tensor *mask,
                     const unsigned char *layout, tr_rows_fn fn)
{
    const int64_t B = hidden->shape[0], TC = hidden->shape[1] * hidden->shape[2];
    int32_t *m32;
    int rc = load_mask(ctx, mask, B * hidden->shape[1], &m32);
    if (rc) return rc;
    rc = tr_stage_rows_by(ctx, d, c, layout, B, TC, tr_stage_block_rows(TC), fn, m32);
    tr_stage_scratch_free(ctx, m32);
    return rc;
}

int tr_cpu_pool(tr_ctx *ctx, tr_op_call *c)
{
    return pool_rows(ctx, &tr_opd_pool, c, c->pool.hidden, c->pool.mask, fwd_layout, fwd_rows);
}

int tr_cpu_pool_backward(tr_ctx *ctx, tr_op_call *c)
{
    /* hidden is read only by max pooling */
    const unsigned char layout[TR_OP_MAX_TENSORS] = {
        [BWD(dhidden)] = TR_ROWS_BLOCK,
        [BWD(dout)] = TR_ROWS_BLOCK,
        [BWD(hidden)] = c->i[0] == TR_POOL_MAX ? TR_ROWS_BLOCK : 0,
    };
    return pool_rows(ctx, &tr_opd_pool_backward, c, c->pool_backward.hidden, c->pool_backward.mask, layout, bwd_rows);
}
