/* ops_elem.h — tensor-level ops outside the network layers: elementwise arithmetic,
 * embedding lookup, dropout, cross-entropy, masked pooling, L2 normalisation and
 * cosine similarity, reductions and casts.
 *
 * Contract shared by every op here:
 *   - outputs come first and are allocated by the caller (who owns their lifetime and
 *     tag); inputs follow, then scalars;
 *   - every tensor of one call is on one device (TR_EUSER otherwise); every op is
 *     in the op table (core/ops/op_table.h), a device without a slot answers TR_EUSER;
 *   - activations may be f32, bf16 or f16 (each tensor independently); the CPU computes
 *     in f32 (reductions accumulate in f32 or better) and converts on the way in and out,
 *     through workspace blocks that are returned before the op returns;
 *   - errors return TR_EUSER (or TR_EOOM from the allocator) with the message in
 *     tr_ctx_err(ctx), naming the op, the argument and its shape;
 *   - "(=)" marks outputs that are overwritten, "(+=)" those that accumulate. */
#ifndef TR_OPS_ELEM_H
#define TR_OPS_ELEM_H

#include "tensor.h"
#include "rng.h"

/* ------------------------------------------------------------ elementwise */

/* out = a + b, out = a * b (=). b has a's shape, or is a vector [C] (C = a's last dim)
 * broadcast over a's rows. out has a's number of elements. out may alias a. */
int tr_op_add(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b);
int tr_op_mul(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b);
/* da = dout * b (=), db = dout * a (=, summed over rows when b was broadcast); da or db
 * may be NULL. */
int tr_op_mul_backward(tr_ctx *ctx, tr_tensor *da, tr_tensor *db, const tr_tensor *dout, const tr_tensor *a,
                       const tr_tensor *b);
/* out = alpha * x (=); out may alias x. */
int tr_op_scale(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float alpha);
/* y += alpha * x (+=). */
int tr_op_axpy(tr_ctx *ctx, tr_tensor *y, const tr_tensor *x, float alpha);
/* out = value (=). */
int tr_op_fill(tr_ctx *ctx, tr_tensor *out, float value);

/* ------------------------------------------------------------ embedding */

/* out[n, :] = table[ids[n], :] (=). ids i32 or i64 of any shape (N elements); table
 * [V, C]; out has N*C elements with last dim C. An id outside [0, V) is TR_EUSER
 * naming the id, its position and V. */
int tr_op_embedding(tr_ctx *ctx, tr_tensor *out, const tr_tensor *ids, const tr_tensor *table);
/* dtable[ids[n], :] += dout[n, :] (+=) for every id != padding_idx (padding_idx < 0:
 * none). Deterministic (no atomics, a fixed summation order). */
int tr_op_embedding_backward(tr_ctx *ctx, tr_tensor *dtable, const tr_tensor *dout, const tr_tensor *ids,
                             int64_t padding_idx);

/* ------------------------------------------------------------ dropout */

/* out = x * keep / (1 - p) (=), keep[i] = uniform(key, offset + i) >= p (core/base/rng.h);
 * element i of x draws stream element offset + i. p = 0 copies; p = 1 gives zeros.
 * The mask is never stored: the backward regenerates it from (key, offset).
 * out may alias x. */
int tr_op_dropout(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float p, const tr_rng_key *key,
                  uint64_t offset);
/* dx = dout * keep / (1 - p) (=) with the forward's key and offset. */
int tr_op_dropout_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, float p, const tr_rng_key *key,
                           uint64_t offset);

/* ------------------------------------------------------------ cross-entropy */

/* loss (=, f32, one element) = mean over rows n with targets[n] != ignore_index of
 *   (1 - ls) * (lse_n - logits[n, t_n]) + ls * (lse_n - mean_k logits[n, k])
 * (torch.nn.functional.cross_entropy with label_smoothing ls). logits [N, K] (any
 * leading dims, last dim K); targets i32/i64 with N elements, each in [0, K) or
 * ignore_index (torch's default is -100). lse (=, f32, N elements) is the row
 * log-sum-exp that the backward needs. All rows ignored gives loss 0 (torch gives NaN). */
int tr_op_cross_entropy(tr_ctx *ctx, tr_tensor *loss, tr_tensor *lse, const tr_tensor *logits,
                        const tr_tensor *targets, int64_t ignore_index, float label_smoothing);
/* dlogits (=) = dloss * d(loss)/d(logits); dlogits may alias logits. */
int tr_op_cross_entropy_backward(tr_ctx *ctx, tr_tensor *dlogits, float dloss, const tr_tensor *logits,
                                 const tr_tensor *lse, const tr_tensor *targets, int64_t ignore_index,
                                 float label_smoothing);

/* ------------------------------------------------------------ pooling */

/* sentence-transformers' pooling modes. */
typedef enum tr_pool_mode {
    TR_POOL_MEAN = 0,          /* mean over kept tokens */
    TR_POOL_CLS = 1,           /* token 0 */
    TR_POOL_MAX = 2,           /* per-channel max over kept tokens */
    TR_POOL_MEAN_SQRT_LEN = 3  /* sum over kept tokens / sqrt(number kept) */
} tr_pool_mode;

/* out [B, C] (=) from hidden [B, T, C] and the attention mask [B, T] (i32, i64 or a
 * float dtype; non-zero = real token; NULL = every token real). Rows without a kept
 * token pool to 0. */
int tr_op_pool(tr_ctx *ctx, tr_tensor *out, const tr_tensor *hidden, const tr_tensor *mask, int mode);
/* dhidden [B, T, C] (=); padding positions get 0; max sends the gradient to the first
 * maximal token. */
int tr_op_pool_backward(tr_ctx *ctx, tr_tensor *dhidden, const tr_tensor *dout, const tr_tensor *hidden,
                        const tr_tensor *mask, int mode);

/* ------------------------------------------------------------ normalisation, similarity */

/* out = x / max(||x||, eps) over the last dim (=) (torch.nn.functional.normalize; eps
 * 1e-12 there). out may alias x. */
int tr_op_l2norm(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float eps);
/* dx (=) from dout, recomputing the norms from x. */
int tr_op_l2norm_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *x, float eps);
/* sim [N, M] (=) = normalize(a) normalize(b)^T with eps 1e-12; a [N, C], b [M, C]. */
int tr_op_cosine_sim(tr_ctx *ctx, tr_tensor *sim, const tr_tensor *a, const tr_tensor *b);
/* da [N, C] (=), db [M, C] (=), either may be NULL; the normalisation is recomputed. */
int tr_op_cosine_sim_backward(tr_ctx *ctx, tr_tensor *da, tr_tensor *db, const tr_tensor *dsim,
                              const tr_tensor *a, const tr_tensor *b);

/* ------------------------------------------------------------ reductions */

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

/* ------------------------------------------------------------ casts */

/* out (=) = in converted to out's dtype (any of the five); equal numel. */
int tr_op_cast(tr_ctx *ctx, tr_tensor *out, const tr_tensor *in);

#endif
