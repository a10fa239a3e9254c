/* pair_features.h — the feature-matrix kernels (pair_features.cu), the device twin of
 * kernels/cpu/pair_features.h; host launchers with C linkage and no CUDA types, under
 * launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_PAIR_FEATURES_H
#define TR_KERNELS_CUDA_PAIR_FEATURES_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* dst[:, dst_col : dst_col + ncols] (= or += with accumulate) = src[:, src_col : ...], N rows. */
int tr_k_copy_cols_cuda(void *dst, int dst_dt, const void *src, int src_dt, int64_t N, int64_t dst_C,
                        int64_t dst_col, int64_t src_C, int64_t src_col, int64_t ncols, int accumulate,
                        void *stream, tr_error *err);
/* out[n] (=) = |a - b| */
int tr_k_abs_diff_fwd_cuda(void *out, int out_dt, const void *a, int a_dt, const void *b, int b_dt, int64_t n,
                           void *stream, tr_error *err);
/* da (=) = dout * sign(a - b), db (=) = -da; either may be NULL. */
int tr_k_abs_diff_bwd_cuda(void *da, int da_dt, void *db, int db_dt, const void *dout, int dout_dt, const void *a,
                           int a_dt, const void *b, int b_dt, int64_t n, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
