/* matmul.c — tensor-level matmul and Linear (forward and backward) on the CPU, over
 * oneDNN or OpenBLAS as cpu_gemm.h routes each product.
 *
 * Half-precision operands: a Linear over bf16 activations and a bf16 weight runs natively
 * where bf16 kernels beat f32 (tr_cpu_gemm_bf16_native: AMX, or AVX512-BF16 on AMD), f32
 * accumulation inside oneDNN. Everywhere else half operands are staged to f32 and the GEMM
 * runs in f32 with f32 accumulation: Linear converts its activations in chunks of rows, and
 * its weight once per pack (oneDNN: the packed copy is made from the f32 conversion and kept
 * until the weight changes) or once per call (a half weight, which is not packed: its
 * staged f32 copy goes to the router's plain product, oneDNN or OpenBLAS); the general
 * matmul converts whole operands. On Intel's AVX512-BF16 without AMX oneDNN's bf16 x bf16
 * product is slower than f32 (docs/BENCHMARKS.md, "Figures behind choices in the code"), and
 * cblas_sbgemm is not exported by Debian's OpenBLAS 0.3.21, see bench/bench_gemm.c.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/matmul_cpu.c, core/cuda_ops/matmul_cuda.c. */
#include "ops_nn.h"
#include "op_stage.h"
#include "op_table.h"
#include "cpu/matmul.h"
#include "cpu_gemm.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static int too_big(tr_ctx *ctx, const char *op, int64_t v, const char *what)
{
    return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                   "%s: %s = %lld exceeds the BLAS index limit %d; split the batch", op, what,
                   (long long)v, INT_MAX);
}

/* ------------------------------------------------------------ matmul */

static int matmul_checks(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *a, const tr_tensor *b,
                         const tr_tensor *bias, int trans_a, int trans_b, float alpha, float beta, int64_t *dim)
{
    static const char *op = "matmul";
    char s1[160], s2[160];
    int rc;
    if (a->ndim < 2 || b->ndim < 2)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: a has shape %s and b has shape %s but both need at least 2 dims "
                       "(matrices, with optional leading batch dims on a)",
                       op, tr_op_shape(a, s1), tr_op_shape(b, s2));
    int na = a->ndim, nbd = b->ndim;
    int64_t M = trans_a ? a->shape[na - 1] : a->shape[na - 2];
    int64_t K = trans_a ? a->shape[na - 2] : a->shape[na - 1];
    int64_t Kb = trans_b ? b->shape[nbd - 1] : b->shape[nbd - 2];
    int64_t N = trans_b ? b->shape[nbd - 2] : b->shape[nbd - 1];
    if (K != Kb)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: a has shape %s (trans_a %d, inner dim %lld) but b has shape %s "
                       "(trans_b %d, inner dim %lld); the inner dims must agree",
                       op, tr_op_shape(a, s1), trans_a, (long long)K, tr_op_shape(b, s2), trans_b,
                       (long long)Kb);
    int64_t batch = 1;
    for (int i = 0; i < na - 2; i++) batch *= a->shape[i];
    int b_shared = nbd == 2;
    if (!b_shared) {
        int same = nbd == na;
        for (int i = 0; same && i < na - 2; i++) same = a->shape[i] == b->shape[i];
        if (!same)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "%s: a has shape %s and b has shape %s: b must be 2-D (shared by "
                           "the batch) or have a's leading batch dims",
                           op, tr_op_shape(a, s1), tr_op_shape(b, s2));
    }
    int64_t want[8];
    for (int i = 0; i < na - 2; i++) want[i] = a->shape[i];
    want[na - 2] = M;
    want[na - 1] = N;
    if ((rc = tr_op_want_shape(ctx, op, "out", out, na, want))) return rc;
    if (bias && (rc = tr_op_want_shape(ctx, op, "bias", bias, 1, &N))) return rc;
    if (batch > INT_MAX) return too_big(ctx, op, batch, "batch");
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX) return too_big(ctx, op, M > N ? M : N, "a dim");
    dim[0] = M, dim[1] = K, dim[2] = N, dim[3] = batch, dim[4] = b_shared;
    return TR_OK;
}

/* ------------------------------------------------------------ linear */

/* rows = product of all but the last dim; checks the last dim is `last` */
static int64_t rows_of(const tr_tensor *t)
{
    int64_t r = 1;
    for (int i = 0; i < t->ndim - 1; i++) r *= t->shape[i];
    return r;
}

/* y must be x's shape with the last dim replaced by last */
static int check_like(tr_ctx *ctx, const char *op, const char *what, const tr_tensor *y,
                      const char *xname, const tr_tensor *x, int64_t last)
{
    int64_t want[8];
    for (int i = 0; i < x->ndim - 1; i++) want[i] = x->shape[i];
    want[x->ndim - 1] = last;
    if (tr_op_want_shape(ctx, op, what, y, x->ndim, want) == TR_OK) return TR_OK;
    char s[160];
    size_t len = strlen(tr_ctx_err(ctx)->msg);
    snprintf(tr_ctx_err(ctx)->msg + len, sizeof tr_ctx_err(ctx)->msg - len,
             " (%s has shape %s)", xname, tr_op_shape(x, s));
    return TR_EUSER;
}

static int linear_checks(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *x, const tr_tensor *w,
                         const tr_tensor *bias, int64_t *dim)
{
    static const char *op = "linear";
    char s1[160], s2[160];
    int rc;
    if (x->ndim < 1 || w->ndim != 2 || w->shape[1] != x->shape[x->ndim - 1])
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: x has shape %s but w has shape %s; w must be [out_features, %lld]",
                       op, tr_op_shape(x, s1), tr_op_shape(w, s2),
                       (long long)(x->ndim ? x->shape[x->ndim - 1] : 0));
    int64_t O = w->shape[0], I = w->shape[1], N = rows_of(x);
    if ((rc = check_like(ctx, op, "out", out, "x", x, O))) return rc;
    if (bias && (rc = tr_op_want_shape(ctx, op, "bias", bias, 1, &O))) return rc;
    if (N > INT_MAX || O > INT_MAX || I > INT_MAX) return too_big(ctx, op, N, "rows");
    dim[0] = O, dim[1] = I, dim[2] = N;
    return TR_OK;
}

static int linear_backward_checks(tr_ctx *ctx, const tr_tensor *dx, const tr_tensor *dw, const tr_tensor *dbias,
                                  const tr_tensor *dout, const tr_tensor *x, const tr_tensor *w, int64_t *dim)
{
    static const char *op = "linear_backward";
    char s1[160], s2[160];
    if (dx && !w) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: dx needs w, which is NULL", op);
    if (dw && !x) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: dw needs x, which is NULL", op);
    int rc = TR_OK;
    if (dout->ndim < 1)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: dout is a scalar; it must be [..., O]", op);
    int64_t O = dout->shape[dout->ndim - 1], N = rows_of(dout), I = 0;
    if (w) {
        if (w->ndim != 2 || w->shape[0] != O)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "%s: dout has shape %s but w has shape %s; w must be [%lld, in_features]",
                           op, tr_op_shape(dout, s1), tr_op_shape(w, s2), (long long)O);
        I = w->shape[1];
    }
    if (x) {
        int64_t xI = x->ndim ? x->shape[x->ndim - 1] : 0;
        if (w && xI != I)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: x has shape %s but w has shape %s", op,
                           tr_op_shape(x, s1), tr_op_shape(w, s2));
        I = xI;
        if (x->ndim < 1 || (rc = check_like(ctx, op, "x", x, "dout", dout, I))) {
            if (x->ndim < 1) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: x is a scalar", op);
            return rc;
        }
    }
    if (dx && (rc = check_like(ctx, op, "dx", dx, "dout", dout, I))) return rc;
    if (dw) {
        int64_t want[2] = { O, I };
        if ((rc = tr_op_want_shape(ctx, op, "dw", dw, 2, want))) return rc;
    }
    if (dbias && (rc = tr_op_want_shape(ctx, op, "dbias", dbias, 1, &O))) return rc;
    if (N > INT_MAX || O > INT_MAX || I > INT_MAX) return too_big(ctx, op, N, "rows");
    dim[0] = O, dim[1] = I, dim[2] = N;
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

/* Each op's shape check and CPU slot are its _impl without and with the run. */
/* out: x's shape with its last dim w's rows, x's dtype. */
int tr_infer_linear(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)
{
    const tr_tensor *x = c->linear.x, *w = c->linear.w;
    int64_t dims[8];
    int n = x->ndim > 0 ? x->ndim : 1;
    for (int i = 0; i < n - 1; i++) dims[i] = x->shape[i];
    dims[n - 1] = w->ndim > 0 ? w->shape[0] : 0;
    tr_op_infer_dims(shape, ndim, dtype, 0, n, dims, x->dtype | TR_INFER_CHOOSE);
    return TR_OK;
}

int tr_check_matmul(tr_ctx *ctx, tr_op_call *c)
{
    return matmul_checks(ctx, c->matmul.out, c->matmul.a, c->matmul.b, c->matmul.bias, (int)c->i[0], (int)c->i[1],
                         c->f[0], c->f[1], c->dim);
}

int tr_check_linear(tr_ctx *ctx, tr_op_call *c)
{
    return linear_checks(ctx, c->linear.out, c->linear.x, c->linear.w, c->linear.bias, c->dim);
}

int tr_check_linear_backward(tr_ctx *ctx, tr_op_call *c)
{
    return linear_backward_checks(ctx, c->linear_backward.dx, c->linear_backward.dw, c->linear_backward.dbias,
                                  c->linear_backward.dout, c->linear_backward.x, c->linear_backward.w, c->dim);
}

int tr_check_linear_backward_acc(tr_ctx *ctx, tr_op_call *c)
{
    return linear_backward_checks(ctx, c->linear_backward_acc.dx, c->linear_backward_acc.dw,
                                  c->linear_backward_acc.dbias, c->linear_backward_acc.dout, c->linear_backward_acc.x,
                                  c->linear_backward_acc.w, c->dim);
}

int tr_op_matmul(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b, const tr_tensor *bias,
                 int trans_a, int trans_b, float alpha, float beta)
{
    tr_op_call c = { .t = { out, a, b, bias }, .i = { trans_a, trans_b }, .f = { alpha, beta } };
    return tr_op_run(ctx, &tr_opd_matmul, &c);
}

int tr_op_linear(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, const tr_tensor *w, const tr_tensor *bias)
{
    tr_op_call c = { .t = { out, x, w, bias } };
    return tr_op_run(ctx, &tr_opd_linear, &c);
}

int tr_op_linear_backward(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dw, tr_tensor *dbias, const tr_tensor *dout,
                          const tr_tensor *x, const tr_tensor *w)
{
    tr_op_call c = { .t = { dx, dw, dbias, dout, x, w } };
    return tr_op_run(ctx, &tr_opd_linear_backward, &c);
}

int tr_op_linear_backward_acc(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dw, tr_tensor *dbias, const tr_tensor *dout,
                              const tr_tensor *x, const tr_tensor *w)
{
    tr_op_call c = { .t = { dx, dw, dbias, dout, x, w } };
    return tr_op_run(ctx, &tr_opd_linear_backward_acc, &c);
}
