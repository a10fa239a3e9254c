/* cuda_card.c — the card a CUDA device is, and why a card or driver cannot run this build
 * (contract in cuda_card.h).
 *
 * Two things stop a CUDA binary before its first kernel, and CUDA names both tersely:
 *   - a driver older than the runtime: cudaGetDeviceCount answers cudaErrorInsufficientDriver
 *     (a CUDA 13 runtime needs a driver that supports CUDA 13, 580 or newer). The runtime then
 *     sees no device; the paragraph says which versions met and which bundle fits the driver;
 *   - a card the fat binary carries no code for: the first launch answers
 *     cudaErrorNoKernelImageForDevice. cuda_device.c launches a probe when it opens a device,
 *     so the paragraph comes before anything is allocated.
 * Compiled only with TR_HAVE_CUDA. */
#ifdef TR_HAVE_CUDA

#include "cuda_card.h"
#include "cuda/card.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

/* The paragraph of the last refused runtime; written by tr_cuda_card_count, which the context
 * calls from one thread at a time in practice (a second writer writes the same text). */
static char unavailable[640];

/* "13.0" from 13000 */
static void version_text(char *buf, size_t n, int v)
{
    if (v <= 0) snprintf(buf, n, "unknown");
    else snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

int tr_cuda_card_count(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess) {
        unavailable[0] = '\0';
        return n < 0 ? 0 : n;
    }
    (void)cudaGetLastError();
    int driver = 0, runtime = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
    (void)cudaGetLastError();
    /* No driver at all (driver version 0) or no GPU is the ordinary "no CUDA device" case. */
    if (e == cudaErrorInsufficientDriver && driver > 0) {
        char dv[16], rv[16];
        version_text(dv, sizeof dv, driver);
        version_text(rv, sizeof rv, runtime);
        snprintf(unavailable, sizeof unavailable,
                 "the NVIDIA driver on this machine supports CUDA %s, older than the CUDA %s runtime this trainer "
                 "was built with (cudaErrorInsufficientDriver: %s), so no GPU is usable. Update the driver (a CUDA "
                 "%d runtime needs a driver that supports CUDA %d.0), or use the CUDA 12 bundle (make "
                 "gpu-bundle-cuda12: drivers from 525 on, cards from sm_70), or run on device = \"cpu\".",
                 dv, rv, cudaGetErrorString(e), runtime / 1000, runtime / 1000);
    } else {
        unavailable[0] = '\0';
    }
    return 0;
}

const char *tr_cuda_card_unavailable(void) { return unavailable; }

int tr_cuda_card_of(int device, tr_cuda_card *card)
{
    memset(card, 0, sizeof *card);
    if (device < 0 || device >= tr_cuda_card_count())
        return TR_EUSER;
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return TR_EUSER;
    }
    snprintf(card->name, sizeof card->name, "%s", prop.name);
    card->major = prop.major;
    card->minor = prop.minor;
    card->memory_bytes = (uint64_t)prop.totalGlobalMem;
    card->multiprocessors = prop.multiProcessorCount;
    if (cudaDriverGetVersion(&card->driver_version) != cudaSuccess) card->driver_version = 0;
    if (cudaRuntimeGetVersion(&card->runtime_version) != cudaSuccess) card->runtime_version = 0;
    (void)cudaGetLastError();
    return TR_OK;
}

enum { CARD_CACHE = 64 };
static int cc_cache[CARD_CACHE]; /* 0: not read yet; written with the same value by any reader */

int tr_cuda_card_cc(int device)
{
    if (device < 0 || device >= CARD_CACHE) return 0;
    if (!cc_cache[device]) {
        tr_cuda_card c;
        if (tr_cuda_card_of(device, &c) != TR_OK) return 0;
        cc_cache[device] = 10 * c.major + c.minor;
    }
    return cc_cache[device];
}

int tr_cuda_card_no_code(int device, tr_error *err)
{
    tr_cuda_card c;
    if (tr_cuda_card_of(device, &c) != TR_OK) snprintf(c.name, sizeof c.name, "an unknown card");
    char dv[16], rv[16];
    version_text(dv, sizeof dv, c.driver_version);
    version_text(rv, sizeof rv, c.runtime_version);
    const int cc = 10 * c.major + c.minor;
    const char *advice =
        cc == 70 || cc == 72
            ? "A V100 (sm_70) runs the CUDA 12 bundle (make gpu-bundle-cuda12)."
            : cc < 70 ? "Cards before Volta (sm_70) are not supported: use device = \"cpu\"."
                      : "Rebuild for this card (make CUDA_ARCHS=\"<its compute capability, such as 86>\"), or use a "
                        "bundle built for it.";
    return tr_fail(err, TR_EUSER,
                   "cuda:%d (%s, compute capability %d.%d, driver CUDA %s, runtime CUDA %s): this trainer carries no "
                   "code for this card (cudaErrorNoKernelImageForDevice): it was built for %s. %s Or run on "
                   "device = \"cpu\".",
                   device, c.name, c.major, c.minor, dv, rv, tr_k_cuda_targets(), advice);
}

#endif
