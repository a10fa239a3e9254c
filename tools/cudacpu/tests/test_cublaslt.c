/* test_cublaslt.c (cudacpu) — the cuBLASLt stand-in (libcublasLt.so.13) against a double-precision
 * reference and against the refusals the real library documents. Built and run by
 * run_cublaslt.sh; prints one PASS/FAIL line per case, exits non-zero when any case fails.
 *
 * Products: every supported type combination x both transposes x beta (0, C == D, C != D with
 * its own leading dimension) x the bias epilogue x strided batches with a broadcast (stride 0)
 * operand, with a tolerance that scales with K (f32 accumulation: |err| <= 2 (K+2) 2^-24 sum|terms|)
 * plus half an ulp of the 16-bit output; sentinels in D's padding and in C must survive.
 * Rounding: products exact in f32 (K = 1, 2) must round to the bit that an independent
 * round-to-nearest-even of the exact value gives, ties and f16 overflow included. */
#include <cublasLt.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, passes;

static void report(const char *name, const char *why)
{
    if (why) printf("FAIL %s: %s\n", name, why), failures++;
    else printf("PASS %s\n", name), passes++;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) /* in [-1, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

/* ------------------------------------------------------------ reference rounding (independent of the library) */

/* x rounded to a binary format of p significant bits, minimum normal exponent emin, maximum emax,
 * nearest even (nearbyint in the default rounding mode), overflowing to infinity. */
static double round_fmt(double x, int p, int emin, int emax)
{
    if (x == 0 || isnan(x) || isinf(x)) return x;
    int e = ilogb(x);
    if (e < emin) e = emin;
    double y = ldexp(nearbyint(ldexp(x, p - 1 - e)), e - (p - 1));
    double max = ldexp(2.0 - ldexp(1.0, 1 - p), emax);
    return fabs(y) > max ? copysign(INFINITY, x) : y;
}

static uint16_t enc_bf16(double x) /* x already representable in bf16 */
{
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static uint16_t enc_f16(double x) /* x already representable in f16 */
{
    uint16_t s = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (isinf(a)) return s | 0x7c00;
    if (a < ldexp(1, -14)) return s | (uint16_t)ldexp(a, 24);
    int e = ilogb(a);
    return s | (uint16_t)((e + 15) << 10) | (uint16_t)((ldexp(a, -e) - 1.0) * 1024.0);
}

static double dec_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double dec_f16(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

static int tsize(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

static double rd(const void *p, cudaDataType t, int64_t i)
{
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    return t == CUDA_R_16BF ? dec_bf16(((const uint16_t *)p)[i]) : dec_f16(((const uint16_t *)p)[i]);
}

/* Stores x rounded to t (so a stored value is exactly what the reference reads back). */
static void wr(void *p, cudaDataType t, int64_t i, double x)
{
    if (t == CUDA_R_32F) ((float *)p)[i] = (float)x;
    else if (t == CUDA_R_16BF) ((uint16_t *)p)[i] = enc_bf16(round_fmt(x, 8, -126, 127));
    else ((uint16_t *)p)[i] = enc_f16(round_fmt(x, 11, -14, 15));
}

/* ------------------------------------------------------------ one product through the API */

typedef struct {
    cudaDataType ab, cd;
    cublasComputeType_t compute;
    int ta, tb, m, n, k, batch, bias, in_place;
    int64_t lda_pad, ldc_pad, ldd_pad, stride_a0; /* stride_a0: A broadcast (stride 0) over the batch */
    float alpha, beta;
} prod_case;

static void *zalloc(size_t bytes)
{
    const size_t rounded = (bytes / 256 + 1) * 256; /* never 0, and room for a misaligned view */
    void *p = aligned_alloc(256, rounded);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    memset(p, 0, rounded);
    return p;
}

#define CK(call)                                                                                                       \
    do {                                                                                                               \
        cublasStatus_t st_ = (call);                                                                                   \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                            \
            snprintf(why, sizeof why, "%s returned %d", #call, (int)st_);                                              \
            goto out;                                                                                                  \
        }                                                                                                              \
    } while (0)

static void run_product(const char *name, const prod_case *pc)
{
    char why[256] = "";
    const int m = pc->m, n = pc->n, k = pc->k, bt = pc->batch;
    const int64_t ar = pc->ta ? k : m, ac = pc->ta ? m : k, br = pc->tb ? n : k, bc = pc->tb ? k : n;
    const int64_t lda = ar + pc->lda_pad, ldb = br, ldd = m + pc->ldd_pad, ldc = pc->in_place ? ldd : m + pc->ldc_pad;
    const int64_t sa = pc->stride_a0 ? 0 : lda * ac, sb = ldb * bc, sc = ldc * n, sd = ldd * n;
    const int es = tsize(pc->ab), cs = tsize(pc->cd);
    void *A = zalloc((size_t)(lda * ac * (pc->stride_a0 ? 1 : bt)) * es), *B = zalloc((size_t)(sb * bt) * es);
    void *D = zalloc((size_t)(sd * bt) * cs), *C = pc->in_place ? D : zalloc((size_t)(sc * bt) * cs);
    void *bias = zalloc((size_t)m * cs), *ws = zalloc(32u << 20);
    double *ref = malloc(sizeof(double) * (size_t)(m * n * bt)), *mag = malloc(sizeof(double) * (size_t)(m * n * bt));
    const double sentinel = -4096.0; /* exact in every storage type */
    cublasLtHandle_t h = NULL;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL, ldl = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    for (int64_t i = 0; i < lda * ac * (pc->stride_a0 ? 1 : bt); i++) wr(A, pc->ab, i, urand());
    for (int64_t i = 0; i < sb * bt; i++) wr(B, pc->ab, i, urand());
    for (int64_t i = 0; i < m; i++) wr(bias, pc->cd, i, urand());
    for (int64_t i = 0; i < sd * bt; i++) wr(D, pc->cd, i, pc->in_place ? urand() : sentinel);
    if (!pc->in_place)
        for (int64_t i = 0; i < sc * bt; i++) wr(C, pc->cd, i, urand());
    /* The reference, before the call (in place, C is overwritten). */
    for (int b = 0; b < bt; b++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double s = 0, a = 0;
                for (int p = 0; p < k; p++) {
                    double x = rd(A, pc->ab, b * sa + (pc->ta ? p + i * lda : i + p * lda));
                    double y = rd(B, pc->ab, b * sb + (pc->tb ? j + p * ldb : p + j * ldb));
                    s += x * y, a += fabs(x * y);
                }
                double c = pc->beta != 0 ? rd(C, pc->cd, b * sc + i + j * ldc) : 0, bi = pc->bias ? rd(bias, pc->cd, i) : 0;
                ref[(b * n + j) * m + i] = pc->alpha * s + pc->beta * c + bi;
                mag[(b * n + j) * m + i] = fabs(pc->alpha) * a + fabs(pc->beta * c) + fabs(bi);
            }
    CK(cublasLtCreate(&h));
    CK(cublasLtMatmulDescCreate(&op, pc->compute, CUDA_R_32F));
    int32_t ta = pc->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = pc->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (pc->bias) {
        uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
        int32_t btype = pc->cd;
        CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &btype, sizeof btype));
        CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    CK(cublasLtMatrixLayoutCreate(&la, pc->ab, (uint64_t)ar, (uint64_t)ac, lda));
    CK(cublasLtMatrixLayoutCreate(&lb, pc->ab, (uint64_t)br, (uint64_t)bc, ldb));
    CK(cublasLtMatrixLayoutCreate(&ldl, pc->cd, (uint64_t)m, (uint64_t)n, ldd));
    CK(cublasLtMatrixLayoutCreate(&lc, pc->cd, (uint64_t)m, (uint64_t)n, ldc));
    if (bt > 1) {
        int32_t count = bt;
        cublasLtMatrixLayout_t ls[4] = {la, lb, lc, ldl};
        int64_t strides[4] = {sa, sb, sc, sd};
        for (int i = 0; i < 4; i++) {
            CK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
            CK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                                sizeof strides[i]));
        }
    }
    CK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = 32u << 20;
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    cublasLtMatmulHeuristicResult_t res;
    int got = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, pc->in_place ? ldl : lc, ldl, pref, 1, &res, &got));
    if (got != 1) { snprintf(why, sizeof why, "heuristic returned %d algorithms", got); goto out; }
    CK(cublasLtMatmul(h, op, &pc->alpha, A, la, B, lb, &pc->beta, C, pc->in_place ? ldl : lc, D, ldl, &res.algo, ws,
                      wsb, NULL));
    {
        const int p = pc->cd == CUDA_R_16BF ? 8 : 11;
        double worst = 0;
        for (int b = 0; b < bt && !why[0]; b++)
            for (int j = 0; j < n && !why[0]; j++) {
                for (int i = 0; i < m; i++) {
                    double want = ref[(b * n + j) * m + i], got_v = rd(D, pc->cd, b * sd + i + j * ldd);
                    double tol = 2.0 * (k + 2) * ldexp(mag[(b * n + j) * m + i], -24) +
                                 (pc->cd == CUDA_R_32F ? 0 : ldexp(fabs(want), -(p - 1)));
                    double err = fabs(got_v - want);
                    if (!(err <= tol)) {
                        snprintf(why, sizeof why, "batch %d D[%d,%d] = %.9g, reference %.9g (tolerance %.3g)", b, i, j,
                                 got_v, want, tol);
                        break;
                    }
                    if (tol > 0 && err / tol > worst) worst = err / tol;
                }
                for (int64_t i = m; i < ldd && !why[0]; i++) /* D's padding below row m is not D's */
                    if (!pc->in_place && rd(D, pc->cd, b * sd + i + j * ldd) != sentinel)
                        snprintf(why, sizeof why, "padding D[%lld,%d] overwritten", (long long)i, j);
            }
    }
out:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (ldl) cublasLtMatrixLayoutDestroy(ldl);
    if (op) cublasLtMatmulDescDestroy(op);
    if (h) cublasLtDestroy(h);
    report(name, why[0] ? why : NULL);
    free(A), free(B), free(D), free(bias), free(ws), free(ref), free(mag);
    if (!pc->in_place) free(C);
}

static void products(void)
{
    static const struct {
        cudaDataType ab, cd;
        cublasComputeType_t compute;
        const char *name;
    } types[] = {
        {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, "f32"},
        {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, "f32_tf32"},
        {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, "bf16"},
        {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, "bf16_f32"},
        {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, "f16"},
        {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, "f16_f32"},
    };
    char name[160];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (int tr = 0; tr < 4; tr++)
            for (int mode = 0; mode < 4; mode++) {
                /* mode 0: beta 0, no bias; 1: beta, C == D, bias; 2: beta, C != D (own ld), bias, batch 3
                 * with A broadcast; 3: beta 0 in place with D's padded ld, bias, batch 2. */
                prod_case pc = {types[t].ab, types[t].cd, types[t].compute, tr & 1, tr >> 1, 37, 29, 53, 1, 0, 0,
                                0, 0, 0, 0, 0.75f, 0.0f};
                if (mode == 1) pc.beta = 1.5f, pc.in_place = 1, pc.bias = 1, pc.lda_pad = 3;
                if (mode == 2) pc.beta = -0.5f, pc.bias = 1, pc.batch = 3, pc.stride_a0 = 1, pc.ldc_pad = 5, pc.ldd_pad = 2;
                if (mode == 3) pc.in_place = 1, pc.bias = 1, pc.batch = 2, pc.ldd_pad = 4;
                snprintf(name, sizeof name, "product_%s_%c%c_%s", types[t].name, "NT"[tr & 1], "NT"[tr >> 1],
                         (const char *[]){"beta0", "inplace_beta_bias", "outofplace_beta_bias_batch3_bcastA",
                                          "inplace_beta0_bias_batch2"}[mode]);
                run_product(name, &pc);
            }
    /* Larger than one 512-tile in every dimension, so the 16-bit path accumulates K panels. */
    prod_case big = {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 0, 600, 530, 1100, 1, 1, 0, 0, 0, 0, 0, 1.0f, 0.5f};
    big.ldc_pad = 1;
    run_product("product_bf16_TN_tiles_600x530x1100_bias_beta", &big);
    big.ab = big.cd = CUDA_R_32F;
    run_product("product_f32_TN_600x530x1100_bias_beta", &big);
    prod_case k0 = {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 0, 0, 7, 5, 0, 1, 1, 0, 0, 0, 0, 0, 1.0f, 2.0f};
    run_product("product_f16_k0_is_beta_C_plus_bias", &k0);
    k0.ab = k0.cd = CUDA_R_32F;
    run_product("product_f32_k0_is_beta_C_plus_bias", &k0);
}

/* ------------------------------------------------------------ a small fixture for the other cases */

typedef struct {
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulPreference_t pref;
    void *A, *B, *C, *D, *bias, *ws;
    cublasLtMatmulHeuristicResult_t res;
    int got;
} fixture;

/* D[m,n] = A[m,k] B[k,n] (no transposes), types ab -> cd, ld = rows, one workspace of 32 MiB;
 * buffers hold up to 4 batches of m x n f32 (the batch cases use at most 3). */
static cublasStatus_t fx_make(fixture *f, cublasComputeType_t compute, cudaDataType ab, cudaDataType cd, int m, int n,
                              int k)
{
    memset(f, 0, sizeof *f);
    cublasStatus_t st;
    if ((st = cublasLtCreate(&f->h)) || (st = cublasLtMatmulDescCreate(&f->op, compute, CUDA_R_32F)) ||
        (st = cublasLtMatrixLayoutCreate(&f->la, ab, (uint64_t)m, (uint64_t)k, m)) ||
        (st = cublasLtMatrixLayoutCreate(&f->lb, ab, (uint64_t)k, (uint64_t)n, k)) ||
        (st = cublasLtMatrixLayoutCreate(&f->lc, cd, (uint64_t)m, (uint64_t)n, m)) ||
        (st = cublasLtMatrixLayoutCreate(&f->ld, cd, (uint64_t)m, (uint64_t)n, m)) ||
        (st = cublasLtMatmulPreferenceCreate(&f->pref)))
        return st;
    /* room for up to 4 batches of f32 and a misaligned view of each */
    f->A = zalloc((size_t)(m * k) * 16 + 64), f->B = zalloc((size_t)(k * n) * 16 + 64);
    f->C = zalloc((size_t)(m * n) * 16 + 64), f->D = zalloc((size_t)(m * n) * 16 + 64);
    f->bias = zalloc((size_t)m * 16 + 64), f->ws = zalloc((32u << 20) + 256);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fx_heuristic(fixture *f)
{
    f->got = -1;
    return cublasLtMatmulAlgoGetHeuristic(f->h, f->op, f->la, f->lb, f->lc, f->ld, f->pref, 1, &f->res, &f->got);
}

static cublasStatus_t fx_run(fixture *f, const cublasLtMatmulAlgo_t *algo, size_t ws_bytes)
{
    const float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(f->h, f->op, &alpha, f->A, f->la, f->B, f->lb, &beta, f->C, f->lc, f->D, f->ld, algo, f->ws,
                          ws_bytes, NULL);
}

static void fx_free(fixture *f)
{
    cublasLtMatrixLayout_t ls[4] = {f->la, f->lb, f->lc, f->ld};
    for (int i = 0; i < 4; i++)
        if (ls[i]) cublasLtMatrixLayoutDestroy(ls[i]);
    if (f->pref) cublasLtMatmulPreferenceDestroy(f->pref);
    if (f->op) cublasLtMatmulDescDestroy(f->op);
    if (f->h) cublasLtDestroy(f->h);
    free(f->A), free(f->B), free(f->C), free(f->D), free(f->bias), free(f->ws);
}

static void expect(const char *name, cublasStatus_t got, cublasStatus_t want)
{
    char why[96];
    snprintf(why, sizeof why, "status %d, want %d", (int)got, (int)want);
    report(name, got == want ? NULL : why);
}

/* The heuristic must refuse with `want` and return no algorithm. */
static void expect_no_algo(const char *name, fixture *f, cublasStatus_t want)
{
    cublasStatus_t st = fx_heuristic(f);
    char why[96];
    snprintf(why, sizeof why, "status %d (want %d), %d algorithms", (int)st, (int)want, f->got);
    report(name, st == want && f->got <= 0 ? NULL : why);
}

/* ------------------------------------------------------------ rounding of 16-bit outputs */

/* D = A B with K = 2, every product and sum exact in f32: D must be the reference rounding of
 * the exact value, bit for bit. Pairs are random, then the constructed ties and overflows. */
static void rounding(cudaDataType t, const char *name)
{
    const int n = 4096, k = 2, p = t == CUDA_R_16BF ? 8 : 11, emin = t == CUDA_R_16BF ? -126 : -14;
    const int emax = t == CUDA_R_16BF ? 127 : 15;
    fixture f;
    char why[200] = "";
    cublasStatus_t st = fx_make(&f, CUBLAS_COMPUTE_32F, t, t, 1, n, k);
    if (st) { snprintf(why, sizeof why, "setup status %d", (int)st); goto out; }
    uint16_t *A = f.A, *B = f.B, *D = f.D;
    wr(A, t, 0, 1.0), wr(A, t, 1, 1.0);
    /* A = [1 1], so D[j] = B[0,j] + B[1,j]: exact in f32 when the exponents are within 24 - p of each other. */
    for (int j = 0; j < n; j++) {
        double x = urand() * 4, y = ldexp(urand(), -(int)(8 * fabs(urand())));
        wr(B, t, 2 * j, x), wr(B, t, 2 * j + 1, y * fabs(x));
    }
    /* Ties to even and overflow, set explicitly: 1 + half an ulp (even: down), 1 + 1.5 ulp (up). */
    const double ulp = ldexp(1, 1 - p);
    wr(B, t, 0, 1.0), wr(B, t, 1, ulp / 2);
    wr(B, t, 2, 1.0 + ulp), wr(B, t, 3, ulp / 2);
    wr(B, t, 4, -1.0), wr(B, t, 5, -ulp / 2);
    if (t == CUDA_R_16F) {
        wr(B, t, 6, 65504), wr(B, t, 7, 16);   /* 65520: the midpoint above the largest f16 -> inf */
        wr(B, t, 8, 65504), wr(B, t, 9, 15);   /* 65519 -> 65504 */
        wr(B, t, 10, ldexp(3, -24)), wr(B, t, 11, ldexp(1, -24)); /* a subnormal result, 2^-22 */
    }
    if ((st = fx_heuristic(&f)) || (st = fx_run(&f, &f.res.algo, 32u << 20))) {
        snprintf(why, sizeof why, "status %d", (int)st);
        goto out;
    }
    for (int j = 0; j < n; j++) {
        double exact = rd(B, t, 2 * j) + rd(B, t, 2 * j + 1);
        if ((double)(float)exact != exact) continue; /* not exact in f32: not this test's business */
        double r = round_fmt(exact, p, emin, emax);
        uint16_t want = t == CUDA_R_16BF ? enc_bf16(r) : enc_f16(r);
        if (D[j] != want) {
            snprintf(why, sizeof why, "D[%d] = 0x%04x for %.17g, reference rounding 0x%04x", j, D[j], exact, want);
            break;
        }
    }
out:
    fx_free(&f);
    report(name, why[0] ? why : NULL);
}

/* beta == 0: C is not read, so NaN garbage in D (C == D) must not reach the result. */
static void beta0_ignores_nan(cudaDataType t, const char *name)
{
    fixture f;
    char why[120] = "";
    const int m = 8, n = 8, k = 8;
    cublasStatus_t st = fx_make(&f, CUBLAS_COMPUTE_32F, t, t, m, n, k);
    for (int i = 0; i < m * k; i++) wr(f.A, t, i, 1.0);
    for (int i = 0; i < k * n; i++) wr(f.B, t, i, 0.5);
    for (int i = 0; i < m * n; i++) wr(f.D, t, i, NAN);
    const float alpha = 1.0f, beta = 0.0f;
    if (!st) st = fx_heuristic(&f);
    if (!st)
        st = cublasLtMatmul(f.h, f.op, &alpha, f.A, f.la, f.B, f.lb, &beta, f.D, f.ld, f.D, f.ld, &f.res.algo, f.ws,
                            32u << 20, NULL);
    if (st) snprintf(why, sizeof why, "status %d", (int)st);
    for (int i = 0; i < m * n && !why[0]; i++)
        if (rd(f.D, t, i) != 4.0) snprintf(why, sizeof why, "D[%d] = %g, want 4", i, rd(f.D, t, i));
    fx_free(&f);
    report(name, why[0] ? why : NULL);
}

/* ------------------------------------------------------------ refusals */

#define FIXTURE(compute, ab, cd, m, n, k)                                                                              \
    fixture f;                                                                                                         \
    if (fx_make(&f, compute, ab, cd, m, n, k)) {                                                                      \
        report(__func__, "fixture setup failed");                                                                      \
        fx_free(&f);                                                                                                   \
        return;                                                                                                        \
    }

static void set_u32(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, uint32_t v)
{
    if (cublasLtMatmulPreferenceSetAttribute(p, a, &v, sizeof v)) report("preference_set", "refused a uint32 value");
}

static void refuse_ld_below_rows(void)
{
    FIXTURE(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, 8, 8, 8);
    int64_t ld = 7;
    cublasLtMatrixLayoutSetAttribute(f.la, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld);
    expect_no_algo("refuse_ld_below_rows_heuristic", &f, CUBLAS_STATUS_INVALID_VALUE);
    expect("refuse_ld_below_rows_matmul", fx_run(&f, NULL, 0), CUBLAS_STATUS_INVALID_VALUE);
    ld = -8;
    cublasLtMatrixLayoutSetAttribute(f.la, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld);
    expect_no_algo("refuse_negative_ld", &f, CUBLAS_STATUS_INVALID_VALUE);
    fx_free(&f);
}

static void refuse_alignment(void)
{
    {   /* declared alignment below the element size: no algorithm */
        FIXTURE(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, 16, 16, 16);
        set_u32(f.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 1);
        expect_no_algo("refuse_declared_alignment_below_element", &f, CUBLAS_STATUS_NOT_SUPPORTED);
        fx_free(&f);
    }
    {   /* algorithm chosen for 16-byte operands (default preference, ld*2 = 32): a 2-byte-aligned A is refused */
        FIXTURE(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, 16, 16, 16);
        cublasStatus_t st = fx_heuristic(&f);
        expect("alignment_heuristic_default_preference", st, CUBLAS_STATUS_SUCCESS);
        f.A = (char *)f.A + 2;
        expect("refuse_underaligned_A_at_matmul", fx_run(&f, &f.res.algo, 0), CUBLAS_STATUS_NOT_SUPPORTED);
        f.A = (char *)f.A - 2;
        f.D = (char *)f.D + 8;
        expect("refuse_underaligned_D_at_matmul", fx_run(&f, &f.res.algo, 0), CUBLAS_STATUS_NOT_SUPPORTED);
        f.D = (char *)f.D - 8;
        /* the truth declared: 2 bytes; then the same pointer runs */
        set_u32(f.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 2);
        st = fx_heuristic(&f);
        f.A = (char *)f.A + 2;
        expect("accept_2byte_A_when_declared", st ? st : fx_run(&f, &f.res.algo, 0), CUBLAS_STATUS_SUCCESS);
        f.A = (char *)f.A - 2;
        fx_free(&f);
    }
    {   /* ld * 2 = 18 bytes: the algorithm can only assume 2-byte columns, whatever was declared */
        FIXTURE(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, 9, 16, 16);
        cublasStatus_t st = fx_heuristic(&f);
        expect("accept_odd_ld", st ? st : fx_run(&f, &f.res.algo, 0), CUBLAS_STATUS_SUCCESS);
        /* the algorithm reads A in 2-byte units already, so an A 2 bytes in runs too */
        f.A = (char *)f.A + 2;
        expect("accept_2byte_A_with_odd_ld", fx_run(&f, &f.res.algo, 0), CUBLAS_STATUS_SUCCESS);
        f.A = (char *)f.A - 2;
        f.B = (char *)f.B + 2; /* B's ld * 2 = 32 bytes: its algorithm still wants 16 */
        expect("refuse_underaligned_B_with_odd_ld_A", fx_run(&f, &f.res.algo, 0), CUBLAS_STATUS_NOT_SUPPORTED);
        f.B = (char *)f.B - 2;
        fx_free(&f);
    }
    {   /* batch stride of 3 elements (6 bytes): declared 256 is met by the pointer only */
        FIXTURE(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, 8, 8, 8);
        int32_t count = 2;
        int64_t stride_a = 64 + 3, stride = 64;
        cublasLtMatrixLayout_t ls[4] = {f.la, f.lb, f.lc, f.ld};
        for (int i = 0; i < 4; i++) {
            cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
            cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, i ? &stride : &stride_a,
                                             sizeof stride);
        }
        cublasStatus_t st = fx_heuristic(&f);
        expect("accept_odd_batch_stride", st ? st : fx_run(&f, &f.res.algo, 0), CUBLAS_STATUS_SUCCESS);
        fx_free(&f);
    }
    {   /* the bias pointer: the heuristic reads its alignment, the run must keep it */
        FIXTURE(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, 16, 16, 16);
        uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
        cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
        cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &f.bias, sizeof f.bias);
        cublasStatus_t st = fx_heuristic(&f);
        const void *moved = (const char *)f.bias + 2;
        cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &moved, sizeof moved);
        expect("refuse_underaligned_bias_at_matmul", st ? st : fx_run(&f, &f.res.algo, 0), CUBLAS_STATUS_NOT_SUPPORTED);
        const void *odd = (const char *)f.bias + 1;
        cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &odd, sizeof odd);
        expect_no_algo("refuse_bias_below_element_alignment", &f, CUBLAS_STATUS_NOT_SUPPORTED);
        const void *none = NULL;
        cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &none, sizeof none);
        expect("refuse_bias_epilogue_without_bias", fx_run(&f, NULL, 0), CUBLAS_STATUS_INVALID_VALUE);
        fx_free(&f);
    }
}

static void refuse_types(void)
{
    static const struct {
        cublasComputeType_t compute;
        cudaDataType scale, a, b, c, d;
        const char *name;
    } bad[] = {
        {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16F, CUDA_R_16BF, CUDA_R_16BF, "refuse_types_A_bf16_B_f16"},
        {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, "refuse_types_f32_to_bf16"},
        {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16F, CUDA_R_16F, "refuse_types_bf16_to_f16"},
        {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUDA_R_16BF, "refuse_types_C_ne_D"},
        {CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, "refuse_types_tf32_over_bf16"},
        {CUBLAS_COMPUTE_32F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, "refuse_types_scale_f16_with_compute_32f"},
        {CUBLAS_COMPUTE_64F, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F, "refuse_types_64f_not_in_stand_in"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fixture f;
        memset(&f, 0, sizeof f);
        cublasStatus_t st = cublasLtCreate(&f.h);
        if (!st) st = cublasLtMatmulDescCreate(&f.op, bad[i].compute, bad[i].scale);
        if (!st) st = cublasLtMatrixLayoutCreate(&f.la, bad[i].a, 8, 8, 8);
        if (!st) st = cublasLtMatrixLayoutCreate(&f.lb, bad[i].b, 8, 8, 8);
        if (!st) st = cublasLtMatrixLayoutCreate(&f.lc, bad[i].c, 8, 8, 8);
        if (!st) st = cublasLtMatrixLayoutCreate(&f.ld, bad[i].d, 8, 8, 8);
        if (!st) st = cublasLtMatmulPreferenceCreate(&f.pref);
        if (st) report(bad[i].name, "setup failed");
        else expect_no_algo(bad[i].name, &f, CUBLAS_STATUS_NOT_SUPPORTED);
        fx_free(&f);
    }
}

static void refuse_bias_type(void)
{
    FIXTURE(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, 16, 16, 16);
    uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
    int32_t bt = CUDA_R_32F;
    cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &f.bias, sizeof f.bias);
    cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
    expect_no_algo("refuse_bias_f32_with_bf16_D_heuristic", &f, CUBLAS_STATUS_NOT_SUPPORTED);
    expect("refuse_bias_f32_with_bf16_D_matmul", fx_run(&f, NULL, 0), CUBLAS_STATUS_NOT_SUPPORTED);
    bt = -1; /* the default: D's type */
    cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
    cublasStatus_t st = fx_heuristic(&f);
    expect("accept_bias_default_type", st ? st : fx_run(&f, &f.res.algo, 0), CUBLAS_STATUS_SUCCESS);
    fx_free(&f);
}

static void refuse_workspace(void)
{
    FIXTURE(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, 64, 64, 64);
    uint64_t max = 32u << 20;
    cublasLtMatmulPreferenceSetAttribute(f.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max, sizeof max);
    cublasStatus_t st = fx_heuristic(&f);
    if (st || f.got != 1 || f.res.workspaceSize == 0) {
        report("refuse_workspace_too_small", "the heuristic chose no algorithm that uses workspace");
    } else {
        expect("refuse_workspace_too_small", fx_run(&f, &f.res.algo, f.res.workspaceSize - 1), CUBLAS_STATUS_INVALID_VALUE);
        expect("accept_workspace_exact", fx_run(&f, &f.res.algo, f.res.workspaceSize), CUBLAS_STATUS_SUCCESS);
        f.ws = (char *)f.ws + 128;
        expect("refuse_workspace_not_256_aligned", fx_run(&f, &f.res.algo, f.res.workspaceSize), CUBLAS_STATUS_INVALID_VALUE);
        f.ws = (char *)f.ws - 128;
    }
    max = 0; /* the default: no workspace allowed, so none required */
    cublasLtMatmulPreferenceSetAttribute(f.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max, sizeof max);
    st = fx_heuristic(&f);
    report("heuristic_respects_max_workspace", !st && f.res.workspaceSize == 0 ? NULL : "workspace above the maximum");
    expect("accept_no_workspace", fx_run(&f, &f.res.algo, 0), CUBLAS_STATUS_SUCCESS);
    fx_free(&f);
}

static void refuse_batches_and_shapes(void)
{
    FIXTURE(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, 8, 8, 8);
    int32_t two = 2, three = 3;
    int64_t stride = 64;
    cublasLtMatrixLayout_t ls[4] = {f.la, f.lb, f.lc, f.ld};
    for (int i = 0; i < 4; i++)
        cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    cublasLtMatrixLayoutSetAttribute(f.ld, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &three, sizeof three);
    cublasLtMatrixLayoutSetAttribute(f.lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &three, sizeof three);
    cublasLtMatrixLayoutSetAttribute(f.la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, sizeof two);
    cublasLtMatrixLayoutSetAttribute(f.lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &three, sizeof three);
    expect_no_algo("refuse_batch_count_A_ne_D", &f, CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatrixLayoutSetAttribute(f.la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &three, sizeof three);
    cublasLtMatrixLayoutSetAttribute(f.lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, sizeof two);
    expect_no_algo("refuse_batch_count_C_ne_D", &f, CUBLAS_STATUS_INVALID_VALUE);
    int32_t zero = 0;
    cublasLtMatrixLayoutSetAttribute(f.lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &zero, sizeof zero);
    expect_no_algo("refuse_batch_count_zero", &f, CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatrixLayoutSetAttribute(f.lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &three, sizeof three);
    cublasStatus_t st = fx_heuristic(&f);
    expect("accept_batch_count_3", st ? st : fx_run(&f, &f.res.algo, 0), CUBLAS_STATUS_SUCCESS);
    uint64_t k9 = 9;
    cublasLtMatrixLayoutSetAttribute(f.lb, CUBLASLT_MATRIX_LAYOUT_ROWS, &k9, sizeof k9);
    expect_no_algo("refuse_inner_dimensions_differ", &f, CUBLAS_STATUS_INVALID_VALUE);
    expect("refuse_inner_dimensions_differ_matmul", fx_run(&f, NULL, 0), CUBLAS_STATUS_INVALID_VALUE);
    fx_free(&f);
    {
        FIXTURE(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, 8, 8, 8);
        uint64_t huge = (uint64_t)INT32_MAX + 1;
        int64_t ld = (int64_t)huge;
        cublasLtMatrixLayoutSetAttribute(f.la, CUBLASLT_MATRIX_LAYOUT_ROWS, &huge, sizeof huge);
        cublasLtMatrixLayoutSetAttribute(f.la, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld);
        expect_no_algo("refuse_rows_beyond_int32", &f, CUBLAS_STATUS_NOT_SUPPORTED);
        fx_free(&f);
    }
}

static void refuse_misc(void)
{
    FIXTURE(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, 8, 8, 8);
    cublasLtMatmulHeuristicResult_t r;
    int got = 5;
    expect("refuse_requested_algo_count_0",
           cublasLtMatmulAlgoGetHeuristic(f.h, f.op, f.la, f.lb, f.lc, f.ld, f.pref, 0, &r, &got),
           CUBLAS_STATUS_INVALID_VALUE);
    int32_t v = 1;
    expect("refuse_attribute_size_mismatch",
           cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_TRANSA, &v, sizeof(int64_t)), CUBLAS_STATUS_INVALID_VALUE);
    expect("refuse_attribute_null_buffer", cublasLtMatrixLayoutSetAttribute(f.la, CUBLASLT_MATRIX_LAYOUT_LD, NULL, 8),
           CUBLAS_STATUS_INVALID_VALUE);
    expect("refuse_preference_size_mismatch",
           cublasLtMatmulPreferenceSetAttribute(f.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &v, sizeof v),
           CUBLAS_STATUS_INVALID_VALUE);
    int32_t transc = CUBLAS_OP_T;
    cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_TRANSC, &transc, sizeof transc);
    expect_no_algo("refuse_transc", &f, CUBLAS_STATUS_NOT_SUPPORTED);
    transc = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_TRANSC, &transc, sizeof transc);
    int32_t row = CUBLASLT_ORDER_ROW;
    cublasLtMatrixLayoutSetAttribute(f.lb, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof row);
    expect_no_algo("refuse_row_order_not_in_stand_in", &f, CUBLAS_STATUS_NOT_SUPPORTED);
    row = CUBLASLT_ORDER_COL;
    cublasLtMatrixLayoutSetAttribute(f.lb, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof row);
    /* C == D read through a layout with another leading dimension: neither in place nor out of place */
    cublasLtMatrixLayout_t wide;
    cublasLtMatrixLayoutCreate(&wide, CUDA_R_32F, 8, 8, 16);
    const float alpha = 1, beta = 1;
    cublasStatus_t st = fx_heuristic(&f);
    expect("refuse_in_place_with_other_layout",
           st ? st : cublasLtMatmul(f.h, f.op, &alpha, f.A, f.la, f.B, f.lb, &beta, f.D, wide, f.D, f.ld, &f.res.algo,
                                    NULL, 0, NULL),
           CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatrixLayoutDestroy(wide);
    expect("refuse_beta_with_null_C",
           cublasLtMatmul(f.h, f.op, &alpha, f.A, f.la, f.B, f.lb, &beta, NULL, f.lc, f.D, f.ld, &f.res.algo, NULL, 0,
                          NULL),
           CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatmulAlgo_t forged;
    memset(&forged, 0, sizeof forged);
    expect("refuse_algo_not_from_heuristic", fx_run(&f, &forged, 0), CUBLAS_STATUS_INVALID_VALUE);
    expect("refuse_null_handle",
           cublasLtMatmul(NULL, f.op, &alpha, f.A, f.la, f.B, f.lb, &beta, f.C, f.lc, f.D, f.ld, NULL, NULL, 0, NULL),
           CUBLAS_STATUS_NOT_INITIALIZED);
    expect("accept_null_algo_implicit_heuristic", fx_run(&f, NULL, 0), CUBLAS_STATUS_SUCCESS);
    fx_free(&f);
}

/* ------------------------------------------------------------ the GELU epilogues */

static double gelu_ref(double x) { return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double dgelu_ref(double x)
{
    const double t = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

static void set_epilogue(fixture *f, uint32_t epi, void *aux, int64_t aux_ld)
{
    cublasLtMatmulDescSetAttribute(f->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    cublasLtMatmulDescSetAttribute(f->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &f->bias, sizeof f->bias);
    cublasLtMatmulDescSetAttribute(f->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
    cublasLtMatmulDescSetAttribute(f->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
}

/* |got - want| within tol relative to max(1, |want|) for every element, else the first miss */
static void expect_close(const char *name, const void *got, cudaDataType t, const double *want, int64_t n, double tol)
{
    char why[160];
    for (int64_t i = 0; i < n; i++) {
        const double g = rd(got, t, i), w = want[i];
        if (!(fabs(g - w) <= tol * (fabs(w) > 1 ? fabs(w) : 1))) {
            snprintf(why, sizeof why, "element %lld: %.9g, want %.9g", (long long)i, g, w);
            report(name, why);
            return;
        }
    }
    report(name, NULL);
}

/* GELU_AUX_BIAS: D = GELU(AB + bias) and aux = AB + bias (aux's leading dimension above D's
 * rows); then DGELU_BGRAD over that aux: D = (AB) GELU'(aux), bias = D's row sums; GELU and
 * GELU_BIAS without aux. Against double references, in D's type t. */
static void gelu_epilogues(cudaDataType t, const char *tag)
{
    enum { M = 24, N = 20, K = 16, AUX_LD = 32 };
    FIXTURE(CUBLAS_COMPUTE_32F, t, t, M, N, K);
    double x[M * N], want[M * N], want_aux[AUX_LD * N], bg[M];
    void *aux = zalloc((size_t)AUX_LD * N * 4);
    for (int i = 0; i < M * K; i++) wr(f.A, t, i, urand());
    for (int i = 0; i < K * N; i++) wr(f.B, t, i, urand());
    for (int i = 0; i < M; i++) wr(f.bias, t, i, urand());
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++) {
            double acc = 0;
            for (int k = 0; k < K; k++) acc += rd(f.A, t, i + k * M) * rd(f.B, t, k + j * K);
            x[i + j * M] = acc;
        }
    const double tol = t == CUDA_R_32F ? 1e-5 : 1.0 / 128;
    char name[96];
    /* GELU and GELU_BIAS */
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        set_epilogue(&f, with_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU, NULL, 0);
        for (int j = 0; j < N; j++)
            for (int i = 0; i < M; i++) want[i + j * M] = gelu_ref(x[i + j * M] + (with_bias ? rd(f.bias, t, i) : 0));
        snprintf(name, sizeof name, "epilogue_gelu%s_%s", with_bias ? "_bias" : "", tag);
        cublasStatus_t st = fx_run(&f, NULL, 0);
        if (st) expect(name, st, CUBLAS_STATUS_SUCCESS);
        else expect_close(name, f.D, t, want, M * N, tol);
    }
    /* GELU_AUX_BIAS */
    set_epilogue(&f, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, aux, AUX_LD);
    for (int j = 0; j < N; j++)
        for (int i = 0; i < AUX_LD; i++) {
            const double v = i < M ? x[i + j * M] + rd(f.bias, t, i) : 0;
            want_aux[i + j * AUX_LD] = v;
            if (i < M) want[i + j * M] = gelu_ref(v);
        }
    snprintf(name, sizeof name, "epilogue_gelu_aux_bias_%s", tag);
    cublasStatus_t st = fx_run(&f, NULL, 0);
    if (st) expect(name, st, CUBLAS_STATUS_SUCCESS);
    else {
        expect_close(name, f.D, t, want, M * N, tol);
        snprintf(name, sizeof name, "epilogue_gelu_aux_bias_stores_x_%s", tag);
        expect_close(name, aux, t, want_aux, AUX_LD * N, tol);
    }
    /* DGELU_BGRAD over the aux just written */
    set_epilogue(&f, CUBLASLT_EPILOGUE_DGELU_BGRAD, aux, AUX_LD);
    for (int i = 0; i < M; i++) bg[i] = 0;
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++) {
            want[i + j * M] = x[i + j * M] * dgelu_ref(rd(aux, t, i + j * AUX_LD));
            bg[i] += want[i + j * M];
        }
    snprintf(name, sizeof name, "epilogue_dgelu_bgrad_%s", tag);
    st = fx_run(&f, NULL, 0);
    if (st) expect(name, st, CUBLAS_STATUS_SUCCESS);
    else {
        expect_close(name, f.D, t, want, M * N, tol);
        snprintf(name, sizeof name, "epilogue_dgelu_bgrad_row_sums_%s", tag);
        expect_close(name, f.bias, t, bg, M, t == CUDA_R_32F ? 1e-5 : 1.0 / 64);
    }
    free(aux);
    fx_free(&f);
}

/* The aux matrix's documented rules: leading dimension a multiple of 8 and at least D's rows
 * (INVALID_VALUE), D's type, a pointer (at the run) aligned as at the heuristic; no bias
 * gradient of a batched product in the stand-in. */
static void refuse_aux(void)
{
    FIXTURE(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, 24, 16, 16);
    char *aux = zalloc(64 * 16 * 4);
    set_epilogue(&f, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, aux, 16);
    expect_no_algo("refuse_aux_ld_below_rows", &f, CUBLAS_STATUS_INVALID_VALUE);
    set_epilogue(&f, CUBLASLT_EPILOGUE_DGELU, aux, 28);
    expect_no_algo("refuse_aux_ld_not_multiple_of_8", &f, CUBLAS_STATUS_INVALID_VALUE);
    set_epilogue(&f, CUBLASLT_EPILOGUE_GELU_AUX, aux, 32);
    int32_t at = CUDA_R_32F;
    cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &at, sizeof at);
    expect_no_algo("refuse_aux_type_not_D", &f, CUBLAS_STATUS_NOT_SUPPORTED);
    at = -1;
    cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &at, sizeof at);
    cublasStatus_t st = fx_heuristic(&f);
    expect("accept_aux_ld_32", st ? st : fx_run(&f, &f.res.algo, 0), CUBLAS_STATUS_SUCCESS);
    if (st == CUBLAS_STATUS_SUCCESS) {
        set_epilogue(&f, CUBLASLT_EPILOGUE_GELU_AUX, aux + 2, 32);
        expect("refuse_aux_less_aligned_than_heuristic", fx_run(&f, &f.res.algo, 0), CUBLAS_STATUS_NOT_SUPPORTED);
    }
    set_epilogue(&f, CUBLASLT_EPILOGUE_GELU_AUX, aux + 1, 32);
    expect_no_algo("refuse_aux_below_element_alignment", &f, CUBLAS_STATUS_NOT_SUPPORTED);
    set_epilogue(&f, CUBLASLT_EPILOGUE_DGELU_BGRAD, NULL, 32);
    expect("refuse_aux_null_at_run", fx_run(&f, NULL, 0), CUBLAS_STATUS_INVALID_VALUE);
    int32_t two = 2;
    int64_t stride = 24 * 16;
    cublasLtMatrixLayout_t ls[4] = {f.la, f.lb, f.lc, f.ld};
    for (int i = 0; i < 4; i++) {
        cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, sizeof two);
        cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    }
    set_epilogue(&f, CUBLASLT_EPILOGUE_DGELU_BGRAD, aux, 32);
    expect_no_algo("refuse_bgrad_batched", &f, CUBLAS_STATUS_NOT_SUPPORTED);
    free(aux);
    fx_free(&f);
}

/* BGRADB: D = AB and bias[j] = the sum of B's column j over k (the bias gradient of a layer
 * whose output gradient is B), with B stored as written and transposed; A, B of type ab, D and
 * the bias of type cd (f32 from bf16: a weight gradient in f32 from half activations). */
static void bgradb_epilogue(cudaDataType ab, cudaDataType cd, const char *tag)
{
    enum { M = 24, N = 20, K = 16 };
    FIXTURE(CUBLAS_COMPUTE_32F, ab, cd, M, N, K);
    double want[M * N], bg[N];
    char name[96];
    for (int trans = 0; trans < 2; trans++) {
        /* B[k, n]: column-major k x n (ld K), or stored as n x k (ld N) and transposed */
        cublasOperation_t tb = trans ? CUBLAS_OP_T : CUBLAS_OP_N;
        cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
        cublasLtMatrixLayoutDestroy(f.lb);
        cublasLtMatrixLayoutCreate(&f.lb, ab, trans ? N : K, trans ? K : N, trans ? N : K);
        for (int i = 0; i < M * K; i++) wr(f.A, ab, i, urand());
        for (int i = 0; i < K * N; i++) wr(f.B, ab, i, urand());
        for (int j = 0; j < N; j++) {
            bg[j] = 0;
            for (int k = 0; k < K; k++) bg[j] += rd(f.B, ab, trans ? j + k * N : k + j * K);
            for (int i = 0; i < M; i++) {
                double acc = 0;
                for (int k = 0; k < K; k++) acc += rd(f.A, ab, i + k * M) * rd(f.B, ab, trans ? j + k * N : k + j * K);
                want[i + j * M] = acc;
            }
        }
        set_epilogue(&f, CUBLASLT_EPILOGUE_BGRADB, NULL, 0);
        snprintf(name, sizeof name, "epilogue_bgradb_%s%s", tag, trans ? "_transb" : "");
        cublasStatus_t st = fx_run(&f, NULL, 0);
        if (st) {
            expect(name, st, CUBLAS_STATUS_SUCCESS);
            continue;
        }
        const double tol = cd == CUDA_R_32F ? 1e-5 : 1.0 / 128;
        expect_close(name, f.D, cd, want, M * N, tol);
        snprintf(name, sizeof name, "epilogue_bgradb_column_sums_%s%s", tag, trans ? "_transb" : "");
        expect_close(name, f.bias, cd, bg, N, cd == CUDA_R_32F ? 1e-5 : 1.0 / 64);
    }
    fx_free(&f);
}

/* CUDACPU_LT_EPILOGUES=bias (run by run_cublaslt.sh): the heuristic offers DEFAULT and BIAS and
 * no algorithm for the other epilogues (NOT_SUPPORTED, none returned), as a card whose library
 * lacks them would. */
static void epilogues_bias_only(void)
{
    FIXTURE(CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, 24, 16, 16);
    char *aux = zalloc(64 * 16 * 4);
    set_epilogue(&f, CUBLASLT_EPILOGUE_DEFAULT, NULL, 0);
    expect("offered_default", fx_heuristic(&f), CUBLAS_STATUS_SUCCESS);
    set_epilogue(&f, CUBLASLT_EPILOGUE_BIAS, NULL, 0);
    expect("offered_bias", fx_heuristic(&f), CUBLAS_STATUS_SUCCESS);
    set_epilogue(&f, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, aux, 32);
    expect_no_algo("not_offered_gelu_aux_bias", &f, CUBLAS_STATUS_NOT_SUPPORTED);
    set_epilogue(&f, CUBLASLT_EPILOGUE_DGELU_BGRAD, aux, 32);
    expect_no_algo("not_offered_dgelu_bgrad", &f, CUBLAS_STATUS_NOT_SUPPORTED);
    set_epilogue(&f, CUBLASLT_EPILOGUE_BGRADB, NULL, 0);
    expect_no_algo("not_offered_bgradb", &f, CUBLAS_STATUS_NOT_SUPPORTED);
    free(aux);
    fx_free(&f);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines, so the summary on stderr never splits one */
    if (argc > 1 && !strcmp(argv[1], "--epilogues-bias")) {
        epilogues_bias_only();
        fprintf(stderr, "test_cublaslt --epilogues-bias: %d passed, %d failed\n", passes, failures);
        return failures ? 1 : 0;
    }
    products();
    rounding(CUDA_R_16BF, "rounding_bf16_nearest_even");
    rounding(CUDA_R_16F, "rounding_f16_nearest_even_overflow_subnormal");
    beta0_ignores_nan(CUDA_R_32F, "beta0_ignores_nan_in_D_f32");
    beta0_ignores_nan(CUDA_R_16BF, "beta0_ignores_nan_in_D_bf16");
    refuse_ld_below_rows();
    refuse_alignment();
    refuse_types();
    refuse_bias_type();
    refuse_workspace();
    refuse_batches_and_shapes();
    refuse_misc();
    gelu_epilogues(CUDA_R_32F, "f32");
    gelu_epilogues(CUDA_R_16BF, "bf16");
    gelu_epilogues(CUDA_R_16F, "f16");
    refuse_aux();
    bgradb_epilogue(CUDA_R_32F, CUDA_R_32F, "f32");
    bgradb_epilogue(CUDA_R_16BF, CUDA_R_32F, "bf16_to_f32");
    bgradb_epilogue(CUDA_R_16BF, CUDA_R_16BF, "bf16");
    fflush(stdout);
    fprintf(stderr, "test_cublaslt: %d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
