/* layernorm.c — tensor-level layernorm over the last dim (kernels/cpu/layernorm.c):
 * the op table's descriptions, shape checks and CPU slots, and the public wrappers.
 * Half activations are staged to f32 in chunks of rows; mean, rstd and the parameter
 * gradients are f32; dweight/dbias accumulate across chunks through the kernel's +=. */
#include "ops_nn.h"
#include "op_stage.h"
#include "op_cuda.h"
#include "op_table.h"
#include "cpu/layernorm.h"

/* ------------------------------------------------------------ shapes */

/* x [..., C], weight [C], stats with N elements; sets dim[0] = N, dim[1] = C. */
static int check_common(tr_ctx *ctx, const char *op, tr_op_call *c, const tr_tensor *x, const tr_tensor *weight,
                        const tr_tensor *mean, const tr_tensor *rstd)
{
    char s1[160], s2[160], s3[160];
    if (x->ndim < 1) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: x is a scalar; it must be [..., C]", op);
    int64_t C = x->shape[x->ndim - 1], N = 1;
    for (int i = 0; i < x->ndim - 1; i++) N *= x->shape[i];
    if (weight->ndim != 1 || weight->shape[0] != C)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: x has shape %s but weight has shape %s; weight must be [%lld] (the "
                       "normalised last dim of x)",
                       op, tr_op_shape(x, s1), tr_op_shape(weight, s2), (long long)C);
    if (mean->numel != N || rstd->numel != N)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: x has shape %s so mean and rstd need %lld elements (one per row), "
                       "but mean has shape %s and rstd %s",
                       op, tr_op_shape(x, s1), (long long)N, tr_op_shape(mean, s2), tr_op_shape(rstd, s3));
    c->dim[0] = N;
    c->dim[1] = C;
    return TR_OK;
}

/* ------------------------------------------------------------ forward */

enum { F_OUT, F_MEAN, F_RSTD, F_X, F_W, F_B };

static int fwd_check(tr_ctx *ctx, tr_op_call *c)
{
    const char *op = "layernorm";
    const tr_tensor *x = c->t[F_X];
    int rc;
    if ((rc = check_common(ctx, op, c, x, c->t[F_W], c->t[F_MEAN], c->t[F_RSTD]))) return rc;
    if ((rc = tr_op_want_shape(ctx, op, "out", c->t[F_OUT], x->ndim, x->shape))) return rc;
    if (c->t[F_B] && (rc = tr_op_want_shape(ctx, op, "bias", c->t[F_B], 1, &c->dim[1]))) return rc;
    return TR_OK;
}

static int fwd_cpu(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *out = c->t[F_OUT], *mean = c->t[F_MEAN], *rstd = c->t[F_RSTD], *x = c->t[F_X];
    int64_t N = c->dim[0], C = c->dim[1];
    float *W = NULL, *Bi = NULL;
    void *ow = NULL, *obi = NULL;
    int rc;
    if ((rc = tr_stage_load(ctx, c->t[F_W], 0, C, &W, &ow))) goto done;
    if (c->t[F_B] && (rc = tr_stage_load(ctx, c->t[F_B], 0, C, &Bi, &obi))) goto done;
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

const tr_op_desc tr_opd_layernorm = {
    "layernorm", 6,
    { { "out", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "mean", TR_ARG_OUT, TR_DT_F32, 0 },
      { "rstd", TR_ARG_OUT, TR_DT_F32, 0 }, { "x", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "weight", TR_ARG_IN, TR_DT_FLOAT, 0 }, { "bias", TR_ARG_IN, TR_DT_FLOAT, 1 } },
    fwd_check, { fwd_cpu, TR_CUDA_SLOT(layernorm) },
};

int tr_op_layernorm(tr_ctx *ctx, tr_tensor *out, tr_tensor *mean, tr_tensor *rstd, const tr_tensor *x,
                    const tr_tensor *weight, const tr_tensor *bias, float eps)
{
    tr_op_call c = { .t = { out, mean, rstd, x, weight, bias }, .f = { eps } };
    return tr_op_run(ctx, &tr_opd_layernorm, &c);
}

/* ------------------------------------------------------------ backward */

enum { B_DX, B_DW, B_DB, B_DOUT, B_X, B_W, B_MEAN, B_RSTD };

static int bwd_check(tr_ctx *ctx, tr_op_call *c)
{
    const char *op = "layernorm_backward";
    const tr_tensor *x = c->t[B_X];
    int rc;
    if ((rc = check_common(ctx, op, c, x, c->t[B_W], c->t[B_MEAN], c->t[B_RSTD]))) return rc;
    if ((rc = tr_op_want_shape(ctx, op, "dout", c->t[B_DOUT], x->ndim, x->shape))) return rc;
    if (c->t[B_DX] && (rc = tr_op_want_shape(ctx, op, "dx", c->t[B_DX], x->ndim, x->shape))) return rc;
    if (c->t[B_DW] && (rc = tr_op_want_shape(ctx, op, "dweight", c->t[B_DW], 1, &c->dim[1]))) return rc;
    if (c->t[B_DB] && (rc = tr_op_want_shape(ctx, op, "dbias", c->t[B_DB], 1, &c->dim[1]))) return rc;
    return TR_OK;
}

static int bwd_cpu(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *dx = c->t[B_DX], *dweight = c->t[B_DW], *dbias = c->t[B_DB], *dout = c->t[B_DOUT],
                    *x = c->t[B_X];
    int64_t N = c->dim[0], C = c->dim[1];
    if (!dx && !dweight && !dbias) return TR_OK;
    float *W = NULL;
    void *ow = NULL;
    int rc;
    if ((rc = tr_stage_load(ctx, c->t[B_W], 0, C, &W, &ow))) return rc;
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
                                   (const float *)c->t[B_MEAN]->data + r0, (const float *)c->t[B_RSTD]->data + r0,
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

const tr_op_desc tr_opd_layernorm_backward = {
    "layernorm_backward", 8,
    { { "dx", TR_ARG_OUT, TR_DT_FLOAT, 1 }, { "dweight", TR_ARG_ACC, TR_DT_F32, 1 },
      { "dbias", TR_ARG_ACC, TR_DT_F32, 1 }, { "dout", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "x", TR_ARG_IN, TR_DT_FLOAT, 0 }, { "weight", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "mean", TR_ARG_IN, TR_DT_F32, 0 }, { "rstd", TR_ARG_IN, TR_DT_F32, 0 } },
    bwd_check, { bwd_cpu, TR_CUDA_SLOT(layernorm_backward) },
};

int tr_op_layernorm_backward(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dweight, tr_tensor *dbias,
                             const tr_tensor *dout, const tr_tensor *x, const tr_tensor *weight,
                             const tr_tensor *mean, const tr_tensor *rstd)
{
    tr_op_call c = { .t = { dx, dweight, dbias, dout, x, weight, mean, rstd } };
    return tr_op_run(ctx, &tr_opd_layernorm_backward, &c);
}
