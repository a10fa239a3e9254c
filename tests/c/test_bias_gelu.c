/* test_bias_gelu.c — the fused up-projection bias + GELU (core/ops/bias_gelu.c) against the
 * ops it replaces in the FFN, linear with its bias -> gelu and gelu_backward -> the linear
 * backward's bias gradient:
 *   - f32: h becomes exactly h + bias; out is gelu's output for that h bit for bit; dx is
 *     gelu_backward's bit for bit; dbias (+= from a non-zero start) within 1e-6 of a double
 *     column sum of dx; the same bits on one thread as on all, and on a second call (blocks of
 *     rows are fixed, their partial sums added in order); several blocks of rows, an odd I;
 *   - bf16: out and dx within the dtype's tolerance of the unfused ops';
 *   - bad shapes and kinds: TR_EUSER naming the op and the argument; no workspace left. */
#include "check.h"
#include "ctx_check.h"
#include "op_check.h"
#include "tensor_check.h"

#include "ops_nn.h"
#include "trainer.h"

#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static tr_ctx *ctx;

static tr_tensor *mk(int ndim, const int64_t *shape, int dtype, const double *vals)
{
    return tc_tensor(ctx, ndim, shape, dtype, vals);
}

static float *get(const tr_tensor *t) { return tc_values_f32(t); }

static void no_workspace_left(const char *after) { tc_no_workspace_left(ctx, after); }

/* Elements of a and b equal (tol 0: bit for bit) or within tol * (1 + |b|). */
static void same(const char *what, const float *a, const float *b, int64_t n, double tol)
{
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
        int ok = tol == 0 ? memcmp(&a[i], &b[i], 4) == 0 : fabs((double)a[i] - b[i]) <= tol * (1 + fabs((double)b[i]));
        if (!ok && bad++ == 0) first = i;
    }
    CHECK(bad == 0, "%s: %lld of %lld differ (first %lld: %.9g vs %.9g)", what, (long long)bad, (long long)n,
          (long long)first, first >= 0 ? (double)a[first] : 0.0, first >= 0 ? (double)b[first] : 0.0);
}

/* N x I with bias, kind; f32 exact checks as in the header. */
static void check_f32(int64_t N, int64_t I, int kind)
{
    char what[64];
    snprintf(what, sizeof what, "f32 %lldx%lld kind %d", (long long)N, (long long)I, kind);
    int64_t sh[2] = { N, I }, shb[1] = { I }, n = N * I;
    double *h0 = malloc(sizeof(double) * (size_t)n), *dy = malloc(sizeof(double) * (size_t)n);
    double *b = malloc(sizeof(double) * (size_t)I), *db0 = malloc(sizeof(double) * (size_t)I);
    oc_fill(h0, n, 2), oc_fill(dy, n, 1), oc_fill(b, I, 1), oc_fill(db0, I, 1);
    tr_tensor *th = mk(2, sh, TR_F32, h0), *tb = mk(1, shb, TR_F32, b), *to = mk(2, sh, TR_F32, NULL);
    tr_tensor *tg = mk(2, sh, TR_F32, NULL), *tdy = mk(2, sh, TR_F32, dy);
    CHECK(tr_op_bias_gelu(ctx, to, th, tb, kind) == TR_OK, "bias_gelu: %s", tr_ctx_errmsg(ctx));
    float *h = get(th), *hb = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) hb[i] = (float)h0[i] + (float)b[i % I];
    same("h = h + bias", h, hb, n, 0);
    CHECK(tr_op_gelu(ctx, tg, th, kind) == TR_OK, "gelu: %s", tr_ctx_errmsg(ctx));
    float *o = get(to), *g = get(tg);
    same("out = gelu(h)", o, g, n, 0);
    /* backward */
    tr_tensor *tdx = mk(2, sh, TR_F32, NULL), *tgx = mk(2, sh, TR_F32, NULL), *tdb = mk(1, shb, TR_F32, db0);
    CHECK(tr_op_bias_gelu_backward(ctx, tdx, tdb, tdy, th, kind) == TR_OK, "backward: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_gelu_backward(ctx, tgx, tdy, th, kind) == TR_OK, "gelu_backward: %s", tr_ctx_errmsg(ctx));
    float *dx = get(tdx), *gx = get(tgx), *dbias = get(tdb), *want = malloc(sizeof(float) * (size_t)I);
    same("dx = gelu_backward", dx, gx, n, 0);
    for (int64_t c = 0; c < I; c++) {
        double s = (float)db0[c];
        for (int64_t r = 0; r < N; r++) s += dx[r * I + c];
        want[c] = (float)s;
    }
    same("dbias = column sums of dx", dbias, want, I, 1e-6 * (double)N);
    /* the same bits again, and on one thread */
    tr_tensor *tdb2 = mk(1, shb, TR_F32, db0);
#ifdef _OPENMP
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    CHECK(tr_op_bias_gelu_backward(ctx, tdx, tdb2, tdy, th, kind) == TR_OK, "backward again: %s", tr_ctx_errmsg(ctx));
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    float *dbias2 = get(tdb2);
    same("dbias on one thread", dbias2, dbias, I, 0);
    tr_tensor *all[] = { th, tb, to, tg, tdy, tdx, tgx, tdb, tdb2 };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tr_tensor_free(all[i]);
    free(h0), free(dy), free(b), free(db0), free(h), free(hb), free(o), free(g), free(dx), free(gx), free(dbias),
        free(want), free(dbias2);
    no_workspace_left(what);
}

static void test_f32_matches_unfused(void)
{
    oc_seed(11);
    check_f32(3, 7, TR_OP_GELU_ERF);
    check_f32(70, 1000, TR_OP_GELU_ERF);   /* several blocks of rows, above the parallel threshold */
    check_f32(131, 1537, TR_OP_GELU_TANH);
}

/* bf16: against linear-with-bias's rounding then gelu, to the dtype's tolerance. */
static void test_bf16_close_to_unfused(void)
{
    oc_seed(12);
    int64_t N = 9, I = 33, sh[2] = { N, I }, shb[1] = { I }, n = N * I;
    double h0[297], b[33], dy[297];
    oc_fill(h0, n, 2), oc_fill(b, I, 1), oc_fill(dy, n, 1);
    tr_tensor *th = mk(2, sh, TR_BF16, h0), *tb = mk(1, shb, TR_F32, b), *to = mk(2, sh, TR_BF16, NULL);
    tr_tensor *tu = mk(2, sh, TR_BF16, NULL), *tg = mk(2, sh, TR_BF16, NULL), *tdy = mk(2, sh, TR_BF16, dy);
    /* unfused: h + bias rounded once, then gelu */
    float *hf = get(th), *hb = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) hb[i] = hf[i] + (float)b[i % I];
    tr_convert(tu->data, TR_BF16, hb, TR_F32, (size_t)n);
    CHECK(tr_op_gelu(ctx, tg, tu, TR_OP_GELU_ERF) == TR_OK, "gelu: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_bias_gelu(ctx, to, th, tb, TR_OP_GELU_ERF) == TR_OK, "bias_gelu: %s", tr_ctx_errmsg(ctx));
    float *o = get(to), *g = get(tg), *h = get(th), *u = get(tu);
    same("bf16 h", h, u, n, 0);   /* one rounding of the same f32 sum */
    same("bf16 out", o, g, n, 1e-2);
    tr_tensor *tdx = mk(2, sh, TR_BF16, NULL), *tgx = mk(2, sh, TR_BF16, NULL);
    CHECK(tr_op_bias_gelu_backward(ctx, tdx, NULL, tdy, th, TR_OP_GELU_ERF) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_gelu_backward(ctx, tgx, tdy, th, TR_OP_GELU_ERF) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    float *dx = get(tdx), *gx = get(tgx);
    same("bf16 dx", dx, gx, n, 0);
    tr_tensor *all[] = { th, tb, to, tu, tg, tdy, tdx, tgx };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tr_tensor_free(all[i]);
    free(hf), free(hb), free(o), free(g), free(h), free(u), free(dx), free(gx);
    no_workspace_left("bf16");
}

static void test_errors(void)
{
    int64_t sh[2] = { 2, 5 }, bad[1] = { 4 }, shb[1] = { 5 };
    tr_tensor *th = mk(2, sh, TR_F32, NULL), *to = mk(2, sh, TR_F32, NULL), *tb = mk(1, bad, TR_F32, NULL);
    tr_tensor *tok = mk(1, shb, TR_F32, NULL);
    CHECK(tr_op_bias_gelu(ctx, to, th, tb, 0) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "bias_gelu") &&
              strstr(tr_ctx_errmsg(ctx), "bias"),
          "bias shape: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_bias_gelu(ctx, to, th, tok, 7) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "kind"), "kind: %s",
          tr_ctx_errmsg(ctx));
    CHECK(tr_op_bias_gelu_backward(ctx, to, tb, th, th, 0) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "dbias"),
          "dbias shape: %s", tr_ctx_errmsg(ctx));
    tr_tensor *all[] = { th, to, tb, tok };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tr_tensor_free(all[i]);
    no_workspace_left("errors");
}

int main(void)
{
    static const check_case cases[] = {
        CASE(test_f32_matches_unfused), CASE(test_bf16_close_to_unfused), CASE(test_errors)
    };
    return check_with_ctx(&ctx, cases, sizeof cases / sizeof cases[0]);
}
