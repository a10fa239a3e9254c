/* index_check.cu — an index tensor (token ids, class targets) checked on the device, so that
 * an op that takes indices never waits for the host: one block walks the indices, writes them
 * as int64 with every bad one replaced (by -1, or the ignore index where there is one: the
 * kernels that read them skip such a row), counts the rows that are neither bad nor ignored,
 * and records the first bad index (its value and position) in the device's error word, unless
 * the word holds an earlier error already. The host reads the word where it synchronises
 * anyway (core/cuda_device/device_errors.c) and then fails with the CPU's user error. */
#include "cuda/index_check.h"
#include "cuda/dtype.cuh"

enum { CHECK_THREADS = 1024 };

__device__ __forceinline__ long long warp_min_ll(long long v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const long long w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w < v ? w : v;
    }
    return v;
}

__device__ __forceinline__ long long warp_sum_ll(long long v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void check_indices_kernel(int64_t *out, const void *idx, int idx_dt, int64_t n, int64_t limit,
                                     int64_t ignore_index, int has_ignore, int64_t *count, tr_k_index_error *word,
                                     int64_t op)
{
    __shared__ long long first_part[32];
    __shared__ long long count_part[32];
    long long first = n, kept = 0;
    const int64_t replace = has_ignore ? ignore_index : -1;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const int64_t v = idx_dt == TR_I32 ? (int64_t)((const int32_t *)idx)[i] : ((const int64_t *)idx)[i];
        const int ignored = has_ignore && v == ignore_index;
        const int bad = !ignored && (v < 0 || v >= limit);
        if (bad && i < first) first = i;
        kept += !ignored && !bad;
        out[i] = bad ? replace : v;
    }
    first = warp_min_ll(first);
    kept = warp_sum_ll(kept);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        first_part[warp] = first;
        count_part[warp] = kept;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        long long f = n, c = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) {
            f = first_part[w] < f ? first_part[w] : f;
            c += count_part[w];
        }
        if (count) *count = (int64_t)c;
        if (f < n && word->op == 0) {
            word->op = op;
            word->value = idx_dt == TR_I32 ? (int64_t)((const int32_t *)idx)[f] : ((const int64_t *)idx)[f];
            word->position = (int64_t)f;
            word->limit = limit;
            word->ignore_index = ignore_index;
        }
    }
}

extern "C" int tr_k_check_indices_cuda(int64_t *out, const void *idx, int idx_dt, int64_t n, int64_t limit,
                                       int64_t ignore_index, int has_ignore, int64_t *count, tr_k_index_error *word,
                                       int64_t op, void *stream, tr_error *err)
{
    if (idx_dt != TR_I32 && idx_dt != TR_I64)
        return tr_fail(err, TR_EUSER, "index check on CUDA: indices must be i32 or i64 (dtype %d).", idx_dt);
    if (n < 0 || !word || op <= 0)
        return tr_fail(err, TR_EINTERNAL, "index check on CUDA: %lld indices, error word %p, op %lld.",
                       (long long)n, (void *)word, (long long)op);
    check_indices_kernel<<<1, CHECK_THREADS, 0, (cudaStream_t)stream>>>(out, idx, idx_dt, n, limit, ignore_index,
                                                                      has_ignore, count, word, op);
    return tr_cuda_launched("index check", err);
}
