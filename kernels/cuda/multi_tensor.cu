/* multi_tensor.cu — the clip coefficient read from a device norm (multi_tensor.h), so
 * that clipping after global_norm_into never brings the norm to the host. The f32
 * arithmetic is the CPU's (core/ops/multi_tensor.c): norm + eps, then max_norm / that. */
#include "cuda/multi_tensor.h"
#include "cuda/dtype.cuh"

__global__ void clip_coef_from_norm_kernel(float *coef, const float *norm, float max_norm, float eps,
                                           int32_t *found_inf)
{
    const float nrm = *norm;
    if (!isfinite(nrm)) {
        *coef = 1.0f;
        if (found_inf) *found_inf = 1;
        return;
    }
    /* __fadd_rn / __fdiv_rn: no contraction or fast division, the CPU's two roundings */
    const float c = __fdiv_rn(max_norm, __fadd_rn(nrm, eps));
    *coef = c < 1.0f ? c : 1.0f;
}

extern "C" int tr_k_clip_coef_from_norm_cuda(float *coef, const float *norm, float max_norm, float eps,
                                             int32_t *found_inf, void *stream, tr_error *err)
{
    clip_coef_from_norm_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(coef, norm, max_norm, eps, found_inf);
    return tr_cuda_launched("clip_by_norm", err);
}
