/* multi_tensor.h — the one kernel the device-resident clip needs beside reduce.h's multi-tensor
 * sumsq / scale_by_device and optim.h's multi-tensor AdamW: the clip coefficient from a norm
 * that already lives on the device (multi_tensor.cu); host launchers with C linkage and no CUDA
 * types, under launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_MULTI_TENSOR_H
#define TR_KERNELS_CUDA_MULTI_TENSOR_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* *coef (=, device f32) = min(1, max_norm / (*norm + eps)) in f32 when *norm is finite; 1
 * (leave the gradients alone) when it is not, and then *found_inf (device i32, may be NULL)
 * is set to 1. One thread. */
int tr_k_clip_coef_from_norm_cuda(float *coef, const float *norm, float max_norm, float eps, int32_t *found_inf,
                                  void *stream, tr_error *err);

TR_K_END_DECLS

#endif
