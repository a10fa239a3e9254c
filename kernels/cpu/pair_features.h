/* pair_features.h — CPU kernels that build and take apart feature matrices for losses and
 * heads: a column-block copy between two row-major matrices (concatenation along the
 * last dim, truncation to the first d dims, and their backwards) and |a - b|
 * (sentence-transformers' SoftmaxLoss features). Each exists as _f32 (runtime) and _f64
 * (test reference).
 * Gradient contract: abs_diff_backward OVERWRITES da and db; copy_cols overwrites its
 * destination block or, with accumulate, ACCUMULATES into it. */
#ifndef TR_KERNELS_CPU_PAIR_FEATURES_H
#define TR_KERNELS_CPU_PAIR_FEATURES_H

#include <stdint.h>

void tr_k_copy_cols_fwd_f32(float *dst, const float *src, int64_t N, int64_t dst_C, int64_t dst_col, int64_t src_C,
                   int64_t src_col, int64_t ncols, int accumulate);
void tr_k_copy_cols_fwd_f64(double *dst, const double *src, int64_t N, int64_t dst_C, int64_t dst_col, int64_t src_C,
                   int64_t src_col, int64_t ncols, int accumulate);
void tr_k_abs_diff_fwd_f32(float *out, const float *a, const float *b, int64_t n);
void tr_k_abs_diff_fwd_f64(double *out, const double *a, const double *b, int64_t n);
void tr_k_abs_diff_bwd_f32(float *da, float *db, const float *dout, const float *a, const float *b, int64_t n);
void tr_k_abs_diff_bwd_f64(double *da, double *db, const double *dout, const double *a, const double *b,
                           int64_t n);

#endif
