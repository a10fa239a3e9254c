/* ops_optim.h — the fused optimizer steps, one parameter a call: AdamW (torch.optim.AdamW),
 * SGD with momentum and Nesterov (torch.optim.SGD) and Adafactor
 * (transformers.optimization.Adafactor); the steps over a whole list of parameters are in
 * ops_multi_tensor.h. Same contract as ops_elementwise.h: the caller owns
 * every tensor (state tensors are f32, tag optimizer, zero before the first step), all
 * tensors of a call are on one device, errors are TR_EUSER naming the op and argument.
 * The master parameter is f32 and updated in place (=); the gradient may be f32, bf16
 * or f16 and is read only; half_copy (bf16 or f16, optional) receives the new parameter
 * (the half weight a mixed-precision forward reads; a skipped step leaves it alone). grad_scale divides the gradient
 * (the loss scale it still carries; 1 when none). step counts from 1.
 *
 * SGD and Adafactor can be skipped and their step number corrected where the fp16 loss scale
 * lives, so that a step on a GPU reads nothing back (as tr_op_adamw_multi_steps,
 * ops_multi_tensor.h): skip_if (1-element i32, may be NULL) nonzero leaves every tensor
 * as it was (param, the state, half_copy); skipped (1-element i32, may be NULL: the step
 * is `step`) is the device loss scale's skip count, and the step the update uses is
 * step - (skipped[0] - skipped_known), skipped_known being the count the host last read
 * (its step counts leave those skips out and still count the later ones). On the CPU both
 * are read directly; on CUDA the kernels read them (an effective step below 1, which the
 * CPU refuses, counts as 1 there: a device cannot report it without a read). */
#ifndef TR_OPS_OPTIM_H
#define TR_OPS_OPTIM_H

#include "tensor.h"

/* ------------------------------------------------------------ adamw */

/* One torch.optim.AdamW step in place on param (f32), m and v (f32, zero before step 1):
 * g = grad / grad_scale (grad f32, bf16 or f16; grad_scale 1 when the gradients carry no
 * loss scale); param -= lr * weight_decay * param; m = beta1 m + (1 - beta1) g;
 * v = beta2 v + (1 - beta2) g^2; param -= lr / (1 - beta1^step) * m /
 * (sqrt(v) / sqrt(1 - beta2^step) + eps). step counts from 1. When half_copy is not NULL
 * (bf16 or f16, param's numel) it receives the new param (=): the half weight the
 * forward reads. */
int tr_op_adamw(tr_ctx *ctx, tr_tensor *param, const tr_tensor *grad, tr_tensor *m, tr_tensor *v,
                tr_tensor *half_copy, float lr, float beta1, float beta2, float eps, float weight_decay,
                int64_t step, float grad_scale);

/* ------------------------------------------------------------ sgd */

/* One torch.optim.SGD step: d = g + weight_decay * param (coupled L2); with momentum != 0,
 * buf = d at (effective) step 1 and momentum * buf + (1 - dampening) * d after, then
 * d = buf, or d + momentum * buf with nesterov (which needs dampening 0, as torch checks);
 * param -= lr * d. momentum_buf (f32, param's numel) is required when momentum != 0 and
 * ignored (may be NULL) otherwise. */
int tr_op_sgd(tr_ctx *ctx, tr_tensor *param, const tr_tensor *grad, tr_tensor *momentum_buf, tr_tensor *half_copy,
              float lr, float momentum, float dampening, float weight_decay, int32_t nesterov, int64_t step,
              float grad_scale, const tr_tensor *skip_if, const tr_tensor *skipped, int64_t skipped_known);

/* ------------------------------------------------------------ adafactor */

/* transformers' Adafactor arguments. Its defaults: lr unused (relative_step = 1),
 * eps1 1e-30, eps2 1e-3, clip_threshold 1, decay_rate -0.8, no first moment,
 * weight_decay 0, relative_step = scale_parameter = 1, warmup_init = 0. With an explicit
 * lr: relative_step = scale_parameter = warmup_init = 0. */
typedef struct tr_adafactor_config {
    float lr;
    float eps1;
    float eps2;
    float clip_threshold;
    float decay_rate;
    float beta1;             /* < 0: no first moment (transformers' beta1=None) */
    float weight_decay;
    int32_t relative_step;
    int32_t scale_parameter;
    int32_t warmup_init;
} tr_adafactor_config;

/* One Adafactor step. A parameter of 2 or more dims [..., R, C] is factored: row holds
 * numel / C elements (shape[:-1]), col numel / R (shape[:-2] + [C]), v is NULL. Otherwise
 * v has param's numel and row, col are NULL. exp_avg (param's numel) is given exactly when
 * cfg->beta1 >= 0. The relative step size and beta2 come from the effective step. *lr_used
 * (host, may be NULL) receives the learning rate the step applied (relative step times the
 * parameter-RMS scale, or cfg->lr; 0 when skip_if skipped the step); on a device asking for
 * it waits for the step, so a training step passes NULL. */
int tr_op_adafactor(tr_ctx *ctx, tr_tensor *param, const tr_tensor *grad, tr_tensor *exp_avg, tr_tensor *row,
                    tr_tensor *col, tr_tensor *v, tr_tensor *half_copy, const tr_adafactor_config *cfg,
                    int64_t step, float grad_scale, float *lr_used, const tr_tensor *skip_if,
                    const tr_tensor *skipped, int64_t skipped_known);

#endif
