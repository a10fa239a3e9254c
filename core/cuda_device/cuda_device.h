/* cuda_device.h — one CUDA device as the runtime sees it: its caching allocator (over
 * cudaMalloc/cudaFree), its compute stream, its cuBLASLt handle and cached workspace.
 * The context (core/ctx/ctx.c) creates a device's state on first use through the device
 * backend (core/cuda_device/cuda_context_backend.c) and releases it with the context; kernels receive the
 * stream and the cuBLASLt environment from here.
 *
 * Ownership: tr_cuda_init_device gives the caller two things. The allocator belongs to
 * the caller, who destroys it with tr_alloc_destroy (before or after releasing the state:
 * the order does not matter). The state owns the stream, the cuBLASLt library and handle
 * (loaded on first use) and the GEMM plan cache; its workspace is a block of the allocator (tag workspace) that goes
 * back with the allocator, so it shows in the workspace ledger for the device's life.
 *
 * Functions exist only in builds with the CUDA backend (TR_HAVE_CUDA); the rest of core/
 * asks the context (tr_cuda_device_count, tr_ctx_cuda_state), which answers for every build.
 * No CUDA type appears here: streams and handles are void *. */
#ifndef TR_CUDA_DEVICE_H
#define TR_CUDA_DEVICE_H

#include "ctx.h"

/* Devices this build can address: cuda:0 .. cuda:15. */
enum { TR_CUDA_MAX_DEVICES = 16 };

/* Bytes of the cuBLASLt workspace each device keeps (32 MiB). */
enum { TR_CUDA_WORKSPACE_BYTES = 33554432 };

/* Visible CUDA devices; 0 when there is no driver or no GPU (never an error). */
int tr_cuda_count_devices(void);
/* Total memory of `device` in bytes; 0 when it does not exist or the query fails. */
uint64_t tr_cuda_memory_bytes(int device);

/* Creates device `device`'s allocator and state. ctx may be NULL (it is not used yet).
 * TR_EUSER when the device does not exist, TR_EOOM when the workspace does not fit,
 * TR_EINTERNAL when a CUDA call fails; on failure nothing is left allocated and both
 * outputs are NULL. The calling thread's current device is left unchanged. */
int tr_cuda_init_device(tr_ctx *ctx, int device, tr_alloc **out_alloc, void **out_state, tr_error *err);
/* Waits for the stream, then destroys the plan cache, the cuBLASLt handle and the stream.
 * Does not touch the allocator (see Ownership). NULL is a no-op. */
void tr_cuda_release_device(void *state);

/* The device's compute stream (a cudaStream_t), created non-blocking: it does not wait
 * for the legacy default stream, so copies and memsets for it must be the Async forms
 * on this stream (plain cudaMemcpy/cudaMemset do not order with its kernels). */
void *tr_cuda_stream(void *state);
/* The tr_cuda_blas (kernels/cuda/matmul.h) to pass to tr_k_matmul_fwd_cuda. The first
 * call loads cuBLASLt (dlopen of libcublasLt.so.N, N the major version of the cuBLAS headers
 * the build used, then libcublasLt.so) and creates the handle; when that fails, the
 * environment's lt is NULL and its `unavailable` says why (every product on the device then
 * returns that message as TR_EUSER). */
void *tr_cuda_blas_env(void *state);
/* The device's error word (a tr_k_index_error in device memory, kernels/cuda/index_check.h, zero
 * at start): the ops that take indices check them on the device and record the first bad one
 * there, so they never wait for the host; tr_device_errors_check (device_errors.h) reads it. */
void *tr_cuda_index_error(void *state);
/* The CUDA ordinal of the state. */
int tr_cuda_state_device(void *state);
/* Makes the state's device current on the calling thread; call before launching. */
int tr_cuda_set_current(void *state, tr_error *err);
/* Waits until all work on the state's stream is done; reports kernel execution errors. */
int tr_cuda_synchronize(void *state, tr_error *err);

#endif
