/* test_features.c — the feature-matrix ops (core/ops/ops_pair_features.h): column-block copies as
 * concatenation, truncation and accumulation against hand-computed values; |a - b| and its
 * backward against the float64 kernels and finite differences; half dtypes; argument
 * errors; every op returns its workspace. */
#include "check.h"
#include "ctx_check.h"
#include "tensor_check.h"

#include "cpu/pair_features.h"
#include "trainer.h"

#include <string.h>

static tr_ctx *ctx;

/* ------------------------------------------------------------ helpers */

static tr_tensor *mk(int64_t N, int64_t C, int dtype, const float *vals)
{
    int64_t shape[2] = { N, C };
    tr_tensor *t = tr_tensor_new(ctx, 2, shape, dtype, TR_CPU, TR_TAG_ACTIVATIONS);
    if (t && vals) tr_convert(t->data, dtype, vals, TR_F32, (size_t)t->numel);
    return t;
}

static void get(float *out, const tr_tensor *t) { tr_convert(out, TR_F32, t->data, t->dtype, (size_t)t->numel); }

static void no_workspace_left(const char *after) { tc_no_workspace_left(ctx, after); }

/* ------------------------------------------------------------ column blocks */

static void test_concat_and_split(void)
{
    const int dts[3] = { TR_F32, TR_BF16, TR_F16 };
    float u[6] = { 1, 2, 3, 4, 5, 6 }, v[4] = { -1, -2, -3, -4 };   /* u [2, 3], v [2, 2] */
    for (int di = 0; di < 3; di++) {
        tr_tensor *tu = mk(2, 3, dts[di], u), *tv = mk(2, 2, TR_F32, v), *cat = mk(2, 5, dts[di], NULL);
        tr_tensor *back = mk(2, 2, TR_F32, NULL);
        float got[10];
        CHECK(tr_op_copy_cols(ctx, cat, 0, tu, 0, 3, 0) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(tr_op_copy_cols(ctx, cat, 3, tv, 0, 2, 0) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        get(got, cat);
        const float want[10] = { 1, 2, 3, -1, -2, 4, 5, 6, -3, -4 };
        for (int i = 0; i < 10; i++) CHECK(got[i] == want[i], "dtype %d cat[%d] = %g, want %g", di, i, got[i], want[i]);
        /* split the second block back out, then accumulate the first two columns of u on top */
        CHECK(tr_op_copy_cols(ctx, back, 0, cat, 3, 2, 0) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(tr_op_copy_cols(ctx, back, 0, tu, 0, 2, 1) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        get(got, back);
        const float acc[4] = { 0, 0, 1, 1 };   /* v + u[:, :2] */
        for (int i = 0; i < 4; i++) CHECK(got[i] == acc[i], "accumulated[%d] = %g, want %g", i, got[i], acc[i]);
        tr_tensor_free(tu), tr_tensor_free(tv), tr_tensor_free(cat), tr_tensor_free(back);
    }
    no_workspace_left("copy_cols");
}

/* A copy of a column block between half tensors large enough for the threads (ModernBERT's
 * q out of Wqkv's [N, 3C]): every element's bits, the other columns untouched. */
static void test_copy_cols_half_bits(void)
{
    enum { N = 300, C = 700 };
    const int dts[2] = { TR_BF16, TR_F16 };
    for (int di = 0; di < 2; di++) {
        int64_t s3[2] = { N, 3 * C }, s1[2] = { N, C };
        tr_tensor *qkv = tr_tensor_new(ctx, 2, s3, dts[di], TR_CPU, TR_TAG_ACTIVATIONS);
        tr_tensor *k = tr_tensor_new(ctx, 2, s1, dts[di], TR_CPU, TR_TAG_ACTIVATIONS);
        CHECK(qkv && k, "alloc");
        uint16_t *src = qkv->data, *dst = k->data;
        for (int64_t i = 0; i < qkv->numel; i++) src[i] = (uint16_t)(i * 2654435761u >> 17);
        for (int64_t i = 0; i < k->numel; i++) dst[i] = 0x7e00;
        CHECK(tr_op_copy_cols(ctx, k, 0, qkv, C, C, 0) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        int64_t bad = 0;
        for (int64_t r = 0; r < N; r++)
            for (int64_t c = 0; c < C; c++) bad += dst[r * C + c] != src[r * 3 * C + C + c];
        CHECK(bad == 0, "dtype %d: %lld elements differ from the source's bits", di, (long long)bad);
        /* and back into the last block of the wide one: the first two blocks keep their bits */
        uint16_t first = src[0], mid = src[2 * C - 1];
        CHECK(tr_op_copy_cols(ctx, qkv, 2 * C, k, 0, C, 0) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(src[0] == first && src[2 * C - 1] == mid && src[2 * C] == dst[0] && src[3 * C * N - 1] == dst[C * N - 1],
              "dtype %d: the block went to the wrong columns", di);
        tr_tensor_free(qkv), tr_tensor_free(k);
    }
    no_workspace_left("copy_cols");
}

static void test_copy_cols_errors(void)
{
    tr_tensor *a = mk(2, 3, TR_F32, NULL), *b = mk(3, 3, TR_F32, NULL), *c = mk(2, 2, TR_F32, NULL);
    CHECK(tr_op_copy_cols(ctx, a, 0, b, 0, 3, 0) == TR_EUSER, "row mismatch accepted");
    CHECK(strstr(tr_ctx_errmsg(ctx), "rows") != NULL, "message: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_copy_cols(ctx, c, 1, a, 0, 2, 0) == TR_EUSER, "block past dst's end accepted");
    CHECK(strstr(tr_ctx_errmsg(ctx), "do not fit") != NULL, "message: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_copy_cols(ctx, c, 0, a, 2, 2, 0) == TR_EUSER, "block past src's end accepted");
    CHECK(tr_op_copy_cols(ctx, a, 0, a, 0, 1, 0) == TR_EUSER, "aliasing accepted");
    CHECK(tr_op_copy_cols(ctx, a, 0, c, 0, -1, 0) == TR_EUSER, "negative ncols accepted");
    tr_tensor_free(a), tr_tensor_free(b), tr_tensor_free(c);
}

/* ------------------------------------------------------------ |a - b| */

static void test_abs_diff(void)
{
    enum { N = 3, C = 4 };
    float a[N * C], b[N * C], dout[N * C], out[N * C], da[N * C], db[N * C];
    double a64[N * C], b64[N * C], d64[N * C], ref[N * C], rda[N * C], rdb[N * C];
    for (int i = 0; i < N * C; i++) {
        a[i] = (float)((i * 7) % 5) - 2.0f;
        b[i] = (float)((i * 3) % 4) - 1.5f;
        dout[i] = 0.25f * (float)(i % 3) - 0.3f;
        a64[i] = a[i], b64[i] = b[i], d64[i] = dout[i];
    }
    tr_tensor *ta = mk(N, C, TR_F32, a), *tb = mk(N, C, TR_F32, b), *td = mk(N, C, TR_F32, dout);
    tr_tensor *to = mk(N, C, TR_F32, NULL), *tda = mk(N, C, TR_F32, NULL), *tdb = mk(N, C, TR_BF16, NULL);
    CHECK(tr_op_abs_diff(ctx, to, ta, tb) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_abs_diff_backward(ctx, tda, tdb, td, ta, tb) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    tr_k_abs_diff_fwd_f64(ref, a64, b64, N * C);
    tr_k_abs_diff_bwd_f64(rda, rdb, d64, a64, b64, N * C);
    get(out, to), get(da, tda), get(db, tdb);
    for (int i = 0; i < N * C; i++) {
        CHECK_CLOSE(out[i], ref[i], 1e-6, 0);
        CHECK_CLOSE(da[i], rda[i], 1e-6, 0);
        CHECK_CLOSE(db[i], rdb[i], 1e-2, 1e-2);
        /* finite differences of sum(dout * |a - b|) (a != b here, where |.| is smooth) */
        double h = 1e-6, up = fabs(a64[i] + h - b64[i]), dn = fabs(a64[i] - h - b64[i]);
        CHECK_CLOSE(rda[i], d64[i] * (up - dn) / (2 * h), 1e-8, 1e-6);
        CHECK_CLOSE(rdb[i], -rda[i], 0, 0);
    }
    /* da only */
    CHECK(tr_op_abs_diff_backward(ctx, tda, NULL, td, ta, tb) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    tr_tensor *small = mk(2, 2, TR_F32, NULL);
    CHECK(tr_op_abs_diff(ctx, small, ta, tb) == TR_EUSER, "wrong out size accepted");
    CHECK(strstr(tr_ctx_errmsg(ctx), "abs_diff") != NULL, "message: %s", tr_ctx_errmsg(ctx));
    tr_tensor_free(ta), tr_tensor_free(tb), tr_tensor_free(td), tr_tensor_free(to), tr_tensor_free(tda);
    tr_tensor_free(tdb), tr_tensor_free(small);
    no_workspace_left("abs_diff");
}

static void test_abs_diff_sign_zero(void)
{
    /* test_abs_diff's a - b is never 0 (integers minus half-integers); torch.abs's backward
     * gives 0 there */
    float a[2] = { 1, 2 }, b[2] = { 1, 3 }, d[2] = { 5, 5 }, da[2], db[2];
    tr_k_abs_diff_bwd_f32(da, db, d, a, b, 2);
    CHECK(da[0] == 0 && db[0] == 0 && da[1] == -5 && db[1] == 5, "got %g %g %g %g", da[0], db[0], da[1], db[1]);
}

int main(void)
{
    static const check_case cases[] = {
        CASE(test_concat_and_split), CASE(test_copy_cols_half_bits), CASE(test_copy_cols_errors), CASE(test_abs_diff), CASE(test_abs_diff_sign_zero)
    };
    return check_with_ctx(&ctx, cases, sizeof cases / sizeof cases[0]);
}
