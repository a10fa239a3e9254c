/* cuda_device.h — what the context needs from the CUDA backend (implemented by the
 * CUDA side of the runtime; declared here so that core/ctx.c compiles without it).
 *
 * Contract:
 *   tr_cuda_device_count  visible CUDA devices (0 without a GPU or driver).
 *   tr_cuda_init_device   makes `device` usable: creates its caching allocator over
 *                         cudaMalloc/cudaFree (*out) and its per-device state (streams,
 *                         cuBLASLt handle and workspace: *state). Returns TR_OK, or a
 *                         status with err filled, leaving *out and *state NULL.
 *   tr_cuda_release_device releases the state made by tr_cuda_init_device. The
 *                         context destroys the device's allocator (tr_alloc_destroy)
 *                         FIRST and then calls this, so cudaFree still has its device.
 * When the implementation exists, its version of this header defines
 * TR_CUDA_DEVICE_READY, which switches core/ctx.c over to these functions. */
#ifndef TR_CUDA_DEVICE_H
#define TR_CUDA_DEVICE_H

#include "ctx.h"

int tr_cuda_device_count(void);
int tr_cuda_init_device(tr_ctx *ctx, int device, tr_alloc **out, void **state, tr_error *err);
void tr_cuda_release_device(void *state);

#endif
