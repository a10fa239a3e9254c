/* cuda_context_backend.c — the CUDA backend as the context sees it (core/ctx/backend.h): the
 * devices and their allocators and states (cuda_device.c), their cards (cuda_card.c), transfers and fills
 * (cuda_copy.c), and the pinned staging buffers as the backend's private state in each
 * context. Registered before main by a constructor, so that the context and tensors reach
 * CUDA without including this folder. This file calls its helpers, never the other way.
 *
 * Compiled only with TR_HAVE_CUDA: a build without it registers no device backend. */
#ifdef TR_HAVE_CUDA

#include "backend.h"
#include "cuda_card.h"
#include "cuda_copy.h"
#include "cuda_device.h"

static int staging_new(void **out, tr_error *err)
{
    *out = tr_cuda_staging_new();
    return *out ? TR_OK : tr_fail(err, TR_EOOM, "out of host memory for the CUDA staging buffers");
}

static void staging_free(void *s) { tr_cuda_staging_free(s); }

static const tr_backend cuda_backend = {
    .name = "cuda",
    .kind = TR_BACKEND_DEVICE,
    .device_count = tr_cuda_count_devices,
    .device_memory_bytes = tr_cuda_memory_bytes,
    .device_card = tr_cuda_card_of,
    .unavailable_reason = tr_cuda_card_unavailable,
    .open_device = tr_cuda_init_device,
    .close_device = tr_cuda_release_device,
    .copy = tr_cuda_copy,
    .fill = tr_cuda_fill,
    .private_new = staging_new,
    .private_free = staging_free,
};

__attribute__((constructor)) static void register_cuda_backend(void) { tr_backend_register(&cuda_backend); }

#endif
