/* op_support.h — the small kernels the op table's CUDA slots (core/cuda_ops/) need beside the
 * families' own (op_support.cu): broadcast binary ops, mixed-dtype scaling, column sums, casts,
 * uploads, mask conversion; host launchers with C linkage and no CUDA types, under launcher.h's
 * contract. */
#ifndef TR_KERNELS_CUDA_OP_SUPPORT_H
#define TR_KERNELS_CUDA_OP_SUPPORT_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* out[N,C] (=) = a (+ or * with is_mul) b, b [N,C] or a vector [C] broadcast over the rows. */
int tr_k_binary_bcast_cuda(void *out, int out_dt, const void *a, int a_dt, const void *b, int b_dt, int64_t N,
                           int64_t C, int b_broadcast, int is_mul, void *stream, tr_error *err);
/* da (=) = dout * b; db (=) = dout * a, or its column sums when b was broadcast; either NULL. */
int tr_k_mul_bwd_cuda(void *da, int da_dt, void *db, int db_dt, const void *dout, int dout_dt, const void *a,
                      int a_dt, const void *b, int b_dt, int64_t N, int64_t C, int b_broadcast, void *stream,
                      tr_error *err);
/* out (=) = alpha * x, or out (+=) += alpha * x with accumulate; each its own dtype. */
int tr_k_scale_mixed_cuda(void *out, int out_dt, const void *x, int x_dt, float alpha, int64_t n, int accumulate,
                          void *stream, tr_error *err);
/* out[C] (+=, f32) += the column sums of x [N, C] (a bias gradient). */
int tr_k_colsum_acc_cuda(float *out, const void *x, int x_dt, int64_t N, int64_t C, void *stream, tr_error *err);
/* out (=) = in converted between any two of the five dtypes (core/tensor/convert.c's rules). */
int tr_k_cast_any_cuda(void *out, int out_dt, const void *in, int in_dt, int64_t n, void *stream, tr_error *err);
/* dst (device) = bytes of host memory src, through by-value kernel arguments (2 KiB per
 * launch): ordered on the stream, never waiting for it; src may be reused at once. */
int tr_k_upload_cuda(void *dst, const void *src, size_t bytes, void *stream, tr_error *err);
/* out[n] (=, i32) = mask != 0 (any dtype), or 1 everywhere when mask is NULL. */
int tr_k_mask_i32_cuda(int32_t *out, const void *mask, int mask_dt, int64_t n, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
