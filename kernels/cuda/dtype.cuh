/* dtype.cuh — what every CUDA kernel file shares: loading a stored element (f32, bf16,
 * f16) as fp32 and rounding fp32 back to the storage dtype, bit-identical to the CPU's
 * core/tensor/convert.c (round-to-nearest-even, NaN keeps its sign and top payload bits), the
 * dtype dispatch of a launcher, deterministic block reductions and the launch check.
 *
 * Reductions are deterministic: a block reduces in a fixed tree (warp shuffles, then one
 * warp over the per-warp partials), so the same inputs and launch shape give the same bits
 * on every run. Private to kernels/cuda. */
#ifndef TR_KERNELS_CUDA_DTYPE_CUH
#define TR_KERNELS_CUDA_DTYPE_CUH

#include "cuda/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

/* ------------------------------------------------------------ element conversion */

__device__ __forceinline__ float tr_ld(float x) { return x; }
__device__ __forceinline__ float tr_ld(__nv_bfloat16 x)
{
    return __uint_as_float((unsigned)__bfloat16_as_ushort(x) << 16);
}
__device__ __forceinline__ float tr_ld(__half x)
{
    const unsigned h = __half_as_ushort(x);
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu))
        return __uint_as_float(((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13));
    return __half2float(x);
}

template <typename T> __device__ __forceinline__ T tr_st(float x);
template <> __device__ __forceinline__ float tr_st<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 tr_st<__nv_bfloat16>(float x)
{
    if (isnan(x)) return __ushort_as_bfloat16((unsigned short)((__float_as_uint(x) >> 16) | 0x40u));
    return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half tr_st<__half>(float x)
{
    if (isnan(x)) {
        const unsigned u = __float_as_uint(x);
        return __ushort_as_half((unsigned short)(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu)));
    }
    return __float2half_rn(x);
}

/* Element i of a buffer whose float dtype is known only at run time. Every thread of a
 * launch sees the same dtype, so the switch never diverges within a warp; this keeps one
 * kernel per op for every mix of activation dtypes (each tensor may differ, as on the CPU). */
__device__ __forceinline__ float tr_ld_dt(const void *p, int64_t i, int dt)
{
    switch (dt) {
    case TR_F32: return ((const float *)p)[i];
    case TR_BF16: return tr_ld(((const __nv_bfloat16 *)p)[i]);
    default: return tr_ld(((const __half *)p)[i]);
    }
}

__device__ __forceinline__ void tr_st_dt(void *p, int64_t i, int dt, float v)
{
    switch (dt) {
    case TR_F32: ((float *)p)[i] = v; break;
    case TR_BF16: ((__nv_bfloat16 *)p)[i] = tr_st<__nv_bfloat16>(v); break;
    default: ((__half *)p)[i] = tr_st<__half>(v); break;
    }
}

/* ------------------------------------------------------------ dtype dispatch */

/* Runs BODY with T bound to the C++ type of the float dtype `dt` (f32, bf16, f16). The
 * launcher has checked dt with tr_cuda_want_float first. */
#define TR_CUDA_FLOAT_DISPATCH(dt, T, ...)                                                      \
    do {                                                                                        \
        switch (dt) {                                                                           \
        case TR_F32: { typedef float T; __VA_ARGS__; } break;                                   \
        case TR_BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; } break;                          \
        default: { typedef __half T; __VA_ARGS__; } break;                                      \
        }                                                                                       \
    } while (0)

static inline int tr_cuda_want_float(const char *op, int dtype, tr_error *err)
{
    if (dtype == TR_F32 || dtype == TR_BF16 || dtype == TR_F16) return TR_OK;
    return tr_fail(err, TR_EUSER, "%s on CUDA: dtype %d is not a float dtype (f32, bf16, f16).", op, dtype);
}

/* The launchers' shared argument checks: N rows of C columns (one block per row, so N
 * below 2^31), and three buffers' float dtypes at once. */
static inline int tr_cuda_want_rows(const char *op, int64_t N, int64_t C, tr_error *err)
{
    if (N < 0 || C <= 0 || N > 2147483647)
        return tr_fail(err, TR_EUSER, "%s on CUDA: %lld rows of %lld columns; rows must be in [0, 2^31) and "
                                      "columns positive.", op, (long long)N, (long long)C);
    return TR_OK;
}

static inline int tr_cuda_want_floats(const char *op, int a, int b, int c, tr_error *err)
{
    int rc;
    if ((rc = tr_cuda_want_float(op, a, err)) || (rc = tr_cuda_want_float(op, b, err)) ||
        (rc = tr_cuda_want_float(op, c, err)))
        return rc;
    return TR_OK;
}

/* After a launch: a bad configuration surfaces here, with the op's name. */
static inline int tr_cuda_launched(const char *op, tr_error *err)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return TR_OK;
    return tr_fail(err, TR_EINTERNAL, "%s on CUDA: the kernel launch failed: %s (%s).", op, cudaGetErrorName(e),
                   cudaGetErrorString(e));
}

/* Grid for a grid-stride loop over n items: enough blocks to fill the GPU, no more. */
static inline unsigned tr_cuda_grid(int64_t n, int threads)
{
    int64_t g = (n + threads - 1) / threads;
    if (g < 1) g = 1;
    if (g > 65535 * 8) g = 65535 * 8;
    return (unsigned)g;
}

/* ------------------------------------------------------------ reductions */

/* The operations the reductions below combine values with. */
struct tr_red_add {
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct tr_red_max {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/* op over the warp's 32 lanes, a butterfly: every lane gets the result. */
template <typename Op> __device__ __forceinline__ float tr_warp_reduce(float v, Op op)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* op over the block (blockDim.x a multiple of 32, at most 1024), returned to every thread;
 * identity fills the lanes past the last warp. `scratch` is 32 floats of shared memory; the
 * call ends with a barrier, so the same scratch may serve the next reduction. */
template <typename Op> __device__ __forceinline__ float tr_block_reduce(float v, float *scratch, Op op, float identity)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = tr_warp_reduce(v, op);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < nwarps ? scratch[lane] : identity;
    t = tr_warp_reduce(t, op);
    __syncthreads();
    return t;
}

__device__ __forceinline__ float tr_warp_sum(float v) { return tr_warp_reduce(v, tr_red_add()); }
__device__ __forceinline__ float tr_warp_max(float v) { return tr_warp_reduce(v, tr_red_max()); }
__device__ __forceinline__ float tr_block_sum(float v, float *scratch)
{
    return tr_block_reduce(v, scratch, tr_red_add(), 0.0f);
}
__device__ __forceinline__ float tr_block_max(float v, float *scratch)
{
    return tr_block_reduce(v, scratch, tr_red_max(), -INFINITY);
}

/* Threads for a kernel with one block per row of C elements: a multiple of 32 up to 1024. */
static inline int tr_cuda_row_threads(int64_t C)
{
    int t = 32;
    while (t < 1024 && t < C) t *= 2;
    return t;
}

#endif
