/* card.cu — the current device's compute capability, cached per device ordinal (card.h).
 *
 * The capability never changes while a process runs, so it is asked of the runtime once per
 * ordinal; the cache is written with the same value by any thread that fills it, so a race
 * between two first readers is harmless (an int store). */
#include "cuda/card.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

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

/* TR_CUDA_TARGET_LIST (75_80_..., one preprocessing number: nvcc splits -D values at commas)
 * and TR_CUDA_PTX come from the Makefile's CUDA_ARCHS and CUDA_PTX, so the message names what
 * this binary really carries. */
#define CARD_TEXT_(...) #__VA_ARGS__
#define CARD_TEXT(...) CARD_TEXT_(__VA_ARGS__)
#ifndef TR_CUDA_TARGET_LIST
#error "TR_CUDA_TARGET_LIST (the built targets, such as 75_80_90) must be given by the build"
#endif

extern "C" const char *tr_k_cuda_targets(void)
{
    static char text[256];
    if (text[0]) return text;
    char list[] = CARD_TEXT(TR_CUDA_TARGET_LIST);
    char buf[sizeof text] = "";
    size_t used = 0;
    for (char *tok = strtok(list, "_"); tok; tok = strtok(NULL, "_"))
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%ssm_%s", used ? ", " : "", tok);
    snprintf(buf + used, sizeof buf - used, " and PTX compute_%s for later cards", CARD_TEXT(TR_CUDA_PTX));
    memcpy(text, buf, sizeof text);
    return text;
}

__global__ void card_probe_kernel() {}

extern "C" int tr_k_cuda_probe(void *stream)
{
    card_probe_kernel<<<1, 32, 0, (cudaStream_t)stream>>>();
    return (int)cudaGetLastError();
}

extern "C" int tr_k_mma_takes(int dt, int cc)
{
    if (dt == TR_F16) return cc >= 70;
    if (dt == TR_BF16) return cc >= 80;
    return 0;
}
