/* test_dropout_add_layernorm.c — the fused end of a post-LN block (core/ops/
 * dropout_add_layernorm.c) against the three unfused ops it replaces, tr_op_dropout ->
 * tr_op_add -> tr_op_layernorm and, backward, tr_op_layernorm_backward ->
 * tr_op_dropout_backward, on the same key and offset:
 *   - f32: the sum (residual + dropout(x)) bit for bit, so the same keep bits; out, mean,
 *     rstd and both input gradients within 1e-6 (the fused row reductions are simd
 *     reductions); dropped elements of dx exactly where the unfused dx has them; dweight and
 *     dbias bit for bit from the same saved tensors; with dropout 0 and 0.1, rows above the
 *     parallel thresholds, an odd hidden size, all-zero (padded) rows, rows too long for the
 *     per-thread stack blocks (the workspace paths);
 *   - bf16 and f16: every output and gradient bit for bit (the half path rounds where the
 *     unfused ops round and runs layernorm's own kernels);
 *   - the sum written over x (in place, as the BERT layer runs it) gives the same bits;
 *   - f32: the output remade from the kept sum (a zero residual, no dropout) has its bits;
 *   - p = 1 gives sum = residual; argument errors name the op and the argument and write
 *     nothing; no workspace is left. */
#include "check.h"
#include "ctx_check.h"
#include "op_check.h"
#include "tensor_check.h"

#include "ops_elementwise.h"
#include "ops_dropout.h"
#include "ops_nn.h"
#include "trainer.h"

#include <string.h>

static tr_ctx *ctx;

/* ------------------------------------------------------------ helpers */

static tr_tensor *mk(int ndim, const int64_t *shape, int dtype, const double *vals)
{
    return tc_tensor(ctx, ndim, shape, dtype, vals);
}

static float *get(const tr_tensor *t) { return tc_values_f32(t); }

static void no_workspace_left(const char *after) { tc_no_workspace_left(ctx, after); }

/* a and b equal bit for bit (tol 0) or within tol * (1 + |b|); reports the first miss. */
static void same(const char *what, const tr_tensor *ta, const tr_tensor *tb, double tol)
{
    float *a = get(ta), *b = get(tb);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < ta->numel; i++) {
        int ok = tol == 0 ? memcmp(&a[i], &b[i], 4) == 0 : fabs((double)a[i] - b[i]) <= tol * (1 + fabs((double)b[i]));
        if (!ok && bad++ == 0) first = i;
    }
    CHECK(bad == 0, "%s: %lld of %lld elements differ (first %lld: fused %.9g, unfused %.9g)", what, (long long)bad,
          (long long)ta->numel, (long long)first, first >= 0 ? (double)a[first] : 0.0,
          first >= 0 ? (double)b[first] : 0.0);
    free(a), free(b);
}

/* Zeros of a exactly where b has them. */
static void same_zeros(const char *what, const tr_tensor *ta, const tr_tensor *tb)
{
    float *a = get(ta), *b = get(tb);
    int64_t bad = 0;
    for (int64_t i = 0; i < ta->numel; i++) bad += (a[i] == 0) != (b[i] == 0);
    CHECK(bad == 0, "%s: %lld elements dropped in one and not the other", what, (long long)bad);
    free(a), free(b);
}

/* ------------------------------------------------------------ fused against unfused */

/* N rows of C; rows 0 and N-1 of x and the residual all zero (padded tokens). tol 0: every
 * output bit for bit (half); else the f32 bounds of the file's header. */
static void compare(int dtype, int64_t N, int64_t C, float p, double tol)
{
    char what[96];
    int64_t sh[2] = { N, C }, shc[1] = { C }, shn[1] = { N }, n = N * C;
    double *x = malloc(sizeof(double) * (size_t)n), *r = malloc(sizeof(double) * (size_t)n);
    double *dy = malloc(sizeof(double) * (size_t)n), w[16400], b[16400];
    oc_fill(x, n, 2), oc_fill(r, n, 2), oc_fill(dy, n, 1), oc_fill(w, C, 1), oc_fill(b, C, 1);
    for (int64_t c = 0; c < C; c++) x[c] = r[c] = x[n - C + c] = r[n - C + c] = 0;
    const tr_rng_key key = { 42, 3, 2, 5 };
    const uint64_t off = 77;
    tr_tensor *tx = mk(2, sh, dtype, x), *tr = mk(2, sh, dtype, r), *tdy = mk(2, sh, dtype, dy);
    tr_tensor *tw = mk(1, shc, TR_F32, w), *tb = mk(1, shc, TR_F32, b);
    /* unfused */
    tr_tensor *od = mk(2, sh, dtype, NULL), *us = mk(2, sh, dtype, NULL), *uo = mk(2, sh, dtype, NULL);
    tr_tensor *um = mk(1, shn, TR_F32, NULL), *ur = mk(1, shn, TR_F32, NULL);
    CHECK(tr_op_dropout(ctx, od, tx, p, &key, off) == TR_OK, "dropout: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_add(ctx, us, od, tr) == TR_OK, "add: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_layernorm(ctx, uo, um, ur, us, tw, tb, 1e-12f) == TR_OK, "layernorm: %s", tr_ctx_errmsg(ctx));
    /* fused */
    tr_tensor *fs = mk(2, sh, dtype, NULL), *fo = mk(2, sh, dtype, NULL);
    tr_tensor *fm = mk(1, shn, TR_F32, NULL), *fr = mk(1, shn, TR_F32, NULL);
    CHECK(tr_op_dropout_add_layernorm(ctx, fo, fs, fm, fr, tx, tr, tw, tb, p, 1e-12f, &key, off) == TR_OK,
          "fused: %s", tr_ctx_errmsg(ctx));
    snprintf(what, sizeof what, "%s %lldx%lld p %g", tr_dtype_name(dtype), (long long)N, (long long)C, (double)p);
    char w2[160];
    snprintf(w2, sizeof w2, "%s: sum", what);
    same(w2, fs, us, 0);
    snprintf(w2, sizeof w2, "%s: out", what);
    same(w2, fo, uo, tol);
    snprintf(w2, sizeof w2, "%s: mean", what);
    same(w2, fm, um, tol);
    snprintf(w2, sizeof w2, "%s: rstd", what);
    same(w2, fr, ur, tol);

    /* in place, the sum over x (as the BERT layer runs it): the same bits */
    tr_tensor *tx2 = mk(2, sh, dtype, x), *fo2 = mk(2, sh, dtype, NULL);
    CHECK(tr_op_dropout_add_layernorm(ctx, fo2, tx2, fm, fr, tx2, tr, tw, tb, p, 1e-12f, &key, off) == TR_OK,
          "fused in place: %s", tr_ctx_errmsg(ctx));
    snprintf(w2, sizeof w2, "%s: sum over x", what);
    same(w2, tx2, fs, 0);
    snprintf(w2, sizeof w2, "%s: out with the sum over x", what);
    same(w2, fo2, fo, 0);

    /* the output remade from the kept sum alone (x = the sum, a zero residual, no dropout,
     * no statistics: nn/dropout_add_norm.lua's remake, f32 only): the forward's bits */
    tr_tensor *zero = mk(2, sh, dtype, NULL), *ro = mk(2, sh, dtype, NULL);
    if (dtype == TR_F32) {
        CHECK(tr_tensor_fill(ctx, zero, 0) == TR_OK, "fill");
        CHECK(tr_op_dropout_add_layernorm(ctx, ro, NULL, NULL, NULL, fs, zero, tw, tb, 0.0f, 1e-12f, NULL, 0) == TR_OK,
              "remake: %s", tr_ctx_errmsg(ctx));
        snprintf(w2, sizeof w2, "%s: out remade from the sum", what);
        same(w2, ro, fo, 0);
    }

    /* backward, both from the fused forward's saved tensors */
    tr_tensor *udres = mk(2, sh, dtype, NULL), *udx = mk(2, sh, dtype, NULL);
    tr_tensor *udw = mk(1, shc, TR_F32, w), *udb = mk(1, shc, TR_F32, b);   /* += from a non-zero start */
    CHECK(tr_op_layernorm_backward(ctx, udres, udw, udb, tdy, fs, tw, fm, fr) == TR_OK, "ln backward: %s",
          tr_ctx_errmsg(ctx));
    CHECK(tr_op_dropout_backward(ctx, udx, udres, p, &key, off) == TR_OK, "dropout backward: %s", tr_ctx_errmsg(ctx));
    tr_tensor *fdres = mk(2, sh, dtype, NULL), *fdx = mk(2, sh, dtype, NULL);
    tr_tensor *fdw = mk(1, shc, TR_F32, w), *fdb = mk(1, shc, TR_F32, b);
    CHECK(tr_op_dropout_add_layernorm_backward(ctx, fdx, fdres, fdw, fdb, tdy, fs, tw, fm, fr, p, &key, off) == TR_OK,
          "fused backward: %s", tr_ctx_errmsg(ctx));
    snprintf(w2, sizeof w2, "%s: dresidual", what);
    same(w2, fdres, udres, tol);
    snprintf(w2, sizeof w2, "%s: dx", what);
    same(w2, fdx, udx, tol);
    same_zeros(w2, fdx, udx);
    snprintf(w2, sizeof w2, "%s: dweight", what);
    same(w2, fdw, udw, 0);
    snprintf(w2, sizeof w2, "%s: dbias", what);
    same(w2, fdb, udb, 0);
    /* dx alone (no dresidual) is the same dx */
    tr_tensor *fdx2 = mk(2, sh, dtype, NULL);
    CHECK(tr_op_dropout_add_layernorm_backward(ctx, fdx2, NULL, NULL, NULL, tdy, fs, tw, fm, fr, p, &key, off) ==
              TR_OK,
          "fused backward, dx alone: %s", tr_ctx_errmsg(ctx));
    snprintf(w2, sizeof w2, "%s: dx without dresidual", what);
    same(w2, fdx2, fdx, 0);

    tr_tensor *all[] = { tx, tr, tdy, tw, tb, od, us, uo, um, ur, fs, fo, fm, fr, udres, udx, udw, udb, fdres, fdx,
                         fdw, fdb, fdx2, tx2, fo2, zero, ro };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tr_tensor_free(all[i]);
    free(x), free(r), free(dy);
    no_workspace_left(what);
}

static void test_f32_matches_unfused(void)
{
    oc_seed(3);
    compare(TR_F32, 37, 384, 0.1f, 1e-6);
    compare(TR_F32, 37, 384, 0.0f, 1e-6);
    compare(TR_F32, 300, 385, 0.1f, 1e-6);   /* above the OpenMP and mask thresholds, odd C */
    compare(TR_F32, 3, 1, 0.1f, 1e-6);
    compare(TR_F32, 3, 16385, 0.1f, 1e-6);   /* rows too long for a stack mask: the workspace one */
}

static void test_half_matches_unfused_bit_for_bit(void)
{
    oc_seed(4);
    compare(TR_BF16, 37, 384, 0.1f, 0);
    compare(TR_F16, 37, 384, 0.1f, 0);
    compare(TR_BF16, 300, 385, 0.0f, 0);
    compare(TR_F16, 5, 13, 0.5f, 0);
    compare(TR_BF16, 3, 8193, 0.1f, 0);   /* rows too long for the stack blocks: staged through workspace */
}

/* p = 1 drops everything: sum is the residual itself. */
static void test_p_one_keeps_the_residual(void)
{
    int64_t sh[2] = { 4, 9 }, shc[1] = { 9 }, shn[1] = { 4 };
    double x[36], r[36], w[9];
    oc_seed(5);
    oc_fill(x, 36, 1), oc_fill(r, 36, 1), oc_fill(w, 9, 1);
    tr_rng_key key = { 1, 2, 3, 4 };
    tr_tensor *tx = mk(2, sh, TR_F32, x), *tr = mk(2, sh, TR_F32, r), *tw = mk(1, shc, TR_F32, w);
    tr_tensor *o = mk(2, sh, TR_F32, NULL), *s = mk(2, sh, TR_F32, NULL), *m = mk(1, shn, TR_F32, NULL),
              *rs = mk(1, shn, TR_F32, NULL);
    CHECK(tr_op_dropout_add_layernorm(ctx, o, s, m, rs, tx, tr, tw, NULL, 1.0f, 1e-5f, &key, 0) == TR_OK, "%s",
          tr_ctx_errmsg(ctx));
    same("p = 1: sum", s, tr, 0);
    tr_tensor *all[] = { tx, tr, tw, o, s, m, rs };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tr_tensor_free(all[i]);
}

/* Bad arguments: TR_EUSER naming the op and the argument, and the outputs untouched. */
static void test_errors_write_nothing(void)
{
    int64_t sh[2] = { 2, 5 }, bad[2] = { 2, 4 }, shc[1] = { 5 }, shn[1] = { 2 };
    double x[10];
    oc_seed(6);
    oc_fill(x, 10, 1);
    tr_rng_key key = { 1, 2, 3, 4 };
    tr_tensor *tx = mk(2, sh, TR_F32, x), *tr = mk(2, sh, TR_F32, x), *tbad = mk(2, bad, TR_F32, x);
    tr_tensor *tw = mk(1, shc, TR_F32, x), *o = mk(2, sh, TR_F32, x), *s = mk(2, sh, TR_F32, x);
    tr_tensor *m = mk(1, shn, TR_F32, x), *rs = mk(1, shn, TR_F32, x);
    const char *op = "dropout_add_layernorm";
    CHECK(tr_op_dropout_add_layernorm(ctx, o, s, m, rs, tx, tbad, tw, NULL, 0.1f, 1e-5f, &key, 0) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), op) && strstr(tr_ctx_errmsg(ctx), "residual"),
          "residual shape: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_dropout_add_layernorm(ctx, o, s, m, rs, tx, tr, tw, NULL, 1.5f, 1e-5f, &key, 0) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "[0, 1]"),
          "p = 1.5: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_dropout_add_layernorm(ctx, o, s, m, rs, tx, tr, tw, NULL, 0.1f, 1e-5f, NULL, 0) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "key"),
          "no key: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_dropout_add_layernorm(ctx, o, s, m, rs, tx, tr, tw, NULL, 0.0f, 1e-5f, NULL, 0) == TR_OK,
          "p = 0 needs no key: %s", tr_ctx_errmsg(ctx));
    tr_tensor *o2 = mk(2, sh, TR_F32, x);
    CHECK(tr_op_dropout_add_layernorm_backward(ctx, o2, NULL, NULL, NULL, tbad, s, tw, m, rs, 0.1f, &key, 0) ==
                  TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "dropout_add_layernorm_backward") && strstr(tr_ctx_errmsg(ctx), "dout"),
          "dout shape: %s", tr_ctx_errmsg(ctx));
    same("dx untouched by a failed backward", o2, tx, 0);
    tr_tensor *all[] = { tx, tr, tbad, tw, o, s, m, rs, o2 };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tr_tensor_free(all[i]);
    no_workspace_left("errors");
}

int main(void)
{
    static const check_case cases[] = {
        CASE(test_f32_matches_unfused), CASE(test_half_matches_unfused_bit_for_bit),
        CASE(test_p_one_keeps_the_residual), CASE(test_errors_write_nothing)
    };
    return check_with_ctx(&ctx, cases, sizeof cases / sizeof cases[0]);
}
