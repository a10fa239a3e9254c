/* bench_cuda_ops.c — the CUDA backend's speed against the device's own ceilings: a
 * device-to-device copy (bytes read + written per second) and an 8192^3 bf16 cuBLASLt
 * product, then our casts and elementwise kernels (GB/s, share of the copy ceiling) and
 * the GEMM shapes of BERT-large training at 16 x 512 tokens (TFLOP/s per dtype).
 *
 * Measured as a GPU benchmark must be: random data (never zeros), warm-up first, CUDA events around each
 * region, the median of many repetitions, buffers far larger than the L2. Prints a
 * table; without a GPU (or in a build without CUDA) prints one line and exits 0. */
#include <stdio.h>

#ifndef TR_HAVE_CUDA
int main(void)
{
    printf("bench_cuda_ops: skipped (this build has no CUDA backend)\n");
    return 0;
}
#else

#include "trainer.h"
#include "cuda/elementwise.h"
#include "cuda/matmul.h"

#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ fixtures */

typedef struct bench {
    tr_alloc *alloc;
    void *state;
    cudaStream_t stream;
    const tr_cuda_blas *env;
    cudaEvent_t start, stop;
    tr_error err;
} bench;

enum { WARMUP = 3, REPEAT = 20 };

static int fail(const char *what, const char *msg)
{
    printf("bench_cuda_ops: %s failed: %s\n", what, msg);
    return 1;
}

#define BCUDA(call)                                                                          \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) return fail(#call, cudaGetErrorString(e_));                   \
    } while (0)

static void *dev_malloc(bench *b, size_t bytes)
{
    void *p = NULL;
    if (tr_alloc_malloc(b->alloc, bytes, TR_TAG_ACTIVATIONS, (uintptr_t)b->stream, &p, &b->err) != TR_OK) {
        printf("bench_cuda_ops: %s\n", b->err.msg);
        return NULL;
    }
    return p;
}

/* n random floats in [-1, 1) on the device, in dtype (converted on the GPU). */
static void *dev_random(bench *b, int dtype, size_t n, uint64_t seed)
{
    float *h = malloc(n * sizeof(float));
    void *f = dev_malloc(b, n * 4), *out = dtype == TR_F32 ? f : dev_malloc(b, n * tr_dtype_size(dtype));
    if (!h || !f || !out) {
        free(h);
        return NULL;
    }
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        h[i] = (float)((double)((s * 0x2545f4914f6cdd1dull) >> 40) / 8388608.0 - 1.0);
    }
    int ok = cudaMemcpyAsync(f, h, n * 4, cudaMemcpyHostToDevice, b->stream) == cudaSuccess;
    free(h);
    if (ok && dtype != TR_F32) {
        ok = tr_k_cast_fwd_cuda(out, dtype, f, TR_F32, (int64_t)n, b->stream, &b->err) == TR_OK;
        ok = ok && cudaStreamSynchronize(b->stream) == cudaSuccess;
        tr_alloc_free(b->alloc, f);
    }
    return ok ? out : NULL;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* ------------------------------------------------------------ timed regions */

typedef enum { K_COPY, K_CAST, K_ADD, K_AXPY, K_GEMM } kind;

typedef struct job {
    kind k;
    void *out, *a, *b, *bias;
    int64_t n;
    int out_dtype, in_dtype;
    tr_cuda_gemm_desc g;
} job;

static int run_job(bench *b, const job *j)
{
    switch (j->k) {
    case K_COPY:
        return cudaMemcpyAsync(j->out, j->a, (size_t)j->n, cudaMemcpyDeviceToDevice, b->stream) == cudaSuccess
                   ? TR_OK
                   : TR_EINTERNAL;
    case K_CAST: return tr_k_cast_fwd_cuda(j->out, j->out_dtype, j->a, j->in_dtype, j->n, b->stream, &b->err);
    case K_ADD: return tr_k_add_fwd_cuda(j->out, j->a, j->b, j->in_dtype, j->n, b->stream, &b->err);
    case K_AXPY: return tr_k_axpy_fwd_cuda(j->out, j->a, 0.5f, j->in_dtype, j->n, b->stream, &b->err);
    default: return tr_k_matmul_fwd_cuda(b->env, j->out, j->a, j->b, j->bias, &j->g, &b->err);
    }
}

/* Median milliseconds of one run; negative on failure. */
static float time_job(bench *b, const job *j)
{
    float ms[REPEAT];
    for (int i = 0; i < WARMUP; i++)
        if (run_job(b, j) != TR_OK) return -1;
    for (int i = 0; i < REPEAT; i++) {
        if (cudaEventRecord(b->start, b->stream) != cudaSuccess || run_job(b, j) != TR_OK ||
            cudaEventRecord(b->stop, b->stream) != cudaSuccess || cudaEventSynchronize(b->stop) != cudaSuccess ||
            cudaEventElapsedTime(&ms[i], b->start, b->stop) != cudaSuccess)
            return -1;
    }
    qsort(ms, REPEAT, sizeof ms[0], cmp_float);
    return ms[REPEAT / 2];
}

/* ------------------------------------------------------------ memory-bound kernels */

static int bench_memory(bench *b)
{
    const size_t n = (size_t)128 << 20; /* 128 Mi elements: 512 MiB of f32, ~9x the L2 */
    void *f1 = dev_random(b, TR_F32, n, 1), *f2 = dev_random(b, TR_F32, n, 2);
    void *h1 = dev_random(b, TR_BF16, n, 3), *h2 = dev_random(b, TR_BF16, n, 4), *h3 = dev_malloc(b, n * 2);
    if (!f1 || !f2 || !h1 || !h2 || !h3) return fail("allocating 2.5 GiB of inputs", b->err.msg);
    struct {
        const char *name;
        job j;
        double bytes;
    } rows[] = {
        { "copy f32 (ceiling)", { .k = K_COPY, .out = f2, .a = f1, .n = (int64_t)(n * 4) }, 8.0 * n },
        { "cast f32 -> bf16", { .k = K_CAST, .out = h3, .a = f1, .n = (int64_t)n, .out_dtype = TR_BF16, .in_dtype = TR_F32 }, 6.0 * n },
        { "cast bf16 -> f32", { .k = K_CAST, .out = f2, .a = h1, .n = (int64_t)n, .out_dtype = TR_F32, .in_dtype = TR_BF16 }, 6.0 * n },
        { "cast bf16 -> f16", { .k = K_CAST, .out = h3, .a = h1, .n = (int64_t)n, .out_dtype = TR_F16, .in_dtype = TR_BF16 }, 4.0 * n },
        { "add bf16", { .k = K_ADD, .out = h3, .a = h1, .b = h2, .n = (int64_t)n, .in_dtype = TR_BF16 }, 6.0 * n },
        { "add f32", { .k = K_ADD, .out = f2, .a = f1, .b = f2, .n = (int64_t)n, .in_dtype = TR_F32 }, 12.0 * n },
        { "axpy f32", { .k = K_AXPY, .out = f2, .a = f1, .n = (int64_t)n, .in_dtype = TR_F32 }, 12.0 * n },
        { "add bf16, misaligned", { .k = K_ADD, .out = (char *)h3 + 2, .a = (char *)h1 + 2, .b = (char *)h2 + 2, .n = (int64_t)n - 1, .in_dtype = TR_BF16 }, 6.0 * n },
    };
    double ceiling = 0;
    printf("%-24s %10s %10s %12s\n", "memory-bound (128 Mi el.)", "ms", "GB/s", "of copy");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        float ms = time_job(b, &rows[i].j);
        if (ms < 0) return fail(rows[i].name, b->err.msg);
        double gbs = rows[i].bytes / (ms * 1e-3) / 1e9;
        if (i == 0) ceiling = gbs;
        printf("%-24s %10.3f %10.0f %11.0f%%\n", rows[i].name, ms, gbs, 100.0 * gbs / ceiling);
    }
    tr_alloc_free(b->alloc, f1);
    tr_alloc_free(b->alloc, f2);
    tr_alloc_free(b->alloc, h1);
    tr_alloc_free(b->alloc, h2);
    tr_alloc_free(b->alloc, h3);
    tr_alloc_empty_cache(b->alloc);
    return 0;
}

/* ------------------------------------------------------------ GEMM */

typedef struct gemm_row {
    const char *name;
    int64_t m, n, k;
    int ta, tb, ab, c, tf32, bias;
} gemm_row;

static int bench_gemm(bench *b)
{
    /* BERT-large at 16 x 512 tokens: T = 8192 rows, hidden 1024, FFN 4096. */
    static const gemm_row rows[] = {
        { "8192^3 bf16 (ceiling)", 8192, 8192, 8192, 0, 0, TR_BF16, TR_BF16, 0, 0 },
        { "qkv fwd  X W^T + b", 8192, 3072, 1024, 0, 1, TR_BF16, TR_BF16, 0, 1 },
        { "ffn up   X W^T + b", 8192, 4096, 1024, 0, 1, TR_BF16, TR_BF16, 0, 1 },
        { "ffn down X W^T + b", 8192, 1024, 4096, 0, 1, TR_BF16, TR_BF16, 0, 1 },
        { "ffn up dX = dY W", 8192, 1024, 4096, 0, 0, TR_BF16, TR_BF16, 0, 0 },
        { "ffn up dW = dY^T X", 4096, 1024, 8192, 1, 0, TR_BF16, TR_F32, 0, 0 },
        { "ffn up f16", 8192, 4096, 1024, 0, 1, TR_F16, TR_F16, 0, 1 },
        { "ffn up tf32", 8192, 4096, 1024, 0, 1, TR_F32, TR_F32, 1, 1 },
        { "ffn up f32", 8192, 4096, 1024, 0, 1, TR_F32, TR_F32, 0, 1 },
    };
    printf("\n%-24s %10s %10s\n", "GEMM (cuBLASLt)", "ms", "TFLOP/s");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const gemm_row *r = &rows[i];
        void *a = dev_random(b, r->ab, (size_t)(r->m * r->k), 10 + i);
        void *bb = dev_random(b, r->ab, (size_t)(r->k * r->n), 20 + i);
        void *c = dev_random(b, r->c, (size_t)(r->m * r->n), 30 + i);
        void *bias = r->bias ? dev_random(b, r->c, (size_t)r->n, 40 + i) : NULL;
        if (!a || !bb || !c || (r->bias && !bias)) return fail(r->name, b->err.msg);
        job j = { .k = K_GEMM, .out = c, .a = a, .b = bb, .bias = bias,
                  .g = { .m = r->m, .n = r->n, .k = r->k, .batch = 1, .trans_a = r->ta, .trans_b = r->tb,
                         .ab_dtype = r->ab, .c_dtype = r->c, .tf32 = r->tf32, .alpha = 1.0f,
                         .beta = r->c == TR_F32 && r->ab != TR_F32 ? 1.0f : 0.0f } };
        float ms = time_job(b, &j);
        if (ms < 0) return fail(r->name, b->err.msg);
        printf("%-24s %10.3f %10.1f\n", r->name, ms, 2.0 * r->m * r->n * r->k / (ms * 1e-3) / 1e12);
        tr_alloc_free(b->alloc, a);
        tr_alloc_free(b->alloc, bb);
        tr_alloc_free(b->alloc, c);
        tr_alloc_free(b->alloc, bias);
    }
    tr_alloc_empty_cache(b->alloc);
    return 0;
}

int main(void)
{
    if (tr_cuda_device_count() < 1) {
        printf("bench_cuda_ops: skipped (no CUDA device visible)\n");
        return 0;
    }
    bench b;
    memset(&b, 0, sizeof b);
    if (tr_cuda_init_device(NULL, 0, &b.alloc, &b.state, &b.err) != TR_OK) return fail("init", b.err.msg);
    b.stream = (cudaStream_t)tr_cuda_stream(b.state);
    b.env = tr_cuda_blas_env(b.state);
    BCUDA(cudaSetDevice(0));
    BCUDA(cudaEventCreate(&b.start));
    BCUDA(cudaEventCreate(&b.stop));
    struct cudaDeviceProp prop;
    BCUDA(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MiB\n\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    int rc = bench_memory(&b);
    if (rc == 0) rc = bench_gemm(&b);
    tr_alloc_stats st;
    tr_alloc_get_stats(b.alloc, &st);
    printf("\nallocator: peak reserved %.2f GiB, peak allocated %.2f GiB, %llu cudaMalloc calls\n",
           st.peak_reserved / 1073741824.0, st.peak_allocated / 1073741824.0, (unsigned long long)st.n_raw_alloc);
    cudaEventDestroy(b.start);
    cudaEventDestroy(b.stop);
    tr_cuda_release_device(b.state);
    tr_alloc_destroy(b.alloc);
    return rc;
}
#endif
