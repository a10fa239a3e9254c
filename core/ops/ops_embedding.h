/* ops_embedding.h — the embedding lookup and its backward. Contract: ops_elementwise.h. */
#ifndef TR_OPS_EMBEDDING_H
#define TR_OPS_EMBEDDING_H

#include "tensor.h"

/* out[n, :] = table[ids[n], :] (=). ids i32 or i64 of any shape (N elements); table
 * [V, C]; out has N*C elements with last dim C. An id outside [0, V) is TR_EUSER
 * naming the id, its position and V. */
int tr_op_embedding(tr_ctx *ctx, tr_tensor *out, const tr_tensor *ids, const tr_tensor *table);
/* dtable[ids[n], :] += dout[n, :] (+=) for every id != padding_idx (padding_idx < 0:
 * none). Deterministic (no atomics, a fixed summation order). */
int tr_op_embedding_backward(tr_ctx *ctx, tr_tensor *dtable, const tr_tensor *dout, const tr_tensor *ids,
                             int64_t padding_idx);

#endif
