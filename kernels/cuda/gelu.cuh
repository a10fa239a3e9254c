/* gelu.cuh — GELU and its derivative on the device, erf and tanh forms (approx 1 = tanh; 2 =
 * ReLU, the gelu op's third form, never passed by the fused bias / linear GELU ops),
 * fp32: shared by activation.cu and bias_gelu.cu so that both compute the same values.
 * Private to kernels/cuda. */
#ifndef TR_KERNELS_CUDA_GELU_CUH
#define TR_KERNELS_CUDA_GELU_CUH

__device__ __forceinline__ float gelu_f(float v, int approx)
{
    if (approx == 2) return v > 0.0f ? v : 0.0f;
    if (approx) return 0.5f * v * (1.0f + tanhf(0.79788456080286535588f * (v + 0.044715f * v * v * v)));
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));
}

__device__ __forceinline__ float gelu_grad(float v, int approx)
{
    if (approx == 2) return v > 0.0f ? 1.0f : 0.0f;
    if (approx) {
        const float k = 0.79788456080286535588f, c = 0.044715f;
        const float t = tanhf(k * (v + c * v * v * v));
        return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * k * (1.0f + 3.0f * c * v * v);
    }
    return 0.5f * (1.0f + erff(v * 0.70710678118654752440f)) + v * 0.39894228040143267794f * expf(-0.5f * v * v);
}

#endif
