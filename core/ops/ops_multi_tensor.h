/* ops_multi_tensor.h — the optimizer step's ops over a whole list of tensors whose results
 * stay in device tensors: a step on a GPU then never waits for the host.
 *   global_norm_into          norm (a 1-element f32 tensor) = the L2 norm of the list
 *   clip_by_norm              every tensor of the list *= min(1, max_norm / (norm + eps)),
 *                             reading norm where it lives
 *   scale_check_finite_into   the loss scaler's unscale, its found-inf flag into a tensor
 *   adamw_multi               AdamW over every parameter of a list in one launch, skipped
 *                             when a found-inf flag tensor is set
 * The host-result ops (tr_op_global_norm, tr_op_scale_check_finite) and the per-parameter
 * tr_op_adamw stay; on the CPU these ops are those, so their results are the same bits.
 * A found-inf flag is a 1-element i32 tensor that the ops only ever set to 1 (never
 * clear): the caller zeroes it once per optimizer step, and unscale and clip share it. */
#ifndef TR_OPS_MULTI_TENSOR_H
#define TR_OPS_MULTI_TENSOR_H

#include "tensor.h"

/* norm (=, 1-element f32 tensor on the list's device) = sqrt(sum of squares of every
 * element of ts[0..n)); as tr_op_global_norm, without a host result. */
int tr_op_global_norm_into(tr_ctx *ctx, tr_tensor *norm, tr_tensor **ts, int n);

/* coef = min(1, max_norm / (norm + eps)) in f32 (torch's clip_grad_norm_; eps 1e-6 there),
 * and every tensor of ts *= coef in place. A non-finite norm leaves the tensors alone and
 * sets found_inf (when not NULL) to 1, so that adamw_multi skips the step. */
int tr_op_clip_by_norm(tr_ctx *ctx, tr_tensor **ts, int n, const tr_tensor *norm, tr_tensor *found_inf, float max_norm,
                       float eps);

/* Every tensor of ts *= scale in place; found_inf (+=, 1-element i32) is set to 1 when a
 * result is inf or NaN (or overflows a half dtype) and left alone otherwise. */
int tr_op_scale_check_finite_into(tr_ctx *ctx, tr_tensor *found_inf, tr_tensor **ts, int n, float scale);
/* The same with the factor read from scale (1-element f32 on the list's device: the device
 * loss scale's 1/scale, ops_loss_scale.h), so that the unscale needs no host value. */
int tr_op_scale_check_finite_by_into(tr_ctx *ctx, tr_tensor *found_inf, tr_tensor **ts, int n, const tr_tensor *scale);

/* One torch.optim.AdamW step (tr_op_adamw's formula and arguments) on each of n parameters:
 * params[i], grads[i] (f32: the runtime's gradients always are), m[i], v[i] (f32), half_copies[i] (NULL, or the array
 * NULL) and decay[i] (nonzero: weight_decay applies; NULL: to all). All share step, lr, betas, eps and grad_scale (the
 * caller groups parameters by step count). When skip_if is not NULL (1-element i32) and nonzero, nothing changes. On
 * the CPU each parameter runs tr_op_adamw (bit-identical); on CUDA one multi-tensor launch. */
int tr_op_adamw_multi(tr_ctx *ctx, tr_tensor **params, tr_tensor **grads, tr_tensor **m, tr_tensor **v,
                      tr_tensor **half_copies, const int32_t *decay, int n, const tr_tensor *skip_if, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale);
/* The same, the step counted on the host without knowing which recent steps the device
 * skipped: with skipped (1-element i32, the device loss scale's skip count; NULL: as above)
 * the step applied is step - (skipped[0] - skipped_known), skipped_known being the count
 * the host last read, and the bias corrections come from that step where skipped lives. */
int tr_op_adamw_multi_steps(tr_ctx *ctx, tr_tensor **params, tr_tensor **grads, tr_tensor **m, tr_tensor **v,
                            tr_tensor **half_copies, const int32_t *decay, int n, const tr_tensor *skip_if, float lr,
                            float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale,
                            const tr_tensor *skipped, int64_t skipped_known);

#endif
