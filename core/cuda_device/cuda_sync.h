/* cuda_sync.h — the only way core/ waits for a device or copies to the host: each wrapper
 * counts its call (host_sync.h) and makes it, so the counts are every round trip there is.
 * `make lint` refuses the raw calls (cudaStreamSynchronize, cudaEventSynchronize,
 * cudaDeviceSynchronize, cudaMemcpyDeviceToHost) anywhere in core/ but here.
 *
 * Include it after the CUDA runtime's header (cuda_runtime.h, or the fake runtime that
 * tests/c/test_cuda_copy.c compiles cuda_copy.c against): it includes none itself. */
#ifndef TR_CUDA_SYNC_H
#define TR_CUDA_SYNC_H

#include "host_sync.h"

static inline cudaError_t tr_sync_stream(cudaStream_t s)
{
    tr_host_sync_note(TR_HOST_SYNC_STREAM);
    return cudaStreamSynchronize(s);
}

static inline cudaError_t tr_sync_event(cudaEvent_t e)
{
    tr_host_sync_note(TR_HOST_SYNC_EVENT);
    return cudaEventSynchronize(e);
}

/* The batch feed's wait before it rewrites a pinned slot (host_sync.h: not a round trip). */
static inline cudaError_t tr_sync_feed_slot(cudaEvent_t e)
{
    tr_host_sync_note(TR_HOST_SYNC_FEED_WAIT);
    return cudaEventSynchronize(e);
}

/* Queues a device -> host copy of `bytes` on `s`. */
static inline cudaError_t tr_copy_to_host_async(void *dst, const void *src, size_t bytes, cudaStream_t s)
{
    tr_host_sync_note(TR_HOST_SYNC_COPY_D2H);
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s);
}

#endif
