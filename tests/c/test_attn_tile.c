/* test_attn_tile.c — the attention tile products (kernels/cpu/attn_tile.c) against
 * cblas_sgemm, on every ISA path this CPU runs (the others SKIP): both A forms, odd M, N, K
 * (not multiples of the tiles' rows or vectors; the head sizes D = 1..128 and the key counts
 * T = 1..129 that attention gives them), strided operands, alpha, row scales and
 * accumulation, with C's padding columns and both ends guarded against stray stores; and
 * the packed transpose with its zero padding. */
#include <cblas.h>

#include "check.h"
#include "attn_isa.h"
#include "op_check.h"
#include "cpu/attn_tile.h"

static const int isas[] = { TR_ATTN_ISA_AVX2, TR_ATTN_ISA_AVX512 };
static const char *isa_names[] = { "avx2", "avx512" };

static float *rand_f32(int64_t n)
{
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)oc_rand();
    return x;
}

/* One product on isa against cblas_sgemm (alpha 1, beta 0) followed by the row scales and
 * the accumulation in float; returns 0 and reports through CHECK on a mismatch. */
static int one_case(int isa, int trans_a, int64_t M, int64_t N, int64_t K, int with_rs, int accumulate)
{
    const int64_t lda = (trans_a ? M : K) + 3, ldb = N + 5, ldc = N + 2;
    const int64_t arows = trans_a ? K : M;
    float *A = rand_f32(arows * lda), *B = rand_f32(K * ldb), *rs = rand_f32(M);
    float *C0 = rand_f32(M * ldc), *AB = malloc((size_t)(M * N) * sizeof(float));
    float *C = oc_guarded((size_t)(M * ldc) * sizeof(float));
    const float alpha = 0.75f;
    memcpy(C, C0, (size_t)(M * ldc) * sizeof(float));
    if (K > 0)
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
                    A, (int)lda, B, (int)ldb, 0.0f, AB, (int)N);
    else
        memset(AB, 0, (size_t)(M * N) * sizeof(float));
    tr_attn_tile_gemm(isa, trans_a, C, ldc, A, lda, B, ldb, M, N, K, alpha, with_rs ? rs : NULL, accumulate);
    double err = 0, scale = 1e-30;
    int pad_ok = 1;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double want = (double)alpha * (with_rs ? rs[i] : 1) * AB[i * N + j] + (accumulate ? C0[i * ldc + j] : 0);
            double e = fabs((double)C[i * ldc + j] - want);
            err = e > err || e != e ? e : err;
            scale = fabs(want) > scale ? fabs(want) : scale;
        }
        for (int64_t j = N; j < ldc; j++) pad_ok &= C[i * ldc + j] == C0[i * ldc + j];
    }
    /* both sum K products in f32, in different orders */
    double tol = 4e-7 * (double)(K + 4);
    int ok = err <= tol * scale && pad_ok && oc_guard_ok(C);
    CHECK(ok, "%s trans_a=%d M=%lld N=%lld K=%lld rs=%d acc=%d: max err %g of scale %g (tol %g), padding %s, guards %s",
          isa_names[isa == TR_ATTN_ISA_AVX512], trans_a, (long long)M, (long long)N, (long long)K, with_rs, accumulate,
          err, scale, tol * scale, pad_ok ? "intact" : "WRITTEN", oc_guard_ok(C) ? "intact" : "WRITTEN");
    free(A); free(B); free(rs); free(C0); free(AB);
    oc_guarded_free(C);
    return ok;
}

/* ------------------------------------------------------------ cases */

/* M and K over the key counts and block sizes, N over the head sizes and odd widths. */
static void test_attn_tile_matches_cblas(void)
{
    static const int64_t Ms[] = { 1, 7, 15, 16, 17, 64, 129 };
    static const int64_t Ns[] = { 1, 8, 15, 16, 17, 32, 48, 64, 80, 128, 129 };
    static const int64_t Ks[] = { 1, 7, 16, 33, 128 };
    oc_seed(41);
    for (size_t s = 0; s < sizeof isas / sizeof isas[0]; s++) {
        if (!attn_isa_runs(isas[s], isa_names[s])) continue;
        int n = 0, bad = 0;
        for (int tr = 0; tr < 2; tr++)
            for (size_t i = 0; i < sizeof Ms / sizeof Ms[0]; i++)
                for (size_t j = 0; j < sizeof Ns / sizeof Ns[0]; j++)
                    for (size_t k = 0; k < sizeof Ks / sizeof Ks[0] && bad < 3; k++, n++)
                        bad += !one_case(isas[s], tr, Ms[i], Ns[j], Ks[k], (int)(n % 3 == 1), (int)(n % 2));
    }
}

/* The attention shapes themselves: S = q k^T (K = D, N = Tp), P v and dS k (K = T, N = D),
 * dV += P^T dO and dK += dS^T q (trans_a, M = T, K = the block's rows). */
static void test_attn_tile_attention_shapes(void)
{
    static const int64_t Ds[] = { 1, 8, 32, 48, 64, 80, 128 };
    static const int64_t Ts[] = { 1, 7, 15, 16, 17, 128, 129 };
    oc_seed(42);
    for (size_t s = 0; s < sizeof isas / sizeof isas[0]; s++) {
        if (!attn_isa_runs(isas[s], isa_names[s])) continue;
        int bad = 0;
        for (size_t i = 0; i < sizeof Ds / sizeof Ds[0] && bad < 3; i++)
            for (size_t j = 0; j < sizeof Ts / sizeof Ts[0] && bad < 3; j++) {
                int64_t D = Ds[i], T = Ts[j], Tp = (T + 15) / 16 * 16, nb = T < 64 ? T : 64;
                bad += !one_case(isas[s], 0, nb, Tp, D, 0, 0);   /* scores */
                bad += !one_case(isas[s], 0, nb, D, T, 1, 0);    /* P v, normalised rows */
                bad += !one_case(isas[s], 1, T, D, nb, 0, 1);    /* dV, dK accumulate */
                bad += !one_case(isas[s], 1, T, D, nb, 0, 0);    /* their first block */
            }
    }
}

/* An ISA this CPU lacks must say so, the BLAS path always exists, and the best one is usable. */
/* A row's panels take the plain-store kernels wherever their last vector is whole: only the
 * last panel of a row that is not a whole number of vectors (16 floats is one on AVX-512, two
 * on AVX2) takes the masked ones. */
static void test_attn_tile_whole_panels_store_plainly(void)
{
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (!tr_attn_tile_usable(isas[i])) continue;
        for (int64_t N = 16; N <= 512; N += 16)
            CHECK(tr_attn_tile_masked_panels(isas[i], N) == 0, "%s N=%lld: %d panels with masked stores, want 0",
                  isa_names[isas[i] == TR_ATTN_ISA_AVX512], (long long)N, tr_attn_tile_masked_panels(isas[i], N));
        for (int64_t N = 1; N <= 300; N += 7)
            if (N % 16)
                CHECK(tr_attn_tile_masked_panels(isas[i], N) == ((N % 8) != 0 || isas[i] == TR_ATTN_ISA_AVX512),
                      "%s N=%lld: %d panels with masked stores", isa_names[isas[i] == TR_ATTN_ISA_AVX512],
                      (long long)N, tr_attn_tile_masked_panels(isas[i], N));
    }
}

static void test_attn_tile_isa_choice(void)
{
    CHECK(tr_attn_tile_usable(TR_ATTN_ISA_BLAS), "the BLAS path is always usable");
    CHECK(tr_attn_tile_usable(tr_attn_tile_isa()), "the chosen path %d is not usable", tr_attn_tile_isa());
    CHECK(!tr_attn_tile_usable(7), "an unknown path is not usable");
    if (tr_attn_tile_usable(TR_ATTN_ISA_AVX512))
        CHECK(tr_attn_tile_isa() == TR_ATTN_ISA_AVX512, "AVX-512 present but %d chosen", tr_attn_tile_isa());
}

/* Rows and columns around the 16 x 16 blocks of the AVX-512 transpose, ldd at the next
 * multiple of 16 and beyond it, and ldd = rows (the scalar path when rows is not a multiple
 * of 16). */
static void test_attn_tile_pack_t_pads_with_zeros(void)
{
    static const int64_t Rs[] = { 1, 7, 16, 17, 33 }, Cs[] = { 1, 5, 16, 20, 48 };
    oc_seed(43);
    for (size_t i = 0; i < sizeof Rs / sizeof Rs[0]; i++)
        for (size_t j = 0; j < sizeof Cs / sizeof Cs[0]; j++)
            for (int extra = -16; extra <= 32; extra += 16) {   /* 32: T + 3, short of 16-row blocks */
                const int64_t T = Rs[i], D = Cs[j], ld = D + 3;
                const int64_t Tp = extra < 0 ? T : extra == 32 ? T + 3 : (T + 15) / 16 * 16 + extra;
                float *src = rand_f32(T * ld), *dst = oc_guarded((size_t)(D * Tp) * sizeof(float));
                for (int64_t k = 0; k < D * Tp; k++) dst[k] = 99;
                tr_attn_tile_pack_t(dst, Tp, src, ld, T, D);
                int ok = 1;
                for (int64_t d = 0; d < D; d++)
                    for (int64_t t = 0; t < Tp; t++) ok &= dst[d * Tp + t] == (t < T ? src[t * ld + d] : 0.0f);
                CHECK(ok, "rows %lld cols %lld ldd %lld: dst[d][t] = src[t][d] for t < T, 0 after", (long long)T,
                      (long long)D, (long long)Tp);
                CHECK(oc_guard_ok(dst), "guards, rows %lld cols %lld ldd %lld", (long long)T, (long long)D, (long long)Tp);
                free(src);
                oc_guarded_free(dst);
            }
}

int main(void)
{
    RUN(test_attn_tile_matches_cblas);
    RUN(test_attn_tile_attention_shapes);
    RUN(test_attn_tile_whole_panels_store_plainly);
    RUN(test_attn_tile_isa_choice);
    RUN(test_attn_tile_pack_t_pads_with_zeros);
    return check_done();
}
