/* reduce.h — the reductions and multi-tensor scaling kernels (reduce.cu), the device twin of
 * kernels/cpu/reduce.h; host launchers with C linkage and no CUDA types, under launcher.h's
 * contract. */
#ifndef TR_KERNELS_CUDA_REDUCE_H
#define TR_KERNELS_CUDA_REDUCE_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* One tensor of a multi-tensor launch: the list lives in device memory. */
typedef struct tr_k_tensor_ref {
    void *data;
    int64_t n;
    int32_t dtype;
    int32_t flags;              /* optimizer: bit 0 = apply weight decay */
} tr_k_tensor_ref;

/* Scratch (f32 elements) for a reduction over n values. */
int64_t tr_k_reduce_scratch_cuda(int64_t n);
/* *out (=, device f32) = sum of x[0..n) (squares when `squares`), in a fixed order. */
int tr_k_sum_cuda(float *out, const void *x, int x_dt, int64_t n, int squares, float *scratch, void *stream,
                  tr_error *err);
/* out[N] (=, out_dt) = row sums of x[N, C]. */
int tr_k_sum_lastdim_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t N, int64_t C, void *stream,
                          tr_error *err);
/* Multi-tensor launches take the list (device memory), its length and max_n, the largest
 * n in it (the host knows both when it builds the list). */
/* Scratch (f32 elements) for a global norm over `ntensors` tensors, the largest of max_n. */
int64_t tr_k_global_sumsq_scratch_cuda(int64_t ntensors, int64_t max_n);
/* *out (=, device f32) = sum over every listed tensor of its squared elements, in one
 * launch plus one final block (clipping's global norm, without a host round trip). */
int tr_k_global_sumsq_cuda(float *out, const tr_k_tensor_ref *list, int64_t ntensors, int64_t max_n,
                           float *scratch, void *stream, tr_error *err);
/* x[i] (=) *= scale for every listed tensor; *found_inf (device int32) set to 1 when any
 * scaled value is inf or NaN, left alone otherwise (the caller zeroes it once per step). */
int tr_k_scale_check_cuda(const tr_k_tensor_ref *list, int64_t ntensors, int64_t max_n, float scale,
                          int32_t *found_inf, void *stream, tr_error *err);
/* x[i] (=) *= *scale_dev (a device scalar: the clip coefficient computed on the device
 * from the norm), for every listed tensor: clipping without a host round trip. */
/* scale_check's launch with the factor read from a device f32 (the loss scaler's 1/scale). */
int tr_k_scale_by_device_check_cuda(const tr_k_tensor_ref *list, int64_t ntensors, int64_t max_n,
                                    const float *scale_dev, int32_t *found_inf, void *stream, tr_error *err);
int tr_k_scale_by_device_cuda(const tr_k_tensor_ref *list, int64_t ntensors, int64_t max_n,
                              const float *scale_dev, void *stream, tr_error *err);
/* *coef (=) = min(1, max_norm / (sqrt(*sumsq) + 1e-6)) and *norm (=) = sqrt(*sumsq), as
 * torch.nn.utils.clip_grad_norm_; one thread. */
int tr_k_clip_coef_cuda(float *coef, float *norm, const float *sumsq, float max_norm, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
