/* layernorm_cpu.c — the CPU slots of layernorm and layernorm_backward over
 * kernels/cpu/layernorm.c. Half activations are staged to f32 in chunks of rows; mean, rstd
 * and the parameter gradients are f32; dweight/dbias accumulate across chunks through the
 * kernel's +=. The shape check left N and C in call->dim. */
#include "cpu_slot.h"
#include "cpu/layernorm.h"

int tr_cpu_layernorm(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *out = c->layernorm.out, *mean = c->layernorm.mean, *rstd = c->layernorm.rstd, *x = c->layernorm.x;
    int64_t N = c->dim[0], C = c->dim[1];
    float *W = NULL, *Bi = NULL;
    void *ow = NULL, *obi = NULL;
    int rc;
    if ((rc = tr_stage_load(ctx, c->layernorm.weight, 0, C, &W, &ow))) goto done;
    if (c->layernorm.bias && (rc = tr_stage_load(ctx, c->layernorm.bias, 0, C, &Bi, &obi))) goto done;
    int64_t step = (x->dtype == TR_F32 && out->dtype == TR_F32) ? (N > 0 ? N : 1) : tr_stage_block_rows(C);
    for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += step) {
        int64_t nr = N - r0 < step ? N - r0 : step;
        float *X = NULL, *Y = NULL;
        void *ox = NULL, *oy = NULL;
        rc = tr_stage_load(ctx, x, r0 * C, nr * C, &X, &ox);
        if (rc == TR_OK) rc = tr_stage_buf(ctx, out, r0 * C, nr * C, 0, &Y, &oy);
        if (rc == TR_OK) {
            tr_k_layernorm_fwd_f32(Y, (float *)mean->data + r0, (float *)rstd->data + r0, X, W, Bi, nr, C, c->f[0]);
            tr_stage_put(out, r0 * C, Y, nr * C);
        }
        tr_stage_scratch_free(ctx, ox);
        tr_stage_scratch_free(ctx, oy);
    }
done:
    tr_stage_scratch_free(ctx, ow);
    tr_stage_scratch_free(ctx, obi);
    return rc;
}

int tr_cpu_layernorm_backward(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *dx = c->layernorm_backward.dx, *dweight = c->layernorm_backward.dweight, *dbias = c->layernorm_backward.dbias, *dout = c->layernorm_backward.dout,
                    *x = c->layernorm_backward.x;
    int64_t N = c->dim[0], C = c->dim[1];
    if (!dx && !dweight && !dbias) return TR_OK;
    float *W = NULL;
    void *ow = NULL;
    int rc;
    if ((rc = tr_stage_load(ctx, c->layernorm_backward.weight, 0, C, &W, &ow))) return rc;
    int all_f32 = x->dtype == TR_F32 && dout->dtype == TR_F32 && (!dx || dx->dtype == TR_F32);
    int64_t step = all_f32 ? (N > 0 ? N : 1) : tr_stage_block_rows(C);
    for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += step) {
        int64_t nr = N - r0 < step ? N - r0 : step;
        float *X = NULL, *D = NULL, *DX = NULL;
        void *ox = NULL, *od = NULL, *odx = NULL;
        rc = tr_stage_load(ctx, x, r0 * C, nr * C, &X, &ox);
        if (rc == TR_OK) rc = tr_stage_load(ctx, dout, r0 * C, nr * C, &D, &od);
        if (rc == TR_OK && dx) rc = tr_stage_buf(ctx, dx, r0 * C, nr * C, 0, &DX, &odx);
        if (rc == TR_OK) {
            tr_k_layernorm_bwd_f32(DX, dweight ? dweight->data : NULL, dbias ? dbias->data : NULL, D, X, W,
                                   (const float *)c->layernorm_backward.mean->data + r0, (const float *)c->layernorm_backward.rstd->data + r0,
                                   nr, C);
            if (dx) tr_stage_put(dx, r0 * C, DX, nr * C);
        }
        tr_stage_scratch_free(ctx, ox);
        tr_stage_scratch_free(ctx, od);
        tr_stage_scratch_free(ctx, odx);
    }
    tr_stage_scratch_free(ctx, ow);
    return rc;
}
