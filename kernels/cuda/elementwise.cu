/* elementwise.cu — add, mul, scale, axpy, fill and dtype casts on the GPU.
 *
 * One kernel template per arity (map0, map1, map2): each thread loads its elements,
 * widens them to fp32, applies a functor, and rounds once to the output dtype with
 * round-to-nearest-even (__float2bfloat16_rn, __float2half_rn), which matches the CPU's
 * tr_f32_to_bf16 / tr_f32_to_f16 bit for bit (NaN payloads too, see below). The functors use __fadd_rn/__fmul_rn so
 * that nvcc never contracts a*b+c into an FMA: results equal plain fp32 C arithmetic.
 *
 * Vectorisation: when every pointer is aligned to its pack (16 bytes of the widest
 * type), threads move whole packs and a tail loop finishes the last n % V elements;
 * otherwise the V = 1 instantiation runs. Grid-stride loops, so any n fits any grid. */
#include "cuda/cuda_check.h"
#include "cuda/elementwise.h"
#include "cuda/dtype.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* ------------------------------------------------------------ dtype helpers */

/* Conversions are dtype.cuh's tr_ld / tr_st (bit for bit core/convert.c, NaN payloads
 * included). */

template <typename T, int V> struct alignas(sizeof(T) * V) pack {
    T v[V];
};

/* ------------------------------------------------------------ functors */

struct op_add {
    __device__ float operator()(float a, float b) const { return __fadd_rn(a, b); }
};
struct op_mul {
    __device__ float operator()(float a, float b) const { return __fmul_rn(a, b); }
};
struct op_axpy { /* (y, x) -> y + alpha * x */
    float alpha;
    __device__ float operator()(float y, float x) const { return __fadd_rn(y, __fmul_rn(alpha, x)); }
};
struct op_scale {
    float alpha;
    __device__ float operator()(float x) const { return __fmul_rn(alpha, x); }
};
struct op_identity {
    __device__ float operator()(float x) const { return x; }
};

/* ------------------------------------------------------------ kernels */

/* out[i] = value, V elements per pack. */
template <int V, typename TO>
__global__ void map0_kernel(TO *out, float value, int64_t n)
{
    const TO v = tr_st<TO>(value);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t npack = n / V;
    pack<TO, V> p;
#pragma unroll
    for (int j = 0; j < V; j++) p.v[j] = v;
    for (int64_t i = first; i < npack; i += stride) reinterpret_cast<pack<TO, V> *>(out)[i] = p;
    for (int64_t i = npack * V + first; i < n; i += stride) out[i] = v;
}

/* out[i] = f(in[i]) */
template <int V, typename TO, typename TI, typename F>
__global__ void map1_kernel(TO *out, const TI *in, int64_t n, F f)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t npack = n / V;
    for (int64_t i = first; i < npack; i += stride) {
        const pack<TI, V> x = reinterpret_cast<const pack<TI, V> *>(in)[i];
        pack<TO, V> y;
#pragma unroll
        for (int j = 0; j < V; j++) y.v[j] = tr_st<TO>(f(tr_ld(x.v[j])));
        reinterpret_cast<pack<TO, V> *>(out)[i] = y;
    }
    for (int64_t i = npack * V + first; i < n; i += stride) out[i] = tr_st<TO>(f(tr_ld(in[i])));
}

/* out[i] = f(a[i], b[i]) */
template <int V, typename T, typename F>
__global__ void map2_kernel(T *out, const T *a, const T *b, int64_t n, F f)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t npack = n / V;
    for (int64_t i = first; i < npack; i += stride) {
        const pack<T, V> x = reinterpret_cast<const pack<T, V> *>(a)[i];
        const pack<T, V> y = reinterpret_cast<const pack<T, V> *>(b)[i];
        pack<T, V> z;
#pragma unroll
        for (int j = 0; j < V; j++) z.v[j] = tr_st<T>(f(tr_ld(x.v[j]), tr_ld(y.v[j])));
        reinterpret_cast<pack<T, V> *>(out)[i] = z;
    }
    for (int64_t i = npack * V + first; i < n; i += stride)
        out[i] = tr_st<T>(f(tr_ld(a[i]), tr_ld(b[i])));
}

/* ------------------------------------------------------------ launch helpers */

static const int threads_per_block = 256;
/* Enough blocks to fill an H200 (132 SMs x 8 resident blocks of 256 threads) several
 * times over; beyond that the grid-stride loop takes over. */
static const int64_t max_blocks = 132 * 8 * 4;

static unsigned grid_for(int64_t work)
{
    int64_t blocks = (work + threads_per_block - 1) / threads_per_block;
    if (blocks < 1) blocks = 1;
    if (blocks > max_blocks) blocks = max_blocks;
    return (unsigned)blocks;
}

static bool aligned_to(const void *p, size_t bytes) { return ((uintptr_t)p % bytes) == 0; }

/* The pack width for types of these sizes: 16 bytes of the wider one. */
template <typename TO, typename TI> struct pack_width {
    static const int value = 16 / (sizeof(TO) > sizeof(TI) ? sizeof(TO) : sizeof(TI));
};

template <typename TO>
static int launch_map0(TO *out, float value, int64_t n, cudaStream_t s, tr_error *err)
{
    const int V = pack_width<TO, TO>::value;
    if (aligned_to(out, sizeof(TO) * V))
        map0_kernel<V, TO><<<grid_for(n / V > 0 ? n / V : n), threads_per_block, 0, s>>>(out, value, n);
    else
        map0_kernel<1, TO><<<grid_for(n), threads_per_block, 0, s>>>(out, value, n);
    TR_CUDA_CHECK_LAUNCH(err);
    return TR_OK;
}

template <typename TO, typename TI, typename F>
static int launch_map1(TO *out, const TI *in, int64_t n, F f, cudaStream_t s, tr_error *err)
{
    const int V = pack_width<TO, TI>::value;
    if (aligned_to(out, sizeof(TO) * V) && aligned_to(in, sizeof(TI) * V))
        map1_kernel<V><<<grid_for(n / V > 0 ? n / V : n), threads_per_block, 0, s>>>(out, in, n, f);
    else
        map1_kernel<1><<<grid_for(n), threads_per_block, 0, s>>>(out, in, n, f);
    TR_CUDA_CHECK_LAUNCH(err);
    return TR_OK;
}

template <typename T, typename F>
static int launch_map2(T *out, const T *a, const T *b, int64_t n, F f, cudaStream_t s, tr_error *err)
{
    const int V = pack_width<T, T>::value;
    const size_t pb = sizeof(T) * V;
    if (aligned_to(out, pb) && aligned_to(a, pb) && aligned_to(b, pb))
        map2_kernel<V><<<grid_for(n / V > 0 ? n / V : n), threads_per_block, 0, s>>>(out, a, b, n, f);
    else
        map2_kernel<1><<<grid_for(n), threads_per_block, 0, s>>>(out, a, b, n, f);
    TR_CUDA_CHECK_LAUNCH(err);
    return TR_OK;
}

/* ------------------------------------------------------------ argument checks */

static bool is_float_dtype(int dtype) { return dtype == TR_F32 || dtype == TR_BF16 || dtype == TR_F16; }

static int check_args(const char *op, int dtype, int64_t n, const void *p0, const void *p1,
                      const void *p2, tr_error *err)
{
    if (!is_float_dtype(dtype))
        return tr_fail(err, TR_EUSER,
                       "tr_cuda_%s: dtype %s is not supported on the GPU; use f32, bf16 or f16.",
                       op, tr_dtype_name(dtype));
    if (n < 0) return tr_fail(err, TR_EUSER, "tr_cuda_%s: negative element count %lld.", op, (long long)n);
    if (n > 0 && (!p0 || !p1 || !p2))
        return tr_fail(err, TR_EUSER, "tr_cuda_%s: NULL device pointer for %lld elements.", op,
                       (long long)n);
    return TR_OK;
}

/* ------------------------------------------------------------ dispatch */

template <typename F>
static int dispatch_map2(void *out, const void *a, const void *b, int dtype, int64_t n, F f,
                         cudaStream_t s, tr_error *err)
{
    switch (dtype) {
    case TR_F32: return launch_map2((float *)out, (const float *)a, (const float *)b, n, f, s, err);
    case TR_BF16:
        return launch_map2((__nv_bfloat16 *)out, (const __nv_bfloat16 *)a, (const __nv_bfloat16 *)b, n, f,
                           s, err);
    default: return launch_map2((__half *)out, (const __half *)a, (const __half *)b, n, f, s, err);
    }
}

template <typename F>
static int dispatch_map1_same(void *out, const void *in, int dtype, int64_t n, F f, cudaStream_t s,
                              tr_error *err)
{
    switch (dtype) {
    case TR_F32: return launch_map1((float *)out, (const float *)in, n, f, s, err);
    case TR_BF16: return launch_map1((__nv_bfloat16 *)out, (const __nv_bfloat16 *)in, n, f, s, err);
    default: return launch_map1((__half *)out, (const __half *)in, n, f, s, err);
    }
}

template <typename TO>
static int dispatch_cast_from(TO *out, const void *in, int in_dtype, int64_t n, cudaStream_t s,
                              tr_error *err)
{
    switch (in_dtype) {
    case TR_F32: return launch_map1(out, (const float *)in, n, op_identity(), s, err);
    case TR_BF16: return launch_map1(out, (const __nv_bfloat16 *)in, n, op_identity(), s, err);
    default: return launch_map1(out, (const __half *)in, n, op_identity(), s, err);
    }
}

/* ------------------------------------------------------------ C entry points */

extern "C" int tr_k_add_fwd_cuda(void *out, const void *a, const void *b, int dtype, int64_t n, void *stream,
                           tr_error *err)
{
    int rc = check_args("add", dtype, n, out, a, b, err);
    if (rc != TR_OK || n == 0) return rc;
    return dispatch_map2(out, a, b, dtype, n, op_add(), (cudaStream_t)stream, err);
}

extern "C" int tr_k_mul_fwd_cuda(void *out, const void *a, const void *b, int dtype, int64_t n, void *stream,
                           tr_error *err)
{
    int rc = check_args("mul", dtype, n, out, a, b, err);
    if (rc != TR_OK || n == 0) return rc;
    return dispatch_map2(out, a, b, dtype, n, op_mul(), (cudaStream_t)stream, err);
}

extern "C" int tr_k_scale_fwd_cuda(void *out, const void *x, float alpha, int dtype, int64_t n, void *stream,
                             tr_error *err)
{
    int rc = check_args("scale", dtype, n, out, x, x, err);
    if (rc != TR_OK || n == 0) return rc;
    op_scale f = { alpha };
    return dispatch_map1_same(out, x, dtype, n, f, (cudaStream_t)stream, err);
}

extern "C" int tr_k_axpy_fwd_cuda(void *y, const void *x, float alpha, int dtype, int64_t n, void *stream,
                            tr_error *err)
{
    int rc = check_args("axpy", dtype, n, y, x, x, err);
    if (rc != TR_OK || n == 0) return rc;
    op_axpy f = { alpha };
    return dispatch_map2(y, y, x, dtype, n, f, (cudaStream_t)stream, err);
}

extern "C" int tr_k_fill_fwd_cuda(void *out, float value, int dtype, int64_t n, void *stream, tr_error *err)
{
    int rc = check_args("fill", dtype, n, out, out, out, err);
    if (rc != TR_OK || n == 0) return rc;
    cudaStream_t s = (cudaStream_t)stream;
    switch (dtype) {
    case TR_F32: return launch_map0((float *)out, value, n, s, err);
    case TR_BF16: return launch_map0((__nv_bfloat16 *)out, value, n, s, err);
    default: return launch_map0((__half *)out, value, n, s, err);
    }
}

extern "C" int tr_k_cast_fwd_cuda(void *out, int out_dtype, const void *in, int in_dtype, int64_t n,
                            void *stream, tr_error *err)
{
    int rc = check_args("cast", out_dtype, n, out, in, in, err);
    if (rc == TR_OK) rc = check_args("cast", in_dtype, n, out, in, in, err);
    if (rc != TR_OK || n == 0) return rc;
    if (out == in && tr_dtype_size(out_dtype) != tr_dtype_size(in_dtype))
        return tr_fail(err, TR_EUSER,
                       "tr_k_cast_fwd_cuda: %s -> %s cannot run in place (the element sizes differ); "
                       "cast into a separate buffer.",
                       tr_dtype_name(in_dtype), tr_dtype_name(out_dtype));
    cudaStream_t s = (cudaStream_t)stream;
    if (out_dtype == in_dtype) {
        if (out != in)
            TR_CUDA_CHECK(err, cudaMemcpyAsync(out, in, (size_t)n * tr_dtype_size(in_dtype),
                                               cudaMemcpyDeviceToDevice, s));
        return TR_OK;
    }
    switch (out_dtype) {
    case TR_F32: return dispatch_cast_from((float *)out, in, in_dtype, n, s, err);
    case TR_BF16: return dispatch_cast_from((__nv_bfloat16 *)out, in, in_dtype, n, s, err);
    default: return dispatch_cast_from((__half *)out, in, in_dtype, n, s, err);
    }
}
