/* ops_nn.h — tensor-level transformer-core ops: matmul, linear, layernorm, GELU, softmax
 * and scaled-dot-product attention, forward and backward.
 *
 * Contract shared by every op here:
 *   - outputs come first and are pre-allocated by the caller, who owns their lifetimes
 *     and tags; inputs follow, then scalars. Gradients say whether they OVERWRITE (=) or
 *     ACCUMULATE (+=); a NULL gradient is skipped (frozen parameters need none).
 *   - activations may be f32, bf16 or f16 (each tensor independently); on the CPU they are
 *     converted in chunks of rows to f32 scratch, the f32 kernel runs, results are
 *     converted back. Reductions are always in f32. Parameter gradients (dw, dbias,
 *     dweight) and the saved statistics (layernorm mean/rstd, attention lse) are f32.
 *   - all tensors must be on one device; scratch comes from that device's allocator
 *     with tag workspace and is released before the op returns.
 *   - errors: TR_EUSER with a message naming the op, the tensor and its shape (in the
 *     ctx's error); TR_EOOM when scratch could not be allocated. Nothing is written to
 *     the outputs when an argument check fails. */
#ifndef TR_OPS_NN_H
#define TR_OPS_NN_H

#include "tensor.h"
#include "rng.h"

/* GELU forms: BERT's "gelu" (erf) and "gelu_new" / "gelu_pytorch_tanh" (tanh); the gelu op
 * and its backward also take ReLU (DistilBERT's activation = "relu", its classification
 * head), which the fused bias / linear GELU ops do not. */
typedef enum tr_gelu_kind {
    TR_OP_GELU_ERF = 0,
    TR_OP_GELU_TANH = 1,
    TR_OP_ACT_RELU = 2
} tr_gelu_kind;

/* ------------------------------------------------------------ matmul, linear */

/* out[..., M, N] = alpha * op(a) op(b) + beta * out + bias[N] (bias may be NULL).
 * a is [..., M, K] ([..., K, M] when trans_a); b is [..., K, N] ([..., N, K] when trans_b)
 * with the same leading batch shape as a, or 2-D and then shared by every batch.
 * beta == 0 never reads out. */
int tr_op_matmul(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b,
                 const tr_tensor *bias, int trans_a, int trans_b, float alpha, float beta);

/* out[..., O] = x[..., I] w[O, I]^T + bias[O] (bias may be NULL). */
int tr_op_linear(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, const tr_tensor *w,
                 const tr_tensor *bias);
/* dx[..., I] (=) = dout w; dw[O, I] (+=) += dout^T x; dbias[O] (+=) += column sums of
 * dout. Each of dx, dw, dbias may be NULL; dw and dbias must be f32. */
int tr_op_linear_backward(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dw, tr_tensor *dbias,
                          const tr_tensor *dout, const tr_tensor *x, const tr_tensor *w);
/* linear_backward with the input gradient accumulated: dx[..., I] (+=) += dout w, in the
 * product itself (beta = 1: the sum rounds once, no temporary, no add pass); dx and w are
 * required, dw and dbias as above. For a layer whose input gradient sums several paths
 * (the residual, the attention's three projections, a LoRA adapter). */
int tr_op_linear_backward_acc(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dw, tr_tensor *dbias,
                              const tr_tensor *dout, const tr_tensor *x, const tr_tensor *w);

/* ------------------------------------------------------------ layernorm */

/* Over the last dim C of x[..., C]: out (=) like x; mean and rstd (=) f32 with numel
 * x.numel / C, saved for the backward; weight[C]; bias[C] may be NULL. */
int tr_op_layernorm(tr_ctx *ctx, tr_tensor *out, tr_tensor *mean, tr_tensor *rstd,
                    const tr_tensor *x, const tr_tensor *weight, const tr_tensor *bias,
                    float eps);
/* dx (=) may be NULL; dweight and dbias (+=, f32) may be NULL (frozen). */
int tr_op_layernorm_backward(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dweight, tr_tensor *dbias,
                             const tr_tensor *dout, const tr_tensor *x, const tr_tensor *weight,
                             const tr_tensor *mean, const tr_tensor *rstd);

/* The end of a post-LN block fused (core/ops/dropout_add_layernorm.c):
 *   sum = residual + dropout(x, p, key, offset),  out = layernorm(sum, weight, bias, eps).
 * x, residual, out (=) and sum (=) are [..., C]; mean, rstd (=) f32 with one element per row;
 * bias may be NULL. The dropout stream is tr_op_dropout's for the same key and offset (the
 * same keep bits), and in half precision the dropped-out x and the sum are rounded to x's
 * and sum's dtypes as the unfused ops round them; key may be NULL when p is 0. sum is what
 * the backward reads (the layernorm input); nothing else is kept, the mask is regenerated.
 * sum may be x (in place: x's storage becomes the sum); no other output may alias an input.
 * sum, mean and rstd may all be NULL (a forward no backward follows: a checkpoint's first
 * pass, inference): out is the same, the sum rounded to x's dtype; on CUDA the sum is then
 * never written (out holds the row until it is normalised). */
int tr_op_dropout_add_layernorm(tr_ctx *ctx, tr_tensor *out, tr_tensor *sum, tr_tensor *mean, tr_tensor *rstd,
                                const tr_tensor *x, const tr_tensor *residual, const tr_tensor *weight,
                                const tr_tensor *bias, float p, float eps, const tr_rng_key *key, uint64_t offset);
/* dresidual (=) = the layernorm's input gradient, dx (=) = dropout_backward(dresidual);
 * either may be NULL; dweight, dbias (+=, f32) may be NULL (frozen). sum, mean, rstd, p, key
 * and offset are the forward's. */
int tr_op_dropout_add_layernorm_backward(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dresidual, tr_tensor *dweight,
                                         tr_tensor *dbias, const tr_tensor *dout, const tr_tensor *sum,
                                         const tr_tensor *weight, const tr_tensor *mean, const tr_tensor *rstd,
                                         float p, const tr_rng_key *key, uint64_t offset);

/* ------------------------------------------------------------ activations */

/* out (=) = gelu(x), any shape; kind is a tr_gelu_kind. out may be x. */
int tr_op_gelu(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, int kind);
/* dx (=) = dout * gelu'(x). dx may be dout (in place: each element is read before it is written). */
int tr_op_gelu_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *x,
                        int kind);

/* The FFN's up-projection bias and GELU fused (core/ops/bias_gelu.c), after a GEMM run
 * without its bias: h[..., I] (updated in place) = h + bias[I] (bias may be NULL), out (=) =
 * gelu(h), kind a tr_gelu_kind. The backward: dx (=) = dout * gelu'(h) with the h the forward
 * left, dbias (+=, f32, may be NULL) += the column sums of dx, in the same pass. */
int tr_op_bias_gelu(tr_ctx *ctx, tr_tensor *out, tr_tensor *h, const tr_tensor *bias, int kind);
int tr_op_bias_gelu_backward(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dbias, const tr_tensor *dout, const tr_tensor *h,
                             int kind);

/* GeGLU's gate (core/ops/geglu.c): h[..., 2I] is [x | g], out[..., I] (=) = gelu(x) * g,
 * kind a tr_gelu_kind. The backward: dh[..., 2I] (=) = [dout * g * gelu'(x) | dout * gelu(x)]
 * from the forward's h. */
int tr_op_geglu(tr_ctx *ctx, tr_tensor *out, const tr_tensor *h, int kind);
int tr_op_geglu_backward(tr_ctx *ctx, tr_tensor *dh, const tr_tensor *dout, const tr_tensor *h, int kind);

/* Rotary position embedding (core/ops/rotary.c), rotate-half convention: out[B, T, H, D] (=)
 * = x rotated by the angles t / theta^(2i / D) of position t (the sequence index) and pair
 * (i, i + D/2); D even. The backward: dx (=) = dout rotated back. */
int tr_op_rotary(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float theta);
int tr_op_rotary_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, float theta);

/* out (=) = softmax over the last dim of x. */
int tr_op_softmax(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x);
/* dx (=) from dout and the forward's output y. */
int tr_op_softmax_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *y);

/* out (=) = tanh(x), any shape (the BERT pooler's activation). out may be x. */
int tr_op_tanh(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x);
/* dx (=) = dout * (1 - y^2) from the forward's OUTPUT y (no input needs saving). */
int tr_op_tanh_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *y);

/* ------------------------------------------------------------ attention */

/* q, k, v, out: [B, T, H, D] (the [B, T, H*D] Linear outputs reshaped, no transposes);
 * lse (=): [B, H, T] f32, the row log-sum-exp the backward needs (-inf for a row whose keys
 * are all padded; its out is 0). mask: [B, T] i32 or f32, nonzero = keep, 0 = pad; NULL =
 * none. scale <= 0 means 1/sqrt(D). dropout_p in [0, 1) on the attention probabilities,
 * drawn from key (element ((b*H + h)*T + i)*T + j of key's stream); key may be NULL when
 * dropout_p == 0. Memory: O(threads * 64 * T) scratch, never T x T per head.
 * rel_bias: NULL, or a relative-position bias table [num_buckets, H] (f32, or half: a frozen
 * table under bf16 / fp16; read in f32) (MPNet's and T5's
 * relative_attention_bias): the score of query i and key j of head h gains
 * rel_bias[bucket(j - i), h] after the scaling, bucket() being T5's bucketing of the relative
 * position with num_buckets (the table's rows: >= 4 bidirectional, >= 2 otherwise),
 * max_distance (above the exact buckets, num_buckets / 4 bidirectional, / 2 otherwise) and
 * bidirectional (0 or 1; 1: half the buckets for keys after the query;
 * kernels/cpu/attn_bucket.h); computed per pair inside the kernels, never a B x H x T x T
 * tensor. max_distance and bidirectional are ignored without a table.
 * window: 0 = every key; w > 0 = query i sees only keys j with |i - j| <= w (a local window,
 * ModernBERT's local_attention / 2).
 * query_rows: 0 (or T) = every query; 0 < n < T = only queries 0 .. n-1 of each sequence are
 * computed (a head that reads the first rows of the last layer): out's other rows are 0 and
 * lse's -inf; the kept rows' bits are the full call's. */
int tr_op_attention(tr_ctx *ctx, tr_tensor *out, tr_tensor *lse, const tr_tensor *q,
                    const tr_tensor *k, const tr_tensor *v, const tr_tensor *mask, float scale,
                    float dropout_p, const tr_rng_key *key, const tr_tensor *rel_bias,
                    int max_distance, int bidirectional, int window, int query_rows);
/* dq, dk, dv (=) [B, T, H, D]; mask, scale, dropout_p and key must be the forward's. out:
 * the forward's output [B, T, H, D] (the dropped-out P v, from the same q, k, v, mask and key),
 * or NULL. The backward's row terms delta_i = dout_i . out_i need it: CUDA reads it when given
 * and otherwise recomputes it into workspace (the same kernel, so the same bits either way);
 * the CPU takes delta from the probabilities and their gradient it forms anyway
 * (rowsum(P dP), the same sum) and reads no out. rel_bias, max_distance, bidirectional and
 * window must be the forward's; drel_bias (+=) [num_buckets, H] f32 accumulates the bias
 * table's gradient (the scores' gradient summed per bucket and head), or is NULL (no table,
 * or a frozen one). query_rows: the forward's; 0 < n < T: dout's rows past n are not read (dq's
 * are 0) and dk, dv are the first n rows' part, the full backward's bits when those rows of
 * dout are 0. */
int tr_op_attention_backward(tr_ctx *ctx, tr_tensor *dq, tr_tensor *dk, tr_tensor *dv,
                             const tr_tensor *dout, const tr_tensor *q, const tr_tensor *k,
                             const tr_tensor *v, const tr_tensor *out, const tr_tensor *lse,
                             const tr_tensor *mask, float scale, float dropout_p,
                             const tr_rng_key *key, tr_tensor *drel_bias, const tr_tensor *rel_bias,
                             int max_distance, int bidirectional, int window, int query_rows);

/* The sequence lengths of attention_packed (its tr_op_call's p). */
typedef struct tr_attn_lengths {
    int64_t B;              /* sequences */
    const int64_t *len;     /* B lengths, >= 0, on the host */
    int64_t T;              /* the padded layout's length (each len <= T), or 0: the longest */
} tr_attn_lengths;

/* Attention over nseq sequences stored back to back, forward only, no mask, no dropout:
 * q, k, v, out [N, H, D], N = the sum of lengths (host, nseq of them); sequence b is the
 * next lengths[b] rows and attends over its own rows. lse (=) f32 [H * N]: sequence b, head
 * h, query i at H*off_b + h*lengths[b] + i (off_b = the rows before b). padded_len: the
 * length T of the padded [nseq, T] layout these rows came from (every length <= T; 0 = the
 * longest): out then equals tr_op_attention's over that layout with a mask keeping each
 * row's prefix, on the real rows, bit for bit on the CPU (core/ops/attention_packed.c).
 * scale <= 0 means 1/sqrt(D). */
int tr_op_attention_packed(tr_ctx *ctx, tr_tensor *out, tr_tensor *lse, const tr_tensor *q,
                           const tr_tensor *k, const tr_tensor *v, const int64_t *lengths, int64_t nseq,
                           int64_t padded_len, float scale);

#endif
