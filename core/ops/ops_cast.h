/* ops_cast.h — dtype conversion. Contract: ops_elementwise.h. */
#ifndef TR_OPS_CAST_H
#define TR_OPS_CAST_H

#include "tensor.h"

/* out (=) = in converted to out's dtype (any of the five); equal numel. */
int tr_op_cast(tr_ctx *ctx, tr_tensor *out, const tr_tensor *in);

#endif
