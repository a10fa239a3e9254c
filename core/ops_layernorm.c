/* ops_layernorm.c — tensor-level layernorm over the last dim (kernels/cpu/layernorm.c).
 * Half activations are staged to f32 in chunks of rows; mean, rstd and the parameter
 * gradients are f32; dweight/dbias accumulate across chunks through the kernel's +=. */
#include "ops_nn.h"
#include "ops_nn_util.h"
#include "cpu/layernorm.h"

static int not_built(tr_ctx *ctx, const char *op)
{
    return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                   "%s: the CUDA path of this op is not built yet; run on the CPU (device = "
                   "\"cpu\")",
                   op);
}

/* Shapes shared by forward and backward: x [..., C], weight [C], stats with N elements. */
static int check_common(tr_ctx *ctx, const char *op, const tr_tensor *x, const tr_tensor *weight,
                        const tr_tensor *mean, const tr_tensor *rstd, int64_t *N, int64_t *C)
{
    char s1[160], s2[160], s3[160];
    int rc;
    if (x->ndim < 1)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: x is a scalar; it must be [..., C]", op);
    *C = x->shape[x->ndim - 1];
    *N = 1;
    for (int i = 0; i < x->ndim - 1; i++) *N *= x->shape[i];
    if (weight->ndim != 1 || weight->shape[0] != *C)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: x has shape %s but weight has shape %s; weight must be [%lld] (the "
                       "normalised last dim of x)",
                       op, tr_nn_shape(x, s1), tr_nn_shape(weight, s2), (long long)*C);
    if ((rc = tr_nn_check_f32(ctx, op, "mean", mean)) || (rc = tr_nn_check_f32(ctx, op, "rstd", rstd)))
        return rc;
    if (mean->numel != *N || rstd->numel != *N)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: x has shape %s so mean and rstd need %lld elements (one per row), "
                       "but mean has shape %s and rstd %s",
                       op, tr_nn_shape(x, s1), (long long)*N, tr_nn_shape(mean, s2),
                       tr_nn_shape(rstd, s3));
    return TR_OK;
}

/* ------------------------------------------------------------ forward */

int tr_op_layernorm(tr_ctx *ctx, tr_tensor *out, tr_tensor *mean, tr_tensor *rstd,
                    const tr_tensor *x, const tr_tensor *weight, const tr_tensor *bias, float eps)
{
    static const char *op = "layernorm";
    if (!out || !mean || !rstd || !x || !weight)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: out, mean, rstd, x and weight must not be NULL (bias may be)", op);
    const tr_tensor *ts[] = { out, mean, rstd, x, weight, bias };
    const char *names[] = { "out", "mean", "rstd", "x", "weight", "bias" };
    int device, rc;
    int64_t N, C;
    if ((rc = tr_nn_check_device(ctx, op, ts, names, 6, &device))) return rc;
    for (int i = 0; i < 6; i++)
        if (ts[i] && (rc = tr_nn_check_float(ctx, op, names[i], ts[i]))) return rc;
    if ((rc = check_common(ctx, op, x, weight, mean, rstd, &N, &C))) return rc;
    if ((rc = tr_nn_check_shape(ctx, op, "out", out, x->ndim, x->shape))) return rc;
    if (bias && (rc = tr_nn_check_shape(ctx, op, "bias", bias, 1, &C))) return rc;

    switch (device) {
    case TR_CPU: {
        float *W = NULL, *Bi = NULL;
        void *ow = NULL, *obi = NULL;
        if ((rc = tr_nn_load(ctx, weight, 0, C, &W, &ow))) goto cpu_done;
        if (bias && (rc = tr_nn_load(ctx, bias, 0, C, &Bi, &obi))) goto cpu_done;
        int64_t step = (x->dtype == TR_F32 && out->dtype == TR_F32) ? (N > 0 ? N : 1)
                                                                     : tr_nn_chunk_rows(C);
        for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += step) {
            int64_t nr = N - r0 < step ? N - r0 : step;
            float *X = NULL, *Y = NULL;
            void *ox = NULL, *oy = NULL;
            rc = tr_nn_load(ctx, x, r0 * C, nr * C, &X, &ox);
            if (rc == TR_OK) rc = tr_nn_out(ctx, out, r0 * C, nr * C, 0, &Y, &oy);
            if (rc == TR_OK) {
                tr_k_layernorm_fwd_f32(Y, (float *)mean->data + r0, (float *)rstd->data + r0, X,
                                         W, Bi, nr, C, eps);
                tr_nn_store(out, r0 * C, Y, nr * C);
            }
            tr_nn_scratch_free(ctx, ox);
            tr_nn_scratch_free(ctx, oy);
        }
    cpu_done:
        tr_nn_scratch_free(ctx, ow);
        tr_nn_scratch_free(ctx, obi);
        return rc;
    }
    default:
        return not_built(ctx, op);
    }
}

/* ------------------------------------------------------------ backward */

int tr_op_layernorm_backward(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dweight, tr_tensor *dbias,
                             const tr_tensor *dout, const tr_tensor *x, const tr_tensor *weight,
                             const tr_tensor *mean, const tr_tensor *rstd)
{
    static const char *op = "layernorm_backward";
    if (!dout || !x || !weight || !mean || !rstd)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: dout, x, weight, mean and rstd must not be NULL", op);
    const tr_tensor *ts[] = { dx, dweight, dbias, dout, x, weight, mean, rstd };
    const char *names[] = { "dx", "dweight", "dbias", "dout", "x", "weight", "mean", "rstd" };
    int device, rc;
    int64_t N, C;
    if ((rc = tr_nn_check_device(ctx, op, ts, names, 8, &device))) return rc;
    for (int i = 0; i < 8; i++)
        if (ts[i] && (rc = tr_nn_check_float(ctx, op, names[i], ts[i]))) return rc;
    if ((rc = check_common(ctx, op, x, weight, mean, rstd, &N, &C))) return rc;
    if ((rc = tr_nn_check_shape(ctx, op, "dout", dout, x->ndim, x->shape))) return rc;
    if (dx && (rc = tr_nn_check_shape(ctx, op, "dx", dx, x->ndim, x->shape))) return rc;
    if (dweight && ((rc = tr_nn_check_f32(ctx, op, "dweight", dweight)) ||
                    (rc = tr_nn_check_shape(ctx, op, "dweight", dweight, 1, &C))))
        return rc;
    if (dbias && ((rc = tr_nn_check_f32(ctx, op, "dbias", dbias)) ||
                  (rc = tr_nn_check_shape(ctx, op, "dbias", dbias, 1, &C))))
        return rc;
    if (!dx && !dweight && !dbias) return TR_OK;

    switch (device) {
    case TR_CPU: {
        float *W = NULL;
        void *ow = NULL;
        if ((rc = tr_nn_load(ctx, weight, 0, C, &W, &ow))) return rc;
        int all_f32 = x->dtype == TR_F32 && dout->dtype == TR_F32 && (!dx || dx->dtype == TR_F32);
        int64_t step = all_f32 ? (N > 0 ? N : 1) : tr_nn_chunk_rows(C);
        for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += step) {
            int64_t nr = N - r0 < step ? N - r0 : step;
            float *X = NULL, *D = NULL, *DX = NULL;
            void *ox = NULL, *od = NULL, *odx = NULL;
            rc = tr_nn_load(ctx, x, r0 * C, nr * C, &X, &ox);
            if (rc == TR_OK) rc = tr_nn_load(ctx, dout, r0 * C, nr * C, &D, &od);
            if (rc == TR_OK && dx) rc = tr_nn_out(ctx, dx, r0 * C, nr * C, 0, &DX, &odx);
            if (rc == TR_OK) {
                tr_k_layernorm_bwd_f32(DX, dweight ? dweight->data : NULL,
                                          dbias ? dbias->data : NULL, D, X, W,
                                          (const float *)mean->data + r0,
                                          (const float *)rstd->data + r0, nr, C);
                if (dx) tr_nn_store(dx, r0 * C, DX, nr * C);
            }
            tr_nn_scratch_free(ctx, ox);
            tr_nn_scratch_free(ctx, od);
            tr_nn_scratch_free(ctx, odx);
        }
        tr_nn_scratch_free(ctx, ow);
        return rc;
    }
    default:
        return not_built(ctx, op);
    }
}
