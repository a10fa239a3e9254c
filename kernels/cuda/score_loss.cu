/* score_loss.cu — the scored-pair losses (CoSENT, cosine MSE) on the GPU, the twins of
 * kernels/cpu/score_loss.c, computed in f32 from sim's diagonal and the scores: one block
 * reduces the loss in a fixed tree (tr_block_max, tr_block_sum) and writes the whole gradient
 * dsim [B, B] (zero off the diagonal), so nothing goes to the host. */
#include "cuda/score_loss.h"
#include "cuda/dtype.cuh"

enum { SCORE_THREADS = 256 };

__device__ __forceinline__ float diag(const void *sim, int dt, int64_t B, int64_t i)
{
    return tr_ld_dt(sim, i * B + i, dt);
}

__global__ void cosent_kernel(float *loss, float *dsim, const void *sim, int dt, const float *y, float scale,
                              int64_t B)
{
    __shared__ float red[32];
    const int64_t P = B * B;
    float m = 0.0f;
    for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
        const int64_t i = p / B, j = p % B;
        if (y[i] > y[j]) m = fmaxf(m, scale * diag(sim, dt, B, j) - scale * diag(sim, dt, B, i));
    }
    m = tr_block_max(m, red);
    float z = 0.0f;
    for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
        const int64_t i = p / B, j = p % B;
        if (y[i] > y[j]) z += expf(scale * diag(sim, dt, B, j) - scale * diag(sim, dt, B, i) - m);
    }
    z = tr_block_sum(z, red);
    const float l = m + logf(expf(-m) + z);
    for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
        const int64_t r = p / B, c = p % B;
        float v = 0.0f;
        if (r == c) {
            const float sr = scale * diag(sim, dt, B, r);
            float ds = 0.0f;
            for (int64_t i = 0; i < B; i++) {
                const float si = scale * diag(sim, dt, B, i);
                if (y[i] > y[r]) ds += expf(sr - si - l);
                if (y[r] > y[i]) ds -= expf(si - sr - l);
            }
            v = scale * ds;
        }
        dsim[p] = v;
    }
    if (threadIdx.x == 0) *loss = l;
}

__global__ void cosine_mse_kernel(float *loss, float *dsim, const void *sim, int dt, const float *y,
                                  float score_scale, int64_t B)
{
    __shared__ float red[32];
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < B; i += blockDim.x) {
        const float r = diag(sim, dt, B, i) - y[i] / score_scale;
        acc += r * r;
    }
    acc = tr_block_sum(acc, red);
    for (int64_t p = threadIdx.x; p < B * B; p += blockDim.x) {
        const int64_t r = p / B, c = p % B;
        dsim[p] = r == c ? 2.0f * (diag(sim, dt, B, r) - y[r] / score_scale) / (float)B : 0.0f;
    }
    if (threadIdx.x == 0) *loss = B > 0 ? acc / (float)B : 0.0f;
}

extern "C" int tr_k_score_loss_cuda(float *loss, float *dsim, const void *sim, int sim_dt, const float *y, float k,
                                    int64_t B, int kind, void *stream, tr_error *err)
{
    const char *op = kind ? "cosine_mse_loss" : "cosent_loss";
    int rc = tr_cuda_want_float(op, sim_dt, err);
    if (rc) return rc;
    if (B < 0) return tr_fail(err, TR_EUSER, "%s on CUDA: %lld pairs.", op, (long long)B);
    cudaStream_t s = (cudaStream_t)stream;
    if (kind) cosine_mse_kernel<<<1, SCORE_THREADS, 0, s>>>(loss, dsim, sim, sim_dt, y, k, B);
    else cosent_kernel<<<1, SCORE_THREADS, 0, s>>>(loss, dsim, sim, sim_dt, y, k, B);
    return tr_cuda_launched(op, err);
}
