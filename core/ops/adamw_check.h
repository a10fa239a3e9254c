/* adamw_check.h — the hyper-parameter checks tr_op_adamw and tr_op_adamw_multi share.
 * Internal to core/. */
#ifndef TR_ADAMW_CHECK_H
#define TR_ADAMW_CHECK_H

#include "tensor.h"

/* TR_EUSER, in op's name, unless step >= 1, betas in [0, 1), lr, eps and weight_decay >= 0,
 * and grad_scale finite and > 0. */
int tr_check_adamw_hparams(tr_ctx *ctx, const char *op, float lr, float beta1, float beta2, float eps,
                           float weight_decay, int64_t step, float grad_scale);

#endif
