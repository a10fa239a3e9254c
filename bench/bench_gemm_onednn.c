/* bench_gemm_onednn.c — the CPU products of a training step, OpenBLAS against oneDNN, in
 * GFLOP/s: what core/cpu_device/cpu_gemm.c's routing is decided from.
 *
 * For each Linear shape of all-MiniLM-L6-v2 (384 <-> 384, 384 <-> 1536) and BERT-base
 * (768 <-> 768, 768 <-> 3072) at 4096 tokens (32 x 128) and 1024, the three products of a
 * Linear: forward Y = X W^T, input gradient dX = dY W, weight gradient dW += dY^T X; each on
 * cblas_sgemm, on oneDNN with plain row-major operands, and (forward, input gradient) on
 * oneDNN with the weight packed once. Then the attention's per-head tiles (128 x 128 x 32,
 * 128 x 32 x 128, head dim 64 too) on one thread, as the CPU attention kernel
 * (kernels/cpu/attention.c) runs them inside its own OpenMP region. Every figure is the best
 * of several timed batches (a shared machine measures its neighbours); the thread count is
 * OpenMP's (OMP_NUM_THREADS); BENCH_CLOCK=cpu times CPU instead of wall time. Prints one table; never a test. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "blas_core.h"
#include "gemm_onednn.h"
#include "bench_clock.h"

/* Wall time, or with BENCH_CLOCK=cpu the process's CPU time: on a loaded shared machine,
 * with OMP_NUM_THREADS=1, that measures the kernels' work per FLOP whatever the neighbours
 * do (with more threads it also counts the time spent waiting at barriers). */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now(void) { return bench_seconds(bench_clock); }

static void die(const char *what, const tr_error *err)
{
    fprintf(stderr, "bench_gemm_onednn: %s: %s\n", what, err->msg);
    exit(1);
}

/* One product C[M,N] (+)= op(A) op(B) on `lib`: 0 OpenBLAS, 1 oneDNN plain, 2 oneDNN packed B. */
typedef struct prod {
    int M, N, K, ta, tb;
    float beta;
} prod;

static tr_onednn *dnnl;

static void run_once(int lib, const prod *p, float *C, const float *A, const float *B, const void *Bp)
{
    tr_error err;
    tr_error_clear(&err);
    if (lib == 0) {
        cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans, p->M, p->N,
                    p->K, 1.0f, A, p->ta ? p->M : p->K, B, p->tb ? p->K : p->N, p->beta, C, p->N);
        return;
    }
    if (tr_onednn_gemm(dnnl, C, A, lib == 2 ? Bp : B, lib == 2, NULL, p->M, p->N, p->K, p->ta, p->tb, 1.0f, p->beta,
                       &err) != TR_OK)
        die("gemm", &err);
}

/* Best GFLOP/s of 7 batches of enough calls to last ~40 ms each, for each library in
 * libs[0..n) (the libraries alternate batch by batch, so that a busy neighbour slows them
 * alike). */
static void gflops(const prod *p, const int *libs, int n, double *best)
{
    size_t na = (size_t)p->M * p->K, nb = (size_t)p->K * p->N, nc = (size_t)p->M * p->N;
    float *A = malloc(na * 4), *B = malloc(nb * 4), *C = malloc(nc * 4);
    void *Bp = NULL;
    for (size_t i = 0; i < na; i++) A[i] = (float)((i % 13) * 0.01);
    for (size_t i = 0; i < nb; i++) B[i] = (float)((i % 7) * 0.02);
    memset(C, 0, nc * 4);
    tr_error err;
    tr_error_clear(&err);
    size_t bytes;
    if (tr_onednn_pack_bytes(dnnl, p->N, p->K, p->tb, &bytes, &err) != TR_OK) die("pack_bytes", &err);
    Bp = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (tr_onednn_pack(dnnl, Bp, B, p->N, p->K, p->tb, &err) != TR_OK) die("pack", &err);
    double flop = 2.0 * p->M * p->N * p->K;
    int reps = (int)(0.04 * 100e9 / flop) + 1;
    for (int l = 0; l < n; l++) {
        run_once(libs[l], p, C, A, B, Bp);   /* warm-up: primitive creation, page faults */
        best[l] = 0;
    }
    for (int t = 0; t < 7; t++)
        for (int l = 0; l < n; l++) {
            double t0 = now();
            for (int r = 0; r < reps; r++) run_once(libs[l], p, C, A, B, Bp);
            double g = flop * reps / (now() - t0) / 1e9;
            if (g > best[l]) best[l] = g;
        }
    free(A), free(B), free(C), free(Bp);
}

static void row(const char *what, const prod *p, int packed)
{
    static const int libs[3] = { 0, 1, 2 };
    double g[3] = { 0, 0, 0 };
    gflops(p, libs, packed ? 3 : 2, g);
    double blas = g[0], plain = g[1], pk = g[2];
    tr_error err;
    tr_error_clear(&err);
    const char *impl = tr_onednn_impl(dnnl, p->M, p->N, p->K, p->ta, p->tb, packed, &err);
    double best = plain > pk ? plain : pk;
    printf("%-26s %5d %5d %5d  %8.1f %8.1f ", what, p->M, p->N, p->K, blas, plain);
    if (packed) printf("%8.1f", pk);
    else printf("%8s", "-");
    printf("  %5.2fx  %s\n", best / blas, impl ? impl : "?");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    /* bench_gemm_onednn [lora | encode [ROWS]]: with "lora", only LoRA's rank-8 factor
     * products; with "encode", only the MiniLM forward products at ROWS tokens (default 416,
     * a batch of 32 short sentences: what `trainer encode` runs), q, k and v apart and as
     * one 384 -> 1152 product */
    int lora_only = argc > 1 && strcmp(argv[1], "lora") == 0;
    int encode_rows = argc > 1 && strcmp(argv[1], "encode") == 0 ? (argc > 2 ? atoi(argv[2]) : 416) : 0;
    tr_error err;
    tr_error_clear(&err);
    tr_blas_core_setup();   /* OpenBLAS on the kernels this CPU can run, as the runtime does */
    const char *clk = getenv("BENCH_CLOCK");
    if (clk && strcmp(clk, "cpu") == 0) bench_clock = CLOCK_PROCESS_CPUTIME_ID;
    if (tr_onednn_open(&dnnl, &err) != TR_OK) {
        printf("bench_gemm_onednn: no oneDNN here (%s); nothing to compare\n", err.msg);
        return 0;
    }
    int threads = bench_threads();
    printf("GFLOP/s of %s time, f32, %d threads (best of 7 alternated batches), OpenBLAS kernels %s; ratio = the "
           "better oneDNN column over OpenBLAS\n", bench_clock == CLOCK_MONOTONIC ? "wall" : "CPU", threads,
           tr_blas_core_name());
    printf("%-26s %5s %5s %5s  %8s %8s %8s  %6s  %s\n", "product", "M", "N", "K", "OpenBLAS", "dnnl", "packed",
           "ratio", "oneDNN impl");
    static const int shapes[][2] = { { 384, 384 }, { 384, 1536 }, { 1536, 384 }, { 768, 768 }, { 768, 3072 },
                                     { 3072, 768 } };
    static const int tokens[] = { 4096, 1024 };
    /* LoRA r 8 on a 384 -> 384 projection at 4096 rows: a = X A^T, y += a B^T (scale in alpha),
     * dB += dy^T a, da = dy B, dA += da^T X, dX += da A */
    static const struct { const char *name; prod p; } lora[] = {
        { "lora down a = X A^T", { 4096, 8, 384, 0, 1, 0.0f } },
        { "lora up y += a B^T", { 4096, 384, 8, 0, 1, 1.0f } },
        { "lora dB += dy^T a", { 384, 8, 4096, 1, 0, 1.0f } },
        { "lora da = dy B", { 4096, 8, 384, 0, 0, 0.0f } },
        { "lora dA += da^T X", { 8, 384, 4096, 1, 0, 1.0f } },
        { "lora dX += da A", { 4096, 384, 8, 0, 0, 1.0f } },
    };
    if (encode_rows > 0) {
        static const int enc[][2] = { { 384, 384 }, { 384, 1152 }, { 384, 1536 }, { 1536, 384 } };
        for (int s = 0; s < 4; s++) {
            prod f = { encode_rows, enc[s][1], enc[s][0], 0, 1, 0.0f };
            char name[64];
            snprintf(name, sizeof name, "forward %d->%d", enc[s][0], enc[s][1]);
            row(name, &f, 1);
        }
        tr_onednn_close(dnnl);
        return 0;
    }
    for (size_t i = 0; i < sizeof lora / sizeof lora[0]; i++) row(lora[i].name, &lora[i].p, 0);
    if (lora_only) {
        tr_onednn_close(dnnl);
        return 0;
    }
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < 6; s++) {
            int in = shapes[s][0], out = shapes[s][1], R = tokens[t];
            char name[64];
            /* forward: Y[R,O] = X[R,I] W^T (W stored [O,I]) */
            prod f = { R, out, in, 0, 1, 0.0f };
            snprintf(name, sizeof name, "forward %d->%d", in, out);
            row(name, &f, 1);
            /* input gradient: dX[R,I] = dY[R,O] W */
            prod dx = { R, in, out, 0, 0, 0.0f };
            snprintf(name, sizeof name, "input grad %d->%d", in, out);
            row(name, &dx, 1);
            /* weight gradient: dW[O,I] += dY^T X */
            prod dw = { out, in, R, 1, 0, 1.0f };
            snprintf(name, sizeof name, "weight grad %d->%d", in, out);
            row(name, &dw, 0);
        }
    /* attention tiles, one thread (inside the kernel's own parallel region) */
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    openblas_set_num_threads(1);
    printf("attention tiles, 1 thread:\n");
    static const int tiles[][3] = { { 128, 128, 32 }, { 128, 32, 128 }, { 128, 128, 64 }, { 128, 64, 128 } };
    for (int i = 0; i < 4; i++) {
        prod q = { tiles[i][0], tiles[i][1], tiles[i][2], 0, i % 2 == 0, 0.0f };
        row(i % 2 == 0 ? "scores Q K^T" : "context P V", &q, 0);
    }
    tr_onednn_close(dnnl);
    return 0;
}
