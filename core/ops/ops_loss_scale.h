/* ops_loss_scale.h — the fp16 dynamic loss scale kept on the device, so that a
 * training step under fp16 never reads the found-inf flag back to choose the next scale:
 *
 *   loss_scale_update   the scaler's update rule (trainer.train.amp Scaler:update) on device
 *                       tensors: backoff and count a skip on a set flag, grow after
 *                       growth_interval clean steps; also writes 1/scale for the unscale
 *   scale_by_scalar     x *= s[0] * factor, s a 1-element f32 device tensor: the backward's
 *                       seed (the loss gradient) multiplied by the device scale / accumulate
 *
 * CPU slots: core/ops/loss_scale.c (the host rule's arithmetic, so that a CPU run through
 * these ops is bitwise the eager scaler); CUDA slots: core/cuda_ops/loss_scale_cuda.c. */
#ifndef TR_OPS_LOSS_SCALE_H
#define TR_OPS_LOSS_SCALE_H

#include "tensor.h"

/* scale, inv_scale: { 1 } f32; tracker, skipped: { 1 } i32 (consecutive clean steps, skipped
 * steps over the run); found_inf: { 1 } i32, this step's flag (read only). In f32:
 *   found_inf != 0: scale *= backoff_factor, tracker = 0, skipped += 1
 *   otherwise:      tracker += 1; tracker >= growth_interval: scale *= growth_factor, tracker = 0
 * then inv_scale = 1 / scale. The factors must be finite and > 0, growth_interval >= 1. */
int tr_op_loss_scale_update(tr_ctx *ctx, tr_tensor *scale, tr_tensor *inv_scale, tr_tensor *tracker, tr_tensor *skipped,
                            const tr_tensor *found_inf, float growth_factor, float backoff_factor,
                            int64_t growth_interval);

/* x (a float dtype, in place) *= s[0] * factor, the coefficient rounded to f32 once, then
 * x * coefficient as tr_op_scale. s: { 1 } f32 on x's device. */
int tr_op_scale_by_scalar(tr_ctx *ctx, tr_tensor *x, const tr_tensor *s, float factor);

#endif
