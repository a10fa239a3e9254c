/* test_blas_core.c — after a runtime context exists, OpenBLAS runs a kernel set that uses
 * the widest ISA this CPU has (AVX-512, AVX2, AVX), not the SSE3 "Prescott" fallback its
 * model-number detection picks on CPUs it does not know; GEMM results stay right. */
#include "blas_core.h"
#include "check.h"
#include "trainer.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_ranks(void)
{
    CHECK(tr_blas_core_rank("Prescott") == 0, "Prescott is SSE");
    CHECK(tr_blas_core_rank("haswell") == 2, "names compare without case");
    CHECK(tr_blas_core_rank("Zen") == 2, "Zen is AVX2");
    CHECK(tr_blas_core_rank("SkylakeX") == 3, "SkylakeX is AVX-512");
    CHECK(tr_blas_core_rank("NoSuchCore") == -1, "unknown name");
    CHECK(tr_blas_core_rank(NULL) == -1, "NULL name");
    int cpu = tr_blas_cpu_rank();
    CHECK(cpu >= 0 && cpu <= 3, "cpu rank %d", cpu);
}

static void test_core_after_ctx(void)
{
    tr_ctx *ctx = tr_ctx_new();
    CHECK(ctx != NULL, "context");
    const char *core = tr_blas_core_name();
    int rank = tr_blas_core_rank(core);
    /* Only OpenBLAS names its kernels; with OPENBLAS_CORETYPE the user's choice stands. */
    if (strcmp(core, "unknown") != 0 && !getenv("OPENBLAS_CORETYPE"))
        CHECK(rank >= tr_blas_cpu_rank(), "OpenBLAS runs %s (rank %d) on a CPU of rank %d", core, rank,
              tr_blas_cpu_rank());
    /* A GEMM through the re-selected kernels: C = A B with exact small integers. */
    enum { M = 37, N = 29, K = 53 };
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N), *c = malloc(sizeof(float) * M * N);
    CHECK(a && b && c, "buffers");
    for (int i = 0; i < M * K; i++) a[i] = (float)(i % 7 - 3);
    for (int i = 0; i < K * N; i++) b[i] = (float)(i % 5 - 2);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double ref = 0;
            for (int k = 0; k < K; k++) ref += (double)a[i * K + k] * b[k * N + j];
            worst = fmax(worst, fabs(ref - c[i * N + j]));
        }
    CHECK(worst == 0, "sgemm off by %g", worst);
    free(a); free(b); free(c);
    tr_ctx_free(ctx);
}

int main(void)
{
    RUN(test_ranks);
    RUN(test_core_after_ctx);
    return check_done();
}
