/* softmax.h — the softmax kernels (softmax.cu), the device twin of kernels/cpu/softmax.h; host
 * launchers with C linkage and no CUDA types, under launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_SOFTMAX_H
#define TR_KERNELS_CUDA_SOFTMAX_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* out[N,C] (=) = softmax over the last dim (max-subtracted). */
int tr_k_softmax_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t N, int64_t C, void *stream,
                          tr_error *err);
/* dx[N,C] (=) = y * (dout - sum_c dout * y). */
int tr_k_softmax_bwd_cuda(void *dx, int dx_dt, const void *dout, int dout_dt, const void *y, int y_dt, int64_t N,
                          int64_t C, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
