/* score_loss.h — the scored-pair loss kernel (score_loss.cu), the device twin of
 * kernels/cpu/score_loss.h; host launchers with C linkage and no CUDA types, under launcher.h's
 * contract. */
#ifndef TR_KERNELS_CUDA_SCORE_LOSS_H
#define TR_KERNELS_CUDA_SCORE_LOSS_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* *loss (=, f32) and dsim[B,B] (=, f32, zero off the diagonal) from sim[B,B]'s diagonal and the
 * device scores y[B]: kind 0 CoSENT (k = scale), 1 the cosine MSE (k = score_scale). One block. */
int tr_k_score_loss_cuda(float *loss, float *dsim, const void *sim, int sim_dt, const float *y, float k, int64_t B,
                         int kind, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
