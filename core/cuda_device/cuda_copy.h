/* cuda_copy.h — moving tensor bytes to, from and between CUDA devices, and filling device
 * memory: what core/tensor/tensor.c calls for any tensor that is not on the CPU, so that
 * tensor.c itself holds no CUDA code.
 *
 * Streams and sync points (docs/CUDA.md, "Device memory and transfers"):
 *   - every copy and fill is queued on the compute stream of the destination device (of the
 *     source for a download to the host): tr_cuda_stream(tr_ctx_cuda_state(ctx, d)), a
 *     non-blocking stream; never the legacy default stream, never a plain cudaMemcpy or
 *     cudaMemset, which would not be ordered with that stream's kernels;
 *   - a transfer that touches host memory has finished when the call returns (host -> device:
 *     the host buffer may be reused or freed; device -> host: the host sees the data). The
 *     stream is in order, so this also waits for the work queued on it before;
 *   - device -> device copies and fills are only queued: later work on the same stream sees
 *     them; a copy between two GPUs is ordered after the source stream's work by an event,
 *     and the source stream waits for the copy before its later work (which may reuse the
 *     source's memory through the allocator);
 *   - up to 1 MiB of the same dtype moves in one cudaMemcpyAsync; anything bigger, and every
 *     transfer that changes the dtype, moves in chunks of at most TR_CUDA_STAGING_CHUNK bytes
 *     through two pinned host buffers (the context's staging, made on first use; plain
 *     malloc'd memory if the system refuses to pin), so that no transfer needs a second full
 *     host copy and the upload of one chunk overlaps the conversion of the next;
 *   - a dtype change is done on the host, chunk by chunk (device -> device with a dtype
 *     change goes down, is converted and goes up again) until the op table's CUDA `cast`
 *     slot is used here.
 * Errors name the function, the direction and the device, then the CUDA message:
 * "tr_tensor_copy to cuda:0: out of memory (cudaErrorMemoryAllocation; `...` at file:line)".
 *
 * The functions exist only in builds with the CUDA backend (TR_HAVE_CUDA); they are the
 * copy and fill of the device backend (core/cuda_device/cuda_context_backend.c), which core/tensor/
 * reaches through core/ctx/backend.h. Not part of core/trainer.h (Lua reaches them through
 * tr_tensor_copy and friends). */
#ifndef TR_CUDA_COPY_H
#define TR_CUDA_COPY_H

#include "ctx.h"

/* Bytes of each of the two pinned staging buffers (8 MiB). */
enum { TR_CUDA_STAGING_CHUNK = 8388608 };
/* Same-dtype transfers up to this many bytes skip the staging buffers (1 MiB). */
enum { TR_CUDA_DIRECT_BYTES = 1048576 };

/* dst[i] = src[i] for i < n, converted from src_dtype to dst_dtype; at least one of the two
 * devices is a CUDA ordinal (the other may be TR_CPU, for a host buffer). `fn` names the
 * caller in messages ("tr_tensor_copy"). The devices must exist in ctx (their tensors do).
 * Overlapping ranges on one device are the caller's to reject. */
int tr_cuda_copy(tr_ctx *ctx, const char *fn, void *dst, int dst_device, int dst_dtype, const void *src,
                 int src_device, int src_dtype, size_t n);

/* n elements of esize bytes (1..8) at dst on `device`, each set to the bytes of `elem`.
 * Queued on the device's stream (cudaMemsetAsync, then device-to-device copies that double
 * the filled prefix); nothing waits. */
int tr_cuda_fill(tr_ctx *ctx, const char *fn, void *dst, int device, const void *elem, size_t esize, size_t n);

/* The staging buffers: the device backend's private state in a context (backend.h), freed
 * with the context. NULL when host memory is short. */
typedef struct tr_cuda_staging tr_cuda_staging;
tr_cuda_staging *tr_cuda_staging_new(void);
void tr_cuda_staging_free(tr_cuda_staging *s);
/* The staging of ctx: the private state of the registered device backend
 * (core/cuda_device/cuda_context_backend.c), made on first use; NULL when host memory is short. */
tr_cuda_staging *tr_ctx_cuda_staging(tr_ctx *ctx);

#endif
