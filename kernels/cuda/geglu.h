/* geglu.h — the GeGLU gate's kernels (geglu.cu), the device twin of kernels/cpu/geglu.h; host
 * launchers with C linkage and no CUDA types, under launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_GEGLU_H
#define TR_KERNELS_CUDA_GEGLU_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* out[N,I] (=) = gelu(h[:, :I]) * h[:, I:] from h[N,2I]; approx 0 = erf, 1 = tanh. */
int tr_k_geglu_fwd_cuda(void *out, int out_dt, const void *h, int h_dt, int64_t N, int64_t I, int approx,
                        void *stream, tr_error *err);
/* dh[N,2I] (=) = [dout * g * gelu'(x) | dout * gelu(x)] for h = [x | g]. */
int tr_k_geglu_bwd_cuda(void *dh, int dh_dt, const void *dout, int dout_dt, const void *h, int h_dt, int64_t N,
                        int64_t I, int approx, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
