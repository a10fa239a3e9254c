/* dropout.h — CPU dropout application, _f32 and _f64: out = x * keep * scale (=).
 * Forward and backward are the same call (backward passes dout and the same mask). */
#ifndef TR_KERNELS_CPU_DROPOUT_H
#define TR_KERNELS_CPU_DROPOUT_H

#include <stdint.h>

void tr_k_dropout_fwd_f32(float *out, const float *x, const uint32_t *mask, float scale, int64_t n);
void tr_k_dropout_fwd_f64(double *out, const double *x, const uint32_t *mask, double scale, int64_t n);

#endif
