/* loss.h — CPU cross-entropy on logits [N, K] with int64 targets (ignore_index rows
 * excluded, optional label smoothing), _f32 and _f64. The forward saves only lse [N];
 * the backward recomputes the softmax from it. Gradient contract: cross_entropy_backward
 * OVERWRITES dlogits. */
#ifndef TR_KERNELS_CPU_LOSS_H
#define TR_KERNELS_CPU_LOSS_H

#include <stdint.h>

int64_t tr_k_cross_entropy_fwd_f32(float *losses, float *lse, const float *logits, const int64_t *targets,
                                  int64_t N, int64_t K, int64_t ignore_index, float label_smoothing);
int64_t tr_k_cross_entropy_fwd_f64(double *losses, double *lse, const double *logits, const int64_t *targets,
                                  int64_t N, int64_t K, int64_t ignore_index, double label_smoothing);
void tr_k_cross_entropy_bwd_f32(float *dlogits, const float *logits, const float *lse, const int64_t *targets,
                                float g, int64_t N, int64_t K, int64_t ignore_index, float label_smoothing);
void tr_k_cross_entropy_bwd_f64(double *dlogits, const double *logits, const double *lse,
                                const int64_t *targets, double g, int64_t N, int64_t K, int64_t ignore_index,
                                double label_smoothing);

#endif
