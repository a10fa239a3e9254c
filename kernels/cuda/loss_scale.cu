/* loss_scale.cu — the device loss scale (loss_scale.h): the fp16 scaler's update from
 * a device found-inf flag, and the loss gradient scaled by the device scale, so that fp16
 * training never reads the flag back per step. The f32 arithmetic is the CPU slots'
 * (core/ops/loss_scale.c): __fmul_rn / __fdiv_rn keep each rounding where the CPU has it. */
#include "cuda/loss_scale.h"
#include "cuda/dtype.cuh"

__global__ void loss_scale_update_kernel(float *scale, float *inv, int32_t *tracker, int32_t *skipped,
                                         const int32_t *found, float growth, float backoff, int64_t interval)
{
    float s = *scale;
    if (*found) {
        s = __fmul_rn(s, backoff);
        *tracker = 0;
        *skipped += 1;
    } else {
        const int32_t t = *tracker + 1;
        if (t >= interval) {
            s = __fmul_rn(s, growth);
            *tracker = 0;
        } else {
            *tracker = t;
        }
    }
    *scale = s;
    *inv = __fdiv_rn(1.0f, s);
}

__global__ void scale_by_scalar_kernel(void *x, int dt, int64_t n, const float *s, float factor)
{
    const float k = __fmul_rn(*s, factor);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        tr_st_dt(x, i, dt, __fmul_rn(tr_ld_dt(x, i, dt), k));
}

extern "C" int tr_k_loss_scale_update_cuda(float *scale, float *inv_scale, int32_t *tracker, int32_t *skipped,
                                           const int32_t *found_inf, float growth_factor, float backoff_factor,
                                           int64_t growth_interval, void *stream, tr_error *err)
{
    loss_scale_update_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(scale, inv_scale, tracker, skipped, found_inf,
                                                                growth_factor, backoff_factor, growth_interval);
    return tr_cuda_launched("loss_scale_update", err);
}

extern "C" int tr_k_scale_by_scalar_cuda(void *x, int dtype, int64_t n, const float *s, float factor, void *stream,
                                         tr_error *err)
{
    if (n < 0) return tr_fail(err, TR_EUSER, "scale_by_scalar on CUDA: negative element count %lld.", (long long)n);
    if (n == 0) return TR_OK;
    const int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535; /* grid-stride beyond that */
    scale_by_scalar_kernel<<<(unsigned)blocks, threads, 0, (cudaStream_t)stream>>>(x, dtype, n, s, factor);
    return tr_cuda_launched("scale_by_scalar", err);
}
