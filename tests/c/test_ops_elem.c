/* test_ops_elem.c — the tensor-level ops outside the network layers (core/ops/: ops_elementwise.h,
 * ops_embedding.h, ops_dropout.h, ops_loss.h, ops_pooling.h, ops_similarity.h, ops_reduce.h,
 * ops_cast.h, AdamW of ops_optim.h): results against the
 * float64 kernels, bf16/f16 against f32 with per-dtype tolerances (bf16 2e-2, f16 2e-3
 * relative), argument errors and their messages, the "CUDA path not built yet" error, dropout regeneration,
 * AdamW with half gradients and a half weight copy, and that every op returns its
 * workspace. */
#include "check.h"
#include "ctx_check.h"
#include "op_check.h"
#include "tensor_check.h"

#include "cpu/elementwise.h"
#include "cpu/loss.h"
#include "cpu/pooling.h"
#include "cpu/similarity.h"
#include "trainer.h"
#include "ops_elementwise.h"
#include "ops_embedding.h"
#include "ops_dropout.h"
#include "ops_loss.h"
#include "ops_pooling.h"
#include "ops_similarity.h"
#include "ops_reduce.h"
#include "ops_cast.h"
#include "ops_optim.h"
#include "op_stage.h"

#include <string.h>

static tr_ctx *ctx;

/* ------------------------------------------------------------ helpers */

static tr_tensor *mk(int ndim, const int64_t *shape, int dtype, const double *vals)
{
    return tc_tensor(ctx, ndim, shape, dtype, vals);
}

static tr_tensor *mk_ids(int64_t n, int dtype, const int64_t *ids)
{
    tr_tensor *t = tr_tensor_new(ctx, 1, &n, dtype, TR_CPU, TR_TAG_ACTIVATIONS);
    if (t) tr_convert(t->data, dtype, ids, TR_I64, (size_t)n);
    return t;
}

static float *get(const tr_tensor *t) { return tc_values_f32(t); }

static double tol_of(int dtype) { return dtype == TR_BF16 ? 2e-2 : dtype == TR_F16 ? 2e-3 : 1e-5; }

static void no_workspace_left(const char *after) { tc_no_workspace_left(ctx, after); }

static const int dtypes[3] = { TR_F32, TR_BF16, TR_F16 };

/* ------------------------------------------------------------ elementwise */

static void test_elementwise(void)
{
    oc_seed(21);
    int64_t N = 5, C = 7, sh[2] = { N, C }, shb[1] = { C };
    double a[35], b[35], bv[7], ref[35], refb[35];
    oc_fill(a, 35, 1), oc_fill(b, 35, 1), oc_fill(bv, 7, 1);
    for (int di = 0; di < 3; di++) {
        int dt = dtypes[di];
        double tol = tol_of(dt);
        tr_tensor *ta = mk(2, sh, dt, a), *tb = mk(2, sh, dt, b), *tv = mk(1, shb, dt, bv), *to = mk(2, sh, dt, NULL);
        tr_tensor *tdb = mk(1, shb, dt, NULL);
        CHECK(tr_op_add(ctx, to, ta, tb) == TR_OK, "add: %s", tr_ctx_errmsg(ctx));
        tr_k_add_fwd_f64(ref, a, b, N, C, N);
        float *o = get(to);
        close_f32("add", o, ref, 35, 2 * tol, 2 * tol);
        free(o);
        CHECK(tr_op_mul(ctx, to, ta, tv) == TR_OK, "mul broadcast: %s", tr_ctx_errmsg(ctx));
        tr_k_mul_fwd_f64(ref, a, bv, N, C, 1);
        o = get(to);
        close_f32("mul broadcast", o, ref, 35, 2 * tol, tol);
        free(o);
        CHECK(tr_op_mul_backward(ctx, to, tdb, tb, ta, tv) == TR_OK, "mul_backward: %s", tr_ctx_errmsg(ctx));
        tr_k_mul_bwd_f64(ref, refb, b, a, bv, N, C, 1);
        o = get(to);
        close_f32("mul da", o, ref, 35, 2 * tol, tol);
        free(o);
        o = get(tdb);
        close_f32("mul db", o, refb, 7, 4 * tol, 4 * tol);
        free(o);
        CHECK(tr_op_fill(ctx, to, 2.0f) == TR_OK && tr_op_axpy(ctx, to, ta, -0.5f) == TR_OK, "fill/axpy");
        for (int i = 0; i < 35; i++) ref[i] = 2 - 0.5 * a[i];
        o = get(to);
        close_f32("fill+axpy", o, ref, 35, 2 * tol, tol);
        free(o);
        CHECK(tr_op_scale(ctx, to, to, 3.0f) == TR_OK, "scale in place");
        for (int i = 0; i < 35; i++) ref[i] *= 3;
        o = get(to);
        close_f32("scale", o, ref, 35, 3 * tol, 3 * tol);
        free(o);
        tr_tensor_free(ta), tr_tensor_free(tb), tr_tensor_free(tv), tr_tensor_free(to), tr_tensor_free(tdb);
    }
    /* a bad broadcast names both shapes */
    int64_t bad[1] = { 6 };
    tr_tensor *ta = mk(2, sh, TR_F32, a), *tb = mk(1, bad, TR_F32, b), *to = mk(2, sh, TR_F32, NULL);
    CHECK(tr_op_add(ctx, to, ta, tb) == TR_EUSER, "bad broadcast accepted");
    CHECK(strstr(tr_ctx_errmsg(ctx), "b has shape [6]") && strstr(tr_ctx_errmsg(ctx), "[5, 7]"), "message: %s",
          tr_ctx_errmsg(ctx));
    tr_tensor_free(ta), tr_tensor_free(tb), tr_tensor_free(to);
    no_workspace_left("elementwise");
}

/* ------------------------------------------------------------ embedding */

static void test_embedding(void)
{
    oc_seed(22);
    int64_t V = 5, C = 6, N = 7, shT[2] = { V, C }, shO[2] = { N, C };
    const int64_t ids[7] = { 4, 0, 2, 2, 1, 4, 0 };
    double table[30], dout[42];
    oc_fill(table, 30, 1), oc_fill(dout, 42, 1);
    for (int di = 0; di < 3; di++) {
        int dt = dtypes[di];
        tr_tensor *tt = mk(2, shT, dt, table), *to = mk(2, shO, TR_F32, NULL);
        tr_tensor *ti = mk_ids(N, di == 1 ? TR_I64 : TR_I32, ids);
        CHECK(tr_op_embedding(ctx, to, ti, tt) == TR_OK, "embedding: %s", tr_ctx_errmsg(ctx));
        float *o = get(to);
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < C; c++) CHECK_CLOSE(o[n * C + c], table[ids[n] * C + c], tol_of(dt), tol_of(dt));
        free(o);
        /* backward accumulates, skips the padding id 2 */
        tr_tensor *td = mk(2, shO, dt, dout), *tdt = mk(2, shT, TR_F32, table);
        CHECK(tr_op_embedding_backward(ctx, tdt, td, ti, 2) == TR_OK, "backward: %s", tr_ctx_errmsg(ctx));
        double want[30];
        memcpy(want, table, sizeof want);
        for (int64_t n = 0; n < N; n++)
            if (ids[n] != 2)
                for (int64_t c = 0; c < C; c++) want[ids[n] * C + c] += dout[n * C + c];
        o = get(tdt);
        close_f32("dtable", o, want, 30, 2 * tol_of(dt), 2 * tol_of(dt));
        free(o);
        tr_tensor_free(tt), tr_tensor_free(to), tr_tensor_free(ti), tr_tensor_free(td), tr_tensor_free(tdt);
    }
    const int64_t bad[2] = { 1, 9 };
    int64_t sh2[2] = { 2, C };
    tr_tensor *tt = mk(2, shT, TR_F32, table), *to = mk(2, sh2, TR_F32, NULL), *ti = mk_ids(2, TR_I32, bad);
    CHECK(tr_op_embedding(ctx, to, ti, tt) == TR_EUSER, "out-of-range id accepted");
    CHECK(strstr(tr_ctx_errmsg(ctx), "id 9 at position 1") && strstr(tr_ctx_errmsg(ctx), "vocabulary of 5"),
          "message: %s", tr_ctx_errmsg(ctx));
    tr_tensor_free(tt), tr_tensor_free(to), tr_tensor_free(ti);
    no_workspace_left("embedding");
}

/* ------------------------------------------------------------ dropout */

static void test_dropout(void)
{
    int64_t n = 100003;
    double *x = malloc(n * 8);
    for (int64_t i = 0; i < n; i++) x[i] = 1 + (double)(i % 7);
    tr_rng_key key = { 1234, 7, 3, 1 };
    float p = 0.3f;
    tr_tensor *tx = mk(1, &n, TR_F32, x), *to = mk(1, &n, TR_F32, NULL), *td = mk(1, &n, TR_F32, NULL);
    CHECK(tr_op_dropout(ctx, to, tx, p, &key, 0) == TR_OK, "dropout: %s", tr_ctx_errmsg(ctx));
    float *o = get(to);
    int64_t zeros = 0;
    for (int64_t i = 0; i < n; i++) {
        if (o[i] == 0) zeros++;
        else CHECK_CLOSE(o[i], x[i] / (1 - p), 1e-6, 1e-6);
    }
    CHECK(fabs((double)zeros / n - p) < 0.01, "dropped fraction %g for p %g", (double)zeros / n, (double)p);
    /* backward regenerates the same mask: dx is zero exactly where out is */
    CHECK(tr_op_dropout_backward(ctx, td, tx, p, &key, 0) == TR_OK, "backward: %s", tr_ctx_errmsg(ctx));
    float *d = get(td);
    CHECK(memcmp(d, o, n * 4) == 0, "backward mask differs from the forward's");
    /* a slice regenerates alone: elements [1000, 1000+m) with offset 1000 */
    int64_t m = 5000;
    tr_tensor *ts = mk(1, &m, TR_BF16, x + 1000), *tso = mk(1, &m, TR_BF16, NULL);
    CHECK(tr_op_dropout(ctx, tso, ts, p, &key, 1000) == TR_OK, "slice: %s", tr_ctx_errmsg(ctx));
    float *so = get(tso);
    for (int64_t i = 0; i < m; i++)
        CHECK((so[i] == 0) == (o[1000 + i] == 0), "slice mask differs at %lld", (long long)i);
    /* p = 0 is the identity; another key gives another mask */
    CHECK(tr_op_dropout(ctx, to, tx, 0, &key, 0) == TR_OK, "p = 0");
    free(o);
    o = get(to);
    close_f32("p=0", o, x, n, 0, 0);
    tr_rng_key key2 = key;
    key2.step = 8;
    CHECK(tr_op_dropout(ctx, td, tx, p, &key2, 0) == TR_OK, "key2");
    free(d);
    d = get(td);
    CHECK(memcmp(d, o, n * 4) != 0, "another step gave the same mask");
    CHECK(tr_op_dropout(ctx, to, tx, 1.5f, &key, 0) == TR_EUSER, "p = 1.5 accepted");
    free(x), free(o), free(d), free(so);
    tr_tensor_free(tx), tr_tensor_free(to), tr_tensor_free(td), tr_tensor_free(ts), tr_tensor_free(tso);
    no_workspace_left("dropout");
}

/* f32 in and out runs without staging copies and the kernel's vector bit select: each
 * element is exactly keep ? x * scale : +0 with rng.h's keep bits, a dropped inf or NaN is
 * +0 too, and in place (out = x) gives the same. */
static void test_dropout_f32_exact(void)
{
    int64_t n = 70001;   /* above the op's parallel threshold, not a multiple of any span */
    double *x = malloc(n * 8);
    for (int64_t i = 0; i < n; i++) x[i] = i % 101 == 0 ? INFINITY : i % 103 == 0 ? NAN : -3.5 + (double)(i % 13) * 0.75;
    tr_rng_key key = { 99, 2, 5, 4 };
    float p = 0.1f, scale = 1 / (1 - p);
    uint8_t *keep = malloc((size_t)n);
    tr_dropout_mask_bits(keep, (size_t)n, p, key, 17);
    tr_tensor *tx = mk(1, &n, TR_F32, x), *to = mk(1, &n, TR_F32, NULL);
    CHECK(tr_op_dropout(ctx, to, tx, p, &key, 17) == TR_OK, "dropout: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_dropout(ctx, tx, tx, p, &key, 17) == TR_OK, "in place: %s", tr_ctx_errmsg(ctx));
    float *o = get(to), *ip = get(tx);
    int bad = 0, dropped_nonfinite = 0;
    for (int64_t i = 0; i < n; i++) {
        float want = keep[i] ? (float)x[i] * scale : 0.0f;
        if (!keep[i] && !isfinite(x[i])) dropped_nonfinite++;
        int same = isnan(want) ? isnan(o[i]) && isnan(ip[i])
                               : memcmp(&o[i], &want, 4) == 0 && memcmp(&ip[i], &want, 4) == 0;
        if (!same && bad++ < 3)
            CHECK(0, "element %lld: out %.9g in place %.9g, want %.9g", (long long)i, (double)o[i], (double)ip[i],
                  (double)want);
    }
    CHECK(bad == 0, "%d elements differ from keep ? x * scale : +0", bad);
    CHECK(dropped_nonfinite > 0, "the case drops no inf or NaN; change the key");
    free(x), free(keep), free(o), free(ip);
    tr_tensor_free(tx), tr_tensor_free(to);
    no_workspace_left("dropout f32");
}

/* ------------------------------------------------------------ cross-entropy */

static void test_cross_entropy(void)
{
    oc_seed(23);
    int64_t N = 6, K = 9, sh[2] = { N, K }, one = 1;
    const int64_t t[6] = { 3, -100, 8, 0, 3, 5 };
    double z[54], losses[6], lse[6], dz[54];
    oc_fill(z, 54, 1);
    for (int i = 0; i < 54; i++) z[i] *= 3;
    int64_t cnt = tr_k_cross_entropy_fwd_f64(losses, lse, z, t, N, K, -100, 0.1);
    double mean = 0;
    for (int i = 0; i < 6; i++) mean += losses[i] / cnt;
    tr_k_cross_entropy_bwd_f64(dz, z, lse, t, 2.0 / cnt, N, K, -100, 0.1);
    for (int di = 0; di < 3; di++) {
        int dt = dtypes[di];
        /* the reference sees the same rounded logits as the op */
        tr_tensor *tz = mk(2, sh, dt, z), *tl = mk(0, &one, TR_F32, NULL), *tlse = mk(1, &N, TR_F32, NULL);
        tr_tensor *tt = mk_ids(N, di ? TR_I32 : TR_I64, t), *td = mk(2, sh, dt, NULL);
        CHECK(tr_op_cross_entropy(ctx, tl, tlse, tz, tt, -100, 0.1f) == TR_OK, "forward: %s", tr_ctx_errmsg(ctx));
        CHECK_CLOSE(*(float *)tl->data, mean, 3 * tol_of(dt), 3 * tol_of(dt));
        CHECK(tr_op_cross_entropy_backward(ctx, td, 2.0f, tz, tlse, tt, -100, 0.1f) == TR_OK, "backward: %s",
              tr_ctx_errmsg(ctx));
        float *o = get(td);
        close_f32("dlogits", o, dz, 54, 3 * tol_of(dt), tol_of(dt) / 4);
        free(o);
        /* in place: dlogits over the logits */
        CHECK(tr_op_cross_entropy_backward(ctx, tz, 2.0f, tz, tlse, tt, -100, 0.1f) == TR_OK, "in place");
        o = get(tz);
        close_f32("dlogits in place", o, dz, 54, 3 * tol_of(dt), tol_of(dt) / 4);
        free(o);
        tr_tensor_free(tz), tr_tensor_free(tl), tr_tensor_free(tlse), tr_tensor_free(tt), tr_tensor_free(td);
    }
    const int64_t bad[6] = { 3, -100, 9, 0, 3, 5 };
    tr_tensor *tz = mk(2, sh, TR_F32, z), *tl = mk(0, &one, TR_F32, NULL), *tlse = mk(1, &N, TR_F32, NULL);
    tr_tensor *tt = mk_ids(N, TR_I64, bad);
    CHECK(tr_op_cross_entropy(ctx, tl, tlse, tz, tt, -100, 0) == TR_EUSER, "target 9 of 9 classes accepted");
    CHECK(strstr(tr_ctx_errmsg(ctx), "target 9 at row 2"), "message: %s", tr_ctx_errmsg(ctx));
    tr_tensor_free(tz), tr_tensor_free(tl), tr_tensor_free(tlse), tr_tensor_free(tt);
    no_workspace_left("cross_entropy");
}

/* ------------------------------------------------------------ pooling */

static void test_pooling(void)
{
    oc_seed(24);
    int64_t B = 3, T = 4, C = 5, sh[3] = { B, T, C }, shm[2] = { B, T }, sho[2] = { B, C };
    const int32_t mask[12] = { 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0 };
    const double maskd[12] = { 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0 };
    const int64_t maskl[12] = { 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0 };
    double h[60], dout[15], ref[60];
    oc_fill(h, 60, 1), oc_fill(dout, 15, 1);
    for (int mode = 0; mode < 4; mode++)
        for (int di = 0; di < 3; di++) {
            int dt = dtypes[di];
            tr_tensor *th = mk(3, sh, dt, h), *to = mk(2, sho, dt, NULL), *td = mk(2, sho, dt, dout);
            tr_tensor *tdh = mk(3, sh, dt, NULL);
            tr_tensor *tm = di == 0 ? mk(2, shm, TR_F32, maskd)
                                    : tr_tensor_new(ctx, 2, shm, di == 1 ? TR_I64 : TR_I32, TR_CPU, TR_TAG_ACTIVATIONS);
            if (di == 1) memcpy(tm->data, maskl, sizeof maskl);
            if (di == 2) memcpy(tm->data, mask, sizeof mask);
            CHECK(tr_op_pool(ctx, to, th, tm, mode) == TR_OK, "pool: %s", tr_ctx_errmsg(ctx));
            tr_k_pool_fwd_f64(ref, h, mask, B, T, C, mode);
            float *o = get(to);
            close_f32("pool", o, ref, 15, 2 * tol_of(dt), 2 * tol_of(dt));
            free(o);
            CHECK(tr_op_pool_backward(ctx, tdh, td, th, tm, mode) == TR_OK, "backward: %s", tr_ctx_errmsg(ctx));
            tr_k_pool_bwd_f64(ref, dout, h, mask, B, T, C, mode);
            o = get(tdh);
            if (dt == TR_F32 || mode != TR_POOL_MAX)   /* max in half may pick another argmax among near-ties */
                close_f32("pool backward", o, ref, 60, 2 * tol_of(dt), 2 * tol_of(dt));
            free(o);
            tr_tensor_free(th), tr_tensor_free(to), tr_tensor_free(td), tr_tensor_free(tdh), tr_tensor_free(tm);
        }
    tr_tensor *th = mk(3, sh, TR_F32, h), *to = mk(2, sho, TR_F32, NULL);
    CHECK(tr_op_pool(ctx, to, th, NULL, 7) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "mode 7"), "bad mode: %s",
          tr_ctx_errmsg(ctx));
    tr_tensor_free(th), tr_tensor_free(to);
    no_workspace_left("pool");
}

/* ------------------------------------------------------------ similarity */

static void test_similarity(void)
{
    oc_seed(25);
    int64_t N = 4, M = 3, C = 6, sha[2] = { N, C }, shb[2] = { M, C }, shs[2] = { N, M };
    double a[24], b[18], d[12], an[24], bn[18], sim[12], dan[24], dbn[18], da[24], db[18];
    oc_fill(a, 24, 1), oc_fill(b, 18, 1), oc_fill(d, 12, 1);
    tr_k_l2norm_fwd_f64(an, a, N, C, 1e-12);
    tr_k_l2norm_fwd_f64(bn, b, M, C, 1e-12);
    tr_k_cosine_sim_fwd_f64(sim, an, bn, N, M, C);
    tr_k_cosine_sim_bwd_f64(dan, dbn, d, an, bn, N, M, C);
    tr_k_l2norm_bwd_f64(da, dan, a, N, C, 1e-12);
    tr_k_l2norm_bwd_f64(db, dbn, b, M, C, 1e-12);
    for (int di = 0; di < 3; di++) {
        int dt = dtypes[di];
        double tol = tol_of(dt);
        tr_tensor *ta = mk(2, sha, dt, a), *tb = mk(2, shb, dt, b), *ts = mk(2, shs, dt, NULL), *td = mk(2, shs, dt, d);
        tr_tensor *tda = mk(2, sha, dt, NULL), *tdb = mk(2, shb, dt, NULL), *tn = mk(2, sha, dt, NULL);
        CHECK(tr_op_cosine_sim(ctx, ts, ta, tb) == TR_OK, "cosine_sim: %s", tr_ctx_errmsg(ctx));
        float *o = get(ts);
        close_f32("sim", o, sim, 12, 2 * tol, 2 * tol);
        free(o);
        CHECK(tr_op_cosine_sim_backward(ctx, tda, tdb, td, ta, tb) == TR_OK, "backward: %s", tr_ctx_errmsg(ctx));
        o = get(tda);
        close_f32("da", o, da, 24, 4 * tol, 4 * tol);
        free(o);
        o = get(tdb);
        close_f32("db", o, db, 18, 4 * tol, 4 * tol);
        free(o);
        CHECK(tr_op_l2norm(ctx, tn, ta, 1e-12f) == TR_OK, "l2norm: %s", tr_ctx_errmsg(ctx));
        o = get(tn);
        close_f32("l2norm", o, an, 24, 2 * tol, 2 * tol);
        free(o);
        CHECK(tr_op_cosine_sim_backward(ctx, NULL, tdb, td, ta, tb) == TR_OK, "db only");
        tr_tensor_free(ta), tr_tensor_free(tb), tr_tensor_free(ts), tr_tensor_free(td);
        tr_tensor_free(tda), tr_tensor_free(tdb), tr_tensor_free(tn);
    }
    tr_tensor *ta = mk(2, sha, TR_F32, a), *ts = mk(2, shs, TR_F32, NULL);
    tr_tensor *tb = mk(2, shs, TR_F32, b);   /* [4, 3]: wrong dim */
    CHECK(tr_op_cosine_sim(ctx, ts, ta, tb) == TR_EUSER, "dim mismatch accepted");
    tr_tensor_free(ta), tr_tensor_free(ts), tr_tensor_free(tb);
    no_workspace_left("similarity");
}

/* ------------------------------------------------------------ reductions, lists */

static void test_reductions(void)
{
    oc_seed(26);
    int64_t n = 1000000, one = 1, sh[2] = { 1000, 1000 };
    double *x = malloc(n * 8);
    oc_fill(x, n, 1);
    for (int64_t i = 0; i < n; i++) x[i] += 0.5;
    tr_tensor *tx = mk(2, sh, TR_BF16, x), *to = mk(0, &one, TR_F32, NULL), *tr = mk(1, sh, TR_F32, NULL);
    float *xb = get(tx);   /* the bf16 values exactly */
    double exact = 0;
    for (int64_t i = 0; i < n; i++) exact += xb[i];
    CHECK(tr_op_sum(ctx, to, tx, 0) == TR_OK, "sum: %s", tr_ctx_errmsg(ctx));
    CHECK_CLOSE(*(float *)to->data, exact, 0, 1e-6);
    CHECK(tr_op_mean(ctx, to, tx, 0) == TR_OK, "mean");
    CHECK_CLOSE(*(float *)to->data, exact / n, 0, 1e-6);
    CHECK(tr_op_mean(ctx, tr, tx, 1) == TR_OK, "mean lastdim: %s", tr_ctx_errmsg(ctx));
    for (int r = 0; r < 1000; r += 111) {
        double rs = 0;
        for (int c = 0; c < 1000; c++) rs += xb[r * 1000 + c];
        CHECK_CLOSE(((float *)tr->data)[r], rs / 1000, 0, 1e-6);
    }
    CHECK(tr_op_sum(ctx, tr, tx, 0) == TR_EUSER, "sum into [1000] accepted");

    /* global norm over a list of mixed dtypes */
    int64_t s3 = 3, s2 = 2;
    double v1[3] = { 3, 4, 12 }, v2[2] = { 0.5, -0.25 };
    tr_tensor *g[2] = { mk(1, &s3, TR_F32, v1), mk(1, &s2, TR_F16, v2) };
    float norm = 0;
    CHECK(tr_op_global_norm(ctx, &norm, g, 2) == TR_OK, "global_norm: %s", tr_ctx_errmsg(ctx));
    CHECK_CLOSE(norm, sqrt(169 + 0.3125), 1e-6, 1e-6);
    int found = -1;
    CHECK(tr_op_scale_check_finite(ctx, &found, g, 2, 0.5f) == TR_OK && found == 0, "finite list: found %d", found);
    CHECK(((float *)g[0]->data)[2] == 6, "not scaled");
    CHECK(tr_op_scale_check_finite(ctx, &found, g, 2, 1e6f) == TR_OK && found == 1,
          "f16 overflow not reported (found %d)", found);
    ((float *)g[0]->data)[0] = NAN;
    CHECK(tr_op_scale_check_finite(ctx, &found, g, 1, 1.0f) == TR_OK && found == 1, "NaN not reported");
    free(x), free(xb);
    tr_tensor_free(tx), tr_tensor_free(to), tr_tensor_free(tr), tr_tensor_free(g[0]), tr_tensor_free(g[1]);
    no_workspace_left("reductions");
}

/* ------------------------------------------------------------ cast */

static void test_cast(void)
{
    int64_t n = 70001;
    double *x = malloc(n * 8);
    oc_seed(27);
    oc_fill(x, n, 1);
    tr_tensor *tf = mk(1, &n, TR_F32, x), *tb = mk(1, &n, TR_BF16, NULL), *th = mk(1, &n, TR_F16, NULL);
    CHECK(tr_op_cast(ctx, tb, tf) == TR_OK && tr_op_cast(ctx, th, tb) == TR_OK, "cast: %s", tr_ctx_errmsg(ctx));
    const float *f = tf->data;
    const uint16_t *b = tb->data, *h = th->data;
    for (int64_t i = 0; i < n; i++) {
        CHECK(b[i] == tr_f32_to_bf16(f[i]), "bf16 at %lld", (long long)i);
        CHECK(h[i] == tr_f32_to_f16(tr_bf16_to_f32(b[i])), "f16 at %lld", (long long)i);
        if (b[i] != tr_f32_to_bf16(f[i]) || h[i] != tr_f32_to_f16(tr_bf16_to_f32(b[i]))) break;
    }
    int64_t two = 2;
    tr_tensor *ti = mk(1, &two, TR_F32, NULL);
    CHECK(tr_op_cast(ctx, ti, tf) == TR_EUSER, "numel mismatch accepted");
    free(x), tr_tensor_free(tf), tr_tensor_free(tb), tr_tensor_free(th), tr_tensor_free(ti);
}

/* ------------------------------------------------------------ adamw */

static void test_adamw(void)
{
    oc_seed(28);
    enum { n = 9001 };
    double *p = malloc(n * 8), *m = calloc(n, 8), *v = calloc(n, 8), *g = malloc(n * 8);
    oc_fill(p, n, 1);
    int64_t nn = n;
    tr_tensor *tp = mk(1, &nn, TR_F32, p), *tm = tr_tensor_zeros(ctx, 1, &nn, TR_F32, TR_CPU, TR_TAG_OPTIMIZER);
    tr_tensor *tv = tr_tensor_zeros(ctx, 1, &nn, TR_F32, TR_CPU, TR_TAG_OPTIMIZER);
    tr_tensor *tg = mk(1, &nn, TR_BF16, NULL), *th = mk(1, &nn, TR_F16, NULL);
    for (int i = 0; i < n; i++) p[i] = ((float *)tp->data)[i];
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01, scale = 256;
    for (int step = 1; step <= 10; step++) {
        oc_fill(g, n, 1);
        for (int i = 0; i < n; i++) g[i] *= scale;
        float *gf = malloc(n * 4);
        oc_to_f32(gf, g, n);
        tr_convert(tg->data, TR_BF16, gf, TR_F32, n);
        tr_convert(gf, TR_F32, tg->data, TR_BF16, n);   /* the reference sees the bf16 gradient */
        for (int i = 0; i < n; i++) {
            double gi = gf[i] / scale;
            p[i] *= 1 - lr * wd;
            m[i] = b1 * m[i] + (1 - b1) * gi;
            v[i] = b2 * v[i] + (1 - b2) * gi * gi;
            p[i] -= lr / (1 - pow(b1, step)) * m[i] / (sqrt(v[i]) / sqrt(1 - pow(b2, step)) + eps);
        }
        free(gf);
        CHECK(tr_op_adamw(ctx, tp, tg, tm, tv, th, lr, b1, b2, eps, wd, step, scale) == TR_OK, "adamw: %s",
              tr_ctx_errmsg(ctx));
    }
    close_f32("param", tp->data, p, n, 1e-5, 1e-6);
    close_f32("m", tm->data, m, n, 1e-4, 1e-6);
    float *hf = get(th);
    close_f32("half copy", hf, p, n, 1e-3, 1e-6);
    CHECK(tr_op_adamw(ctx, tp, tg, tm, tv, NULL, lr, b1, b2, eps, wd, 0, 1) == TR_EUSER, "step 0 accepted");
    CHECK(tr_op_adamw(ctx, tp, tg, th, tv, NULL, lr, b1, b2, eps, wd, 1, 1) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "must be f32"),
          "f16 moment accepted: %s", tr_ctx_errmsg(ctx));
    free(p), free(m), free(v), free(g), free(hf);
    tr_tensor_free(tp), tr_tensor_free(tm), tr_tensor_free(tv), tr_tensor_free(tg), tr_tensor_free(th);
}

/* ------------------------------------------------------------ blocks */

/* Half tensors bigger than one block (TR_STAGE_BLOCK elements): results across block
 * boundaries, and a workspace peak of a few blocks, not of the tensor. */
static void test_blocks(void)
{
    oc_seed(29);
    int64_t N = 2300, C = 1001, n = N * C, sh[2] = { N, C }, shc[1] = { C };
    double *a = malloc(n * 8), *d = malloc(n * 8), bv[1001];
    oc_fill(a, n, 1), oc_fill(d, n, 1), oc_fill(bv, C, 1);
    tr_tensor *ta = mk(2, sh, TR_BF16, a), *td = mk(2, sh, TR_BF16, d), *tb = mk(1, shc, TR_F32, bv);
    tr_tensor *to = mk(2, sh, TR_BF16, NULL), *tdb = mk(1, shc, TR_F32, NULL);
    float *af = get(ta), *df = get(td);
    tr_alloc_reset_peak(tr_ctx_alloc(ctx, TR_CPU));
    CHECK(tr_op_mul(ctx, to, ta, tb) == TR_OK, "mul: %s", tr_ctx_errmsg(ctx));
    float *o = get(to);
    for (int64_t i = 0; i < n; i += 997) CHECK_CLOSE(o[i], af[i] * bv[i % C], 1e-6, 1e-2);
    free(o);
    CHECK(tr_op_mul_backward(ctx, to, tdb, td, ta, tb) == TR_OK, "mul_backward: %s", tr_ctx_errmsg(ctx));
    for (int64_t c = 0; c < C; c += 100) {
        double want = 0;
        for (int64_t r = 0; r < N; r++) want += (double)df[r * C + c] * af[r * C + c];
        CHECK_CLOSE(((float *)tdb->data)[c], want, 1e-4, 1e-4);
    }
    CHECK(tr_op_axpy(ctx, to, td, 2.0f) == TR_OK && tr_op_l2norm(ctx, to, to, 1e-12f) == TR_OK, "axpy, l2norm: %s",
          tr_ctx_errmsg(ctx));
    o = get(to);
    for (int64_t r = 0; r < N; r += 301) {
        double ss = 0;
        for (int64_t c = 0; c < C; c++) ss += (double)o[r * C + c] * o[r * C + c];
        CHECK_CLOSE(ss, 1, 1e-2, 0);
    }
    free(o);
    /* cross-entropy over 2300 rows of 1001 classes, in place */
    int64_t *t = malloc(N * 8), one = 1;
    for (int64_t r = 0; r < N; r++) t[r] = r % 7 == 0 ? -100 : (r * 37) % C;
    tr_tensor *tt = mk_ids(N, TR_I64, t), *tl = mk(0, &one, TR_F32, NULL), *tlse = mk(1, &N, TR_F32, NULL);
    CHECK(tr_op_cross_entropy(ctx, tl, tlse, ta, tt, -100, 0) == TR_OK, "ce: %s", tr_ctx_errmsg(ctx));
    double want = 0;
    int64_t cnt = 0;
    for (int64_t r = 0; r < N; r++) {
        if (t[r] == -100) continue;
        double se = 0;
        for (int64_t c = 0; c < C; c++) se += exp(af[r * C + c]);
        want += log(se) - af[r * C + t[r]];
        cnt++;
    }
    CHECK_CLOSE(*(float *)tl->data, want / cnt, 1e-5, 1e-5);
    CHECK(tr_op_cross_entropy_backward(ctx, ta, 1.0f, ta, tlse, tt, -100, 0) == TR_OK, "ce backward in place");
    o = get(ta);
    for (int64_t r = 1; r < N; r += 250) {
        double row = 0;
        for (int64_t c = 0; c < C; c++) row += o[r * C + c];
        CHECK_CLOSE(row, 0, 1e-5, 0);   /* softmax - onehot sums to 0 */
    }
    free(o);
    tr_alloc_stats st;
    tr_alloc_get_stats(tr_ctx_alloc(ctx, TR_CPU), &st);
    CHECK(st.tag_peak[TR_TAG_WORKSPACE] <= 14u * TR_STAGE_BLOCK, "workspace peak %llu bytes for %lld-element tensors",
          (unsigned long long)st.tag_peak[TR_TAG_WORKSPACE], (long long)n);
    free(a), free(d), free(af), free(df), free(t);
    tr_tensor_free(ta), tr_tensor_free(td), tr_tensor_free(tb), tr_tensor_free(to), tr_tensor_free(tdb);
    tr_tensor_free(tt), tr_tensor_free(tl), tr_tensor_free(tlse);
    no_workspace_left("blocks");
}

/* ------------------------------------------------------------ devices */

static void test_devices(void)
{
    int64_t two = 2;
    tr_tensor *a = mk(1, &two, TR_F32, NULL), *o = mk(1, &two, TR_F32, NULL);
    tr_tensor gpu = *a;   /* a header that claims cuda:0; its data is never read */
    gpu.device = 0;
    CHECK(tr_op_add(ctx, o, a, &gpu) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "one device"), "mixed devices: %s",
          tr_ctx_errmsg(ctx));
    tr_tensor go = gpu;
    CHECK(tr_op_scale(ctx, &go, &gpu, 2) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "not built yet"),
          "CUDA not-built message: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_fill(ctx, NULL, 1) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "NULL"), "NULL out");
    tr_tensor_free(a), tr_tensor_free(o);
}

int main(void)
{
    static const check_case cases[] = {
        CASE(test_elementwise), CASE(test_embedding), CASE(test_dropout), CASE(test_dropout_f32_exact),
        CASE(test_cross_entropy), CASE(test_pooling), CASE(test_similarity), CASE(test_reductions), CASE(test_cast),
        CASE(test_adamw), CASE(test_blocks), CASE(test_devices)
    };
    return check_with_ctx(&ctx, cases, sizeof cases / sizeof cases[0]);
}
