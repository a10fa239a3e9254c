/* ops_activation.c — tensor-level GELU (erf and tanh forms) and softmax over the last dim
 * (kernels/cpu/gelu.c, softmax.c). Half tensors are staged to f32 in chunks (of elements
 * for GELU, of rows for softmax, whose sums are always f32). */
#include "ops_nn.h"
#include "ops_nn_util.h"
#include "cpu/gelu.h"
#include "cpu/softmax.h"

enum { ACT_GELU_FWD, ACT_GELU_BWD, ACT_SOFTMAX_FWD, ACT_SOFTMAX_BWD };

/* ------------------------------------------------------------ shared driver */

/* y (=) = f(a [, b]) chunk by chunk; rows of width `row` (1 for elementwise). a, b and y
 * have one shape (checked). kind selects the kernel, arg is the GELU form. */
static int run(tr_ctx *ctx, const char *op, int kind, int arg, tr_tensor *y, const char *yname,
               const tr_tensor *a, const char *aname, const tr_tensor *b, const char *bname)
{
    if (!y || !a || (bname && !b))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s, %s%s%s must not be NULL", op, yname,
                       aname, bname ? " and " : "", bname ? bname : "");
    const tr_tensor *ts[] = { y, a, b };
    const char *names[] = { yname, aname, bname };
    int device, rc;
    if ((rc = tr_nn_check_device(ctx, op, ts, names, b ? 3 : 2, &device))) return rc;
    for (int i = 0; i < (b ? 3 : 2); i++)
        if ((rc = tr_nn_check_float(ctx, op, names[i], ts[i]))) return rc;
    if ((rc = tr_nn_check_shape(ctx, op, yname, y, a->ndim, a->shape))) return rc;
    if (b && (rc = tr_nn_check_shape(ctx, op, bname, b, a->ndim, a->shape))) return rc;
    int rowwise = kind == ACT_SOFTMAX_FWD || kind == ACT_SOFTMAX_BWD;
    int64_t C = rowwise ? (a->ndim ? a->shape[a->ndim - 1] : 1) : 1;
    int64_t N = C > 0 ? a->numel / C : 0;

    switch (device) {
    case TR_CPU: {
        int all_f32 = y->dtype == TR_F32 && a->dtype == TR_F32 && (!b || b->dtype == TR_F32);
        int64_t step = all_f32 ? (N > 0 ? N : 1) : tr_nn_chunk_rows(C);
        for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += step) {
            int64_t nr = N - r0 < step ? N - r0 : step, off = r0 * C, n = nr * C;
            float *A = NULL, *B = NULL, *Y = NULL;
            void *oa = NULL, *ob = NULL, *oy = NULL;
            rc = tr_nn_load(ctx, a, off, n, &A, &oa);
            if (rc == TR_OK && b) rc = tr_nn_load(ctx, b, off, n, &B, &ob);
            if (rc == TR_OK) rc = tr_nn_out(ctx, y, off, n, 0, &Y, &oy);
            if (rc == TR_OK) {
                switch (kind) {
                case ACT_GELU_FWD: tr_k_gelu_fwd_f32(Y, A, n, arg); break;
                case ACT_GELU_BWD: tr_k_gelu_bwd_f32(Y, A, B, n, arg); break;
                case ACT_SOFTMAX_FWD: tr_k_softmax_fwd_f32(Y, A, nr, C); break;
                default: tr_k_softmax_bwd_f32(Y, A, B, nr, C); break;
                }
                tr_nn_store(y, off, Y, n);
            }
            tr_nn_scratch_free(ctx, oa);
            tr_nn_scratch_free(ctx, ob);
            tr_nn_scratch_free(ctx, oy);
        }
        return rc;
    }
    default:
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: the CUDA path of this op is not built yet; run on the CPU (device = "
                       "\"cpu\")",
                       op);
    }
}

static int check_kind(tr_ctx *ctx, const char *op, int kind)
{
    if (kind == TR_OP_GELU_ERF || kind == TR_OP_GELU_TANH) return TR_OK;
    return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                   "%s: GELU kind %d is unknown: use 0 (erf, BERT's \"gelu\") or 1 (tanh, "
                   "\"gelu_new\" / \"gelu_pytorch_tanh\")",
                   op, kind);
}

/* ------------------------------------------------------------ gelu */

int tr_op_gelu(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, int kind)
{
    int rc = check_kind(ctx, "gelu", kind);
    if (rc) return rc;
    return run(ctx, "gelu", ACT_GELU_FWD, kind == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF,
               out, "out", x, "x", NULL, NULL);
}

int tr_op_gelu_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *x,
                        int kind)
{
    int rc = check_kind(ctx, "gelu_backward", kind);
    if (rc) return rc;
    return run(ctx, "gelu_backward", ACT_GELU_BWD,
               kind == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF, dx, "dx", dout, "dout", x, "x");
}

/* ------------------------------------------------------------ softmax */

int tr_op_softmax(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x)
{
    return run(ctx, "softmax", ACT_SOFTMAX_FWD, 0, out, "out", x, "x", NULL, NULL);
}

int tr_op_softmax_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *y)
{
    return run(ctx, "softmax_backward", ACT_SOFTMAX_BWD, 0, dx, "dx", dout, "dout", y, "y");
}
