/* test_cublaslt_bench.c (cudacpu) — a benchmark, not a test: GFLOP/s of a 1024 x 1024 x 1024
 * product (f32 -> f32 and bf16 -> bf16, CUBLAS_COMPUTE_32F) through one or two cuBLASLt stand-ins
 * loaded with dlopen, as core/cuda_device/cuda_device.c loads the library. With two libraries the
 * runs alternate (new, other, new, other, ...) so that a change of machine load hits both; the
 * table gives the best of the rounds. The BLAS runs with the threads OpenBLAS is configured with.
 *
 *   test_cublaslt_bench LIB [OTHER_LIB] [ROUNDS]        (run_cublaslt.sh OUT bench [OTHER_LIB]) */
#include <cublasLt.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LT_FUNCTIONS(X)                                                                                                \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)                     \
    X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatmulPreferenceCreate)                    \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic)      \
    X(cublasLtMatmul)

typedef struct {
    const char *path;
#define FIELD(name) __typeof__(&name) name;
    LT_FUNCTIONS(FIELD)
#undef FIELD
} lt_api;

static int load(lt_api *api, const char *path)
{
    api->path = path;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return fprintf(stderr, "dlopen %s: %s\n", path, dlerror()), 0;
#define RESOLVE(name)                                                                                                  \
    if (!(*(void **)&api->name = dlsym(lib, #name))) return fprintf(stderr, "%s lacks %s\n", path, #name), 0;
    LT_FUNCTIONS(RESOLVE)
#undef RESOLVE
    return 1;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define CK(call)                                                                                                       \
    do {                                                                                                               \
        cublasStatus_t st_ = (call);                                                                                   \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                            \
            fprintf(stderr, "%s: %s returned %d\n", api->path, #call, (int)st_);                                      \
            return -1;                                                                                                 \
        }                                                                                                              \
    } while (0)

/* Seconds for one n^3 product in type t, or -1 on a refusal. */
static double one(const lt_api *api, cudaDataType t, int n, void *A, void *B, void *D, void *ws, size_t wsb)
{
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t l;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t res;
    int got = 0;
    const float alpha = 1, beta = 0;
    uint64_t max = wsb;
    CK(api->cublasLtCreate(&h));
    CK(api->cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CK(api->cublasLtMatrixLayoutCreate(&l, t, (uint64_t)n, (uint64_t)n, n));
    CK(api->cublasLtMatmulPreferenceCreate(&pref));
    CK(api->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max, sizeof max));
    CK(api->cublasLtMatmulAlgoGetHeuristic(h, op, l, l, l, l, pref, 1, &res, &got));
    if (got < 1) return -1;
    const double t0 = now();
    CK(api->cublasLtMatmul(h, op, &alpha, A, l, B, l, &beta, D, l, D, l, &res.algo, ws, wsb, NULL));
    const double dt = now() - t0;
    api->cublasLtMatmulPreferenceDestroy(pref);
    api->cublasLtMatrixLayoutDestroy(l);
    api->cublasLtMatmulDescDestroy(op);
    api->cublasLtDestroy(h);
    return dt;
}

int main(int argc, char **argv)
{
    if (argc < 2) return fprintf(stderr, "usage: %s LIB [OTHER_LIB] [ROUNDS]\n", argv[0]), 2;
    lt_api apis[2];
    const int nlib = argc > 2 && strcmp(argv[2], "-") ? 2 : 1, rounds = argc > 3 ? atoi(argv[3]) : 3;
    for (int i = 0; i < nlib; i++)
        if (!load(&apis[i], argv[1 + i])) return 1;
    const int n = 1024;
    const size_t wsb = 32u << 20;
    float *A = aligned_alloc(256, (size_t)n * n * 4), *B = aligned_alloc(256, (size_t)n * n * 4);
    float *D = aligned_alloc(256, (size_t)n * n * 4), *ws = aligned_alloc(256, wsb);
    if (!A || !B || !D || !ws) return fprintf(stderr, "out of memory\n"), 1;
    srand(1);
    uint16_t *A16 = aligned_alloc(256, (size_t)n * n * 2), *B16 = aligned_alloc(256, (size_t)n * n * 2);
    if (!A16 || !B16) return fprintf(stderr, "out of memory\n"), 1;
    for (size_t i = 0; i < (size_t)n * n; i++) {
        A[i] = (float)rand() / RAND_MAX - 0.5f, B[i] = (float)rand() / RAND_MAX - 0.5f;
        uint32_t a, b; /* the bf16 operands: the same values truncated to bf16 (all normal numbers) */
        memcpy(&a, &A[i], 4), memcpy(&b, &B[i], 4);
        A16[i] = (uint16_t)(a >> 16), B16[i] = (uint16_t)(b >> 16);
    }
    memset(ws, 0, wsb); /* touched once, so no run pays the workspace's first page faults */
    static const struct { cudaDataType t; const char *name; } types[] = {{CUDA_R_32F, "f32"}, {CUDA_R_16BF, "bf16"}};
    printf("%-6s %-44s %10s %10s\n", "type", "library", "best s", "GFLOP/s");
    for (int ti = 0; ti < 2; ti++) {
        double best[2] = {1e30, 1e30};
        for (int r = 0; r < rounds; r++)
            for (int i = 0; i < nlib; i++) {
                double s = one(&apis[i], types[ti].t, n, ti ? (void *)A16 : A, ti ? (void *)B16 : B, D, ws, wsb);
                if (s < 0) return 1;
                if (s < best[i]) best[i] = s;
            }
        for (int i = 0; i < nlib; i++)
            printf("%-6s %-44s %10.4f %10.2f\n", types[ti].name, apis[i].path, best[i], 2.0 * n * n * n / best[i] * 1e-9);
    }
    free(A), free(B), free(A16), free(B16), free(D), free(ws);
    return 0;
}
