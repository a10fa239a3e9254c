/* test_ops_nn.c — the tensor-level ops of core/ops/ops_nn.h: f32 results against f64
 * references (naive loops or the _f64 kernels), bf16/f16 tensors against the f32 op
 * (bf16 within 2e-2, f16 within 2e-3 of the largest magnitude), shapes large enough to
 * take several staging chunks, attention dropout from the keyed Philox stream (also across
 * batch groups), accumulate/overwrite/NULL gradient semantics, error messages for shapes,
 * dtypes and devices, and workspace scratch returned to the allocator. */
#include "check.h"
#include "ctx_check.h"
#include "op_check.h"
#include "trainer.h"
#include "ops_elementwise.h"
#include "cpu/attention.h"
#include "cpu/layernorm.h"
#include "cpu/rotary.h"

#include <string.h>

static tr_ctx *ctx;

/* ------------------------------------------------------------ tensor helpers */

static tr_tensor *mk(int ndim, const int64_t *shape, int dtype, const double *vals)
{
    tr_tensor *t = tr_tensor_zeros(ctx, ndim, shape, dtype, TR_CPU, TR_TAG_ACTIVATIONS);
    if (!t) {
        printf("tensor: %s\n", tr_ctx_errmsg(ctx));
        abort();
    }
    if (vals) {
        float *f = malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
        oc_to_f32(f, vals, t->numel);
        tr_convert(t->data, dtype, f, TR_F32, (size_t)t->numel);
        free(f);
    }
    return t;
}

static double *rd(const tr_tensor *t)
{
    float *f = malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
    double *d = malloc(sizeof(double) * (size_t)(t->numel ? t->numel : 1));
    tr_convert(f, TR_F32, t->data, t->dtype, (size_t)t->numel);
    for (int64_t i = 0; i < t->numel; i++) d[i] = f[i];
    free(f);
    return d;
}

/* relative error of tensor a against reference values ref */
static double err_t(const tr_tensor *a, const double *ref)
{
    double *x = rd(a);
    double e = oc_rel_err(x, ref, a->numel);
    free(x);
    return e;
}

/* half (a result in dtype) against f32 (the same op's f32 result): relative error below tol,
 * or a failure naming the dtype and what. */
#define CLOSE_TO_F32(half, f32, tol, what)                                                   \
    do {                                                                                     \
        double *r_ = rd(f32);                                                                \
        double e_ = err_t(half, r_);                                                         \
        CHECK(e_ < (tol), "%s %s %g", tr_dtype_name(dtype), what, e_);                       \
        free(r_);                                                                            \
    } while (0)

static double *rnd(int64_t n, double scale)
{
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1));
    oc_fill(x, n, scale);
    return x;
}

static double tol_of(int dtype) { return dtype == TR_BF16 ? 2e-2 : dtype == TR_F16 ? 2e-3 : 1e-5; }

/* ------------------------------------------------------------ linear and matmul */

static void naive_linear(double *out, const double *x, const double *w, const double *b,
                         int64_t N, int64_t I, int64_t O)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++) {
            double s = b ? b[o] : 0;
            for (int64_t i = 0; i < I; i++) s += x[n * I + i] * w[o * I + i];
            out[n * O + o] = s;
        }
}

static void test_linear_forward_backward_f32(void)
{
    int64_t xs[3] = { 2, 3, 5 }, ws[2] = { 4, 5 }, os[3] = { 2, 3, 4 }, bs[1] = { 4 };
    int64_t N = 6, I = 5, O = 4;
    oc_seed(40);
    double *x = rnd(N * I, 1), *w = rnd(O * I, 1), *b = rnd(O, 1), *g = rnd(N * O, 1);
    tr_tensor *tx = mk(3, xs, TR_F32, x), *tw = mk(2, ws, TR_F32, w), *tb = mk(1, bs, TR_F32, b);
    tr_tensor *to = mk(3, os, TR_F32, NULL), *tg = mk(3, os, TR_F32, g);
    tr_tensor *tdx = mk(3, xs, TR_F32, NULL), *tdw = mk(2, ws, TR_F32, NULL), *tdb = mk(1, bs, TR_F32, NULL);
    double ref[24], rdx[30], rdw[20] = { 0 }, rdb[4] = { 0 };
    naive_linear(ref, x, w, b, N, I, O);
    CHECK(tr_op_linear(ctx, to, tx, tw, tb) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(err_t(to, ref) < 1e-6, "out %g", err_t(to, ref));
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < I; i++) {
            rdx[n * I + i] = 0;
            for (int64_t o = 0; o < O; o++) rdx[n * I + i] += g[n * O + o] * w[o * I + i];
        }
    for (int64_t o = 0; o < O; o++) {
        for (int64_t n = 0; n < N; n++) rdb[o] += 2 * g[n * O + o];
        for (int64_t i = 0; i < I; i++)
            for (int64_t n = 0; n < N; n++) rdw[o * I + i] += 2 * g[n * O + o] * x[n * I + i];
    }
    /* twice: dx overwrites, dw and dbias accumulate */
    for (int rep = 0; rep < 2; rep++)
        CHECK(tr_op_linear_backward(ctx, tdx, tdw, tdb, tg, tx, tw) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(err_t(tdx, rdx) < 1e-6, "dx %g", err_t(tdx, rdx));
    CHECK(err_t(tdw, rdw) < 1e-6, "dw accumulates %g", err_t(tdw, rdw));
    CHECK(err_t(tdb, rdb) < 1e-6, "dbias accumulates %g", err_t(tdb, rdb));
    /* frozen weight (LoRA base): only dx, nothing else touched */
    double *before = rd(tdw);
    tr_tensor_fill(ctx, tdx, 7);
    CHECK(tr_op_linear_backward(ctx, tdx, NULL, NULL, tg, NULL, tw) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(err_t(tdx, rdx) < 1e-6, "dx alone %g", err_t(tdx, rdx));
    CHECK(err_t(tdw, before) == 0, "dw changed");
    /* no bias in forward */
    naive_linear(ref, x, w, NULL, N, I, O);
    CHECK(tr_op_linear(ctx, to, tx, tw, NULL) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(err_t(to, ref) < 1e-6, "out without bias");
    free(before); free(x); free(w); free(b); free(g);
    tr_tensor_free(tx); tr_tensor_free(tw); tr_tensor_free(tb); tr_tensor_free(to);
    tr_tensor_free(tg); tr_tensor_free(tdx); tr_tensor_free(tdw); tr_tensor_free(tdb);
}

static void test_matmul_batched_shared_and_transposed(void)
{
    oc_seed(41);
    for (int variant = 0; variant < 4; variant++) {
        int tA = variant & 1, shared = (variant >> 1) & 1;
        int64_t B0 = 2, B1 = 3, M = 4, K = 5, N = 6;
        int64_t as[4] = { B0, B1, tA ? K : M, tA ? M : K };
        int64_t bs4[4] = { B0, B1, N, K }, bs2[2] = { N, K };    /* trans_b = 1 */
        int64_t os[4] = { B0, B1, M, N }, nb[1] = { N };
        int64_t na = B0 * B1 * M * K, nbel = shared ? N * K : B0 * B1 * N * K, no = B0 * B1 * M * N;
        double *a = rnd(na, 1), *b = rnd(nbel, 1), *bias = rnd(N, 1), *c0 = rnd(no, 1);
        double *ref = malloc(8 * no);
        for (int64_t bb = 0; bb < B0 * B1; bb++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0;
                    for (int64_t p = 0; p < K; p++) {
                        double av = tA ? a[bb * M * K + p * M + i] : a[bb * M * K + i * K + p];
                        double bv = b[(shared ? 0 : bb * N * K) + j * K + p];
                        s += av * bv;
                    }
                    int64_t o = bb * M * N + i * N + j;
                    ref[o] = 0.5 * s + 2 * c0[o] + bias[j];
                }
        tr_tensor *ta = mk(4, as, TR_F32, a), *tb = shared ? mk(2, bs2, TR_F32, b) : mk(4, bs4, TR_F32, b);
        tr_tensor *tbias = mk(1, nb, TR_F32, bias), *to = mk(4, os, TR_F32, c0);
        CHECK(tr_op_matmul(ctx, to, ta, tb, tbias, tA, 1, 0.5f, 2.0f) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(err_t(to, ref) < 1e-6, "variant %d: %g", variant, err_t(to, ref));
        /* the same in bf16 activations (out read for beta, staged) */
        tr_tensor *ha = mk(4, as, TR_BF16, a), *ho = mk(4, os, TR_BF16, c0);
        CHECK(tr_op_matmul(ctx, ho, ha, tb, tbias, tA, 1, 0.5f, 2.0f) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(err_t(ho, ref) < 2e-2, "variant %d bf16: %g", variant, err_t(ho, ref));
        tr_tensor_free(ha); tr_tensor_free(ho);
        tr_tensor_free(ta); tr_tensor_free(tb); tr_tensor_free(tbias); tr_tensor_free(to);
        free(a); free(b); free(bias); free(c0); free(ref);
    }
}

/* ------------------------------------------------------------ half dtypes vs f32 */

/* Runs every op on f32 tensors and on `dtype` activations (weights stay f32, as in mixed
 * precision) and compares. Shapes exceed one staging chunk (1 Mi elements). */
static void half_vs_f32(int dtype)
{
    const double tol = tol_of(dtype);
    oc_seed(50 + (uint64_t)dtype);
    /* linear: x [1100, 1000] -> [1100, 8] */
    {
        int64_t xs[2] = { 1100, 1000 }, ws[2] = { 8, 1000 }, os[2] = { 1100, 8 }, bs[1] = { 8 };
        double *x = rnd(1100 * 1000, 1), *w = rnd(8000, 0.05), *b = rnd(8, 1), *g = rnd(8800, 1);
        tr_tensor *fx = mk(2, xs, TR_F32, x), *hx = mk(2, xs, dtype, x), *tw = mk(2, ws, TR_F32, w);
        tr_tensor *tb = mk(1, bs, TR_F32, b), *fo = mk(2, os, TR_F32, NULL), *ho = mk(2, os, dtype, NULL);
        tr_tensor *fg = mk(2, os, TR_F32, g), *hg = mk(2, os, dtype, g);
        tr_tensor *fdx = mk(2, xs, TR_F32, NULL), *hdx = mk(2, xs, dtype, NULL);
        tr_tensor *fdw = mk(2, ws, TR_F32, NULL), *hdw = mk(2, ws, TR_F32, NULL);
        tr_tensor *fdb = mk(1, bs, TR_F32, NULL), *hdb = mk(1, bs, TR_F32, NULL);
        CHECK(tr_op_linear(ctx, fo, fx, tw, tb) == TR_OK && tr_op_linear(ctx, ho, hx, tw, tb) == TR_OK,
              "%s", tr_ctx_errmsg(ctx));
        CLOSE_TO_F32(ho, fo, tol, "linear");
        CHECK(tr_op_linear_backward(ctx, fdx, fdw, fdb, fg, fx, tw) == TR_OK &&
                  tr_op_linear_backward(ctx, hdx, hdw, hdb, hg, hx, tw) == TR_OK,
              "%s", tr_ctx_errmsg(ctx));
        CLOSE_TO_F32(hdx, fdx, tol, "linear dx");
        CLOSE_TO_F32(hdw, fdw, tol, "linear dw");
        CLOSE_TO_F32(hdb, fdb, tol, "linear dbias");
        free(x); free(w); free(b); free(g);
        tr_tensor *all[] = { fx, hx, tw, tb, fo, ho, fg, hg, fdx, hdx, fdw, hdw, fdb, hdb };
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tr_tensor_free(all[i]);
    }
    /* layernorm: x [2100, 512] */
    {
        int64_t xs[2] = { 2100, 512 }, cs[1] = { 512 }, ns[1] = { 2100 }, n = 2100 * 512;
        double *x = rnd(n, 2), *w = rnd(512, 1), *b = rnd(512, 1), *g = rnd(n, 1);
        tr_tensor *fx = mk(2, xs, TR_F32, x), *hx = mk(2, xs, dtype, x), *tw = mk(1, cs, TR_F32, w);
        tr_tensor *tb = mk(1, cs, TR_F32, b), *fo = mk(2, xs, TR_F32, NULL), *ho = mk(2, xs, dtype, NULL);
        tr_tensor *fm = mk(1, ns, TR_F32, NULL), *fr = mk(1, ns, TR_F32, NULL);
        tr_tensor *hm = mk(1, ns, TR_F32, NULL), *hr = mk(1, ns, TR_F32, NULL);
        tr_tensor *fg = mk(2, xs, TR_F32, g), *hg = mk(2, xs, dtype, g);
        tr_tensor *fdx = mk(2, xs, TR_F32, NULL), *hdx = mk(2, xs, dtype, NULL);
        tr_tensor *fdw = mk(1, cs, TR_F32, NULL), *hdw = mk(1, cs, TR_F32, NULL);
        tr_tensor *fdb = mk(1, cs, TR_F32, NULL), *hdb = mk(1, cs, TR_F32, NULL);
        CHECK(tr_op_layernorm(ctx, fo, fm, fr, fx, tw, tb, 1e-12f) == TR_OK &&
                  tr_op_layernorm(ctx, ho, hm, hr, hx, tw, tb, 1e-12f) == TR_OK,
              "%s", tr_ctx_errmsg(ctx));
        CLOSE_TO_F32(ho, fo, tol, "layernorm");
        CHECK(tr_op_layernorm_backward(ctx, fdx, fdw, fdb, fg, fx, tw, fm, fr) == TR_OK &&
                  tr_op_layernorm_backward(ctx, hdx, hdw, hdb, hg, hx, tw, hm, hr) == TR_OK,
              "%s", tr_ctx_errmsg(ctx));
        CLOSE_TO_F32(hdx, fdx, tol, "layernorm dx");
        CLOSE_TO_F32(hdw, fdw, tol, "layernorm dweight");
        CLOSE_TO_F32(hdb, fdb, tol, "layernorm dbias");
        { /* the half path's bits: the f32 kernels on the same (rounded) values, rounded once */
            tr_tensor *rx = mk(2, xs, TR_F32, NULL), *rg = mk(2, xs, TR_F32, NULL), *r = mk(2, xs, dtype, NULL);
            tr_tensor_copy(ctx, rx, hx);
            tr_tensor_copy(ctx, rg, hg);
            CHECK(tr_op_layernorm(ctx, fo, fm, fr, rx, tw, tb, 1e-12f) == TR_OK &&
                      tr_op_layernorm_backward(ctx, fdx, NULL, NULL, rg, rx, tw, fm, fr) == TR_OK,
                  "%s", tr_ctx_errmsg(ctx));
            CHECK(memcmp(hm->data, fm->data, tr_tensor_nbytes(fm)) == 0 && memcmp(hr->data, fr->data, tr_tensor_nbytes(fr)) == 0,
                  "%s layernorm mean/rstd differ from the f32 kernel's", tr_dtype_name(dtype));
            tr_tensor_copy(ctx, r, fo);
            CHECK(memcmp(r->data, ho->data, tr_tensor_nbytes(r)) == 0, "%s layernorm out: not the f32 result rounded",
                  tr_dtype_name(dtype));
            tr_tensor_copy(ctx, r, fdx);
            CHECK(memcmp(r->data, hdx->data, tr_tensor_nbytes(r)) == 0, "%s layernorm dx: not the f32 result rounded",
                  tr_dtype_name(dtype));
            tr_tensor_free(rx); tr_tensor_free(rg); tr_tensor_free(r);
        }
        free(x); free(w); free(b); free(g);
        tr_tensor *all[] = { fx, hx, tw, tb, fo, ho, fm, fr, hm, hr, fg, hg, fdx, hdx, fdw, hdw, fdb, hdb };
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tr_tensor_free(all[i]);
    }
    /* gelu (both forms) and softmax: [1100, 1000] */
    {
        int64_t xs[2] = { 1100, 1000 }, n = 1100 * 1000;
        double *x = rnd(n, 3), *g = rnd(n, 1);
        tr_tensor *fx = mk(2, xs, TR_F32, x), *hx = mk(2, xs, dtype, x);
        tr_tensor *fg = mk(2, xs, TR_F32, g), *hg = mk(2, xs, dtype, g);
        tr_tensor *fo = mk(2, xs, TR_F32, NULL), *ho = mk(2, xs, dtype, NULL);
        for (int kind = 0; kind < 2; kind++) {
            CHECK(tr_op_gelu(ctx, fo, fx, kind) == TR_OK && tr_op_gelu(ctx, ho, hx, kind) == TR_OK,
                  "%s", tr_ctx_errmsg(ctx));
            double *r = rd(fo);
            CHECK(err_t(ho, r) < tol, "%s gelu %d %g", tr_dtype_name(dtype), kind, err_t(ho, r));
            free(r);
            CHECK(tr_op_gelu_backward(ctx, fo, fg, fx, kind) == TR_OK &&
                      tr_op_gelu_backward(ctx, ho, hg, hx, kind) == TR_OK,
                  "%s", tr_ctx_errmsg(ctx));
            r = rd(fo);
            CHECK(err_t(ho, r) < tol, "%s gelu_backward %d %g", tr_dtype_name(dtype), kind, err_t(ho, r));
            free(r);
        }
        tr_tensor *fy = mk(2, xs, TR_F32, NULL), *hy = mk(2, xs, dtype, NULL);
        CHECK(tr_op_softmax(ctx, fy, fx) == TR_OK && tr_op_softmax(ctx, hy, hx) == TR_OK, "%s",
              tr_ctx_errmsg(ctx));
        CLOSE_TO_F32(hy, fy, tol, "softmax");
        CHECK(tr_op_softmax_backward(ctx, fo, fg, fy) == TR_OK &&
                  tr_op_softmax_backward(ctx, ho, hg, hy) == TR_OK,
              "%s", tr_ctx_errmsg(ctx));
        CLOSE_TO_F32(ho, fo, tol, "softmax_backward");
        free(x); free(g);
        tr_tensor *all[] = { fx, hx, fg, hg, fo, ho, fy, hy };
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tr_tensor_free(all[i]);
    }
}

static void test_bf16_against_f32(void) { half_vs_f32(TR_BF16); }
static void test_f16_against_f32(void) { half_vs_f32(TR_F16); }

/* ------------------------------------------------------------ attention */

static void philox_keep(uint32_t *mask, size_t n, float p, const void *key, uint64_t offset)
{
    tr_dropout_mask_words(mask, n, p, *(const tr_rng_key *)key, offset);
}

/* The backward again with the forward's output out given: dq, dk, dv must be the bits of
 * the run without it (dq, dk, dv here); a wrong-shaped out is refused, naming it. */
static void attention_same_bits_with_out(const tr_tensor *dq, const tr_tensor *dk, const tr_tensor *dv,
                                         const tr_tensor *dout, const tr_tensor *q, const tr_tensor *k,
                                         const tr_tensor *v, const tr_tensor *out, const tr_tensor *lse,
                                         const tr_tensor *mask, float p, const tr_rng_key *key)
{
    tr_tensor *g[3];
    for (int i = 0; i < 3; i++) g[i] = mk(4, q->shape, dq->dtype, NULL);
    CHECK(tr_op_attention_backward(ctx, g[0], g[1], g[2], dout, q, k, v, out, lse, mask, 0, p, key, NULL, NULL, 0, 0, 0, 0) == TR_OK, "%s",
          tr_ctx_errmsg(ctx));
    const tr_tensor *want[3] = { dq, dk, dv };
    for (int i = 0; i < 3; i++)
        CHECK(memcmp(g[i]->data, want[i]->data, tr_tensor_nbytes(want[i])) == 0,
              "%s d%c with out given differs from the recompute's bits", tr_dtype_name(dq->dtype), "qkv"[i]);
    tr_tensor bad = *out;
    bad.shape[3] = out->shape[3] - 1;
    bad.numel = out->numel / out->shape[3] * bad.shape[3];
    CHECK(tr_op_attention_backward(ctx, g[0], g[1], g[2], dout, q, k, v, &bad, lse, mask, 0, p, key, NULL, NULL, 0, 0, 0, 0) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "out"),
          "a wrong-shaped out: %s", tr_ctx_errmsg(ctx));
    for (int i = 0; i < 3; i++) tr_tensor_free(g[i]);
}

/* f32 op against the f64 kernel fed by the same Philox stream; then `dtype` tensors
 * against the f32 op. B=3, T=128, H=32, D=96 (393216 elements per batch element) makes half staging run in two batch groups,
 * so the dropout stream offset of the second group is exercised. */
static void attention_case(int dtype, int64_t B, int64_t T, int64_t H, int64_t D, float p)
{
    int64_t s4[4] = { B, T, H, D }, sl[3] = { B, H, T }, sm[2] = { B, T }, n = B * T * H * D;
    tr_rng_key key = { 77, 3, 5, 9 };
    double *q = rnd(n, 1), *k = rnd(n, 1), *v = rnd(n, 1), *g = rnd(n, 1), *m = malloc(8 * B * T);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < T; j++) m[b * T + j] = j < T - 3 * b;
    tr_tensor *fq = mk(4, s4, TR_F32, q), *fk = mk(4, s4, TR_F32, k), *fv = mk(4, s4, TR_F32, v);
    tr_tensor *fg = mk(4, s4, TR_F32, g), *fo = mk(4, s4, TR_F32, NULL), *fl = mk(3, sl, TR_F32, NULL);
    tr_tensor *mask = mk(2, sm, TR_I32, NULL);
    for (int64_t i = 0; i < B * T; i++) ((int32_t *)mask->data)[i] = (int32_t)m[i];
    tr_tensor *fdq = mk(4, s4, TR_F32, NULL), *fdk = mk(4, s4, TR_F32, NULL), *fdv = mk(4, s4, TR_F32, NULL);
    CHECK(tr_op_attention(ctx, fo, fl, fq, fk, fv, mask, 0, p, &key, NULL, 0, 0, 0, 0) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_attention_backward(ctx, fdq, fdk, fdv, fg, fq, fk, fv, NULL, fl, mask, 0, p, &key, NULL, NULL, 0, 0, 0, 0) == TR_OK,
          "%s", tr_ctx_errmsg(ctx));
    attention_same_bits_with_out(fdq, fdk, fdv, fg, fq, fk, fv, fo, fl, mask, p, &key);
    if (dtype == TR_F32) {
        /* reference: the f64 kernel on the same values with the same stream */
        tr_attn_dropout drop = { p, philox_keep, &key };
        int nt = tr_k_attention_threads();
        double *scr = malloc(8 * tr_k_attention_scratch_elems(T, D, nt)), *out = malloc(8 * n);
        double *lse = malloc(8 * B * H * T), *dq = malloc(8 * n), *dk = malloc(8 * n), *dv = malloc(8 * n);
        double *qq = rd(fq), *kk = rd(fk), *vv = rd(fv), *gg = rd(fg);
        int32_t *mi = mask->data;
        tr_k_attention_fwd_f64(out, lse, qq, kk, vv, mi, TR_I32, &drop, 1 / sqrt((double)D), B, T, H,
                                 D, scr, nt);
        tr_k_attention_bwd_f64(dq, dk, dv, gg, qq, kk, vv, lse, mi, TR_I32, &drop,
                                  1 / sqrt((double)D), B, T, H, D, scr, nt);
        CHECK(err_t(fo, out) < 1e-5, "out %g", err_t(fo, out));
        CHECK(err_t(fl, lse) < 1e-5, "lse %g", err_t(fl, lse));
        CHECK(err_t(fdq, dq) < 1e-5, "dq %g", err_t(fdq, dq));
        CHECK(err_t(fdk, dk) < 1e-5, "dk %g", err_t(fdk, dk));
        CHECK(err_t(fdv, dv) < 1e-5, "dv %g", err_t(fdv, dv));
        free(scr); free(out); free(lse); free(dq); free(dk); free(dv);
        free(qq); free(kk); free(vv); free(gg);
    } else {
        double tol = tol_of(dtype);
        tr_tensor *hq = mk(4, s4, dtype, q), *hk = mk(4, s4, dtype, k), *hv = mk(4, s4, dtype, v);
        tr_tensor *hg = mk(4, s4, dtype, g), *ho = mk(4, s4, dtype, NULL), *hl = mk(3, sl, TR_F32, NULL);
        tr_tensor *hdq = mk(4, s4, dtype, NULL), *hdk = mk(4, s4, dtype, NULL), *hdv = mk(4, s4, dtype, NULL);
        /* the f32 reference must see the same rounded inputs */
        tr_tensor *rq = mk(4, s4, TR_F32, NULL), *rk = mk(4, s4, TR_F32, NULL), *rv = mk(4, s4, TR_F32, NULL);
        tr_tensor *rg = mk(4, s4, TR_F32, NULL);
        tr_tensor_copy(ctx, rq, hq); tr_tensor_copy(ctx, rk, hk); tr_tensor_copy(ctx, rv, hv);
        tr_tensor_copy(ctx, rg, hg);
        CHECK(tr_op_attention(ctx, fo, fl, rq, rk, rv, mask, 0, p, &key, NULL, 0, 0, 0, 0) == TR_OK &&
                  tr_op_attention_backward(ctx, fdq, fdk, fdv, rg, rq, rk, rv, NULL, fl, mask, 0, p, &key, NULL, NULL, 0, 0, 0, 0) == TR_OK,
              "%s", tr_ctx_errmsg(ctx));
        CHECK(tr_op_attention(ctx, ho, hl, hq, hk, hv, mask, 0, p, &key, NULL, 0, 0, 0, 0) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(tr_op_attention_backward(ctx, hdq, hdk, hdv, hg, hq, hk, hv, NULL, hl, mask, 0, p, &key, NULL, NULL, 0, 0, 0, 0) == TR_OK,
              "%s", tr_ctx_errmsg(ctx));
        attention_same_bits_with_out(hdq, hdk, hdv, hg, hq, hk, hv, ho, hl, mask, p, &key);
        if (dtype == TR_BF16) { /* the f32 kernels' results rounded once: the head-by-head bf16 path's bits */
            const tr_tensor *got[] = { ho, hdq, hdk, hdv }, *f32[] = { fo, fdq, fdk, fdv };
            tr_tensor *r = mk(4, s4, TR_BF16, NULL);
            for (int i = 0; i < 4; i++) {
                tr_tensor_copy(ctx, r, f32[i]);
                CHECK(memcmp(r->data, got[i]->data, tr_tensor_nbytes(r)) == 0,
                      "bf16 %s differs from the f32 result rounded to bf16", (const char *[]){ "out", "dq", "dk", "dv" }[i]);
            }
            CHECK(memcmp(hl->data, fl->data, tr_tensor_nbytes(fl)) == 0, "bf16 lse differs from the f32 one");
            tr_tensor_free(r);
        }
        CLOSE_TO_F32(ho, fo, tol, "out");
        CLOSE_TO_F32(hl, fl, 1e-6, "lse");
        CLOSE_TO_F32(hdq, fdq, tol, "dq");
        CLOSE_TO_F32(hdk, fdk, tol, "dk");
        CLOSE_TO_F32(hdv, fdv, tol, "dv");
        tr_tensor *all[] = { hq, hk, hv, hg, ho, hl, hdq, hdk, hdv, rq, rk, rv, rg };
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tr_tensor_free(all[i]);
    }
    free(q); free(k); free(v); free(g); free(m);
    tr_tensor *all[] = { fq, fk, fv, fg, fo, fl, mask, fdq, fdk, fdv };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tr_tensor_free(all[i]);
}

static void test_attention_f32_against_f64_kernel_with_philox_dropout(void)
{
    oc_seed(60);
    attention_case(TR_F32, 2, 70, 3, 8, 0.1f);
    attention_case(TR_F32, 2, 37, 2, 16, 0);
}

static void test_attention_half_in_batch_groups(void)
{
    oc_seed(61);
    attention_case(TR_BF16, 3, 128, 32, 96, 0.1f);
    attention_case(TR_F16, 3, 128, 32, 96, 0.1f);
}

/* ------------------------------------------------------------ errors and workspace */

/* Half GELU, GELU backward, tanh, tanh backward, add and mul (converted span by span on
 * each thread) give exactly the bits of their f32 kernels on the same values: the half
 * inputs widened to f32, the f32 op, the result rounded back; add also in place (out = a). Sizes: one short of a span, a partial last span
 * on the calling thread, and many spans over the threads with a partial tail. */
static void test_half_elementwise_bits_are_the_f32_kernels(void)
{
    static const int64_t sizes[] = { 2047, 5000, 1000003 };
    for (int d = 0; d < 2; d++) {
        int dtype = d ? TR_F16 : TR_BF16;
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0] && !check_case_failed; z++) {
            int64_t n = sizes[z];
            double *x = rnd(n, 3), *g = rnd(n, 1);
            tr_tensor *hx = mk(1, &n, dtype, x), *hg = mk(1, &n, dtype, g), *ho = mk(1, &n, dtype, NULL);
            tr_tensor *fx = mk(1, &n, TR_F32, NULL), *fg = mk(1, &n, TR_F32, NULL), *fo = mk(1, &n, TR_F32, NULL);
            tr_tensor *want = mk(1, &n, dtype, NULL);
            CHECK(tr_tensor_copy(ctx, fx, hx) == TR_OK && tr_tensor_copy(ctx, fg, hg) == TR_OK, "widen");
            for (int op = 0; op < 9; op++) {
                int rc1, rc2;
                switch (op) {
                case 0: case 1:
                    rc1 = tr_op_gelu(ctx, ho, hx, op), rc2 = tr_op_gelu(ctx, fo, fx, op); break;
                case 2: case 3:
                    rc1 = tr_op_gelu_backward(ctx, ho, hg, hx, op - 2), rc2 = tr_op_gelu_backward(ctx, fo, fg, fx, op - 2);
                    break;
                case 4: rc1 = tr_op_tanh(ctx, ho, hx), rc2 = tr_op_tanh(ctx, fo, fx); break;
                case 5: rc1 = tr_op_tanh_backward(ctx, ho, hg, hx), rc2 = tr_op_tanh_backward(ctx, fo, fg, fx); break;
                case 6: rc1 = tr_op_add(ctx, ho, hx, hg), rc2 = tr_op_add(ctx, fo, fx, fg); break;
                case 7: rc1 = tr_op_mul(ctx, ho, hx, hg), rc2 = tr_op_mul(ctx, fo, fx, fg); break;
                default:   /* in place: ho = hx + hg into a copy of hx */
                    rc1 = tr_tensor_copy(ctx, ho, hx);
                    if (rc1 == TR_OK) rc1 = tr_op_add(ctx, ho, ho, hg);
                    rc2 = tr_op_add(ctx, fo, fx, fg);
                    break;
                }
                CHECK(rc1 == TR_OK && rc2 == TR_OK, "op %d: %s", op, tr_ctx_errmsg(ctx));
                CHECK(tr_tensor_copy(ctx, want, fo) == TR_OK, "round");
                CHECK(memcmp(ho->data, want->data, tr_tensor_nbytes(ho)) == 0, "%s op %d (n %lld): bits differ from the f32 kernel's",
                      tr_dtype_name(dtype), op, (long long)n);
            }
            tr_tensor *all[] = { hx, hg, ho, fx, fg, fo, want };
            for (size_t i = 0; i < 7; i++) tr_tensor_free(all[i]);
            free(x);
            free(g);
        }
    }
}

static void test_errors_name_op_tensor_and_shape(void)
{
    int64_t xs[2] = { 4, 7 }, ws[2] = { 3, 8 }, os[2] = { 4, 3 };
    tr_tensor *x = mk(2, xs, TR_F32, NULL), *w = mk(2, ws, TR_F32, NULL), *o = mk(2, os, TR_F32, NULL);
    CHECK(tr_op_linear(ctx, o, x, w, NULL) == TR_EUSER, "bad w accepted");
    CHECK(strstr(tr_ctx_errmsg(ctx), "linear: x has shape [4, 7] but w has shape [3, 8]") != NULL,
          "message: %s", tr_ctx_errmsg(ctx));
    int64_t ls[1] = { 5 };
    tr_tensor *lw = mk(1, ls, TR_F32, NULL), *mean = mk(1, xs, TR_F32, NULL);
    CHECK(tr_op_layernorm(ctx, x, mean, mean, x, lw, NULL, 1e-5f) == TR_EUSER, "bad weight accepted");
    CHECK(strstr(tr_ctx_errmsg(ctx), "layernorm: x has shape [4, 7] but weight has shape [5]") != NULL,
          "message: %s", tr_ctx_errmsg(ctx));
    tr_tensor *ix = mk(2, xs, TR_I32, NULL);
    CHECK(tr_op_gelu(ctx, ix, ix, 0) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "dtype i32"),
          "i32 gelu: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_gelu(ctx, x, x, 7) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "kind 7"), "kind");
    /* a tensor header claiming to live on cuda:0 (never dereferenced) */
    tr_tensor gx = *x, go = *x;
    gx.device = 0;
    go.device = 0;
    CHECK(tr_op_softmax(ctx, x, &gx) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "device"),
          "mixed devices: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_softmax(ctx, &go, &gx) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "CUDA path of this op is not built yet"),
          "cuda: %s", tr_ctx_errmsg(ctx));
    int64_t q3[3] = { 2, 4, 6 };
    tr_tensor *q = mk(3, q3, TR_F32, NULL);
    CHECK(tr_op_attention(ctx, q, q, q, q, q, NULL, 0, 0, NULL, NULL, 0, 0, 0, 0) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "must be [B, T, H, D]"),
          "3-D q: %s", tr_ctx_errmsg(ctx));
    int64_t s4[4] = { 2, 4, 3, 2 }, sl[3] = { 2, 3, 4 }, bad_mask[2] = { 2, 5 };
    tr_tensor *q4 = mk(4, s4, TR_F32, NULL), *lse = mk(3, sl, TR_F32, NULL);
    tr_tensor *m = mk(2, bad_mask, TR_I32, NULL);
    CHECK(tr_op_attention(ctx, q4, lse, q4, q4, q4, m, 0, 0, NULL, NULL, 0, 0, 0, 0) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "mask has shape [2, 5] but must be [2, 4]"),
          "mask shape: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_attention(ctx, q4, lse, q4, q4, q4, NULL, 0, 0.1f, NULL, NULL, 0, 0, 0, 0) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "needs an RNG key"),
          "dropout without key: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_attention(ctx, q4, lse, q4, q4, q4, NULL, 0, 1.0f, NULL, NULL, 0, 0, 0, 0) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "must be in [0, 1)"),
          "dropout 1: %s", tr_ctx_errmsg(ctx));
    int64_t dws[2] = { 3, 7 };
    tr_tensor *hdw = mk(2, dws, TR_BF16, NULL), *dout = mk(2, os, TR_F32, NULL);
    CHECK(tr_op_linear_backward(ctx, NULL, hdw, NULL, dout, x, NULL) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "dw has dtype bf16 but must be f32"),
          "bf16 dw: %s", tr_ctx_errmsg(ctx));
    tr_tensor_free(q4); tr_tensor_free(lse); tr_tensor_free(m); tr_tensor_free(hdw);
    tr_tensor_free(dout);
    tr_tensor_free(x); tr_tensor_free(w); tr_tensor_free(o); tr_tensor_free(lw);
    tr_tensor_free(mean); tr_tensor_free(ix); tr_tensor_free(q);
}

/* The rotary kernel over a batch (rows past T: each position's cos and sin made once, in a
 * table) has the bits of the same rows one at a time (each row's own cos and sin), forward and
 * inverse, from a row offset too; so do blocks of rows over a table made once
 * (tr_k_rotary_table / tr_k_rotary_rows, the half path's), in place too. */
static void test_rotary_table_is_the_rows_bits(void)
{
    enum { B = 3, T = 7, H = 2, D = 8, N = B * T * H * D };
    float x[N], batch[N], rows[N], blocks[N], table[T * D];
    for (int i = 0; i < N; i++) x[i] = (float)((i * 37) % 23) / 7.0f - 1.5f;
    for (int inverse = 0; inverse <= 1; inverse++) {
        tr_k_rotary_f32(batch, x, 2, B * T, T, H, D, 10000.0, inverse);
        for (int64_t r = 0; r < B * T; r++) tr_k_rotary_f32(rows + r * H * D, x + r * H * D, 2 + r, 1, T, H, D, 10000.0, inverse);
        CHECK(memcmp(batch, rows, sizeof batch) == 0, "inverse %d: the batch's rotation differs from the rows'", inverse);
        tr_k_rotary_table_f32(table, T, D, 10000.0, inverse);
        memcpy(blocks, x, sizeof blocks);
        for (int64_t r = 0; r < B * T; r += 4) {
            const int64_t nr = B * T - r < 4 ? B * T - r : 4;
            tr_k_rotary_rows_f32(blocks + r * H * D, blocks + r * H * D, table, 2 + r, nr, T, H, D);
        }
        CHECK(memcmp(batch, blocks, sizeof batch) == 0, "inverse %d: blocks over the table differ from the batch", inverse);
    }
}

static void test_workspace_released(void)
{
    tr_alloc_stats st;
    tr_alloc_get_stats(tr_ctx_alloc(ctx, TR_CPU), &st);
    CHECK(st.tag_allocated[TR_TAG_WORKSPACE] == 0, "workspace still held: %llu bytes",
          (unsigned long long)st.tag_allocated[TR_TAG_WORKSPACE]);
    CHECK(st.tag_peak[TR_TAG_WORKSPACE] > 0, "ops used no workspace scratch");
    CHECK(st.tag_allocated[TR_TAG_ACTIVATIONS] == 0, "a test leaked a tensor");
}

int main(void)
{
    static const check_case cases[] = {
        CASE(test_linear_forward_backward_f32), CASE(test_matmul_batched_shared_and_transposed),
        CASE(test_bf16_against_f32), CASE(test_f16_against_f32),
        CASE(test_attention_f32_against_f64_kernel_with_philox_dropout), CASE(test_attention_half_in_batch_groups),
        CASE(test_half_elementwise_bits_are_the_f32_kernels), CASE(test_errors_name_op_tensor_and_shape),
        CASE(test_rotary_table_is_the_rows_bits), CASE(test_workspace_released)
    };
    return check_with_ctx(&ctx, cases, sizeof cases / sizeof cases[0]);
}
