/* loss.h — the cross-entropy kernels (loss.cu), the device twin of kernels/cpu/loss.h; host
 * launchers with C linkage and no CUDA types, under launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_LOSS_H
#define TR_KERNELS_CUDA_LOSS_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

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

TR_K_END_DECLS

#endif
