/* ops_reduce.h — sums and means, the global norm and the loss scaler's unscale check. Contract:
 * ops_elementwise.h. */
#ifndef TR_OPS_REDUCE_H
#define TR_OPS_REDUCE_H

#include "tensor.h"

/* out (=) = the sum (mean) of every element of x (lastdim = 0; out has one element), or
 * over x's last dimension (lastdim = 1; out has numel / C elements). Pairwise sums in
 * f32 with chunk totals combined in f64: 1e6 bf16 elements keep f32 accuracy. */
int tr_op_sum(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, int lastdim);
int tr_op_mean(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, int lastdim);
/* *out = sqrt(sum of squares of every element of ts[0..n-1]) (gradient clipping). */
int tr_op_global_norm(tr_ctx *ctx, float *out, tr_tensor **ts, int n);
/* Every tensor of ts *= scale in place; *found_inf = 1 when any result is inf or NaN,
 * else 0 (the loss scaler's unscale step). */
int tr_op_scale_check_finite(tr_ctx *ctx, int *found_inf, tr_tensor **ts, int n, float scale);

#endif
