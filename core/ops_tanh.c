/* ops_tanh.c — tensor-level tanh and its backward (kernels/cpu/tanh.c), the BERT pooler's
 * activation. Half tensors are staged to f32 in chunks of elements, as for GELU; the
 * backward reads the forward's output y, so callers keep y rather than x. */
#include "ops_nn.h"
#include "ops_nn_util.h"
#include "cpu/tanh.h"

/* ------------------------------------------------------------ shared driver */

/* y (=) = tanh(a) when b is NULL, else tanh_backward(dout = a, y = b), chunk by chunk.
 * Every tensor has a's shape (checked). */
static int run(tr_ctx *ctx, const char *op, tr_tensor *y, const char *yname, const tr_tensor *a,
               const char *aname, const tr_tensor *b, const char *bname)
{
    if (!y || !a || (bname && !b))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s, %s%s%s must not be NULL", op, yname,
                       aname, bname ? " and " : "", bname ? bname : "");
    const tr_tensor *ts[] = { y, a, b };
    const char *names[] = { yname, aname, bname };
    int nt = b ? 3 : 2, device, rc;
    if ((rc = tr_nn_check_device(ctx, op, ts, names, nt, &device))) return rc;
    for (int i = 0; i < nt; i++)
        if ((rc = tr_nn_check_float(ctx, op, names[i], ts[i]))) return rc;
    if ((rc = tr_nn_check_shape(ctx, op, yname, y, a->ndim, a->shape))) return rc;
    if (b && (rc = tr_nn_check_shape(ctx, op, bname, b, a->ndim, a->shape))) return rc;
    if (device != TR_CPU)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: the CUDA path of this op is not built yet; run on the CPU (device = "
                       "\"cpu\")",
                       op);
    int64_t N = a->numel;
    int all_f32 = y->dtype == TR_F32 && a->dtype == TR_F32 && (!b || b->dtype == TR_F32);
    int64_t step = all_f32 ? (N > 0 ? N : 1) : tr_nn_chunk_rows(1);
    for (int64_t off = 0; off < N && rc == TR_OK; off += step) {
        int64_t n = N - off < step ? N - off : step;
        float *A = NULL, *B = NULL, *Y = NULL;
        void *oa = NULL, *ob = NULL, *oy = NULL;
        rc = tr_nn_load(ctx, a, off, n, &A, &oa);
        if (rc == TR_OK && b) rc = tr_nn_load(ctx, b, off, n, &B, &ob);
        if (rc == TR_OK) rc = tr_nn_out(ctx, y, off, n, 0, &Y, &oy);
        if (rc == TR_OK) {
            if (b) tr_k_tanh_bwd_f32(Y, A, B, n);
            else tr_k_tanh_fwd_f32(Y, A, n);
            tr_nn_store(y, off, Y, n);
        }
        tr_nn_scratch_free(ctx, oa);
        tr_nn_scratch_free(ctx, ob);
        tr_nn_scratch_free(ctx, oy);
    }
    return rc;
}

/* ------------------------------------------------------------ tanh */

int tr_op_tanh(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x)
{
    return run(ctx, "tanh", out, "out", x, "x", NULL, NULL);
}

int tr_op_tanh_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *y)
{
    return run(ctx, "tanh_backward", dx, "dx", dout, "dout", y, "y");
}
