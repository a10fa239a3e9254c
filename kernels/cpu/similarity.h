/* similarity.h — CPU row L2-normalisation (torch.nn.functional.normalize, eps 1e-12 by
 * default at the op level) and the cosine-similarity matrix sim = normalize(a)
 * normalize(b)^T, _f32 and _f64. Gradient contract: l2norm_backward and
 * cosine_sim_backward OVERWRITE their gradients. */
#ifndef TR_KERNELS_CPU_SIMILARITY_H
#define TR_KERNELS_CPU_SIMILARITY_H

#include <stdint.h>

void tr_k_l2norm_fwd_f32(float *out, const float *x, int64_t N, int64_t C, float eps);
void tr_k_l2norm_fwd_f64(double *out, const double *x, int64_t N, int64_t C, double eps);
void tr_k_l2norm_bwd_f32(float *dx, const float *dout, const float *x, int64_t N, int64_t C, float eps);
void tr_k_l2norm_bwd_f64(double *dx, const double *dout, const double *x, int64_t N, int64_t C, double eps);
void tr_k_cosine_sim_fwd_f32(float *sim, const float *an, const float *bn, int64_t N, int64_t M, int64_t C);
void tr_k_cosine_sim_fwd_f64(double *sim, const double *an, const double *bn, int64_t N, int64_t M, int64_t C);
void tr_k_cosine_sim_bwd_f32(float *dan, float *dbn, const float *dsim, const float *an, const float *bn,
                             int64_t N, int64_t M, int64_t C);
void tr_k_cosine_sim_bwd_f64(double *dan, double *dbn, const double *dsim, const double *an, const double *bn,
                             int64_t N, int64_t M, int64_t C);

#endif
