/* ctx.c — the runtime context: the CPU caching allocator (made at creation), one
 * allocator and one CUDA state per GPU (made on first use), and the last error.
 *
 * Invariants: cuda_alloc[d] and cuda_state[d] are both set or both NULL; teardown
 * destroys a device's allocator before releasing its CUDA state (cudaFree needs the
 * device), and the CPU allocator last. Tensors must be freed before their context.
 *
 * The CUDA calls are compiled only with TR_HAVE_CUDA (the CUDA backend is built). */
#include "ctx.h"
#include "blas_core.h"
#include "cpu_gemm.h"
#include "cuda_copy.h"
#include "cuda_device.h"

#include <stdlib.h>
#include <unistd.h>

#ifdef TR_HAVE_CUDA
#define CTX_CUDA 1
#else
#define CTX_CUDA 0
#endif

enum { CTX_MAX_CUDA_DEVICES = 16 };

struct tr_ctx {
    tr_alloc *cpu_alloc;
    tr_alloc *cuda_alloc[CTX_MAX_CUDA_DEVICES];
    void *cuda_state[CTX_MAX_CUDA_DEVICES];
    tr_cuda_staging *cuda_staging;   /* pinned host buffers for transfers (core/device/cuda_copy.c) */
    tr_cpu_gemm *cpu_gemm;           /* the CPU GEMM library and its caches (core/ops/cpu_gemm.c) */
    tr_error err;
};

/* ------------------------------------------------------------ lifetime */

tr_ctx *tr_ctx_new(void)
{
    /* Before any op can run a GEMM: OpenBLAS on the kernels this CPU can run. */
    tr_blas_core_setup();
    tr_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    tr_raw_backend cpu = tr_cpu_raw_backend();
    ctx->cpu_alloc = tr_alloc_new(&cpu);
    if (!ctx->cpu_alloc) {
        free(ctx);
        return NULL;
    }
    tr_error_clear(&ctx->err);
    return ctx;
}

void tr_ctx_free(tr_ctx *ctx)
{
    if (!ctx) return;
    for (int d = 0; d < CTX_MAX_CUDA_DEVICES; d++) {
        if (ctx->cuda_alloc[d]) tr_alloc_destroy(ctx->cuda_alloc[d]);
#if CTX_CUDA
        if (ctx->cuda_state[d]) tr_cuda_release_device(ctx->cuda_state[d]);
#endif
    }
#if CTX_CUDA
    tr_cuda_staging_free(ctx->cuda_staging);
#endif
    tr_cpu_gemm_free(ctx->cpu_gemm);
    tr_alloc_destroy(ctx->cpu_alloc);
    free(ctx);
}

/* ------------------------------------------------------------ errors */

tr_error *tr_ctx_err(tr_ctx *ctx) { return &ctx->err; }

const char *tr_ctx_errmsg(const tr_ctx *ctx) { return ctx->err.msg; }

/* ------------------------------------------------------------ devices */

#if !CTX_CUDA
int tr_cuda_device_count(void) { return 0; }
uint64_t tr_cuda_device_memory_bytes(int device) { (void)device; return 0; }
#endif

uint64_t tr_host_memory_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return 0;
    return (uint64_t)pages * (uint64_t)page;
}

tr_alloc *tr_ctx_alloc(tr_ctx *ctx, int device)
{
    if (device == TR_CPU) return ctx->cpu_alloc;
    if (device < 0 || device >= CTX_MAX_CUDA_DEVICES) {
        tr_fail(&ctx->err, TR_EUSER,
                "device %d does not exist: use %d (TR_CPU) for the host or a CUDA ordinal 0..%d "
                "(\"cuda:N\"); this build supports at most %d GPUs",
                device, TR_CPU, CTX_MAX_CUDA_DEVICES - 1, CTX_MAX_CUDA_DEVICES);
        return NULL;
    }
#if CTX_CUDA
    if (ctx->cuda_alloc[device]) return ctx->cuda_alloc[device];
    int count = tr_cuda_device_count();
    if (count == 0) {
        tr_fail(&ctx->err, TR_EUSER,
                "cuda:%d was asked for, but no CUDA device is visible on this machine (no GPU, no "
                "driver, or CUDA_VISIBLE_DEVICES hides it); use device = \"cpu\" or \"auto\"",
                device);
        return NULL;
    }
    if (device >= count) {
        tr_fail(&ctx->err, TR_EUSER,
                "cuda:%d does not exist: this machine has %d visible CUDA device%s; pick "
                "device = \"cuda:0\"..\"cuda:%d\", \"cpu\", or \"auto\" in the recipe (and check "
                "CUDA_VISIBLE_DEVICES)",
                device, count, count == 1 ? "" : "s", count - 1);
        return NULL;
    }
    tr_alloc *a = NULL;
    void *state = NULL;
    if (tr_cuda_init_device(ctx, device, &a, &state, &ctx->err) != TR_OK) return NULL;
    ctx->cuda_alloc[device] = a;
    ctx->cuda_state[device] = state;
    return a;
#elif defined(TR_HAVE_CUDA)
    tr_fail(&ctx->err, TR_EUSER,
            "cuda:%d was requested but this build of trainer has no CUDA device layer yet "
            "(core/device/cuda_device.c is not part of it): use device = \"cpu\"",
            device);
    return NULL;
#else
    tr_fail(&ctx->err, TR_EUSER,
            "cuda:%d was requested but this build of trainer has no CUDA backend (nvcc was not "
            "found at build time): use device = \"cpu\" (or \"auto\"), or rebuild on a machine "
            "with the CUDA toolkit",
            device);
    return NULL;
#endif
}

void *tr_ctx_cuda_state(tr_ctx *ctx, int device)
{
    if (device < 0 || device >= CTX_MAX_CUDA_DEVICES) return NULL;
    if (!ctx->cuda_state[device] && !tr_ctx_alloc(ctx, device)) return NULL;
    return ctx->cuda_state[device];
}

tr_cpu_gemm *tr_ctx_cpu_gemm(tr_ctx *ctx)
{
    if (!ctx->cpu_gemm && tr_cpu_gemm_create(&ctx->cpu_gemm, &ctx->err) != TR_OK) return NULL;
    return ctx->cpu_gemm;
}

tr_cuda_staging *tr_ctx_cuda_staging(tr_ctx *ctx)
{
#if CTX_CUDA
    if (!ctx->cuda_staging) ctx->cuda_staging = tr_cuda_staging_new();
    return ctx->cuda_staging;
#else
    (void)ctx;
    return NULL;
#endif
}
