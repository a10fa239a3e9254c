/* ops_dropout.h — dropout with masks drawn from the counter-based RNG, never stored. Contract:
 * ops_elementwise.h. */
#ifndef TR_OPS_DROPOUT_H
#define TR_OPS_DROPOUT_H

#include "tensor.h"
#include "rng.h"

/* out = x * keep / (1 - p) (=), keep[i] = uniform(key, offset + i) >= p (core/base/rng.h);
 * element i of x draws stream element offset + i. p = 0 copies; p = 1 gives zeros.
 * The mask is never stored: the backward regenerates it from (key, offset).
 * out may alias x. */
int tr_op_dropout(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float p, const tr_rng_key *key,
                  uint64_t offset);
/* dx = dout * keep / (1 - p) (=) with the forward's key and offset. */
int tr_op_dropout_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, float p, const tr_rng_key *key,
                           uint64_t offset);

#endif
