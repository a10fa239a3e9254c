/* similarity.h — the row L2-normalisation kernels (similarity.cu), the device twin of
 * kernels/cpu/similarity.h; host launchers with C linkage and no CUDA types, under launcher.h's
 * contract. */
#ifndef TR_KERNELS_CUDA_SIMILARITY_H
#define TR_KERNELS_CUDA_SIMILARITY_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* out[N,C] (=) = x / max(||x||, eps) per row (torch.nn.functional.normalize). */
int tr_k_l2norm_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t N, int64_t C, float eps,
                         void *stream, tr_error *err);
/* dx[N,C] (=). */
int tr_k_l2norm_bwd_cuda(void *dx, int dx_dt, const void *dout, int dout_dt, const void *x, int x_dt, int64_t N,
                         int64_t C, float eps, void *stream, tr_error *err);
/* The cosine-similarity matrix is a product of normalised rows: the op runs it through
 * tr_cuda_gemm (sim = an bn^T; dan = dsim bn; dbn = dsim^T an). */

TR_K_END_DECLS

#endif
