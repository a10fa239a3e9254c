/* cuda_nn.h — the CUDA kernels of the model's ops (layer norm, activations, softmax,
 * attention, embedding, dropout, losses, pooling, similarity, reductions, optimizers), as
 * host launchers with C linkage and no CUDA types, the device twins of kernels/cpu/.
 *
 * Contract (the same as cuda_ops.h, and the same gradient rules as the CPU kernels):
 *   - asynchronous on `stream` (a cudaStream_t); the caller made the device current;
 *   - pointers are device pointers; every float buffer comes with its own dtype `*_dt`
 *     (TR_F32, TR_BF16, TR_F16), as on the CPU each activation may differ; arithmetic and
 *     every reduction run in fp32 and round once to the output's dtype (RNE);
 *   - saved statistics (layernorm mean/rstd, attention and cross-entropy lse) and parameter
 *     gradients are f32; a gradient marked (+=) ACCUMULATES, (=) OVERWRITES, and a NULL
 *     gradient is skipped (a frozen parameter);
 *   - reductions are deterministic: a fixed tree per launch shape, never atomics on floats,
 *     so a run repeats bit for bit;
 *   - returns TR_OK, TR_EUSER (bad dtype or size: nothing launched) or TR_EINTERNAL (a
 *     launch failure, naming the op). Errors of a kernel's execution surface at the next
 *     synchronising call.
 * Sizes are int64 elements; N rows of C columns means row-major [N, C]. */
#ifndef TR_CUDA_NN_H
#define TR_CUDA_NN_H

#ifdef __cplusplus
extern "C" {
#endif
#include "tr_base.h"

/* ------------------------------------------------------------ layer norm (layernorm.cu) */

/* out[N,C] (=), mean[N] (=), rstd[N] (=) over the last dim, biased variance; weight[C] and
 * bias[C] (may be NULL) have dtype w_dt. */
int tr_k_layernorm_fwd_cuda(void *out, int out_dt, float *mean, float *rstd, const void *x, int x_dt,
                            const void *weight, const void *bias, int w_dt, int64_t N, int64_t C, float eps,
                            void *stream, tr_error *err);
/* Scratch (f32 elements) the backward needs for N x C: per-chunk column partial sums. */
int64_t tr_k_layernorm_bwd_scratch_cuda(int64_t N, int64_t C);
/* dx[N,C] (=) may be NULL; dweight[C], dbias[C] (+=, f32) may be NULL. `scratch` holds
 * tr_k_layernorm_bwd_scratch_cuda(N, C) floats (may be NULL when both are NULL). */
int tr_k_layernorm_bwd_cuda(void *dx, int dx_dt, float *dweight, float *dbias, const void *dout, int dout_dt,
                            const void *x, int x_dt, const void *weight, int w_dt, const float *mean,
                            const float *rstd, int64_t N, int64_t C, float *scratch, void *stream,
                            tr_error *err);

/* ------------------------------------------------------------ dropout + add + layernorm (dropout_add_layernorm.cu) */

/* sum[N,C] (=) = residual + dropout(x) (the dropped-out x rounded to x_dt, the sum to sum_dt,
 * as the unfused ops round them), out[N,C] (=) = layernorm(sum), mean[N], rstd[N] (=) f32;
 * the keep bits are tr_dropout_mask_bits's for the key (seed, step, layer, op) and stream
 * element offset + i (p = 0 keeps all and draws nothing); bias may be NULL. */
int tr_k_dropout_add_layernorm_fwd_cuda(void *out, int out_dt, void *sum, int sum_dt, float *mean, float *rstd,
                                        const void *x, int x_dt, const void *residual, int res_dt,
                                        const void *weight, const void *bias, int w_dt, int64_t N, int64_t C,
                                        float p, float eps, uint64_t seed, uint32_t step, uint32_t layer,
                                        uint32_t op, uint64_t offset, void *stream, tr_error *err);
/* dresidual[N,C] (=, dres_dt) = the layernorm's input gradient, dx[N,C] (=) = dropout_backward
 * of it with the forward's key; either may be NULL (dres_dt still names the dtype the
 * residual gradient is rounded to). dweight, dbias (+=, f32) may be NULL; `scratch` holds
 * tr_k_layernorm_bwd_scratch_cuda(N, C) floats when either is not. */
int tr_k_dropout_add_layernorm_bwd_cuda(void *dx, int dx_dt, void *dresidual, int dres_dt, float *dweight,
                                        float *dbias, const void *dout, int dout_dt, const void *sum, int sum_dt,
                                        const void *weight, int w_dt, const float *mean, const float *rstd,
                                        int64_t N, int64_t C, float p, uint64_t seed, uint32_t step, uint32_t layer,
                                        uint32_t op, uint64_t offset, float *scratch, void *stream, tr_error *err);

/* ------------------------------------------------------------ bias + GELU (bias_gelu.cu) */

/* h[N,I] (in place) = h + bias[I] (bias may be NULL), out[N,I] (=) = gelu of that fp32 value;
 * approx 0 = erf, 1 = tanh. */
int tr_k_bias_gelu_fwd_cuda(void *out, int out_dt, void *h, int h_dt, const void *bias, int b_dt, int64_t N, int64_t I,
                            int approx, void *stream, tr_error *err);
/* dx[N,I] (=) = dout * gelu'(h); dbias[I] (+=, f32, may be NULL) += the column sums of dx. */
int tr_k_bias_gelu_bwd_cuda(void *dx, int dx_dt, float *dbias, const void *dout, int dout_dt, const void *h, int h_dt,
                            int64_t N, int64_t I, int approx, void *stream, tr_error *err);

/* ------------------------------------------------------------ activations (activation.cu) */

/* out[n] (=) = gelu(x), approx 0 = erf, 1 = tanh (TR_GELU_ERF / TR_GELU_TANH); out may be x. */
int tr_k_gelu_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t n, int approx, void *stream,
                       tr_error *err);
/* dx[n] (=) = dout * gelu'(x); dx may be dout. */
int tr_k_gelu_bwd_cuda(void *dx, int dx_dt, const void *dout, int dout_dt, const void *x, int x_dt, int64_t n,
                       int approx, void *stream, tr_error *err);
/* out[n] (=) = tanh(x). */
int tr_k_tanh_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t n, void *stream, tr_error *err);
/* dx[n] (=) = dout * (1 - y^2), y the forward's output. */
int tr_k_tanh_bwd_cuda(void *dx, int dx_dt, const void *dout, int dout_dt, const void *y, int y_dt, int64_t n,
                       void *stream, tr_error *err);

/* ------------------------------------------------------------ softmax (softmax.cu) */

/* out[N,C] (=) = softmax over the last dim (max-subtracted). */
int tr_k_softmax_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t N, int64_t C, void *stream,
                          tr_error *err);
/* dx[N,C] (=) = y * (dout - sum_c dout * y). */
int tr_k_softmax_bwd_cuda(void *dx, int dx_dt, const void *dout, int dout_dt, const void *y, int y_dt, int64_t N,
                          int64_t C, void *stream, tr_error *err);

/* ------------------------------------------------------------ dropout (dropout.cu) */

/* out[i] (=) = x[i] * keep(offset + i) / (1 - p), the keep bits those of core/base/rng.h's
 * tr_dropout_mask_bits for the key (seed, step, layer, op): bit-identical to the CPU, so
 * the backward (the same call on dout) and a recomputation regenerate the mask. p in [0, 1]. */
int tr_k_dropout_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t n, float p, uint64_t seed,
                      uint32_t step, uint32_t layer, uint32_t op, uint64_t offset, void *stream, tr_error *err);
/* keep[i] (=) = 1 or 0, exactly tr_dropout_mask_bits (for tests and masks kept by choice). */
int tr_k_dropout_mask_cuda(uint8_t *keep, int64_t n, float p, uint64_t seed, uint32_t step, uint32_t layer,
                           uint32_t op, uint64_t offset, void *stream, tr_error *err);

/* ------------------------------------------------------------ index checks (index_check.cu) */

/* The device's error word (one per device, core/device/cuda_device.h): the first bad index an
 * op's check found, 0 in op while there is none. The ops that check (tr_k_index_op) are named
 * by the host when it reads the word (core/device/device_errors.c). */
typedef struct tr_k_index_error {
    int64_t op;            /* 0: no error; else a tr_k_index_op */
    int64_t value;         /* the bad index */
    int64_t position;      /* its position among the op's indices (flattened) */
    int64_t limit;         /* the valid indices are [0, limit) */
    int64_t ignore_index;  /* cross-entropy's: also valid */
} tr_k_index_error;

typedef enum tr_k_index_op {
    TR_K_INDEX_EMBEDDING = 1,
    TR_K_INDEX_EMBEDDING_BACKWARD = 2,
    TR_K_INDEX_CROSS_ENTROPY = 3,
    TR_K_INDEX_CROSS_ENTROPY_BACKWARD = 4
} tr_k_index_op;

/* out[n] (=, int64) = idx[n] (i32 or i64), each bad index (outside [0, limit) and not the
 * ignore index when has_ignore) replaced by the ignore index (has_ignore) or -1; *count (=,
 * may be NULL) = the indices neither bad nor ignored; the first bad one goes into *word
 * (op, value, position, limit, ignore_index) unless word->op is set already. One block:
 * nothing waits for the host. */
int tr_k_check_indices_cuda(int64_t *out, const void *idx, int idx_dt, int64_t n, int64_t limit,
                            int64_t ignore_index, int has_ignore, int64_t *count, tr_k_index_error *word,
                            int64_t op, void *stream, tr_error *err);

/* ------------------------------------------------------------ embedding (embedding.cu) */

/* out[N,C] (=) = table[ids[n], :]; ids int64 in [0, V) or -1 (a bad id the op's device check
 * replaced: its row is 0). */
int tr_k_embedding_fwd_cuda(void *out, int out_dt, const int64_t *ids, const void *table, int table_dt, int64_t N,
                            int64_t C, void *stream, tr_error *err);
/* dtable[V,C] (+=, f32) += dout[n, :] at row ids[n], rows equal to padding_idx skipped
 * (padding_idx < 0: none) and ids of -1 (bad ids, above) skipped. Deterministic: each thread
 * owns one column and walks the tokens in order. */
int tr_k_embedding_bwd_cuda(float *dtable, const void *dout, int dout_dt, const int64_t *ids, int64_t N, int64_t C,
                            int64_t padding_idx, void *stream, tr_error *err);

/* ------------------------------------------------------------ pooling (pooling.cu) */

/* out[B,C] (=) from hidden[B,T,C] and mask[B,T] (i32, nonzero = token); mode 0 mean,
 * 1 cls, 2 max, 3 mean_sqrt_len (kernels/cpu/pooling.h's semantics, ties to the first). */
int tr_k_pool_fwd_cuda(void *out, int out_dt, const void *hidden, int hidden_dt, const int32_t *mask, int64_t B,
                       int64_t T, int64_t C, int mode, void *stream, tr_error *err);
/* dhidden[B,T,C] (=); hidden is read by the max mode only (may be NULL otherwise). */
int tr_k_pool_bwd_cuda(void *dhidden, int dh_dt, const void *dout, int dout_dt, const void *hidden, int hidden_dt,
                       const int32_t *mask, int64_t B, int64_t T, int64_t C, int mode, void *stream,
                       tr_error *err);

/* ------------------------------------------------------------ similarity (similarity.cu) */

/* out[N,C] (=) = x / max(||x||, eps) per row (torch.nn.functional.normalize). */
int tr_k_l2norm_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t N, int64_t C, float eps,
                         void *stream, tr_error *err);
/* dx[N,C] (=). */
int tr_k_l2norm_bwd_cuda(void *dx, int dx_dt, const void *dout, int dout_dt, const void *x, int x_dt, int64_t N,
                         int64_t C, float eps, void *stream, tr_error *err);
/* The cosine-similarity matrix is a product of normalised rows: the op runs it through
 * tr_cuda_gemm (sim = an bn^T; dan = dsim bn; dbn = dsim^T an). */

/* ------------------------------------------------------------ features (features.cu) */

/* dst[:, dst_col : dst_col + ncols] (= or += with accumulate) = src[:, src_col : ...], N rows. */
int tr_k_copy_cols_cuda(void *dst, int dst_dt, const void *src, int src_dt, int64_t N, int64_t dst_C,
                        int64_t dst_col, int64_t src_C, int64_t src_col, int64_t ncols, int accumulate,
                        void *stream, tr_error *err);
/* out[n] (=) = |a - b| */
int tr_k_abs_diff_fwd_cuda(void *out, int out_dt, const void *a, int a_dt, const void *b, int b_dt, int64_t n,
                           void *stream, tr_error *err);
/* da (=) = dout * sign(a - b), db (=) = -da; either may be NULL. */
int tr_k_abs_diff_bwd_cuda(void *da, int da_dt, void *db, int db_dt, const void *dout, int dout_dt, const void *a,
                           int a_dt, const void *b, int b_dt, int64_t n, void *stream, tr_error *err);

/* ------------------------------------------------------------ cross-entropy (loss.cu) */

/* losses[N] (=, f32), lse[N] (=, f32), both 0 on ignored rows; *count (=, device int64) the
 * rows not ignored, so the mean's divisor never crosses to the host. targets int64. */
int tr_k_cross_entropy_fwd_cuda(float *losses, float *lse, int64_t *count, const void *logits, int logits_dt,
                                const int64_t *targets, int64_t N, int64_t K, int64_t ignore_index,
                                float label_smoothing, void *stream, tr_error *err);
/* dlogits[N,K] (=) = g_scale * g / count * (softmax - (1-ls) onehot - ls/K), with g the
 * upstream gradient (a host float) and count the forward's device counter (0 -> 0). */
int tr_k_cross_entropy_bwd_cuda(void *dlogits, int dl_dt, const void *logits, int logits_dt, const float *lse,
                                const int64_t *targets, const int64_t *count, float g, int64_t N, int64_t K,
                                int64_t ignore_index, float label_smoothing, void *stream, tr_error *err);
/* *out (=, one element of out_dt) = *sum * (1 / *count) in f32, 0 when *count is 0: the mean
 * over the rows not ignored, with the divisor read on the device. */
int tr_k_mean_by_count_cuda(void *out, int out_dt, const float *sum, const int64_t *count, void *stream,
                            tr_error *err);

/* ------------------------------------------------------------ scored pairs (score_loss.cu) */

/* *loss (=, f32) and dsim[B,B] (=, f32, zero off the diagonal) from sim[B,B]'s diagonal and the
 * device scores y[B]: kind 0 CoSENT (k = scale), 1 the cosine MSE (k = score_scale). One block. */
int tr_k_score_loss_cuda(float *loss, float *dsim, const void *sim, int sim_dt, const float *y, float k, int64_t B,
                         int kind, void *stream, tr_error *err);

/* ------------------------------------------------------------ reductions (reduce.cu) */

/* One tensor of a multi-tensor launch: the list lives in device memory. */
typedef struct tr_k_tensor_ref {
    void *data;
    int64_t n;
    int32_t dtype;
    int32_t flags;              /* optimizer: bit 0 = apply weight decay */
} tr_k_tensor_ref;

/* Scratch (f32 elements) for a reduction over n values. */
int64_t tr_k_reduce_scratch_cuda(int64_t n);
/* *out (=, device f32) = sum of x[0..n) (squares when `squares`), in a fixed order. */
int tr_k_sum_cuda(float *out, const void *x, int x_dt, int64_t n, int squares, float *scratch, void *stream,
                  tr_error *err);
/* out[N] (=, out_dt) = row sums of x[N, C]. */
int tr_k_sum_lastdim_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t N, int64_t C, void *stream,
                          tr_error *err);
/* Multi-tensor launches take the list (device memory), its length and max_n, the largest
 * n in it (the host knows both when it builds the list). */
/* Scratch (f32 elements) for a global norm over `ntensors` tensors, the largest of max_n. */
int64_t tr_k_global_sumsq_scratch_cuda(int64_t ntensors, int64_t max_n);
/* *out (=, device f32) = sum over every listed tensor of its squared elements, in one
 * launch plus one final block (clipping's global norm, without a host round trip). */
int tr_k_global_sumsq_cuda(float *out, const tr_k_tensor_ref *list, int64_t ntensors, int64_t max_n,
                           float *scratch, void *stream, tr_error *err);
/* x[i] (=) *= scale for every listed tensor; *found_inf (device int32) set to 1 when any
 * scaled value is inf or NaN, left alone otherwise (the caller zeroes it once per step). */
int tr_k_scale_check_cuda(const tr_k_tensor_ref *list, int64_t ntensors, int64_t max_n, float scale,
                          int32_t *found_inf, void *stream, tr_error *err);
/* x[i] (=) *= *scale_dev (a device scalar: the clip coefficient computed on the device
 * from the norm), for every listed tensor: clipping without a host round trip. */
/* scale_check's launch with the factor read from a device f32 (the loss scaler's 1/scale). */
int tr_k_scale_by_device_check_cuda(const tr_k_tensor_ref *list, int64_t ntensors, int64_t max_n,
                                    const float *scale_dev, int32_t *found_inf, void *stream, tr_error *err);
int tr_k_scale_by_device_cuda(const tr_k_tensor_ref *list, int64_t ntensors, int64_t max_n,
                              const float *scale_dev, void *stream, tr_error *err);
/* *coef (=) = min(1, max_norm / (sqrt(*sumsq) + 1e-6)) and *norm (=) = sqrt(*sumsq), as
 * torch.nn.utils.clip_grad_norm_; one thread. */
int tr_k_clip_coef_cuda(float *coef, float *norm, const float *sumsq, float max_norm, void *stream, tr_error *err);

/* ------------------------------------------------------------ optimizers (optim.cu) */

/* One parameter of a multi-tensor optimizer launch (device memory): the fp32 master,
 * its f32 gradient, the moments, and an optional half copy refreshed after the update. */
typedef struct tr_k_param_ref {
    float *param;
    const float *grad;
    float *m;                   /* AdamW first moment / SGD momentum buffer (may be NULL for SGD) */
    float *v;                   /* AdamW second moment (NULL for SGD) */
    void *half;                 /* NULL, or the bf16/f16 copy that the forward reads */
    int64_t n;
    int32_t half_dt;
    int32_t decay;              /* 1: apply weight decay */
} tr_k_param_ref;

typedef struct tr_k_adamw_args {
    float lr, beta1, beta2, eps, weight_decay;
    float bias_c1;              /* 1 - beta1^step, computed by the host in double as the CPU */
    float bias_c2_sqrt;         /* sqrt(1 - beta2^step), likewise */
    float inv_grad_scale;       /* 1 / the loss scale the gradients still carry (1: none) */
    const int32_t *skip;        /* device flag: nonzero skips the step (fp16 overflow); NULL = never */
    /* the device loss scale's skip count (NULL: bias_c1/bias_c2_sqrt as given): the step is
     * step - (*skipped - skipped_known) and the corrections come from it on the device, so
     * steps skipped since the host last read the count need no read */
    const int32_t *skipped;
    int64_t step, skipped_known;
} tr_k_adamw_args;

/* torch.optim.AdamW on every listed parameter in one launch (kernels/cpu/adamw.h's
 * formula): g = grad * inv_grad_scale, p *= 1 - lr wd, m = b1 m + (1-b1) g,
 * v = b2 v + (1-b2) g^2, p -= lr / c1 * m / (sqrt(v) / c2_sqrt + eps); then the half copy,
 * when listed, is refreshed from p. max_n = the largest n in the list. */
int tr_k_adamw_cuda(const tr_k_param_ref *list, int64_t nparams, int64_t max_n, const tr_k_adamw_args *args,
                    void *stream, tr_error *err);

typedef struct tr_k_sgd_args {
    float lr, momentum, dampening, weight_decay;
    float inv_grad_scale;
    int32_t nesterov;
    int32_t first_step;         /* 1: the momentum buffer starts as the gradient (torch) */
    const int32_t *skip;        /* device flag: nonzero skips the step (fp16 overflow); NULL = never */
    /* the device loss scale's skip count (NULL: first_step as given): the step is
     * step - (*skipped - skipped_known) (at least 1), first_step is whether it is 1 */
    const int32_t *skipped;
    int64_t step, skipped_known;
} tr_k_sgd_args;

/* torch.optim.SGD (coupled weight decay, momentum, dampening, Nesterov); m is the
 * momentum buffer (NULL when momentum is 0). A set skip flag leaves every listed tensor
 * as it was. */
int tr_k_sgd_cuda(const tr_k_param_ref *list, int64_t nparams, int64_t max_n, const tr_k_sgd_args *args,
                  void *stream, tr_error *err);

/* ------------------------------------------------------------ attention (attention.cu) */

/* q, k, v, out [B,T,H,D] of dtype dt; lse [B,H,T] (=, f32, -inf for a row whose keys are
 * all padded: its out is 0); mask [B,T] of mask_dt (TR_I32 or TR_F32, nonzero = keep) or
 * NULL; dropout p on the probabilities with the key (seed, step, layer, op) and stream
 * index ((b*H + h)*T + i)*T + j, as kernels/cpu/attention.h, so the masks are the CPU's.
 * Any D <= 128 (kernels for 32, 64 and 128 lanes of registers).
 * Flash-style: one warp per query row, keys streamed through shared memory in tiles of
 * 32 with an online softmax in fp32; nothing of size T x T is ever stored. */
int tr_k_attention_fwd_cuda(void *out, float *lse, const void *q, const void *k, const void *v, int dt,
                            const void *mask, int mask_dt, float p, uint64_t seed, uint32_t step, uint32_t layer,
                            uint32_t op, float scale, int64_t B, int64_t T, int64_t H, int64_t D, void *stream,
                            tr_error *err);
/* Scratch (f32 elements) of the backward: the row terms delta = dout . out, [B,H,T]. */
int64_t tr_k_attention_bwd_scratch_cuda(int64_t B, int64_t T, int64_t H);
/* dq, dk, dv [B,T,H,D] (=), dtype dt; out and lse are the forward's (the op recomputes out
 * into workspace when it was not kept). dK and dV: one warp per key row; dQ: one warp per
 * query row; no atomics, so the gradients repeat bit for bit. */
int tr_k_attention_bwd_cuda(void *dq, void *dk, void *dv, const void *dout, const void *out, const void *q,
                            const void *k, const void *v, int dt, const float *lse, const void *mask, int mask_dt,
                            float p, uint64_t seed, uint32_t step, uint32_t layer, uint32_t op, float scale,
                            int64_t B, int64_t T, int64_t H, int64_t D, float *scratch, void *stream,
                            tr_error *err);

/* ------------------------------------------------------------ adafactor (adafactor.cu) */

typedef struct tr_k_adafactor_args {
    double rel;                 /* the step size before scale_parameter: lr, or the relative step */
    float eps1, eps2, clip_threshold, beta1, weight_decay;
    float beta2t;               /* 1 - t^decay_rate, computed by the host in double as the CPU */
    float grad_scale;           /* the loss scale the gradients still carry (1: none) */
    int32_t scale_parameter;
    const int32_t *skip;        /* device flag: nonzero skips the step (fp16 overflow); NULL = never */
    /* the device loss scale's skip count (NULL: rel and beta2t as given): t = step -
     * (*skipped - skipped_known) (at least 1), and beta2t = 1 - t^decay_rate and, with
     * relative_step, rel = min(warmup_init ? 1e-6 t : 1e-2, 1 / sqrt(t)) come from t on the
     * device, in double as the host computes them */
    const int32_t *skipped;
    int64_t step, skipped_known;
    double decay_rate;
    int32_t relative_step, warmup_init;
} tr_k_adafactor_args;

/* Scratch (f32 elements) of an Adafactor step over B matrices [R, C] (a vector: B = R = 1). */
int64_t tr_k_adafactor_scratch_cuda(int64_t B, int64_t R, int64_t C);
/* One transformers Adafactor step in place (kernels/cpu/sgd_adafactor_impl.h's formula):
 * param, exp_avg (NULL: beta1 None), row [B*R] and col [B*C] (factored) or v [n] (row and
 * col NULL), all f32 (+= / updated), grad f32; half (NULL, or n elements of half_dt)
 * receives the new param. *lr_out (device f32, may be NULL) receives the learning rate
 * used (0 on a skipped step). A set skip flag leaves every tensor as it was. */
int tr_k_adafactor_cuda(float *param, float *exp_avg, float *row, float *col, float *v, void *half, int half_dt,
                        const float *grad, int64_t B, int64_t R, int64_t C, const tr_k_adafactor_args *args,
                        float *scratch, float *lr_out, void *stream, tr_error *err);

/* ------------------------------------------------------------ op support (op_support.cu) */
/* The small kernels the op table's CUDA slots (core/cuda_ops/) need besides the above. */

/* out[N,C] (=) = a (+ or * with is_mul) b, b [N,C] or a vector [C] broadcast over the rows. */
int tr_k_binary_bcast_cuda(void *out, int out_dt, const void *a, int a_dt, const void *b, int b_dt, int64_t N,
                           int64_t C, int b_broadcast, int is_mul, void *stream, tr_error *err);
/* da (=) = dout * b; db (=) = dout * a, or its column sums when b was broadcast; either NULL. */
int tr_k_mul_bwd_cuda(void *da, int da_dt, void *db, int db_dt, const void *dout, int dout_dt, const void *a,
                      int a_dt, const void *b, int b_dt, int64_t N, int64_t C, int b_broadcast, void *stream,
                      tr_error *err);
/* out (=) = alpha * x, or out (+=) += alpha * x with accumulate; each its own dtype. */
int tr_k_scale_mixed_cuda(void *out, int out_dt, const void *x, int x_dt, float alpha, int64_t n, int accumulate,
                          void *stream, tr_error *err);
/* out[C] (+=, f32) += the column sums of x [N, C] (a bias gradient). */
int tr_k_colsum_acc_cuda(float *out, const void *x, int x_dt, int64_t N, int64_t C, void *stream, tr_error *err);
/* out (=) = in converted between any two of the five dtypes (core/tensor/convert.c's rules). */
int tr_k_cast_any_cuda(void *out, int out_dt, const void *in, int in_dt, int64_t n, void *stream, tr_error *err);
/* dst (device) = bytes of host memory src, through by-value kernel arguments (2 KiB per
 * launch): ordered on the stream, never waiting for it; src may be reused at once. */
int tr_k_upload_cuda(void *dst, const void *src, size_t bytes, void *stream, tr_error *err);
/* out[n] (=, i32) = mask != 0 (any dtype), or 1 everywhere when mask is NULL. */
int tr_k_mask_i32_cuda(int32_t *out, const void *mask, int mask_dt, int64_t n, void *stream, tr_error *err);

#ifdef __cplusplus
}
#endif

#endif
