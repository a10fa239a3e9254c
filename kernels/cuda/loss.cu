/* loss.cu — cross-entropy over logits [N, K] with int64 targets on the GPU, the twin of
 * kernels/cpu/loss.c (torch's label smoothing and ignore_index). One block per row.
 * The count of rows not ignored stays on the device (a final one-block kernel counts the
 * targets in order), so the mean's divisor never makes the host wait. */
#include "cuda/loss.h"
#include "cuda/dtype.cuh"

enum { CE_COUNT_THREADS = 1024 };

__global__ void ce_fwd_kernel(float *losses, float *lse, const void *logits, int dt, const int64_t *targets,
                              int64_t K, int64_t ignore_index, float ls)
{
    __shared__ float red[32];
    const int64_t n = blockIdx.x, base = n * K;
    const int64_t t = targets[n];
    if (t == ignore_index) {
        if (threadIdx.x == 0) {
            losses[n] = 0.0f;
            lse[n] = 0.0f;
        }
        return;
    }
    float m = -INFINITY;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) m = fmaxf(m, tr_ld_dt(logits, base + k, dt));
    m = tr_block_max(m, red);
    float se = 0.0f, sz = 0.0f;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
        const float z = tr_ld_dt(logits, base + k, dt);
        se += expf(z - m);
        sz += z;
    }
    se = tr_block_sum(se, red);
    sz = tr_block_sum(sz, red);
    if (threadIdx.x == 0) {
        const float l = m + logf(se);
        lse[n] = l;
        losses[n] = (1.0f - ls) * (l - tr_ld_dt(logits, base + t, dt)) + ls * (l - sz / (float)K);
    }
}

__global__ void ce_count_kernel(int64_t *count, const int64_t *targets, int64_t N, int64_t ignore_index)
{
    __shared__ long long part[32];
    long long c = 0;
    for (int64_t n = threadIdx.x; n < N; n += blockDim.x) c += targets[n] != ignore_index;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long t = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) t += part[w];
        *count = (int64_t)t;
    }
}

__global__ void ce_bwd_kernel(void *dlogits, int dl_dt, const void *logits, int dt, const float *lse,
                              const int64_t *targets, const int64_t *count, float g, int64_t K, int64_t ignore_index,
                              float ls)
{
    const int64_t n = blockIdx.x, base = n * K;
    const int64_t t = targets[n];
    const int64_t cnt = *count;
    if (t == ignore_index || cnt == 0) {
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) tr_st_dt(dlogits, base + k, dl_dt, 0.0f);
        return;
    }
    const float gn = g / (float)cnt, smooth = ls / (float)K, l = lse[n];
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
        float d = gn * (expf(tr_ld_dt(logits, base + k, dt) - l) - smooth);
        if (k == t) d -= gn * (1.0f - ls);
        tr_st_dt(dlogits, base + k, dl_dt, d);
    }
}

static int ce_check(const char *op, int a, int b, int64_t N, int64_t K, tr_error *err)
{
    int rc;
    if ((rc = tr_cuda_want_float(op, a, err)) || (rc = tr_cuda_want_float(op, b, err))) return rc;
    if (N < 0 || K <= 0 || N > 2147483647)
        return tr_fail(err, TR_EUSER, "%s on CUDA: %lld rows of %lld classes.", op, (long long)N, (long long)K);
    return TR_OK;
}

extern "C" int tr_k_cross_entropy_fwd_cuda(float *losses, float *lse, int64_t *count, const void *logits,
                                           int logits_dt, const int64_t *targets, int64_t N, int64_t K,
                                           int64_t ignore_index, float label_smoothing, void *stream, tr_error *err)
{
    int rc = ce_check("cross_entropy", logits_dt, logits_dt, N, K, err);
    if (rc) return rc;
    cudaStream_t s = (cudaStream_t)stream;
    if (N > 0) {
        ce_fwd_kernel<<<(unsigned)N, tr_cuda_row_threads(K), 0, s>>>(losses, lse, logits, logits_dt, targets, K,
                                                                     ignore_index, label_smoothing);
        if ((rc = tr_cuda_launched("cross_entropy", err))) return rc;
    }
    ce_count_kernel<<<1, CE_COUNT_THREADS, 0, s>>>(count, targets, N, ignore_index);
    return tr_cuda_launched("cross_entropy", err);
}

__global__ void mean_by_count_kernel(void *out, int out_dt, const float *sum, const int64_t *count)
{
    const int64_t c = *count;
    tr_st_dt(out, 0, out_dt, c ? *sum * (1.0f / (float)c) : 0.0f);
}

extern "C" int tr_k_mean_by_count_cuda(void *out, int out_dt, const float *sum, const int64_t *count, void *stream,
                                       tr_error *err)
{
    int rc = tr_cuda_want_float("cross_entropy", out_dt, err);
    if (rc) return rc;
    mean_by_count_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(out, out_dt, sum, count);
    return tr_cuda_launched("cross_entropy", err);
}

extern "C" int tr_k_cross_entropy_bwd_cuda(void *dlogits, int dl_dt, const void *logits, int logits_dt,
                                           const float *lse, const int64_t *targets, const int64_t *count, float g,
                                           int64_t N, int64_t K, int64_t ignore_index, float label_smoothing,
                                           void *stream, tr_error *err)
{
    int rc = ce_check("cross_entropy_backward", dl_dt, logits_dt, N, K, err);
    if (rc || N == 0) return rc;
    ce_bwd_kernel<<<(unsigned)N, tr_cuda_row_threads(K), 0, (cudaStream_t)stream>>>(
        dlogits, dl_dt, logits, logits_dt, lse, targets, count, g, K, ignore_index, label_smoothing);
    return tr_cuda_launched("cross_entropy_backward", err);
}
