/* card.cu — the current device's compute capability, cached per device ordinal (card.h).
 *
 * The capability never changes while a process runs, so it is asked of the runtime once per
 * ordinal; the cache is written with the same value by any thread that fills it, so a race
 * between two first readers is harmless (an int store). */
#include "cuda/card.h"

#include <cuda_runtime.h>

enum { CARD_MAX_DEVICES = 64 };
static int cc_of[CARD_MAX_DEVICES]; /* 0: not read yet */

extern "C" int tr_k_cuda_cc(void)
{
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= CARD_MAX_DEVICES) {
        (void)cudaGetLastError();
        return 0;
    }
    if (cc_of[device]) return cc_of[device];
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    cc_of[device] = 10 * prop.major + prop.minor;
    return cc_of[device];
}

extern "C" int tr_k_mma_takes(int dt, int cc)
{
    if (dt == TR_F16) return cc >= 70;
    if (dt == TR_BF16) return cc >= 80;
    return 0;
}
