/* loss_scale.h — the kernels of the device loss scale (loss_scale.cu): the fp16 scaler's update
 * rule on device scalars and a tensor scaled by a device scalar; host launchers with C linkage
 * and no CUDA types, under launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_LOSS_SCALE_H
#define TR_KERNELS_CUDA_LOSS_SCALE_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* The rule of ops_loss_scale.h's tr_op_loss_scale_update, in f32, one thread. */
int tr_k_loss_scale_update_cuda(float *scale, float *inv_scale, int32_t *tracker, int32_t *skipped,
                                const int32_t *found_inf, float growth_factor, float backoff_factor,
                                int64_t growth_interval, void *stream, tr_error *err);

/* x (n elements of dtype, in place) *= (*s * factor), the coefficient rounded to f32 once. */
int tr_k_scale_by_scalar_cuda(void *x, int dtype, int64_t n, const float *s, float factor, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
