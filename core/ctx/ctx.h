/* ctx.h — the runtime context: the one owner of all mutable runtime state (one caching
 * allocator per device, per-device CUDA state such as streams and the cuBLASLt handle
 * and workspace, the last error). Nothing in core/ keeps global mutable state; every
 * entry point that allocates or may fail takes a tr_ctx. */
#ifndef TR_CTX_H
#define TR_CTX_H

#include "alloc.h"

typedef struct tr_ctx tr_ctx;

/* NULL only when malloc fails. The CPU allocator exists from the start; a CUDA device's
 * allocator and state are created on first use. */
tr_ctx *tr_ctx_new(void);
void tr_ctx_free(tr_ctx *ctx);

/* The error of the last failed call made with ctx (status TR_OK when none). */
tr_error *tr_ctx_err(tr_ctx *ctx);
const char *tr_ctx_errmsg(const tr_ctx *ctx);

/* The allocator of a device (TR_CPU or a CUDA ordinal); NULL with ctx's error set when
 * the device does not exist or this build has no CUDA. */
tr_alloc *tr_ctx_alloc(tr_ctx *ctx, int device);

/* Per-device CUDA state (streams, cuBLASLt handle, workspace), created on first use by
 * the CUDA backend; NULL on the CPU or without CUDA. */
void *tr_ctx_cuda_state(tr_ctx *ctx, int device);

/* Number of visible CUDA devices; 0 without a GPU or in a build without CUDA. */
int tr_cuda_device_count(void);

/* Total memory of CUDA device `device` in bytes; 0 when it does not exist, the query
 * fails, or the build has no CUDA. Starts no allocator (plans are checked before one). */
uint64_t tr_cuda_device_memory_bytes(int device);

/* A CUDA device as its driver describes it: for messages, `trainer plan` and the ledger. */
typedef struct tr_cuda_card {
    char name[256];        /* "NVIDIA A10" */
    int major, minor;      /* compute capability: 8, 6 */
    uint64_t memory_bytes; /* total device memory */
    int multiprocessors;
    int driver_version;    /* the CUDA version the driver supports, 1000 * major + 10 * minor (12040); 0 unknown */
    int runtime_version;   /* the CUDA runtime this binary was built with, the same encoding */
} tr_cuda_card;

/* Fills *card for CUDA device `device` (starts no allocator): TR_OK, or TR_EUSER with *card
 * zeroed when the device does not exist or the build has no CUDA. */
int tr_cuda_device_card(int device, tr_cuda_card *card);

/* Why tr_cuda_device_count() is 0 in a build with CUDA when the runtime refused the driver
 * (older than the runtime): a paragraph naming both versions and what to do; "" otherwise
 * (no GPU, no driver at all, or a build without CUDA). */
const char *tr_cuda_unavailable_reason(void);

/* Physical memory of the host in bytes (sysconf); 0 when the system does not say. */
uint64_t tr_host_memory_bytes(void);

#endif
