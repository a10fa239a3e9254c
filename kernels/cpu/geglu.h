/* geglu.h — the gated GELU of a GeGLU feed-forward (ModernBERT's MLP): the up-projection
 * writes h = [x | g] of 2I columns per row, and
 *   forward:  out = gelu(x) * g                                   (transformers' ModernBertMLP:
 *             `input, gate = Wi(h).chunk(2, dim=-1); act(input) * gate`)
 *   backward: dh[:, :I] = dout * g * gelu'(x), dh[:, I:] = dout * gelu(x)
 * over N rows, in blocks of rows shared among threads. _f32 is the runtime, _f64 the test
 * reference. approx: TR_GELU_ERF or TR_GELU_TANH (cpu/activation.h). */
#ifndef TR_KERNELS_CPU_GEGLU_H
#define TR_KERNELS_CPU_GEGLU_H

#include <stdint.h>

/* out[N,I] (=) from h[N,2I]; out must not alias h. */
void tr_k_geglu_fwd_f32(float *out, const float *h, int64_t N, int64_t I, int approx);
void tr_k_geglu_fwd_f64(double *out, const double *h, int64_t N, int64_t I, int approx);

/* dh[N,2I] (=) from dout[N,I] and the forward's h[N,2I]; dh may be h itself (in place: the
 * backward then needs no second [N, 2I] buffer), else it aliases neither. */
void tr_k_geglu_bwd_f32(float *dh, const float *dout, const float *h, int64_t N, int64_t I, int approx);
void tr_k_geglu_bwd_f64(double *dh, const double *dout, const double *h, int64_t N, int64_t I, int approx);

#endif
