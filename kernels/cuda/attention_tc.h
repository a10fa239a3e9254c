/* attention_tc.h — scaled-dot-product attention on the tensor cores (attention_tc.cu): the
 * launchers tr_k_attention_fwd_cuda / tr_k_attention_bwd_cuda (attention.h) hand a launch to
 * when tr_k_attention_tc_fits says so, with the same arguments, layout, mask, dropout stream
 * and lse; and the row terms of the backward (attention.cu) that both backward paths share. */
#ifndef TR_KERNELS_CUDA_ATTENTION_TC_H
#define TR_KERNELS_CUDA_ATTENTION_TC_H

#include "tr_base.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the tensor-core kernels take dtype dt and head size D (a multiple of 16 in
 * 32..128) on the current device: f16 on sm_70 and up, bf16 on sm_80 and up (card.h); else 0
 * (the fp32-register kernels of attention.cu run). */
int tr_k_attention_tc_fits(int dt, int64_t D);

/* As tr_k_attention_fwd_win_cuda without a window or bias, for a launch tr_k_attention_tc_fits
 * takes, after that launcher's argument checks (B, T > 0). */
int tr_k_attention_tc_fwd_cuda(void *out, float *lse, const void *q, const void *k, const void *v, int dt,
                               const void *mask, int mask_dt, float p, uint64_t seed, uint32_t step, uint32_t layer,
                               uint32_t op, float scale, int64_t B, int64_t T, int64_t H, int64_t D,
                               int64_t query_rows, void *stream, tr_error *err);
/* As tr_k_attention_bwd_win_cuda without a window or bias, after its checks (scratch: delta,
 * tr_k_attention_bwd_scratch_cuda floats). */
int tr_k_attention_tc_bwd_cuda(void *dq, void *dk, void *dv, const void *dout, const void *out, const void *q,
                               const void *k, const void *v, int dt, const float *lse, const void *mask, int mask_dt,
                               float p, uint64_t seed, uint32_t step, uint32_t layer, uint32_t op, float scale,
                               int64_t B, int64_t T, int64_t H, int64_t D, int64_t query_rows, float *scratch,
                               void *stream, tr_error *err);

/* delta [B,H,T] (=) = dout_i . out_i per row, dout and out [B,T,H,D] of dtype dt. */
int tr_k_attention_delta_cuda(float *delta, const void *dout, const void *out, int dt, int64_t B, int64_t T,
                              int64_t H, int64_t D, void *stream, tr_error *err);

#ifdef __cplusplus
}
#endif

#endif
