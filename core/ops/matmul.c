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
 * product is slower than f32 (measured 130-167 against 263-284 GFLOP/s on a Xeon with
 * AVX512-BF16), and cblas_sbgemm is not exported by Debian's OpenBLAS 0.3.21, see
 * bench/bench_gemm.c. */
#include "ops_nn.h"
#include "op_stage.h"
#include "op_cuda.h"
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

static int matmul_impl(tr_ctx *ctx, int run, const tr_tensor *out, const tr_tensor *a, const tr_tensor *b,
                 const tr_tensor *bias, int trans_a, int trans_b, float alpha, float beta)
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

    if (!run) return TR_OK;
    {
        float *A = NULL, *B = NULL, *Bi = NULL, *C = NULL;
        void *oa = NULL, *ob = NULL, *obi = NULL, *oc = NULL;
        if ((rc = tr_stage_load(ctx, a, 0, a->numel, &A, &oa))) goto cpu_done;
        if ((rc = tr_stage_load(ctx, b, 0, b->numel, &B, &ob))) goto cpu_done;
        if (bias && (rc = tr_stage_load(ctx, bias, 0, N, &Bi, &obi))) goto cpu_done;
        if ((rc = tr_stage_buf(ctx, out, 0, out->numel, beta != 0, &C, &oc))) goto cpu_done;
        if (K == 0)   /* an empty product: the BLAS kernel's bias and beta handling */
            rc = tr_k_matmul_fwd_f32(C, A, B, Bi, (int)batch, (int)M, (int)N, (int)K, trans_a, trans_b,
                                     alpha, beta, M * K, b_shared ? 0 : K * N, M * N, tr_ctx_err(ctx));
        /* one matrix shared by the batch: the batch is one product of batch * M rows */
        int64_t rows = b_shared && !trans_a ? batch * M : M, nmat = b_shared && !trans_a ? 1 : batch;
        if (rows > INT_MAX) rows = M, nmat = batch;
        for (int64_t bi = 0; K > 0 && bi < nmat && rc == TR_OK; bi++)
            rc = tr_cpu_gemm_f32(ctx, C + bi * M * N, A + bi * M * K, B + (b_shared ? 0 : bi * K * N), Bi, (int)rows,
                                 (int)N, (int)K, trans_a, trans_b, alpha, beta);
        if (rc == TR_OK) tr_stage_put(out, 0, C, out->numel);
    cpu_done:
        tr_stage_scratch_free(ctx, oa);
        tr_stage_scratch_free(ctx, ob);
        tr_stage_scratch_free(ctx, obi);
        tr_stage_scratch_free(ctx, oc);
        return rc;
    }
}

/* ------------------------------------------------------------ linear */

/* rows = product of all but the last dim; checks the last dim is `last` */
static int64_t rows_of(const tr_tensor *t)
{
    int64_t r = 1;
    for (int i = 0; i < t->ndim - 1; i++) r *= t->shape[i];
    return r;
}

/* Rows per GEMM for N rows of half activations staged in blocks of at most `most` rows:
 * the blocks made equal (4096 rows of 1536 in 7 blocks of 586, not 6 of 682 and one of
 * 4: a 4-row product ran at 6 GFLOP/s), so no block exceeds the staging bound. */
static int64_t even_rows(int64_t N, int64_t most)
{
    if (N <= most) return N > 0 ? N : 1;
    int64_t blocks = (N + most - 1) / most;
    return (N + blocks - 1) / blocks;
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

/* Whether a Linear's forward runs natively in bf16 (cpu_gemm.h): x and w bf16, out bf16 or
 * f32, on a CPU and library that have it. Elsewhere half operands are staged to f32 in
 * blocks of rows. */
static int bf16_forward_native(tr_ctx *ctx, const tr_tensor *x, const tr_tensor *w, const tr_tensor *out)
{
    return x->dtype == TR_BF16 && w->dtype == TR_BF16 && (out->dtype == TR_BF16 || out->dtype == TR_F32) &&
           tr_cpu_gemm_bf16_native(ctx);
}

/* The backward's twin: dout bf16; dx (if asked) from a bf16 w into bf16 or f32; dw (if
 * asked) from a bf16 x into the f32 gradient. */
static int bf16_backward_native(tr_ctx *ctx, const tr_tensor *dx, const tr_tensor *dw, const tr_tensor *dout,
                                const tr_tensor *x, const tr_tensor *w)
{
    if (dout->dtype != TR_BF16 || (!dx && !dw)) return 0;
    if (dx && (w->dtype != TR_BF16 || (dx->dtype != TR_BF16 && dx->dtype != TR_F32))) return 0;
    if (dw && (x->dtype != TR_BF16 || dw->dtype != TR_F32)) return 0;
    return tr_cpu_gemm_bf16_native(ctx);
}

static int linear_impl(tr_ctx *ctx, int run, const tr_tensor *out, const tr_tensor *x, const tr_tensor *w,
                 const tr_tensor *bias)
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

    if (!run) return TR_OK;
    if (bf16_forward_native(ctx, x, w, out)) {
        float *Bi = NULL;
        void *obi = NULL;
        if (bias && (rc = tr_stage_load(ctx, bias, 0, O, &Bi, &obi))) return rc;
        if (N > 0) rc = tr_cpu_gemm_bf16(ctx, out->data, out->dtype, x->data, w->data, Bi, (int)N, (int)O, (int)I, 0, 1,
                                         1.0f, 0.0f);
        tr_stage_scratch_free(ctx, obi);
        return rc;
    }
    {
        float *W = NULL, *Bi = NULL;
        void *ow = NULL, *obi = NULL;
        const void *packed = NULL;
        if ((rc = tr_cpu_weight_packed(ctx, w, TR_PACK_FORWARD, &packed))) goto cpu_done;
        if (!packed && (rc = tr_stage_load(ctx, w, 0, w->numel, &W, &ow))) goto cpu_done;
        if (bias && (rc = tr_stage_load(ctx, bias, 0, O, &Bi, &obi))) goto cpu_done;
        /* f32 activations: one GEMM over every row; half: chunks of rows staged to f32 */
        int64_t step = (x->dtype == TR_F32 && out->dtype == TR_F32) ? (N > 0 ? N : 1)
                                                                     : even_rows(N, tr_stage_block_rows(I > O ? I : O));
        for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += step) {
            int64_t nr = N - r0 < step ? N - r0 : step;
            float *X = NULL, *Y = NULL;
            void *ox = NULL, *oy = NULL;
            rc = tr_stage_load(ctx, x, r0 * I, nr * I, &X, &ox);
            if (rc == TR_OK) rc = tr_stage_buf(ctx, out, r0 * O, nr * O, 0, &Y, &oy);
            if (rc == TR_OK && packed)
                rc = tr_cpu_linear_forward_packed(ctx, Y, X, packed, Bi, (int)nr, (int)O, (int)I);
            else if (rc == TR_OK)   /* an unpacked (half) weight: the router's plain product */
                rc = tr_cpu_gemm_f32(ctx, Y, X, W, Bi, (int)nr, (int)O, (int)I, 0, 1, 1.0f, 0.0f);
            if (rc == TR_OK) tr_stage_put(out, r0 * O, Y, nr * O);
            tr_stage_scratch_free(ctx, ox);
            tr_stage_scratch_free(ctx, oy);
        }
    cpu_done:
        tr_stage_scratch_free(ctx, ow);
        tr_stage_scratch_free(ctx, obi);
        return rc;
    }
}

static int linear_backward_impl(tr_ctx *ctx, int run, const tr_tensor *dx, const tr_tensor *dw, const tr_tensor *dbias,
                          const tr_tensor *dout, const tr_tensor *x, const tr_tensor *w)
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
    if (!dx && !dw && !dbias) return TR_OK;

    if (!run) return TR_OK;
    /* bf16 dout, w and x: the products native (dx = dout W, dw += dout^T x into the f32
     * gradient), and dout staged only for the bias gradient's column sums */
    if (bf16_backward_native(ctx, dx, dw, dout, x, w)) {
        if (dx && N > 0)
            rc = tr_cpu_gemm_bf16(ctx, dx->data, dx->dtype, dout->data, w->data, NULL, (int)N, (int)I, (int)O, 0, 0,
                                  1.0f, 0.0f);
        if (rc == TR_OK && dw && N > 0)
            rc = tr_cpu_gemm_bf16(ctx, dw->data, TR_F32, dout->data, x->data, NULL, (int)O, (int)I, (int)N, 1, 0,
                                  1.0f, 1.0f);
        int64_t step = even_rows(N, tr_stage_block_rows(O));
        for (int64_t r0 = 0; dbias && r0 < N && rc == TR_OK; r0 += step) {
            int64_t nr = N - r0 < step ? N - r0 : step;
            float *D = NULL;
            void *od = NULL;
            rc = tr_stage_load(ctx, dout, r0 * O, nr * O, &D, &od);
            if (rc == TR_OK) tr_k_bias_bwd_f32(dbias->data, D, nr, O);
            tr_stage_scratch_free(ctx, od);
        }
        return rc;
    }
    {
        float *W = NULL;
        void *ow = NULL;
        const void *packed = NULL;
        if (dx && (rc = tr_cpu_weight_packed(ctx, w, TR_PACK_INPUT_GRAD, &packed))) return rc;
        if (dx && !packed && (rc = tr_stage_load(ctx, w, 0, w->numel, &W, &ow))) return rc;
        int all_f32 = dout->dtype == TR_F32 && (!dx || dx->dtype == TR_F32) &&
                      (!dw || x->dtype == TR_F32);
        int64_t step = all_f32 ? (N > 0 ? N : 1) : even_rows(N, tr_stage_block_rows(I > O ? I : O));
        for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += step) {
            int64_t nr = N - r0 < step ? N - r0 : step;
            float *D = NULL, *DX = NULL, *X = NULL;
            void *od = NULL, *odx = NULL, *ox = NULL;
            rc = tr_stage_load(ctx, dout, r0 * O, nr * O, &D, &od);
            if (rc == TR_OK && dx) {
                rc = tr_stage_buf(ctx, dx, r0 * I, nr * I, 0, &DX, &odx);
                if (rc == TR_OK && packed)
                    rc = tr_cpu_linear_input_grad_packed(ctx, DX, D, packed, (int)nr, (int)O, (int)I);
                else if (rc == TR_OK)
                    rc = tr_cpu_gemm_f32(ctx, DX, D, W, NULL, (int)nr, (int)I, (int)O, 0, 0, 1.0f, 0.0f);
                if (rc == TR_OK) tr_stage_put(dx, r0 * I, DX, nr * I);
            }
            if (rc == TR_OK && dw) {
                rc = tr_stage_load(ctx, x, r0 * I, nr * I, &X, &ox);
                if (rc == TR_OK)
                    rc = tr_cpu_gemm_f32(ctx, dw->data, D, X, NULL, (int)O, (int)I, (int)nr, 1, 0, 1, 1);
            }
            if (rc == TR_OK && dbias) tr_k_bias_bwd_f32(dbias->data, D, nr, O);
            tr_stage_scratch_free(ctx, od);
            tr_stage_scratch_free(ctx, odx);
            tr_stage_scratch_free(ctx, ox);
        }
        tr_stage_scratch_free(ctx, ow);
        return rc;
    }
}

/* ------------------------------------------------------------ the op table */

/* Each op's shape check and CPU slot are its _impl without and with the run. */
static int matmul_check(tr_ctx *ctx, tr_op_call *c)
{
    return matmul_impl(ctx, 0, c->t[0], c->t[1], c->t[2], c->t[3], (int)c->i[0], (int)c->i[1], c->f[0], c->f[1]);
}
static int matmul_cpu(tr_ctx *ctx, tr_op_call *c)
{
    return matmul_impl(ctx, 1, c->t[0], c->t[1], c->t[2], c->t[3], (int)c->i[0], (int)c->i[1], c->f[0], c->f[1]);
}
static int linear_check(tr_ctx *ctx, tr_op_call *c) { return linear_impl(ctx, 0, c->t[0], c->t[1], c->t[2], c->t[3]); }
static int linear_cpu(tr_ctx *ctx, tr_op_call *c) { return linear_impl(ctx, 1, c->t[0], c->t[1], c->t[2], c->t[3]); }
static int linear_backward_check(tr_ctx *ctx, tr_op_call *c)
{
    return linear_backward_impl(ctx, 0, c->t[0], c->t[1], c->t[2], c->t[3], c->t[4], c->t[5]);
}
static int linear_backward_cpu(tr_ctx *ctx, tr_op_call *c)
{
    return linear_backward_impl(ctx, 1, c->t[0], c->t[1], c->t[2], c->t[3], c->t[4], c->t[5]);
}

const tr_op_desc tr_opd_matmul = {
    "matmul", 4,
    { { "out", TR_ARG_ACC, TR_DT_FLOAT, 0 }, { "a", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "b", TR_ARG_IN, TR_DT_FLOAT, 0 }, { "bias", TR_ARG_IN, TR_DT_FLOAT, 1 } },
    matmul_check, { matmul_cpu, TR_CUDA_SLOT(matmul) },
};
const tr_op_desc tr_opd_linear = {
    "linear", 4,
    { { "out", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "x", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "w", TR_ARG_IN, TR_DT_FLOAT, 0 }, { "bias", TR_ARG_IN, TR_DT_FLOAT, 1 } },
    linear_check, { linear_cpu, TR_CUDA_SLOT(linear) },
};
/* x and w may be NULL when the gradient that needs them (dw, dx) is not asked for. */
const tr_op_desc tr_opd_linear_backward = {
    "linear_backward", 6,
    { { "dx", TR_ARG_OUT, TR_DT_FLOAT, 1 }, { "dw", TR_ARG_ACC, TR_DT_F32, 1 },
      { "dbias", TR_ARG_ACC, TR_DT_F32, 1 }, { "dout", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "x", TR_ARG_IN, TR_DT_FLOAT, 1 }, { "w", TR_ARG_IN, TR_DT_FLOAT, 1 } },
    linear_backward_check, { linear_backward_cpu, TR_CUDA_SLOT(linear_backward) },
};

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
