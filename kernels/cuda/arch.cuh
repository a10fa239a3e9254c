/* arch.cuh — what the card a kernel is compiled for has, for device code that must compile
 * for every target of the fat binary (sm_75 up; sm_70 in the CUDA 12 bundle).
 *
 * __CUDA_ARCH__ is defined only while nvcc compiles device code for one target (the host
 * pass has none), so the flags below are 1 in host code: a kernel's host stub always
 * compiles, and the runtime (card.h) decides which kernels a card may launch. A kernel
 * whose body needs a feature its target lacks compiles to a trap instead:
 *
 *     if constexpr (tr_arch_mma<T>::value) body<T>(...); else tr_arch_unreachable();
 *
 * The discarded branch of `if constexpr` in a template is never instantiated, so the
 * bf16 WMMA fragments (sm_80 and up) are not even named for sm_75. Private to kernels/cuda. */
#ifndef TR_KERNELS_CUDA_ARCH_CUH
#define TR_KERNELS_CUDA_ARCH_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* bf16 tensor-core products (WMMA bf16 fragments): sm_80 and up. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define TR_ARCH_BF16_MMA 0
#else
#define TR_ARCH_BF16_MMA 1
#endif
/* f16 tensor-core products (WMMA f16 fragments): sm_70 and up. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#define TR_ARCH_F16_MMA 0
#else
#define TR_ARCH_F16_MMA 1
#endif

/* value: whether WMMA takes element type T on the target being compiled. */
template <class T> struct tr_arch_mma {
    static constexpr bool value = false;
};
template <> struct tr_arch_mma<__half> {
    static constexpr bool value = TR_ARCH_F16_MMA != 0;
};
template <> struct tr_arch_mma<__nv_bfloat16> {
    static constexpr bool value = TR_ARCH_BF16_MMA != 0;
};

/* The body of a kernel the runtime never launches on this target (card.h refused it first):
 * a launch that reaches it anyway stops the kernel with an error instead of computing
 * nothing silently. */
__device__ __forceinline__ void tr_arch_unreachable()
{
    __trap();
}

#endif
