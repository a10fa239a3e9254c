/* score_loss.h — CPU kernels of the losses on scored pairs (sentence-transformers' CoSENTLoss
 * and CosineSimilarityLoss), over the pairs' cosines cos[B] (the diagonal of a cosine_sim
 * matrix) and gold scores y[B]. Each computes the loss and its gradient with respect to the
 * cosines in one pass, so the loss's backward needs nothing but the gradient. _f32 and _f64.
 * Gradient contract: dcos is OVERWRITTEN. */
#ifndef TR_KERNELS_CPU_SCORE_LOSS_H
#define TR_KERNELS_CPU_SCORE_LOSS_H

#include <stdint.h>

void tr_k_cosent_loss_f32(float *loss, float *dcos, const float *cos, const float *y, float scale, int64_t B);
void tr_k_cosent_loss_f64(double *loss, double *dcos, const double *cos, const double *y, double scale, int64_t B);
void tr_k_cosine_mse_loss_f32(float *loss, float *dcos, const float *cos, const float *y, float score_scale,
                              int64_t B);
void tr_k_cosine_mse_loss_f64(double *loss, double *dcos, const double *cos, const double *y, double score_scale,
                              int64_t B);

#endif
