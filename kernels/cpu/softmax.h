/* softmax.h — softmax over the last dimension of x[N, C] (max-subtracted, so no overflow),
 * rows in parallel. _f32 is the runtime, _f64 the test reference. */
#ifndef TR_KERNELS_CPU_SOFTMAX_H
#define TR_KERNELS_CPU_SOFTMAX_H

#include <stdint.h>

/* out[N,C] (=); out may alias x. */
void tr_k_softmax_fwd_f32(float *out, const float *x, int64_t N, int64_t C);
void tr_k_softmax_fwd_f64(double *out, const double *x, int64_t N, int64_t C);

/* dx[N,C] OVERWRITES: dx = y * (dout - sum_c dout * y), y the forward's output; dx may
 * alias dout. */
void tr_k_softmax_bwd_f32(float *dx, const float *dout, const float *y, int64_t N, int64_t C);
void tr_k_softmax_bwd_f64(double *dx, const double *dout, const double *y, int64_t N,
                             int64_t C);

#endif
