/* bench_gemm.c — GEMM throughput on this CPU against its measured peak.
 *
 * Peak: an FMA-throughput loop (independent accumulator chains, AVX2 FMA when the build
 * has it) on every core at once, in GFLOP/s. Then cblas_sgemm at n = 512, 1024, 2048
 * (square, row-major, C = A B), and the two bf16 paths the ops could take: cblas_sbgemm
 * (bf16 inputs, f32 output) against converting both bf16 operands to f32 and calling
 * sgemm (what ops_matmul.c does). Prints one table; every figure is the best of several
 * short runs, because the machine is shared and a single run measures the neighbours. */
#include <cblas.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __FMA__
#include <immintrin.h>
#endif

#include "trainer.h"
#include "bench_clock.h"

/* ------------------------------------------------------------ peak */

/* FLOPs done by one thread in `iters` iterations; the result is returned through sink so
 * the compiler cannot drop the loop. */
static double fma_loop(long iters, float *sink)
{
#ifdef __FMA__
    __m256 a0 = _mm256_set1_ps(1.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
           a7 = a0, a8 = a0, a9 = a0;
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (long i = 0; i < iters; i++) {
        a0 = _mm256_fmadd_ps(a0, m, c); a1 = _mm256_fmadd_ps(a1, m, c);
        a2 = _mm256_fmadd_ps(a2, m, c); a3 = _mm256_fmadd_ps(a3, m, c);
        a4 = _mm256_fmadd_ps(a4, m, c); a5 = _mm256_fmadd_ps(a5, m, c);
        a6 = _mm256_fmadd_ps(a6, m, c); a7 = _mm256_fmadd_ps(a7, m, c);
        a8 = _mm256_fmadd_ps(a8, m, c); a9 = _mm256_fmadd_ps(a9, m, c);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(a8, a9));
    float out[8];
    _mm256_storeu_ps(out, s);
    *sink = out[0];
    return (double)iters * 10 * 8 * 2;
#else
    float a[10] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };
    for (long i = 0; i < iters; i++)
        for (int j = 0; j < 10; j++) a[j] = a[j] * 0.999999f + 1e-7f;
    *sink = a[0] + a[9];
    return (double)iters * 10 * 2;
#endif
}

/* Best GFLOP/s of the FMA loop run by `threads` threads at once. */
static double fma_gflops(int threads)
{
    double best = 0;
    for (int rep = 0; rep < 30; rep++) {
        double flops = 0;
        float sink = 0;
        double t0 = bench_now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
        {
            float s;
            flops += fma_loop(10 * 1000 * 1000, &s);
#pragma omp critical
            sink += s;
        }
        double dt = bench_now() - t0;
        if (sink == 12345.0f) printf(" ");
        if (flops / dt > best) best = flops / dt;
    }
    return best / 1e9;
}

/* ------------------------------------------------------------ gemm */

static double best_time(int reps, void (*fn)(void *), void *arg)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        fn(arg);
        double dt = bench_now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

typedef struct {
    int n;
    float *A, *B, *C, *Af, *Bf;
    uint16_t *Ah, *Bh;
} gemm_args;

static void run_sgemm(void *p)
{
    gemm_args *g = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->n, g->n, g->n, 1, g->A, g->n, g->B,
                g->n, 0, g->C, g->n);
}

/* cblas_sbgemm is declared by OpenBLAS's cblas.h but exported only by builds made with
 * BUILD_BFLOAT16 (Debian's 0.3.21 is not): look it up at run time. */
typedef void (*sbgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint,
                          blasint, blasint, float, const bfloat16 *, blasint, const bfloat16 *,
                          blasint, float, float *, blasint);
static sbgemm_fn sbgemm;

static void run_sbgemm(void *p)
{
    gemm_args *g = p;
    sbgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->n, g->n, g->n, 1,
                 (const bfloat16 *)g->Ah, g->n, (const bfloat16 *)g->Bh, g->n, 0, g->C, g->n);
}

static void run_convert_sgemm(void *p)
{
    gemm_args *g = p;
    size_t nn = (size_t)g->n * g->n;
    tr_convert(g->Af, TR_F32, g->Ah, TR_BF16, nn);
    tr_convert(g->Bf, TR_F32, g->Bh, TR_BF16, nn);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->n, g->n, g->n, 1, g->Af, g->n, g->Bf,
                g->n, 0, g->C, g->n);
}

int main(void)
{
    int threads = bench_threads();
    /* The per-core loop x cores is the textbook peak; the loop on every core at once is
     * what the cores deliver together. They differ when the "cores" are SMT siblings of
     * one physical core (one FMA unit pair shared) or neighbours load the host; %peak
     * uses the simultaneous figure, the one a GEMM can reach. */
    double one = fma_gflops(1), all = fma_gflops(threads), peak = all;
    printf("CPU peak (FMA loop%s): %.1f GFLOP/s per core x %d cores = %.1f; all %d at once: "
           "%.1f GFLOP/s (used as peak)\n",
#ifdef __FMA__
           ", AVX2 FMA",
#else
           ", scalar",
#endif
           one, threads, one * threads, threads, all);
    printf("OpenBLAS %s, %d BLAS threads\n", openblas_get_config(), openblas_get_num_threads());
    *(void **)&sbgemm = dlsym(RTLD_DEFAULT, "cblas_sbgemm");
    printf("cblas_sbgemm: %s\n\n", sbgemm ? "exported" : "NOT exported by this OpenBLAS build (column shows -)");
    printf("%6s | %16s %7s | %16s %7s | %16s %7s\n", "n", "sgemm GFLOP/s", "%peak",
           "sbgemm GFLOP/s", "%peak", "cvt+sgemm GFLOP/s", "%peak");
    static const int sizes[] = { 512, 1024, 2048 };
    for (int s = 0; s < 3; s++) {
        int n = sizes[s];
        size_t nn = (size_t)n * n;
        gemm_args g = { n, malloc(4 * nn), malloc(4 * nn), malloc(4 * nn), malloc(4 * nn),
                        malloc(4 * nn), malloc(2 * nn), malloc(2 * nn) };
        for (size_t i = 0; i < nn; i++) {
            g.A[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
            g.B[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
        }
        tr_convert(g.Ah, TR_BF16, g.A, TR_F32, nn);
        tr_convert(g.Bh, TR_BF16, g.B, TR_F32, nn);
        int reps = n >= 2048 ? 5 : 12;
        double flops = 2.0 * n * n * (double)n;
        run_sgemm(&g);    /* warm-up: thread pool, page faults */
        double ts = flops / best_time(reps, run_sgemm, &g) / 1e9;
        double tb = sbgemm ? flops / best_time(reps, run_sbgemm, &g) / 1e9 : 0;
        double tc = flops / best_time(reps, run_convert_sgemm, &g) / 1e9;
        char sb[64] = "               -       -";
        if (sbgemm) snprintf(sb, sizeof sb, "%16.1f %6.0f%%", tb, 100 * tb / peak);
        printf("%6d | %16.1f %6.0f%% | %s | %16.1f %6.0f%%\n", n, ts, 100 * ts / peak, sb, tc,
               100 * tc / peak);
        free(g.A); free(g.B); free(g.C); free(g.Af); free(g.Bf); free(g.Ah); free(g.Bh);
    }
    return 0;
}
