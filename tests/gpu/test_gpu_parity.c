/* test_gpu_parity.c — the CUDA backend against the CPU, on a real GPU: the caching
 * allocator over cudaMalloc (alloc/free/stats, OOM by limit and by the device, per-stream
 * reuse), cuBLASLt GEMM against a float64 reference for every dtype pair, transpose,
 * bias, batch and beta, and the elementwise kernels and casts bit for bit.
 *
 * Built and run by tests/gpu/run.sh (gcc -DTR_HAVE_CUDA, linked with cudart and
 * cuBLASLt), not by the Makefile's ASan pattern. Without a visible GPU it prints SKIP
 * lines and exits 0. Every output buffer sits between guard bytes that must survive, and
 * is poisoned before the kernel writes it (beta = 0 GEMMs get NaN in C, which must not
 * leak into the result). Inputs are fresh random numbers, never zeros.
 *
 * Tolerances (per element, |out - ref| <= tol):
 *   tol = out_eps * |ref| + acc_eps * ref_abs + 1e-30,
 *   ref_abs = |alpha| sum_k |a||b| + |beta c| + |bias|, the scale of the rounding errors;
 *   acc_eps = k * 2^-24 (fp32 accumulation; 2^-9 more for tf32 inputs),
 *   out_eps = 2^-8 for bf16 outputs, 2^-10 for f16, 0 for f32 (twice half an ulp).
 * Casts must match the reference bits exactly, NaN payloads included (the reference is
 * core/tensor/convert.c's rule: quiet, sign and top payload bits kept); elementwise results too,
 * on finite random inputs. */
#include "cuda/elementwise.h"
#include "cuda/matmul.h"
#include "gpu_testutil.h"

#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TR_TEST_HAVE_CBLAS
#include <cblas.h>
#endif

/* ------------------------------------------------------------ device and allocator */

static void test_device_lookup(void)
{
    tr_error err;
    tr_alloc *a = (tr_alloc *)1;
    void *s = (void *)1;
    int n = tr_cuda_device_count();
    CHECK(n >= 1, "device count %d", n);
    CHECK(tr_cuda_init_device(NULL, n, &a, &s, &err) == TR_EUSER, "cuda:%d must not exist", n);
    CHECK(a == NULL && s == NULL, "outputs must be NULL on failure");
    CHECK(strstr(err.msg, "does not exist") != NULL, "message: %s", err.msg);
    CHECK(tr_cuda_init_device(NULL, -1, &a, &s, &err) == TR_EUSER, "cuda:-1 must not exist");
    CHECK(tr_cuda_state_device(dev_state) == 0, "state device %d", tr_cuda_state_device(dev_state));
}

static void test_workspace_in_ledger(void)
{
    tr_alloc_stats st;
    tr_error err;
    tr_alloc_get_stats(dev_alloc, &st);
    const tr_cuda_blas *env = tr_cuda_blas_env(dev_state);
    CHECK(env && env->workspace && env->workspace_bytes == TR_CUDA_WORKSPACE_BYTES, "workspace missing");
    CHECK(env && env->stream == (void *)dev_stream && env->lt && env->cache, "blas env incomplete");
    CHECK(st.tag_allocated[TR_TAG_WORKSPACE] >= TR_CUDA_WORKSPACE_BYTES, "workspace tag %llu",
          (unsigned long long)st.tag_allocated[TR_TAG_WORKSPACE]);
    CHECK(st.reserved >= st.allocated, "reserved %llu < allocated %llu", (unsigned long long)st.reserved,
          (unsigned long long)st.allocated);
    CHECK(tr_alloc_check(dev_alloc, &err) == TR_OK, "%s", err.msg);
}

static void test_alloc_roundtrip(void)
{
    static const size_t sizes[] = { 1, 1000, 1 << 20, 3 << 20, 64 << 20 };
    static const int tags[] = { TR_TAG_WEIGHTS, TR_TAG_GRADS, TR_TAG_OPTIMIZER, TR_TAG_ACTIVATIONS, TR_TAG_WEIGHTS };
    void *p[5] = { 0 };
    tr_error err;
    tr_alloc_stats before, during, after;
    tr_alloc_get_stats(dev_alloc, &before);
    for (int i = 0; i < 5; i++) {
        int rc = tr_alloc_malloc(dev_alloc, sizes[i], tags[i], (uintptr_t)dev_stream, &p[i], &err);
        CHECK(rc == TR_OK && p[i], "malloc %zu: %s", sizes[i], err.msg);
        if (rc != TR_OK) return;
        CHECK(((uintptr_t)p[i] & 255) == 0, "block %p not 256-aligned", p[i]);
        CHECK(tr_alloc_block_size(dev_alloc, p[i]) >= sizes[i], "block size");
    }
    /* Each block is real device memory: write a pattern to all, read the last bytes back. */
    for (int i = 0; i < 5; i++) TCUDA(cudaMemsetAsync(p[i], 0x40 + i, sizes[i], dev_stream));
    for (int i = 0; i < 5; i++) {
        unsigned char b = 0;
        TCUDA(cudaMemcpyAsync(&b, (unsigned char *)p[i] + sizes[i] - 1, 1, cudaMemcpyDeviceToHost, dev_stream));
        TCUDA(cudaStreamSynchronize(dev_stream));
        CHECK(b == 0x40 + i, "block %d reads back %#x", i, b);
    }
    tr_alloc_get_stats(dev_alloc, &during);
    CHECK(during.tag_allocated[TR_TAG_WEIGHTS] - before.tag_allocated[TR_TAG_WEIGHTS] >= (64u << 20) + 512,
          "weights tag did not grow");
    CHECK(during.n_raw_alloc > before.n_raw_alloc, "no cudaMalloc segment was made");
    CHECK(tr_alloc_check(dev_alloc, &err) == TR_OK, "%s", err.msg);
    for (int i = 0; i < 5; i++) tr_alloc_free(dev_alloc, p[i]);
    tr_alloc_empty_cache(dev_alloc);
    tr_alloc_get_stats(dev_alloc, &after);
    CHECK(after.allocated == before.allocated, "allocated %llu after freeing, %llu before",
          (unsigned long long)after.allocated, (unsigned long long)before.allocated);
    CHECK(after.reserved <= before.reserved, "empty_cache kept %llu reserved (was %llu)",
          (unsigned long long)after.reserved, (unsigned long long)before.reserved);
    CHECK(tr_alloc_check(dev_alloc, &err) == TR_OK, "%s", err.msg);
    TCUDA(cudaGetLastError());
}

static void test_alloc_oom_by_limit(void)
{
    tr_alloc_stats st;
    tr_error err;
    tr_alloc_get_stats(dev_alloc, &st);
    tr_alloc_set_limit(dev_alloc, st.reserved + (8u << 20));
    void *p = NULL;
    int rc = tr_alloc_malloc(dev_alloc, 64u << 20, TR_TAG_ACTIVATIONS, (uintptr_t)dev_stream, &p, &err);
    CHECK(rc == TR_EOOM && p == NULL, "64 MiB over an 8 MiB headroom gave %d", rc);
    CHECK(strstr(err.msg, "workspace") != NULL, "OOM message lacks the ledger: %s", err.msg);
    tr_alloc_set_limit(dev_alloc, 0);
    rc = tr_alloc_malloc(dev_alloc, 64u << 20, TR_TAG_ACTIVATIONS, (uintptr_t)dev_stream, &p, &err);
    CHECK(rc == TR_OK, "allocator unusable after OOM: %s", err.msg);
    tr_alloc_free(dev_alloc, p);
    tr_alloc_get_stats(dev_alloc, &st);
    CHECK(st.n_ooms >= 1, "n_ooms %llu", (unsigned long long)st.n_ooms);
    CHECK(tr_alloc_check(dev_alloc, &err) == TR_OK, "%s", err.msg);
}

static void test_alloc_oom_by_device(void)
{
    tr_error err;
    void *p = NULL;
    /* 1 PiB: cudaMalloc must refuse; the backend returns NULL and clears the error. */
    int rc = tr_alloc_malloc(dev_alloc, (size_t)1 << 50, TR_TAG_ACTIVATIONS, (uintptr_t)dev_stream, &p, &err);
    CHECK(rc == TR_EOOM && p == NULL, "1 PiB gave %d", rc);
    cudaError_t last = cudaGetLastError();
    CHECK(last == cudaSuccess, "sticky error left behind: %s", cudaGetErrorString(last));
    /* A kernel still runs afterwards. */
    gbuf g;
    if (gbuf_new(&g, 4096 * 4, 0) != 0) return;
    rc = tr_k_fill_fwd_cuda(g.data, 2.5f, TR_F32, 4096, dev_stream, &err);
    CHECK(rc == TR_OK, "fill after OOM: %s", err.msg);
    float h[4096];
    d2h(h, &g, sizeof h);
    CHECK(h[0] == 2.5f && h[4095] == 2.5f, "fill after OOM wrote %g %g", h[0], h[4095]);
    gbuf_free(&g);
    CHECK(tr_alloc_check(dev_alloc, &err) == TR_OK, "%s", err.msg);
}

/* The caching policy itself, so with caching on whatever the environment says. */
static void test_alloc_stream_reuse(void)
{
    tr_error err;
    cudaStream_t other;
    tr_alloc_set_caching(dev_alloc, 1);
    TCUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    void *p1 = NULL, *p2 = NULL, *p3 = NULL;
    size_t sz = 4u << 20;
    CHECK(tr_alloc_malloc(dev_alloc, sz, TR_TAG_ACTIVATIONS, (uintptr_t)dev_stream, &p1, &err) == TR_OK, "%s",
          err.msg);
    tr_alloc_free(dev_alloc, p1);
    CHECK(tr_alloc_malloc(dev_alloc, sz, TR_TAG_ACTIVATIONS, (uintptr_t)dev_stream, &p2, &err) == TR_OK, "%s",
          err.msg);
    CHECK(p2 == p1, "same stream, same size: cached block not reused (%p then %p)", p1, p2);
    tr_alloc_free(dev_alloc, p2);
    CHECK(tr_alloc_malloc(dev_alloc, sz, TR_TAG_ACTIVATIONS, (uintptr_t)other, &p3, &err) == TR_OK, "%s", err.msg);
    CHECK(p3 != p1, "a block cached for one stream was handed to another");
    tr_alloc_free(dev_alloc, p3);
    tr_alloc_empty_cache(dev_alloc);
    tr_alloc_set_caching(dev_alloc, env_caching());
    TCUDA(cudaStreamDestroy(other));
    CHECK(tr_alloc_check(dev_alloc, &err) == TR_OK, "%s", err.msg);
}

/* ------------------------------------------------------------ GEMM */

typedef struct gemm_config {
    const char *name;
    int ab, c, tf32;
    double out_eps, acc_extra;
} gemm_config;

static const gemm_config gemm_configs[] = {
    { "f32", TR_F32, TR_F32, 0, 0.0, 0.0 },
    { "tf32", TR_F32, TR_F32, 1, 0.0, 1.0 / 512 },
    { "bf16_to_bf16", TR_BF16, TR_BF16, 0, 1.0 / 256, 0.0 },
    { "bf16_to_f32", TR_BF16, TR_F32, 0, 0.0, 0.0 },
    { "f16_to_f16", TR_F16, TR_F16, 0, 1.0 / 1024, 0.0 },
    { "f16_to_f32", TR_F16, TR_F32, 0, 0.0, 0.0 },
};

typedef struct gemm_case {
    int64_t m, n, k, batch;
    int trans_a, trans_b, bias;
    int broadcast_b; /* stride_b = 0 */
    int64_t pad;     /* extra elements between batch items */
    float alpha, beta;
} gemm_case;

typedef struct gemm_result {
    double worst_ratio; /* max |out - ref| / tol */
    double rel_norm;    /* ||out - ref|| / ||ref|| */
    int nan_seen, guards_ok, ran;
} gemm_result;

/* Runs one product on the GPU and compares with the float64 reference. */
static gemm_result run_gemm(const gemm_config *cfg, const gemm_case *gc, tr_error *err, int *rc_out)
{
    gemm_result r = { 0, 0, 0, 1, 0 };
    const int64_t m = gc->m, n = gc->n, k = gc->k, batch = gc->batch;
    const int64_t sa = m * k + gc->pad, sb = gc->broadcast_b ? 0 : k * n + gc->pad, sc = m * n + gc->pad;
    const int64_t na = sa * (batch - 1) + m * k, nb = sb * (batch - 1) + k * n, nc = sc * (batch - 1) + m * n;
    const size_t ab_sz = tr_dtype_size(cfg->ab), c_sz = tr_dtype_size(cfg->c);
    void *ha = malloc((size_t)na * ab_sz), *hb = malloc((size_t)nb * ab_sz), *hc = malloc((size_t)nc * c_sz);
    void *hout = malloc((size_t)nc * c_sz), *hbias = malloc((size_t)n * c_sz);
    *rc_out = TR_EINTERNAL;
    if (!ha || !hb || !hc || !hout || !hbias) goto done;
    for (int64_t i = 0; i < na; i++) set_f(ha, cfg->ab, (size_t)i, rnd_unit());
    for (int64_t i = 0; i < nb; i++) set_f(hb, cfg->ab, (size_t)i, rnd_unit());
    for (int64_t i = 0; i < n; i++) set_f(hbias, cfg->c, (size_t)i, rnd_unit());
    /* C: random where the product lands when beta != 0, NaN where beta = 0 must not read
     * it; the gaps between batch items hold guard bytes set below. */
    for (int64_t i = 0; i < nc; i++) set_f(hc, cfg->c, (size_t)i, gc->beta != 0 ? rnd_unit() : NAN);

    gbuf da, db, dc, dbias;
    memset(&dbias, 0, sizeof dbias);
    if (gbuf_new(&da, (size_t)na * ab_sz, 0) || gbuf_new(&db, (size_t)nb * ab_sz, 0) ||
        gbuf_new(&dc, (size_t)nc * c_sz, 0) || gbuf_new(&dbias, (size_t)n * c_sz, 0))
        goto done;
    h2d(&da, ha, (size_t)na * ab_sz);
    h2d(&db, hb, (size_t)nb * ab_sz);
    h2d(&dbias, hbias, (size_t)n * c_sz);
    for (int64_t b = 0; b < batch; b++)
        TCUDA(cudaMemcpyAsync((char *)dc.data + (size_t)(b * sc) * c_sz, (char *)hc + (size_t)(b * sc) * c_sz,
                              (size_t)(m * n) * c_sz, cudaMemcpyHostToDevice, dev_stream));

    tr_cuda_gemm_desc d = { .m = m, .n = n, .k = k, .batch = batch, .stride_a = sa, .stride_b = sb,
                            .stride_c = sc, .trans_a = gc->trans_a, .trans_b = gc->trans_b,
                            .ab_dtype = cfg->ab, .c_dtype = cfg->c, .tf32 = cfg->tf32,
                            .alpha = gc->alpha, .beta = gc->beta };
    *rc_out = tr_k_matmul_fwd_cuda(tr_cuda_blas_env(dev_state), dc.data, da.data, db.data, gc->bias ? dbias.data : NULL,
                           &d, err);
    if (*rc_out == TR_OK) *rc_out = tr_cuda_synchronize(dev_state, err);
    if (*rc_out != TR_OK) goto free_dev;
    r.ran = 1;
    /* Gaps between batch items: guard bytes, to be compared after. */
    unsigned char *gap_host = malloc((size_t)nc * c_sz);
    d2h(hout, &dc, (size_t)nc * c_sz);
    r.guards_ok = gbuf_guards_ok(&dc);
    if (gap_host) {
        memset(gap_host, guard_byte, (size_t)nc * c_sz);
        for (int64_t b = 0; b + 1 < batch; b++) {
            size_t off = (size_t)(b * sc + m * n) * c_sz, len = (size_t)gc->pad * c_sz;
            if (memcmp((char *)hout + off, gap_host, len) != 0) r.guards_ok = 0;
        }
        free(gap_host);
    }

    const double acc_eps = (double)k * ldexp(1.0, -24) + cfg->acc_extra;
    double err2 = 0, ref2 = 0;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0, s_abs = 0;
                for (int64_t kk = 0; kk < k; kk++) {
                    size_t ia = (size_t)(b * sa + (gc->trans_a ? kk * m + i : i * k + kk));
                    size_t ib = (size_t)(b * sb + (gc->trans_b ? j * k + kk : kk * n + j));
                    double x = get_f(ha, cfg->ab, ia), y = get_f(hb, cfg->ab, ib);
                    s += x * y;
                    s_abs += fabs(x * y);
                }
                size_t ic = (size_t)(b * sc + i * n + j);
                double ref = gc->alpha * s, ref_abs = fabs(gc->alpha) * s_abs;
                if (gc->beta != 0) {
                    double c0 = get_f(hc, cfg->c, ic);
                    ref += gc->beta * c0;
                    ref_abs += fabs(gc->beta * c0);
                }
                if (gc->bias) {
                    double bv = get_f(hbias, cfg->c, (size_t)j);
                    ref += bv;
                    ref_abs += fabs(bv);
                }
                double out = get_f(hout, cfg->c, ic);
                double tol = cfg->out_eps * fabs(ref) + acc_eps * ref_abs + 1e-30;
                double diff = fabs(out - ref);
                if (isnan(out)) r.nan_seen = 1;
                double ratio = isnan(diff) ? INFINITY : diff / tol;
                if (ratio > r.worst_ratio) r.worst_ratio = ratio;
                err2 += isnan(diff) ? INFINITY : diff * diff;
                ref2 += ref * ref;
            }
    r.rel_norm = sqrt(err2 / (ref2 > 0 ? ref2 : 1));

free_dev:
    gbuf_free(&da);
    gbuf_free(&db);
    gbuf_free(&dc);
    gbuf_free(&dbias);
done:
    free(ha);
    free(hb);
    free(hc);
    free(hout);
    free(hbias);
    return r;
}

/* Every transpose, bias, batch layout and beta, on an odd and an aligned shape. */
static void gemm_sweep(const gemm_config *cfg)
{
    static const int64_t shapes[2][3] = { { 67, 45, 83 }, { 64, 128, 96 } };
    int count = 0, details = 0;
    double worst = 0, worst_norm = 0;
    for (int s = 0; s < 2; s++)
        for (int t = 0; t < 4; t++)
            for (int bias = 0; bias < 2; bias++)
                for (int layout = 0; layout < 3; layout++) /* single, strided batch, broadcast B */
                    for (int with_beta = 0; with_beta < 2; with_beta++) {
                        gemm_case gc = { .m = shapes[s][0], .n = shapes[s][1], .k = shapes[s][2],
                                         .batch = layout ? 3 : 1, .trans_a = t & 1, .trans_b = t >> 1,
                                         .bias = bias, .broadcast_b = layout == 2,
                                         .pad = (s == 1 && layout) ? 8 : 0, .alpha = with_beta ? 0.75f : 1.0f,
                                         .beta = with_beta ? 0.5f : 0.0f };
                        tr_error err;
                        tr_error_clear(&err);
                        int rc;
                        gemm_result r = run_gemm(cfg, &gc, &err, &rc);
                        count++;
                        int ok = rc == TR_OK && r.ran && r.worst_ratio <= 1.0 && !r.nan_seen && r.guards_ok;
                        CHECK(ok, "%s m=%lld n=%lld k=%lld batch=%lld ta=%d tb=%d bias=%d bcastB=%d beta=%g: rc=%d "
                                  "worst err/tol=%.3g relnorm=%.3g nan=%d guards=%d %s",
                              cfg->name, (long long)gc.m, (long long)gc.n, (long long)gc.k, (long long)gc.batch,
                              gc.trans_a, gc.trans_b, gc.bias, gc.broadcast_b, gc.beta, rc, r.worst_ratio,
                              r.rel_norm, r.nan_seen, r.guards_ok, rc != TR_OK ? err.msg : "");
                        if (!ok && ++details > 1 && details <= 4)
                            printf("  also failing: ta=%d tb=%d bias=%d layout=%d beta=%g shape=%d rc=%d "
                                   "err/tol=%.3g\n",
                                   gc.trans_a, gc.trans_b, gc.bias, layout, gc.beta, s, rc, r.worst_ratio);
                        if (r.worst_ratio > worst) worst = r.worst_ratio;
                        if (r.rel_norm > worst_norm) worst_norm = r.rel_norm;
                    }
    printf("  gemm %-13s %3d products: worst err/tol %.3g, worst relative norm error %.3g\n", cfg->name, count,
           worst, worst_norm);
}

static void test_gemm_f32(void) { gemm_sweep(&gemm_configs[0]); }
static void test_gemm_tf32(void) { gemm_sweep(&gemm_configs[1]); }
static void test_gemm_bf16_to_bf16(void) { gemm_sweep(&gemm_configs[2]); }
static void test_gemm_bf16_to_f32(void) { gemm_sweep(&gemm_configs[3]); }
static void test_gemm_f16_to_f16(void) { gemm_sweep(&gemm_configs[4]); }
static void test_gemm_f16_to_f32(void) { gemm_sweep(&gemm_configs[5]); }

/* One larger product per dtype pair (tensor-core tiles, split-k), bias and beta on. */
static void test_gemm_large(void)
{
    for (size_t i = 0; i < sizeof gemm_configs / sizeof gemm_configs[0]; i++) {
        gemm_case gc = { .m = 384, .n = 512, .k = 768, .batch = 1, .trans_a = 0, .trans_b = 1, .bias = 1,
                         .alpha = 1.0f, .beta = 1.0f };
        tr_error err;
        int rc;
        gemm_result r = run_gemm(&gemm_configs[i], &gc, &err, &rc);
        CHECK(rc == TR_OK && r.worst_ratio <= 1.0 && !r.nan_seen && r.guards_ok,
              "%s 384x512x768: rc=%d err/tol=%.3g relnorm=%.3g nan=%d guards=%d %s", gemm_configs[i].name, rc,
              r.worst_ratio, r.rel_norm, r.nan_seen, r.guards_ok, rc != TR_OK ? err.msg : "");
        printf("  gemm %-13s 384x512x768 (A, B^T, bias, beta=1): err/tol %.3g, relative norm error %.3g\n",
               gemm_configs[i].name, r.worst_ratio, r.rel_norm);
    }
}

/* The same product twice gives the same bits, the second from the plan cache. */
static void test_gemm_cache_deterministic(void)
{
    const tr_cuda_blas *env = tr_cuda_blas_env(dev_state);
    const int64_t m = 96, n = 80, k = 112;
    gbuf da, db, dc;
    if (gbuf_new(&da, m * k * 2, 0) || gbuf_new(&db, k * n * 2, 0) || gbuf_new(&dc, m * n * 4, 0)) return;
    uint16_t *ha = malloc(m * k * 2), *hb = malloc(k * n * 2);
    float *o1 = malloc(m * n * 4), *o2 = malloc(m * n * 4);
    if (!ha || !hb || !o1 || !o2) goto out;
    for (int64_t i = 0; i < m * k; i++) ha[i] = ref_f32_to_bf16(rnd_unit());
    for (int64_t i = 0; i < k * n; i++) hb[i] = ref_f32_to_bf16(rnd_unit());
    h2d(&da, ha, m * k * 2);
    h2d(&db, hb, k * n * 2);
    tr_cuda_gemm_desc d = { .m = m, .n = n, .k = k, .batch = 1, .ab_dtype = TR_BF16, .c_dtype = TR_F32,
                            .alpha = 1.0f, .beta = 0.0f };
    tr_error err;
    uint64_t h0, m0, h1, m1;
    tr_cuda_gemm_cache_counts(env->cache, &h0, &m0);
    CHECK(tr_k_matmul_fwd_cuda(env, dc.data, da.data, db.data, NULL, &d, &err) == TR_OK, "%s", err.msg);
    d2h(o1, &dc, m * n * 4);
    TCUDA(cudaMemsetAsync(dc.data, 0xff, m * n * 4, dev_stream));
    CHECK(tr_k_matmul_fwd_cuda(env, dc.data, da.data, db.data, NULL, &d, &err) == TR_OK, "%s", err.msg);
    d2h(o2, &dc, m * n * 4);
    tr_cuda_gemm_cache_counts(env->cache, &h1, &m1);
    CHECK(memcmp(o1, o2, m * n * 4) == 0, "two runs of one product differ");
    CHECK(h1 >= h0 + 1 && m1 <= m0 + 1, "cache hits %llu->%llu misses %llu->%llu", (unsigned long long)h0,
          (unsigned long long)h1, (unsigned long long)m0, (unsigned long long)m1);
out:
    free(ha);
    free(hb);
    free(o1);
    free(o2);
    gbuf_free(&da);
    gbuf_free(&db);
    gbuf_free(&dc);
}

/* An epilogue the heuristic finds no algorithm for (here BGRADB into a bias vector that is not
 * aligned to its f32 elements) fails with TR_EINTERNAL, which the CUDA slots answer with their
 * unfused path; the refusal is kept in the plan cache, so the second call is a hit that fails
 * at once without asking the heuristic again. */
static void test_gemm_refused_epilogue_cached(void)
{
    const tr_cuda_blas *env = tr_cuda_blas_env(dev_state);
    const int64_t m = 32, n = 24, k = 16;
    gbuf da, db, dc, dbias;
    if (gbuf_new(&da, k * m * 4, 0) || gbuf_new(&db, k * n * 4, 0) || gbuf_new(&dc, m * n * 4, 0) ||
        gbuf_new(&dbias, m * 4 + 16, 0))
        return;
    tr_cuda_gemm_desc d = { .m = m, .n = n, .k = k, .batch = 1, .trans_a = 1, .ab_dtype = TR_F32, .c_dtype = TR_F32,
                            .alpha = 1.0f, .beta = 0.0f, .epilogue = TR_GEMM_EPI_BGRAD_A };
    const void *bias = (const char *)dbias.data + 2;
    tr_error err;
    uint64_t h0, m0, h1, m1, h2, m2;
    tr_cuda_gemm_cache_counts(env->cache, &h0, &m0);
    int rc1 = tr_k_matmul_fwd_cuda(env, dc.data, da.data, db.data, bias, &d, &err);
    tr_cuda_gemm_cache_counts(env->cache, &h1, &m1);
    int rc2 = tr_k_matmul_fwd_cuda(env, dc.data, da.data, db.data, bias, &d, &err);
    tr_cuda_gemm_cache_counts(env->cache, &h2, &m2);
    CHECK(rc1 == TR_EINTERNAL && rc2 == TR_EINTERNAL, "a misaligned bias gradient: rc %d then %d (want %d)", rc1, rc2,
          TR_EINTERNAL);
    CHECK(m1 == m0 + 1 && h2 == h1 + 1 && m2 == m1, "cache hits %llu->%llu->%llu misses %llu->%llu->%llu",
          (unsigned long long)h0, (unsigned long long)h1, (unsigned long long)h2, (unsigned long long)m0,
          (unsigned long long)m1, (unsigned long long)m2);
    gbuf_free(&da);
    gbuf_free(&db);
    gbuf_free(&dc);
    gbuf_free(&dbias);
}

static void test_gemm_rejects_bad_args(void)
{
    const tr_cuda_blas *env = tr_cuda_blas_env(dev_state);
    tr_error err;
    char dummy[256] __attribute__((aligned(256)));
    tr_cuda_gemm_desc d = { .m = 4, .n = 4, .k = 4, .batch = 1, .ab_dtype = TR_BF16, .c_dtype = TR_F16,
                            .alpha = 1.0f };
    CHECK(tr_k_matmul_fwd_cuda(env, dummy, dummy, dummy, NULL, &d, &err) == TR_EUSER, "bf16 -> f16 accepted");
    d.c_dtype = TR_BF16;
    d.tf32 = 1;
    CHECK(tr_k_matmul_fwd_cuda(env, dummy, dummy, dummy, NULL, &d, &err) == TR_EUSER, "tf32 with bf16 accepted");
    d.tf32 = 0;
    d.k = 0;
    CHECK(tr_k_matmul_fwd_cuda(env, dummy, dummy, dummy, NULL, &d, &err) == TR_EUSER, "k = 0 accepted");
    CHECK(tr_k_add_fwd_cuda(dummy, dummy, dummy, TR_I32, 4, dev_stream, &err) == TR_EUSER, "i32 add accepted");
    CHECK(tr_k_add_fwd_cuda(dummy, dummy, dummy, TR_F32, -1, dev_stream, &err) == TR_EUSER, "n < 0 accepted");
    CHECK(tr_k_cast_fwd_cuda(dummy, TR_BF16, dummy, TR_F32, 4, dev_stream, &err) == TR_EUSER,
          "in-place f32 -> bf16 accepted");
    TCUDA(cudaGetLastError());
}

/* ------------------------------------------------------------ elementwise */

enum { EW_ADD, EW_MUL, EW_SCALE, EW_AXPY, EW_FILL };
static const char *const ew_names[] = { "add", "mul", "scale", "axpy", "fill" };
static const float ew_alpha = -1.7f, ew_fill = 3.14159265f;

static float ew_ref(int op, float a, float b)
{
    switch (op) {
    case EW_ADD: return a + b;
    case EW_MUL: return a * b;
    case EW_SCALE: return ew_alpha * a;
    case EW_AXPY: { float t = ew_alpha * b; return a + t; } /* y = a, x = b */
    default: return ew_fill;
    }
}

/* One op on one dtype, size and misalignment; 1 when bit-exact with guards intact. */
static int ew_case(int op, int dtype, int64_t n, size_t offset_elems)
{
    const size_t es = tr_dtype_size(dtype), bytes = (size_t)n * es, off = offset_elems * es;
    void *ha = malloc(bytes), *hb = malloc(bytes), *hout = malloc(bytes);
    gbuf da, db, dout;
    int ok = 0;
    memset(&da, 0, sizeof da);
    memset(&db, 0, sizeof db);
    memset(&dout, 0, sizeof dout);
    if (!ha || !hb || !hout) goto out;
    for (int64_t i = 0; i < n; i++) {
        set_f(ha, dtype, (size_t)i, 4.0f * rnd_unit());
        set_f(hb, dtype, (size_t)i, 4.0f * rnd_unit());
    }
    if (gbuf_new(&da, bytes, off) || gbuf_new(&db, bytes, off) || gbuf_new(&dout, bytes, off)) goto out;
    h2d(&da, ha, bytes);
    h2d(&db, hb, bytes);
    tr_error err;
    int rc;
    gbuf *result = &dout;
    switch (op) {
    case EW_ADD: rc = tr_k_add_fwd_cuda(dout.data, da.data, db.data, dtype, n, dev_stream, &err); break;
    case EW_MUL: rc = tr_k_mul_fwd_cuda(dout.data, da.data, db.data, dtype, n, dev_stream, &err); break;
    case EW_SCALE: rc = tr_k_scale_fwd_cuda(dout.data, da.data, ew_alpha, dtype, n, dev_stream, &err); break;
    case EW_AXPY:
        rc = tr_k_axpy_fwd_cuda(da.data, db.data, ew_alpha, dtype, n, dev_stream, &err);
        result = &da;
        break;
    default: rc = tr_k_fill_fwd_cuda(dout.data, ew_fill, dtype, n, dev_stream, &err); break;
    }
    CHECK(rc == TR_OK, "%s: %s", ew_names[op], err.msg);
    if (rc != TR_OK) goto out;
    TCUDA(cudaStreamSynchronize(dev_stream));
    d2h(hout, result, bytes);
    ok = gbuf_guards_ok(result);
    CHECK(ok, "%s %s n=%lld offset=%zu: guard bytes overwritten", ew_names[op], tr_dtype_name(dtype),
          (long long)n, offset_elems);
    for (int64_t i = 0; i < n && ok; i++) {
        uint32_t w = ref_bits(dtype, ew_ref(op, get_f(ha, dtype, (size_t)i), get_f(hb, dtype, (size_t)i)));
        uint32_t g = get_bits(hout, dtype, (size_t)i);
        if (w != g && !(is_nan_bits(w, dtype) && is_nan_bits(g, dtype))) {
            CHECK(0, "%s %s n=%lld offset=%zu: element %lld is %#x, want %#x", ew_names[op], tr_dtype_name(dtype),
                  (long long)n, offset_elems, (long long)i, g, w);
            ok = 0;
        }
    }
out:
    free(ha);
    free(hb);
    free(hout);
    gbuf_free(&da);
    gbuf_free(&db);
    gbuf_free(&dout);
    return ok;
}

static void test_elementwise(void)
{
    static const int64_t sizes[] = { 1, 7, 4099, 1000003 };
    static const int dtypes[] = { TR_F32, TR_BF16, TR_F16 };
    int n_ok = 0, n_all = 0;
    for (int op = 0; op <= EW_FILL; op++)
        for (int d = 0; d < 3; d++)
            for (int s = 0; s < 4; s++)
                for (size_t off = 0; off < 2; off++) {
                    n_all++;
                    n_ok += ew_case(op, dtypes[d], sizes[s], off);
                }
    printf("  elementwise: %d of %d (op, dtype, size, alignment) cases bit-exact\n", n_ok, n_all);
    CHECK(n_ok == n_all, "%d elementwise cases differ", n_all - n_ok);
}

/* ------------------------------------------------------------ casts */

/* Inputs for a cast from `dtype`: every bit pattern of a 16-bit type; for f32, the
 * rounding-critical values (ties, overflow edges, subnormals, NaN, inf) and random bits. */
static int64_t cast_inputs(void **out, int dtype)
{
    if (dtype != TR_F32) {
        uint16_t *h = malloc(65536 * 2);
        if (!h) return 0;
        for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
        *out = h;
        return 65536;
    }
    static const uint32_t special[] = {
        0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffc00001, 0x7fffffff,
        0x00000001, 0x007fffff, 0x00800000, 0x3f808000, 0x3f818000, 0x3f80c000, 0x3f807fff, 0x7f7fffff,
        0x7f7f8000, 0x7f7f7fff, 0x477ff000, 0x477fefff, 0x477fe000, 0x33000000, 0x33000001, 0x32ffffff,
        0x33800000, 0x33c00000, 0x38800000, 0x387fe000, 0x387ff000, 0x3f801000, 0x3f803000, 0x3f802000,
        0xc77ff000, 0xb3000001, 0x387fc000, 0x38000000, 0x00400000, 0x80400000,
    };
    const int64_t n_special = sizeof special / sizeof special[0], n = n_special + (1 << 20);
    uint32_t *h = malloc((size_t)n * 4);
    if (!h) return 0;
    memcpy(h, special, sizeof special);
    for (int64_t i = n_special; i < n; i++) {
        uint32_t r = rnd_u32();
        /* Half of them in the range where f16 and bf16 are finite and rounding matters. */
        if (i & 1) r = (r & 0x80ffffffu) | ((uint32_t)(100 + (r >> 24) % 60) << 23);
        h[i] = r;
    }
    *out = h;
    return n;
}

static void test_casts(void)
{
    static const int dtypes[] = { TR_F32, TR_BF16, TR_F16 };
    for (int si = 0; si < 3; si++)
        for (int di = 0; di < 3; di++)
            for (size_t off = 0; off < 2; off++) {
                int src = dtypes[si], dst = dtypes[di];
                void *hin = NULL;
                int64_t n = cast_inputs(&hin, src);
                size_t in_bytes = (size_t)n * tr_dtype_size(src), out_bytes = (size_t)n * tr_dtype_size(dst);
                void *hout = malloc(out_bytes);
                gbuf din, dout;
                memset(&din, 0, sizeof din);
                memset(&dout, 0, sizeof dout);
                if (!hin || !hout || gbuf_new(&din, in_bytes, off * tr_dtype_size(src)) ||
                    gbuf_new(&dout, out_bytes, off * tr_dtype_size(dst))) {
                    CHECK(0, "setup %s -> %s", tr_dtype_name(src), tr_dtype_name(dst));
                    goto next;
                }
                h2d(&din, hin, in_bytes);
                tr_error err;
                int rc = tr_k_cast_fwd_cuda(dout.data, dst, din.data, src, n, dev_stream, &err);
                CHECK(rc == TR_OK, "cast %s -> %s: %s", tr_dtype_name(src), tr_dtype_name(dst), err.msg);
                if (rc != TR_OK) goto next;
                d2h(hout, &dout, out_bytes);
                CHECK(gbuf_guards_ok(&dout), "cast %s -> %s offset %zu: guards overwritten", tr_dtype_name(src),
                      tr_dtype_name(dst), off);
                int64_t bad = 0, first = -1;
                uint32_t first_want = 0;
                for (int64_t i = 0; i < n; i++) {
                    /* A cast to the same dtype is a copy, on the CPU too: every bit pattern,
                     * a signalling NaN included, comes out unchanged. Otherwise the reference
                     * conversion (which quiets a NaN and keeps its sign and payload). */
                    uint32_t w = src == dst ? get_bits(hin, src, (size_t)i)
                                            : ref_bits(dst, get_f(hin, src, (size_t)i));
                    uint32_t g = get_bits(hout, dst, (size_t)i);
                    if (w != g) {
                        if (first < 0) first = i, first_want = w;
                        bad++;
                    }
                }
                CHECK(bad == 0, "cast %s -> %s offset %zu: %lld of %lld differ; first: input %#x gave %#x, want %#x",
                      tr_dtype_name(src), tr_dtype_name(dst), off, (long long)bad, (long long)n,
                      first >= 0 ? get_bits(hin, src, (size_t)first) : 0,
                      first >= 0 ? get_bits(hout, dst, (size_t)first) : 0, first_want);
            next:
                free(hin);
                free(hout);
                gbuf_free(&din);
                gbuf_free(&dout);
            }
}

/* The test's reference conversions are the CPU's (core/tensor/convert.c), so that GPU == test
 * reference means GPU == CPU. Only when the build has them. */
#ifdef TR_TEST_HAVE_CPU_CONVERT
static void test_reference_matches_cpu(void)
{
    int64_t bad = 0;
    for (int i = 0; i < (1 << 22); i++) {
        float x = bits_f32(rnd_u32());
        if (isnan(x)) continue;
        if (tr_f32_to_bf16(x) != ref_f32_to_bf16(x) || tr_f32_to_f16(x) != ref_f32_to_f16(x)) bad++;
    }
    for (uint32_t h = 0; h < 65536; h++) {
        float a = tr_bf16_to_f32((uint16_t)h), b = ref_bf16_to_f32((uint16_t)h);
        float c = tr_f16_to_f32((uint16_t)h), d = ref_f16_to_f32((uint16_t)h);
        if ((!isnan(a) && f32_bits(a) != f32_bits(b)) || (!isnan(c) && f32_bits(c) != f32_bits(d))) bad++;
    }
    CHECK(bad == 0, "%lld conversions of the test's reference differ from the CPU's", (long long)bad);
}
#endif

/* ------------------------------------------------------------ cblas agreement */

/* The float64 reference above, cross-checked against the CPU's BLAS on one product. */
#ifdef TR_TEST_HAVE_CBLAS
static void test_reference_matches_cblas(void)
{
    enum { M = 33, N = 47, K = 65 };
    static float a[M * K], b[N * K], c[M * N];
    for (int i = 0; i < M * K; i++) a[i] = rnd_unit();
    for (int i = 0; i < N * K; i++) b[i] = rnd_unit();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)a[i * K + k] * b[j * K + k];
            double d = fabs(s - c[i * N + j]);
            if (d > worst) worst = d;
        }
    CHECK(worst < 1e-4, "cblas_sgemm and the float64 loop differ by %g", worst);
}
#endif

/* ------------------------------------------------------------ main */

int main(void)
{
    int n = tr_cuda_device_count();
    if (n < 1) {
        printf("SKIP test_gpu_parity: no CUDA device is visible (tr_cuda_device_count() = 0)\n");
        printf("0 passed, 0 failed, 1 skipped\n");
        return 0;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        printf("  device: %s, sm_%d%d, %d SMs, %.1f GiB\n", prop.name, prop.major, prop.minor,
               prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0);
    if (gt_init_device()) return 1;
    TEST(test_device_lookup);
    TEST(test_workspace_in_ledger);
    TEST(test_alloc_roundtrip);
    TEST(test_alloc_oom_by_limit);
    TEST(test_alloc_oom_by_device);
    TEST(test_alloc_stream_reuse);
#ifdef TR_TEST_HAVE_CBLAS
    TEST(test_reference_matches_cblas);
#else
    printf("SKIP test_reference_matches_cblas: built without OpenBLAS\n");
#endif
    TEST(test_gemm_f32);
    TEST(test_gemm_tf32);
    TEST(test_gemm_bf16_to_bf16);
    TEST(test_gemm_bf16_to_f32);
    TEST(test_gemm_f16_to_f16);
    TEST(test_gemm_f16_to_f32);
    TEST(test_gemm_large);
    TEST(test_gemm_cache_deterministic);
    TEST(test_gemm_refused_epilogue_cached);
    TEST(test_gemm_rejects_bad_args);
    TEST(test_elementwise);
#ifdef TR_TEST_HAVE_CPU_CONVERT
    TEST(test_reference_matches_cpu);
#else
    printf("SKIP test_reference_matches_cpu: this build has no tr_f32_to_bf16 (core/tensor/convert.c)\n");
#endif
    TEST(test_casts);
    gt_check_device_at_exit();
    tr_cuda_release_device(dev_state);
    tr_alloc_destroy(dev_alloc);
    return gt_done();
}
