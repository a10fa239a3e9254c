/* pooling.h — the masked pooling kernels (pooling.cu), the device twin of
 * kernels/cpu/pooling.h; host launchers with C linkage and no CUDA types, under launcher.h's
 * contract. */
#ifndef TR_KERNELS_CUDA_POOLING_H
#define TR_KERNELS_CUDA_POOLING_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* out[B,C] (=) from hidden[B,T,C] and mask[B,T] (i32, nonzero = token); mode 0 mean,
 * 1 cls, 2 max, 3 mean_sqrt_len (kernels/cpu/pooling.h's semantics, ties to the first). */
int tr_k_pool_fwd_cuda(void *out, int out_dt, const void *hidden, int hidden_dt, const int32_t *mask, int64_t B,
                       int64_t T, int64_t C, int mode, void *stream, tr_error *err);
/* dhidden[B,T,C] (=); hidden is read by the max mode only (may be NULL otherwise). */
int tr_k_pool_bwd_cuda(void *dhidden, int dh_dt, const void *dout, int dout_dt, const void *hidden, int hidden_dt,
                       const int32_t *mask, int64_t B, int64_t T, int64_t C, int mode, void *stream,
                       tr_error *err);

TR_K_END_DECLS

#endif
