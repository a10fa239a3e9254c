/* layernorm_check.h — the argument checks layernorm and dropout_add_layernorm share (both
 * normalise the last dim of x with one weight and one mean and rstd per row). Internal to
 * core/. */
#ifndef TR_LAYERNORM_CHECK_H
#define TR_LAYERNORM_CHECK_H

#include "op_table.h"

/* x [..., C] (not a scalar) of N rows, weight [C], mean and rstd N elements each (or both
 * NULL: dropout_add_layernorm without its statistics); sets
 * call->dim[0] = N, dim[1] = C. N is the product of x's leading dims, or 0 when C is 0 and
 * empty_rows_when_c0 (dropout_add_layernorm's rule). */
int tr_check_layernorm_rows(tr_ctx *ctx, const char *op, tr_op_call *c, const tr_tensor *x, const tr_tensor *weight,
                            const tr_tensor *mean, const tr_tensor *rstd, int empty_rows_when_c0);

/* The optional [C] parameter tensors (bias, or dweight and dbias; NULL ones skipped), after
 * tr_check_layernorm_rows. */
int tr_check_layernorm_params(tr_ctx *ctx, const char *op, const tr_op_call *c, const char *const *names,
                              const tr_tensor *const *ts, int n);

#endif
