/* bench_fma_peak.c — the f32 FMA peak of this machine's cores, the ceiling every CPU matrix
 * product is measured against: each OpenMP thread runs 12 independent chains of vector FMAs
 * (enough to cover the FMA latency on two ports) on registers alone, AVX-512 where the CPU
 * has it, else AVX2 + FMA (chosen at run time). Prints GFLOP/s of wall time for 1 thread and
 * for OMP_NUM_THREADS threads, the best of 5 runs of about 0.3 s each. Never a test.
 *
 * On the project's 2-core AVX-512 VM: 276-347 GFLOP/s with 2 threads (174 with one),
 * depending on the minute, while oneDNN's products of a MiniLM forward (416 rows, six
 * layers' weights in turn) ran at 222-281 GFLOP/s, so the products sit at 70-85 % of what
 * the cores can do. */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "bench_clock.h"

__attribute__((target("avx2,fma"))) static inline float sum_m256(__m256 t)
{
    float v[8];
    _mm256_storeu_ps(v, t);
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

/* NAME(iters): iters rounds of 12 FMAs over the lanes of VEC, compiled for ISA with its
 * intrinsics (SET1, FMADD, ADD, and SUM for the lanes' total); returns a value that depends
 * on every chain (so the compiler keeps them all). */
#define FMA_CHAINS(NAME, ISA, VEC, SET1, FMADD, ADD, SUM)                                    \
    __attribute__((target(ISA))) static float NAME(long iters)                               \
    {                                                                                        \
        VEC a[12];                                                                           \
        for (int i = 0; i < 12; i++) a[i] = SET1(0.1f * (float)i);                           \
        const VEC b = SET1(0.999f), c = SET1(0.001f);                                        \
        for (long r = 0; r < iters; r++)                                                     \
            for (int j = 0; j < 12; j++) a[j] = FMADD(a[j], b, c);                           \
        VEC t = a[0];                                                                        \
        for (int i = 1; i < 12; i++) t = ADD(t, a[i]);                                       \
        return SUM(t);                                                                       \
    }

FMA_CHAINS(chains_avx512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_reduce_add_ps)
FMA_CHAINS(chains_avx2, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, sum_m256)

/* Best GFLOP/s of 5 runs on `threads` threads; *sink collects the chains' values. */
static double peak(int threads, int wide, long iters, float *sink)
{
    double best = 0;
    for (int run = 0; run < 5; run++) {
        float s = 0;
        double t0 = bench_now();
#pragma omp parallel num_threads(threads) reduction(+ : s)
        s += wide ? chains_avx512(iters) : chains_avx2(iters);
        double g = 2.0 * 12 * (wide ? 16 : 8) * (double)iters * threads / (bench_now() - t0) / 1e9;
        if (g > best) best = g;
        *sink += s;
    }
    return best;
}

int main(void)
{
    __builtin_cpu_init();
    int wide = __builtin_cpu_supports("avx512f");
    if (!wide && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
        printf("bench_fma_peak: this CPU has neither AVX-512 nor AVX2 + FMA; nothing to measure\n");
        return 0;
    }
    int threads = bench_threads();
    float sink = 0;
    long iters = 20000000;   /* ~0.3 s a run on one core at ~3 GHz */
    double one = peak(1, wide, iters, &sink), all = peak(threads, wide, iters, &sink);
    printf("f32 FMA peak (%s, 12 register chains a thread): 1 thread %.1f GFLOP/s, %d threads %.1f GFLOP/s "
           "(checksum %g)\n",
           wide ? "AVX-512" : "AVX2 + FMA", one, threads, all, (double)sink);
    return 0;
}
