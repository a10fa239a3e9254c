/* activation.h — the GELU and tanh kernels (activation.cu), the device twins of
 * kernels/cpu/activation.h; host launchers with C linkage and no CUDA types,
 * under launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_ACTIVATION_H
#define TR_KERNELS_CUDA_ACTIVATION_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* out[n] (=) = gelu(x), approx 0 = erf, 1 = tanh (TR_GELU_ERF / TR_GELU_TANH); out may be x. */
int tr_k_gelu_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t n, int approx, void *stream,
                       tr_error *err);
/* dx[n] (=) = dout * gelu'(x); dx may be dout. */
int tr_k_gelu_bwd_cuda(void *dx, int dx_dt, const void *dout, int dout_dt, const void *x, int x_dt, int64_t n,
                       int approx, void *stream, tr_error *err);
/* out[n] (=) = tanh(x). */
int tr_k_tanh_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t n, void *stream, tr_error *err);
/* dx[n] (=) = dout * (1 - y^2), y the forward's output. */
int tr_k_tanh_bwd_cuda(void *dx, int dx_dt, const void *dout, int dout_dt, const void *y, int y_dt, int64_t n,
                       void *stream, tr_error *err);

TR_K_END_DECLS

#endif
