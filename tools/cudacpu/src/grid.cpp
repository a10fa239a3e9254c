/* grid.cpp (cudacpu) — a kernel launch: its configuration checked when submitted, its blocks
 * run one after another when its stream reaches it, a failure named by kernel and block;
 * the built-in variables, shared memory's poison, and the CUDACPU_STATS summary.
 * Invariant: runs under api_mutex (blocks of every launch one at a time, process-wide). */
#include "internal.h"
#include "scheduler.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <unordered_set>

CUDACPU_TLS uint3 threadIdx;
CUDACPU_TLS uint3 blockIdx;
CUDACPU_TLS dim3 blockDim;
CUDACPU_TLS dim3 gridDim;

namespace cudacpu {

unsigned long long g_block_serial;

void shared_poison(void *p, size_t n)
{
    if (cfg().shared_poison) memset(p, 0xff, n);
}

/* ------------------------------------------------------------ CUDACPU_STATS */

static std::unordered_set<const char *> seen_names; /* launch sites' literals */
static std::set<std::string> names;

static void print_stats()
{
    if (cfg().stats > 1)
        for (const auto &n : names) fprintf(stderr, "cudacpu: ran %s\n", n.c_str());
    const cudacpu_counters c = counts_since_start(); /* at exit: no lock, no thread runs CUDA */
    fprintf(stderr, "cudacpu: %zu distinct kernels\n", names.size());
    fprintf(stderr,
            "cudacpu: %llu kernels, %llu blocks, %llu threads, %llu barriers, %llu warp collectives, %llu fiber "
            "switches\n",
            c.kernels_run, c.blocks, c.threads, c.barriers, c.warp_collectives, fiber_switches());
}

static void note_kernel_name(const char *name)
{
    static bool registered = false;
    if (!registered) {
        registered = true;
        if (atexit(print_stats)) fprintf(stderr, "cudacpu: atexit failed: no CUDACPU_STATS summary\n");
    }
    if (seen_names.insert(name).second) names.insert(name);
}

/* ------------------------------------------------------------ launches */

const char *bad_config(const launch_config &c)
{
    const unsigned long long nthreads = (unsigned long long)c.block.x * c.block.y * c.block.z;
    if (nthreads == 0 || nthreads > 1024) return "a block of 1 to 1024 threads";
    if (c.block.x > 1024 || c.block.y > 1024 || c.block.z > 64) return "block dimensions up to (1024, 1024, 64)";
    if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0) return "a grid of at least one block";
    if (c.grid.x > 2147483647u || c.grid.y > 65535 || c.grid.z > 65535) return "grid dimensions up to (2^31-1, 65535, 65535)";
    if (c.shmem > 0) return "no dynamic shared memory (not emulated)";
    return nullptr;
}

cudaError_t run_grid(const launch_config &c, void (*fn)(void *), void *ctx, const char *name)
{
    const int nthreads = (int)(c.block.x * c.block.y * c.block.z);
    gridDim = c.grid;
    blockDim = c.block;
    unsigned long long seed = cfg().seed;
    std::string why;
    counts.kernels_run++;
    if (cfg().stats) note_kernel_name(name);
    const unsigned long long products_before = wmma_products();
    for (unsigned z = 0; z < c.grid.z; z++)
        for (unsigned y = 0; y < c.grid.y; y++)
            for (unsigned x = 0; x < c.grid.x; x++) {
                blockIdx = uint3{x, y, z};
                g_block_serial++;
                counts.blocks++;
                counts.threads += (unsigned long long)nthreads;
                if (!run_block(nthreads, seed++, fn, ctx, &why)) {
                    char msg[2600];
                    snprintf(msg, sizeof msg,
                             "cudacpu: kernel %s, grid (%u,%u,%u) block (%u,%u,%u), in block (%u,%u,%u): %s", name,
                             c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, x, y, z, why.c_str());
                    counts.kernels_failed++;
                    note_launch_failure(msg);
                    log_ran(ctx, wmma_products() - products_before);
                    return cudaErrorLaunchFailure;
                }
            }
    log_ran(ctx, wmma_products() - products_before);
    return cudaSuccess;
}

void submit_launch(const launch_config &c, const char *name, void (*call)(void *), void (*destroy)(void *),
                   void *ctx)
{
    api_lock lk(api_mutex);
    if (const char *bad = bad_config(c)) {
        fprintf(stderr, "cudacpu: %s: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u) shmem %zu: needs %s\n",
                name, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, c.shmem, bad);
        destroy(ctx);
        set_err(cudaErrorInvalidConfiguration);
        return;
    }
    if (c.built_arch > cfg().arch) {
        fprintf(stderr, "cudacpu: %s: compiled for sm_%d (CUDACPU_ARCH at build time), launched on an sm_%d device "
                        "(CUDACPU_ARCH now): no kernel image for this card\n", name, c.built_arch, cfg().arch);
        destroy(ctx);
        set_err(cudaErrorNoKernelImageForDevice);
        return;
    }
    CUstream_st *s = stream_of((cudaStream_t)c.stream);
    if (!s) {
        fprintf(stderr, "cudacpu: %s: launched on a stream that does not exist\n", name);
        destroy(ctx);
        set_err(cudaErrorInvalidResourceHandle);
        return;
    }
    counts.kernels++;
    log_launch(name, c, ctx);
    queue_kernel(s, c, name, call, destroy, ctx);
}

} // namespace cudacpu
