/* reduce.cu — reductions on the GPU: sum and sum of squares of a tensor, row sums, the
 * global squared norm over many tensors in one launch, the loss scaler's scale-and-check
 * and clipping's scale by a device scalar: the twins of kernels/cpu/reduce.c, built so
 * that a training step never waits on the host for a norm or a finite check.
 *
 * Determinism: partial sums are written per block to a scratch in a fixed layout, then
 * one block adds them in index order; the launch shape depends only on the sizes. */
#include "cuda/reduce.h"
#include "cuda/dtype.cuh"

enum { RED_THREADS = 256, RED_MAX_BLOCKS = 1024, RED_FINAL_THREADS = 1024, MT_CHUNK = 65536 };

static int64_t red_blocks(int64_t n)
{
    int64_t b = (n + RED_THREADS * 8 - 1) / (RED_THREADS * 8);
    if (b < 1) b = 1;
    return b > RED_MAX_BLOCKS ? RED_MAX_BLOCKS : b;
}

__global__ void sum_partial_kernel(float *part, const void *x, int dt, int64_t n, int squares)
{
    __shared__ float red[32];
    float s = 0.0f;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = tr_ld_dt(x, i, dt);
        s += squares ? v * v : v;
    }
    s = tr_block_sum(s, red);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/* out = sum of part[0..m) in a fixed order. */
__global__ void sum_final_kernel(float *out, const float *part, int64_t m)
{
    __shared__ float red[32];
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) s += part[i];
    s = tr_block_sum(s, red);
    if (threadIdx.x == 0) *out = s;
}

__global__ void sum_lastdim_kernel(void *out, int out_dt, const void *x, int x_dt, int64_t C)
{
    __shared__ float red[32];
    const int64_t base = (int64_t)blockIdx.x * C;
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += tr_ld_dt(x, base + c, x_dt);
    s = tr_block_sum(s, red);
    if (threadIdx.x == 0) tr_st_dt(out, blockIdx.x, out_dt, s);
}

/* Multi-tensor: grid (chunks of the largest tensor, tensors); block (chunk, t) covers
 * elements [chunk * MT_CHUNK, +MT_CHUNK) of tensor t, or nothing past its end. */
__global__ void mt_sumsq_kernel(float *part, const tr_k_tensor_ref *list, int64_t nchunks)
{
    __shared__ float red[32];
    const tr_k_tensor_ref r = list[blockIdx.y];
    const int64_t lo = (int64_t)blockIdx.x * MT_CHUNK;
    const int64_t hi = lo + MT_CHUNK < r.n ? lo + MT_CHUNK : r.n;
    float s = 0.0f;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const float v = tr_ld_dt(r.data, i, r.dtype);
        s += v * v;
    }
    s = tr_block_sum(s, red);
    if (threadIdx.x == 0) part[(int64_t)blockIdx.y * nchunks + blockIdx.x] = s;
}

__global__ void mt_scale_kernel(const tr_k_tensor_ref *list, float scale, const float *scale_dev, int32_t *found)
{
    const tr_k_tensor_ref r = list[blockIdx.y];
    const float k = scale_dev ? *scale_dev : scale;
    const int64_t lo = (int64_t)blockIdx.x * MT_CHUNK;
    const int64_t hi = lo + MT_CHUNK < r.n ? lo + MT_CHUNK : r.n;
    int bad = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const float v = tr_ld_dt(r.data, i, r.dtype) * k;
        bad |= !isfinite(v);
        tr_st_dt(r.data, i, r.dtype, v);
        /* a finite f32 may still overflow a half dtype: check what was stored, as the CPU */
        if (r.dtype != TR_F32) bad |= !isfinite(tr_ld_dt(r.data, i, r.dtype));
    }
    if (found && __syncthreads_or(bad) && threadIdx.x == 0) *found = 1;
}

__global__ void clip_coef_kernel(float *coef, float *norm, const float *sumsq, float max_norm)
{
    const float nrm = sqrtf(*sumsq);
    const float c = max_norm / (nrm + 1e-6f);
    *norm = nrm;
    *coef = c < 1.0f ? c : 1.0f;
}

static int64_t mt_chunks(int64_t max_n) { return max_n > 0 ? (max_n + MT_CHUNK - 1) / MT_CHUNK : 1; }

static int mt_check(const char *op, int64_t ntensors, int64_t max_n, tr_error *err)
{
    if (ntensors < 0 || ntensors > 65535 || max_n < 0 || mt_chunks(max_n) > 2147483647)
        return tr_fail(err, TR_EUSER, "%s on CUDA: %lld tensors (at most 65535) of up to %lld elements.", op,
                       (long long)ntensors, (long long)max_n);
    return TR_OK;
}

extern "C" int64_t tr_k_reduce_scratch_cuda(int64_t n) { return red_blocks(n); }

extern "C" int64_t tr_k_global_sumsq_scratch_cuda(int64_t ntensors, int64_t max_n)
{
    return (ntensors > 0 ? ntensors : 1) * mt_chunks(max_n);
}

extern "C" int tr_k_sum_cuda(float *out, const void *x, int x_dt, int64_t n, int squares, float *scratch,
                             void *stream, tr_error *err)
{
    int rc = tr_cuda_want_float("sum", x_dt, err);
    if (rc) return rc;
    if (n < 0) return tr_fail(err, TR_EUSER, "sum on CUDA: negative element count %lld.", (long long)n);
    cudaStream_t s = (cudaStream_t)stream;
    const int64_t nb = red_blocks(n);
    if (n > 0) {
        sum_partial_kernel<<<(unsigned)nb, RED_THREADS, 0, s>>>(scratch, x, x_dt, n, squares != 0);
        if ((rc = tr_cuda_launched("sum", err))) return rc;
    }
    sum_final_kernel<<<1, RED_FINAL_THREADS, 0, s>>>(out, scratch, n > 0 ? nb : 0);
    return tr_cuda_launched("sum", err);
}

extern "C" int tr_k_sum_lastdim_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t N, int64_t C,
                                     void *stream, tr_error *err)
{
    int rc;
    if ((rc = tr_cuda_want_float("sum_lastdim", out_dt, err)) || (rc = tr_cuda_want_float("sum_lastdim", x_dt, err)))
        return rc;
    if (N < 0 || C <= 0 || N > 2147483647)
        return tr_fail(err, TR_EUSER, "sum_lastdim on CUDA: %lld rows of %lld columns.", (long long)N, (long long)C);
    if (N == 0) return TR_OK;
    sum_lastdim_kernel<<<(unsigned)N, tr_cuda_row_threads(C), 0, (cudaStream_t)stream>>>(out, out_dt, x, x_dt, C);
    return tr_cuda_launched("sum_lastdim", err);
}

extern "C" int tr_k_global_sumsq_cuda(float *out, const tr_k_tensor_ref *list, int64_t ntensors, int64_t max_n,
                                      float *scratch, void *stream, tr_error *err)
{
    int rc = mt_check("global_norm", ntensors, max_n, err);
    if (rc) return rc;
    cudaStream_t s = (cudaStream_t)stream;
    const int64_t nch = mt_chunks(max_n);
    if (ntensors > 0) {
        mt_sumsq_kernel<<<dim3((unsigned)nch, (unsigned)ntensors), RED_THREADS, 0, s>>>(scratch, list, nch);
        if ((rc = tr_cuda_launched("global_norm", err))) return rc;
    }
    sum_final_kernel<<<1, RED_FINAL_THREADS, 0, s>>>(out, scratch, ntensors * nch);
    return tr_cuda_launched("global_norm", err);
}

extern "C" int tr_k_scale_check_cuda(const tr_k_tensor_ref *list, int64_t ntensors, int64_t max_n, float scale,
                                     int32_t *found_inf, void *stream, tr_error *err)
{
    int rc = mt_check("scale_check_finite", ntensors, max_n, err);
    if (rc || ntensors == 0) return rc;
    mt_scale_kernel<<<dim3((unsigned)mt_chunks(max_n), (unsigned)ntensors), RED_THREADS, 0, (cudaStream_t)stream>>>(
        list, scale, NULL, found_inf);
    return tr_cuda_launched("scale_check_finite", err);
}

extern "C" int tr_k_scale_by_device_check_cuda(const tr_k_tensor_ref *list, int64_t ntensors, int64_t max_n,
                                               const float *scale_dev, int32_t *found_inf, void *stream,
                                               tr_error *err)
{
    int rc = mt_check("scale_check_finite", ntensors, max_n, err);
    if (rc || ntensors == 0) return rc;
    mt_scale_kernel<<<dim3((unsigned)mt_chunks(max_n), (unsigned)ntensors), RED_THREADS, 0, (cudaStream_t)stream>>>(
        list, 1.0f, scale_dev, found_inf);
    return tr_cuda_launched("scale_check_finite", err);
}

extern "C" int tr_k_scale_by_device_cuda(const tr_k_tensor_ref *list, int64_t ntensors, int64_t max_n,
                                         const float *scale_dev, void *stream, tr_error *err)
{
    int rc = mt_check("clip_scale", ntensors, max_n, err);
    if (rc || ntensors == 0) return rc;
    mt_scale_kernel<<<dim3((unsigned)mt_chunks(max_n), (unsigned)ntensors), RED_THREADS, 0, (cudaStream_t)stream>>>(
        list, 1.0f, scale_dev, NULL);
    return tr_cuda_launched("clip_scale", err);
}

extern "C" int tr_k_clip_coef_cuda(float *coef, float *norm, const float *sumsq, float max_norm, void *stream,
                                   tr_error *err)
{
    clip_coef_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(coef, norm, sumsq, max_norm);
    return tr_cuda_launched("clip_coef", err);
}
