/* backend.h — what the runtime context (ctx.c) and tensors (core/tensor/) know of a backend:
 * a table of functions that the backend defines in its own folder and registers itself, so
 * that the context owns every backend's state without including any backend.
 *
 * Two backends exist: the host (TR_BACKEND_HOST, core/cpu_device/host_context_backend.c: process-wide
 * setup of the CPU BLAS, the GEMM router as private state; its allocator is the context's own
 * malloc allocator and tensor.c moves host bytes itself) and the device backend of the CUDA
 * ordinals 0..TR_CTX_MAX_DEVICES-1 (TR_BACKEND_DEVICE, core/cuda_device/cuda_context_backend.c). A build
 * without the CUDA backend registers no device backend: the context then refuses every
 * ordinal, and a copy or fill that names one says the build lacks CUDA.
 *
 * Registration: each backend calls tr_backend_register from a constructor of its own file,
 * before main runs; the registry is written then and only read afterwards. A function a
 * backend does not need is NULL. */
#ifndef TR_BACKEND_H
#define TR_BACKEND_H

#include "alloc.h"
#include "ctx.h"

enum { TR_BACKEND_HOST = 0, TR_BACKEND_DEVICE = 1, TR_BACKEND_KINDS = 2 };

/* Devices a device backend can address: cuda:0 .. cuda:15. */
enum { TR_CTX_MAX_DEVICES = 16 };

typedef struct tr_backend {
    const char *name;   /* "cpu", "cuda" */
    int kind;           /* TR_BACKEND_HOST or TR_BACKEND_DEVICE */

    /* Process-wide setup, run by every tr_ctx_new before anything else (idempotent). */
    void (*setup)(void);

    /* Visible devices (never an error: 0 when there are none) and a device's total memory
     * in bytes (0 when it does not exist or does not say). */
    int (*device_count)(void);
    uint64_t (*device_memory_bytes)(int device);
    /* A device's card (tr_cuda_device_card's contract, ctx.h), and why no device is visible
     * when the driver refused the runtime ("" when that is not the reason). */
    int (*device_card)(int device, tr_cuda_card *card);
    const char *(*unavailable_reason)(void);

    /* alloc: creates device `device`'s caching allocator (the caller's, destroyed with
     * tr_alloc_destroy) and its per-device state (released by close_device, after the
     * allocator). On failure both outputs are NULL and err says why. */
    int (*open_device)(tr_ctx *ctx, int device, tr_alloc **out_alloc, void **out_state, tr_error *err);
    void (*close_device)(void *state);

    /* copy: n elements from src (src_dtype, on src_device) to dst (dst_dtype, on dst_device),
     * at least one side on this backend's devices, the other may be TR_CPU; `fn` names the
     * public caller in messages ("tr_tensor_copy"). fill: n elements of esize bytes at dst,
     * each the bytes of elem. Their ordering and sync points are the backend's contract. */
    int (*copy)(tr_ctx *ctx, const char *fn, void *dst, int dst_device, int dst_dtype, const void *src,
                int src_device, int src_dtype, size_t n);
    int (*fill)(tr_ctx *ctx, const char *fn, void *dst, int device, const void *elem, size_t esize, size_t n);

    /* private state: one per context and backend (the host's GEMM router, the device's
     * staging buffers), made on first use by tr_ctx_backend_private, freed with the context
     * (device backends first, each after its devices). */
    int (*private_new)(void **out, tr_error *err);
    void (*private_free)(void *state);
} tr_backend;

/* Makes b the backend of its kind (a second registration of a kind replaces the first). */
void tr_backend_register(const tr_backend *b);

/* The backend of TR_CPU or of the device ordinals; NULL when none is registered. */
const tr_backend *tr_backend_of(int device);

/* b's private state in ctx, made on first use; NULL with ctx's error set when b cannot make
 * it (b->private_new failed) or b has none. */
void *tr_ctx_backend_private(tr_ctx *ctx, const tr_backend *b);

/* The device backend's copy and fill (tr_backend's contract), or TR_EUSER with a message
 * that says this build has no backend for the device when none is registered. */
int tr_device_copy(tr_ctx *ctx, const char *fn, void *dst, int dst_device, int dst_dtype, const void *src,
                   int src_device, int src_dtype, size_t n);
int tr_device_fill(tr_ctx *ctx, const char *fn, void *dst, int device, const void *elem, size_t esize, size_t n);

#endif
