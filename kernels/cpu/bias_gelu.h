/* bias_gelu.h — the FFN's up-projection bias and GELU in one pass (the GEMM writes x W^T
 * without its bias), and the backward's GELU' with the bias gradient in the same pass:
 *   forward:  h = h + bias (in place: h then holds the pre-activation the backward reads),
 *             out = gelu(h)
 *   backward: dx = dout * gelu'(h), dbias += column sums of dx
 * over rows of I, in blocks of rows shared among threads (activation.c's vectorised spans). The
 * column sums are deterministic: each fixed block of rows sums its columns in row order
 * into its own partial row, and the partial rows are added in block order, whatever the
 * number of threads. _f32 is the runtime, _f64 the test reference. approx: TR_GELU_ERF or
 * TR_GELU_TANH (cpu/activation.h). */
#ifndef TR_KERNELS_CPU_BIAS_GELU_H
#define TR_KERNELS_CPU_BIAS_GELU_H

#include <stdint.h>

/* h[N,I] (+= bias[I]), out[N,I] (=); out must not alias h. */
void tr_k_bias_gelu_fwd_f32(float *out, float *h, const float *bias, int64_t N, int64_t I, int approx);
void tr_k_bias_gelu_fwd_f64(double *out, double *h, const double *bias, int64_t N, int64_t I, int approx);

/* Scratch (elements) the backward needs for dbias over N x I: one partial row per block. */
int64_t tr_k_bias_gelu_bwd_scratch(int64_t N, int64_t I);

/* dx[N,I] (=) = dout * gelu'(h) (dx may alias dout); dbias[I] (+=) += column sums of dx,
 * or NULL (frozen); scratch holds tr_k_bias_gelu_bwd_scratch(N, I) elements when dbias is
 * not NULL. */
void tr_k_bias_gelu_bwd_f32(float *dx, float *dbias, const float *dout, const float *h, int64_t N, int64_t I,
                            int approx, float *scratch);
void tr_k_bias_gelu_bwd_f64(double *dx, double *dbias, const double *dout, const double *h, int64_t N, int64_t I,
                            int approx, double *scratch);

#endif
