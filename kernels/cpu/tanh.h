/* tanh.h — the hyperbolic tangent, elementwise over n values (the BERT pooler's
 * activation). The backward takes the forward's OUTPUT y, since tanh' = 1 - y^2: the
 * pooler keeps y anyway, so no input needs to be saved.
 * _f32 is the runtime, _f64 the test reference. */
#ifndef TR_KERNELS_CPU_TANH_H
#define TR_KERNELS_CPU_TANH_H

#include <stdint.h>

/* out[n] (=); out may alias x. */
void tr_k_tanh_fwd_f32(float *out, const float *x, int64_t n);
void tr_k_tanh_fwd_f64(double *out, const double *x, int64_t n);

/* dx[n] OVERWRITES: dx = dout * (1 - y^2), y = tanh(x) from the forward; dx may alias dout. */
void tr_k_tanh_bwd_f32(float *dx, const float *dout, const float *y, int64_t n);
void tr_k_tanh_bwd_f64(double *dx, const double *dout, const double *y, int64_t n);

#endif
