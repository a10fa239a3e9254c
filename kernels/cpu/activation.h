/* activation.h — the elementwise activations over n values (activation.c).
 *
 * GELU, in both forms transformers use:
 *   TR_GELU_ERF  (BERT "gelu"):  x/2 * (1 + erf(x / sqrt 2))
 *   TR_GELU_TANH ("gelu_new", "gelu_pytorch_tanh"):
 *                x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
 * _f32 is the runtime, _f64 the test reference. */
#ifndef TR_KERNELS_CPU_ACTIVATION_H
#define TR_KERNELS_CPU_ACTIVATION_H

#include <stdint.h>

/* TR_GELU_RELU: max(x, 0) (gradient 1 where x > 0, else 0, as PyTorch's), the same kernels'
 * third form, for DistilBERT's activation = "relu". */
enum { TR_GELU_ERF = 0, TR_GELU_TANH = 1, TR_GELU_RELU = 2 };

/* out[n] (=); out may alias x. */
void tr_k_gelu_fwd_f32(float *out, const float *x, int64_t n, int approx);
void tr_k_gelu_fwd_f64(double *out, const double *x, int64_t n, int approx);

/* dx[n] OVERWRITES: dx = dout * gelu'(x); dx may alias dout. */
void tr_k_gelu_bwd_f32(float *dx, const float *dout, const float *x, int64_t n, int approx);
void tr_k_gelu_bwd_f64(double *dx, const double *dout, const double *x, int64_t n,
                          int approx);

/* tanh, the BERT pooler's activation. The backward takes the forward's OUTPUT y, since
 * tanh' = 1 - y^2: the pooler keeps y anyway, so no input needs to be saved. */

/* out[n] (=); out may alias x. */
void tr_k_tanh_fwd_f32(float *out, const float *x, int64_t n);
void tr_k_tanh_fwd_f64(double *out, const double *x, int64_t n);

/* dx[n] OVERWRITES: dx = dout * (1 - y^2), y = tanh(x) from the forward; dx may alias dout. */
void tr_k_tanh_bwd_f32(float *dx, const float *dout, const float *y, int64_t n);
void tr_k_tanh_bwd_f64(double *dx, const double *dout, const double *y, int64_t n);

/* GeGLU's halves of a row, on the calling thread: out[n] (=) gelu(x) * g; dx[n] (=)
 * dout * g * gelu'(x) and dg[n] (=) dout * gelu(x), one pass (the erf form shares one exp
 * between gelu and its derivative). Outputs must not alias inputs. */
void tr_k_gelu_gate_fwd_f32(float *out, const float *x, const float *g, int64_t n, int approx);
void tr_k_gelu_gate_fwd_f64(double *out, const double *x, const double *g, int64_t n, int approx);
void tr_k_gelu_gate_bwd_f32(float *dx, float *dg, const float *dout, const float *x, const float *g, int64_t n,
                            int approx);
void tr_k_gelu_gate_bwd_f64(double *dx, double *dg, const double *dout, const double *x, const double *g, int64_t n,
                            int approx);
#endif
