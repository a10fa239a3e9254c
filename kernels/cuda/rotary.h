/* rotary.h — rotary position embedding's kernel (rotary.cu), the device twin of
 * kernels/cpu/rotary.h; a host launcher with C linkage and no CUDA types, under launcher.h's
 * contract. */
#ifndef TR_KERNELS_CUDA_ROTARY_H
#define TR_KERNELS_CUDA_ROTARY_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* out[B,T,H,D] (=) = x rotated by position t's angles t / theta^(2i/D) (rotate-half pairs i,
 * i + D/2), or rotated back when inverse; D even; out may be x. */
int tr_k_rotary_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t B, int64_t T, int64_t H, int64_t D,
                     float theta, int inverse, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
