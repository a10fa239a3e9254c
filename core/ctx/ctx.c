/* ctx.c — the runtime context: the CPU caching allocator (made at creation), one
 * allocator and one state per device of the device backend (made on first use), each
 * backend's private state (made on first use), and the last error; and the registry of
 * backends (backend.h), which the backends fill from their constructors.
 *
 * Invariants: dev_alloc[d] and dev_state[d] are both set or both NULL; teardown destroys a
 * device's allocator before closing its state (freeing device memory needs the device), the
 * device backend's private state after its devices, the host's after that, and the CPU
 * allocator last. Tensors must be freed before their context. */
#include "ctx.h"
#include "backend.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tr_ctx {
    tr_alloc *cpu_alloc;
    tr_alloc *dev_alloc[TR_CTX_MAX_DEVICES];
    void *dev_state[TR_CTX_MAX_DEVICES];
    void *private_state[TR_BACKEND_KINDS];   /* per backend kind, made on first use */
    tr_error err;
};

/* ------------------------------------------------------------ backends */

static const tr_backend *backends[TR_BACKEND_KINDS];

void tr_backend_register(const tr_backend *b)
{
    if (b && b->kind >= 0 && b->kind < TR_BACKEND_KINDS) backends[b->kind] = b;
}

const tr_backend *tr_backend_of(int device) { return backends[device == TR_CPU ? TR_BACKEND_HOST : TR_BACKEND_DEVICE]; }

void *tr_ctx_backend_private(tr_ctx *ctx, const tr_backend *b)
{
    if (!b || !b->private_new) return NULL;
    void **slot = &ctx->private_state[b->kind];
    if (!*slot && b->private_new(slot, &ctx->err) != TR_OK) *slot = NULL;
    return *slot;
}

/* ------------------------------------------------------------ lifetime */

tr_ctx *tr_ctx_new(void)
{
    /* Before any op can run: each backend's process-wide setup (the host's: OpenBLAS on the
     * kernels this CPU can run). */
    for (int k = 0; k < TR_BACKEND_KINDS; k++)
        if (backends[k] && backends[k]->setup) backends[k]->setup();
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

static void free_private(tr_ctx *ctx, int kind)
{
    if (ctx->private_state[kind] && backends[kind] && backends[kind]->private_free)
        backends[kind]->private_free(ctx->private_state[kind]);
    ctx->private_state[kind] = NULL;
}

void tr_ctx_free(tr_ctx *ctx)
{
    if (!ctx) return;
    const tr_backend *dev = backends[TR_BACKEND_DEVICE];
    for (int d = 0; d < TR_CTX_MAX_DEVICES; d++) {
        if (ctx->dev_alloc[d]) tr_alloc_destroy(ctx->dev_alloc[d]);
        if (ctx->dev_state[d] && dev && dev->close_device) dev->close_device(ctx->dev_state[d]);
    }
    free_private(ctx, TR_BACKEND_DEVICE);
    free_private(ctx, TR_BACKEND_HOST);
    tr_alloc_destroy(ctx->cpu_alloc);
    free(ctx);
}

/* ------------------------------------------------------------ errors */

tr_error *tr_ctx_err(tr_ctx *ctx) { return &ctx->err; }

const char *tr_ctx_errmsg(const tr_ctx *ctx) { return ctx->err.msg; }

/* ------------------------------------------------------------ devices */

int tr_cuda_device_count(void)
{
    const tr_backend *b = backends[TR_BACKEND_DEVICE];
    return b && b->device_count ? b->device_count() : 0;
}

uint64_t tr_cuda_device_memory_bytes(int device)
{
    const tr_backend *b = backends[TR_BACKEND_DEVICE];
    return b && b->device_memory_bytes ? b->device_memory_bytes(device) : 0;
}

int tr_cuda_device_card(int device, tr_cuda_card *card)
{
    const tr_backend *b = backends[TR_BACKEND_DEVICE];
    if (b && b->device_card) return b->device_card(device, card);
    memset(card, 0, sizeof *card);
    return TR_EUSER;
}

const char *tr_cuda_unavailable_reason(void)
{
    const tr_backend *b = backends[TR_BACKEND_DEVICE];
    return b && b->unavailable_reason ? b->unavailable_reason() : "";
}

uint64_t tr_host_memory_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return 0;
    return (uint64_t)pages * (uint64_t)page;
}

tr_alloc *tr_ctx_alloc(tr_ctx *ctx, int device)
{
    if (device == TR_CPU) return ctx->cpu_alloc;
    if (device < 0 || device >= TR_CTX_MAX_DEVICES) {
        tr_fail(&ctx->err, TR_EUSER,
                "device %d does not exist: use %d (TR_CPU) for the host or a CUDA ordinal 0..%d "
                "(\"cuda:N\"); this build supports at most %d GPUs",
                device, TR_CPU, TR_CTX_MAX_DEVICES - 1, TR_CTX_MAX_DEVICES);
        return NULL;
    }
    if (ctx->dev_alloc[device]) return ctx->dev_alloc[device];
    const tr_backend *b = backends[TR_BACKEND_DEVICE];
    if (!b || !b->open_device) {
        tr_fail(&ctx->err, TR_EUSER,
                "cuda:%d was requested but this build of trainer has no CUDA backend (nvcc was not "
                "found at build time): use device = \"cpu\" (or \"auto\"), or rebuild on a machine "
                "with the CUDA toolkit",
                device);
        return NULL;
    }
    int count = tr_cuda_device_count();
    if (count == 0) {
        const char *why = tr_cuda_unavailable_reason();
        if (why[0])
            tr_fail(&ctx->err, TR_EUSER, "cuda:%d was asked for, but %s", device, why);
        else
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
    if (b->open_device(ctx, device, &a, &state, &ctx->err) != TR_OK) return NULL;
    ctx->dev_alloc[device] = a;
    ctx->dev_state[device] = state;
    return a;
}

void *tr_ctx_cuda_state(tr_ctx *ctx, int device)
{
    if (device < 0 || device >= TR_CTX_MAX_DEVICES) return NULL;
    if (!ctx->dev_state[device] && !tr_ctx_alloc(ctx, device)) return NULL;
    return ctx->dev_state[device];
}

/* ------------------------------------------------------------ transfers */

/* A device tensor cannot be made without a device backend (tr_ctx_alloc refuses), so this is
 * only reached through a tensor header that claims a device: say what the build lacks. */
static int no_device_backend(tr_ctx *ctx, const char *fn, const char *dir, int device)
{
    return tr_fail(ctx ? tr_ctx_err(ctx) : NULL, TR_EUSER,
                   "%s %s cuda:%d: this build of trainer has no CUDA backend (nvcc was not found at build "
                   "time, or it was built with CUDA=0); keep the tensors on device \"cpu\", or rebuild with "
                   "the CUDA toolkit installed",
                   fn, dir, device);
}

int tr_device_copy(tr_ctx *ctx, const char *fn, void *dst, int dst_device, int dst_dtype, const void *src,
                   int src_device, int src_dtype, size_t n)
{
    const tr_backend *b = backends[TR_BACKEND_DEVICE];
    if (!b || !b->copy)
        return no_device_backend(ctx, fn, dst_device != TR_CPU ? "to" : "from",
                                 dst_device != TR_CPU ? dst_device : src_device);
    return b->copy(ctx, fn, dst, dst_device, dst_dtype, src, src_device, src_dtype, n);
}

int tr_device_fill(tr_ctx *ctx, const char *fn, void *dst, int device, const void *elem, size_t esize, size_t n)
{
    const tr_backend *b = backends[TR_BACKEND_DEVICE];
    if (!b || !b->fill) return no_device_backend(ctx, fn, "on", device);
    return b->fill(ctx, fn, dst, device, elem, esize, n);
}
