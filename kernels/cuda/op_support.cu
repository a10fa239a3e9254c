/* op_support.cu — the small kernels that the op table's CUDA slots (core/cuda_ops/) need
 * beyond the model kernels: the elementwise ops with a broadcast operand and a dtype per
 * tensor, mul's backward with the broadcast operand's column sums, scale/axpy between
 * dtypes, bias-gradient column sums, casts that involve the integer dtypes, and the
 * conversion of a mask to the i32 the pooling kernels read.
 *
 * Same contract as launcher.h: asynchronous on `stream`, fp32 arithmetic rounded once to
 * the output's dtype (RNE), deterministic (a column sum is one thread walking its rows in
 * order, never atomics), TR_EUSER for a bad argument before any launch, the launch checked
 * with the op's name. Integer conversions follow core/tensor/convert.c: by value,
 * float -> integer truncates toward zero, saturates and maps NaN to 0. */
#include "cuda/elementwise.h"
#include "cuda/op_support.h"
#include "cuda/dtype.cuh"

#include <string.h>

enum { SUP_THREADS = 256 };

/* ------------------------------------------------------------ binary ops with broadcast */

/* out[r, c] = a[r, c] (+ or *) b[(b_rows == 1 ? 0 : r), c] over N rows of C. */
__global__ void binary_bcast_kernel(void *out, int out_dt, const void *a, int a_dt, const void *b, int b_dt, int64_t N,
                                    int64_t C, int bcast, int is_mul)
{
    const int64_t n = N * C;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float x = tr_ld_dt(a, i, a_dt), y = tr_ld_dt(b, bcast ? i % C : i, b_dt);
        tr_st_dt(out, i, out_dt, is_mul ? x * y : x + y);
    }
}

extern "C" int tr_k_binary_bcast_cuda(void *out, int out_dt, const void *a, int a_dt, const void *b, int b_dt,
                                      int64_t N, int64_t C, int b_broadcast, int is_mul, void *stream, tr_error *err)
{
    const char *op = is_mul ? "mul" : "add";
    int rc;
    if ((rc = tr_cuda_want_floats(op, out_dt, a_dt, b_dt, err))) return rc;
    if (N < 0 || C < 0)
        return tr_fail(err, TR_EUSER, "%s on CUDA: negative size %lld x %lld.", op, (long long)N, (long long)C);
    if (N * C == 0) return TR_OK;
    binary_bcast_kernel<<<tr_cuda_grid(N * C, SUP_THREADS), SUP_THREADS, 0, (cudaStream_t)stream>>>(
        out, out_dt, a, a_dt, b, b_dt, N, C, b_broadcast != 0, is_mul != 0);
    return tr_cuda_launched(op, err);
}

/* da = dout * b (=); db = dout * a (=) elementwise when b is not broadcast. */
__global__ void mul_bwd_kernel(void *da, int da_dt, void *db, int db_dt, const void *dout, int dout_dt, const void *a,
                               int a_dt, const void *b, int b_dt, int64_t N, int64_t C, int bcast)
{
    const int64_t n = N * C;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float g = tr_ld_dt(dout, i, dout_dt);
        if (da) tr_st_dt(da, i, da_dt, g * tr_ld_dt(b, bcast ? i % C : i, b_dt));
        if (db && !bcast) tr_st_dt(db, i, db_dt, g * tr_ld_dt(a, i, a_dt));
    }
}

/* db[c] (=) = sum over rows of dout[r, c] * a[r, c]: one thread per column, rows in order. */
__global__ void mul_bwd_colsum_kernel(void *db, int db_dt, const void *dout, int dout_dt, const void *a, int a_dt,
                                      int64_t N, int64_t C)
{
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < C; c += (int64_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int64_t r = 0; r < N; r++) s += tr_ld_dt(dout, r * C + c, dout_dt) * tr_ld_dt(a, r * C + c, a_dt);
        tr_st_dt(db, c, db_dt, s);
    }
}

extern "C" int tr_k_mul_bwd_cuda(void *da, int da_dt, void *db, int db_dt, const void *dout, int dout_dt, const void *a,
                                 int a_dt, const void *b, int b_dt, int64_t N, int64_t C, int b_broadcast, void *stream,
                                 tr_error *err)
{
    const char *op = "mul_backward";
    int rc;
    if ((rc = tr_cuda_want_floats(op, dout_dt, a_dt, b_dt, err)) || (da && (rc = tr_cuda_want_float(op, da_dt, err))) ||
        (db && (rc = tr_cuda_want_float(op, db_dt, err))))
        return rc;
    if (N < 0 || C < 0) return tr_fail(err, TR_EUSER, "%s on CUDA: negative size.", op);
    if (N * C == 0 && !(db && b_broadcast && C > 0)) return TR_OK;
    cudaStream_t s = (cudaStream_t)stream;
    if ((da || (db && !b_broadcast)) && N * C > 0) {
        mul_bwd_kernel<<<tr_cuda_grid(N * C, SUP_THREADS), SUP_THREADS, 0, s>>>(da, da_dt, db, db_dt, dout, dout_dt, a,
                                                                                a_dt, b, b_dt, N, C, b_broadcast != 0);
        if ((rc = tr_cuda_launched(op, err))) return rc;
    }
    if (db && b_broadcast) {
        mul_bwd_colsum_kernel<<<tr_cuda_grid(C, SUP_THREADS), SUP_THREADS, 0, s>>>(db, db_dt, dout, dout_dt, a, a_dt, N,
                                                                                   C);
        if ((rc = tr_cuda_launched(op, err))) return rc;
    }
    return TR_OK;
}

/* ------------------------------------------------------------ scale, axpy between dtypes */

/* mode 0: out = alpha * x; mode 1: out += alpha * x (one rounding of the f32 sum). */
__global__ void scale_mixed_kernel(void *out, int out_dt, const void *x, int x_dt, float alpha, int64_t n, int mode)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = alpha * tr_ld_dt(x, i, x_dt);
        tr_st_dt(out, i, out_dt, mode ? __fadd_rn(tr_ld_dt(out, i, out_dt), v) : v);
    }
}

extern "C" int tr_k_scale_mixed_cuda(void *out, int out_dt, const void *x, int x_dt, float alpha, int64_t n,
                                     int accumulate, void *stream, tr_error *err)
{
    const char *op = accumulate ? "axpy" : "scale";
    int rc;
    if ((rc = tr_cuda_want_floats(op, out_dt, x_dt, TR_F32, err))) return rc;
    if (n < 0) return tr_fail(err, TR_EUSER, "%s on CUDA: negative element count.", op);
    if (n == 0) return TR_OK;
    scale_mixed_kernel<<<tr_cuda_grid(n, SUP_THREADS), SUP_THREADS, 0, (cudaStream_t)stream>>>(
        out, out_dt, x, x_dt, alpha, n, accumulate != 0);
    return tr_cuda_launched(op, err);
}

/* ------------------------------------------------------------ column sums */

/* out[c] (+=, f32) += sum over rows of x[r, c]: the bias gradient, deterministic. */
__global__ void colsum_acc_kernel(float *out, const void *x, int x_dt, int64_t N, int64_t C)
{
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < C; c += (int64_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int64_t r = 0; r < N; r++) s += tr_ld_dt(x, r * C + c, x_dt);
        out[c] += s;
    }
}

extern "C" int tr_k_colsum_acc_cuda(float *out, const void *x, int x_dt, int64_t N, int64_t C, void *stream,
                                    tr_error *err)
{
    int rc;
    if ((rc = tr_cuda_want_float("column sum", x_dt, err))) return rc;
    if (N < 0 || C < 0) return tr_fail(err, TR_EUSER, "column sum on CUDA: negative size.");
    if (N * C == 0) return TR_OK;
    colsum_acc_kernel<<<tr_cuda_grid(C, SUP_THREADS), SUP_THREADS, 0, (cudaStream_t)stream>>>(out, x, x_dt, N, C);
    return tr_cuda_launched("column sum", err);
}

/* ------------------------------------------------------------ casts with integers */

__device__ __forceinline__ double ld_any(const void *p, int64_t i, int dt)
{
    switch (dt) {
    case TR_I32:
        return (double)((const int32_t *)p)[i];
    case TR_I64:
        return (double)((const int64_t *)p)[i];
    default:
        return (double)tr_ld_dt(p, i, dt);
    }
}

__global__ void cast_any_kernel(void *out, int out_dt, const void *in, int in_dt, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (out_dt == TR_I64 && in_dt == TR_I32) {
            ((int64_t *)out)[i] = ((const int32_t *)in)[i];
        } else if (out_dt == TR_I32 && in_dt == TR_I64) {
            const int64_t v = ((const int64_t *)in)[i];
            ((int32_t *)out)[i] = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
        } else if (out_dt == TR_I32 || out_dt == TR_I64) {
            const double v = ld_any(in, i, in_dt);
            const double lo = out_dt == TR_I32 ? -2147483648.0 : -9223372036854775808.0;
            const double hi = out_dt == TR_I32 ? 2147483648.0 : 9223372036854775808.0;
            int64_t r;
            if (isnan(v))
                r = 0;
            else if (v < lo)
                r = out_dt == TR_I32 ? INT32_MIN : INT64_MIN;
            else if (v >= hi)
                r = out_dt == TR_I32 ? INT32_MAX : INT64_MAX;
            else
                r = (int64_t)v;
            if (out_dt == TR_I32)
                ((int32_t *)out)[i] = (int32_t)r;
            else
                ((int64_t *)out)[i] = r;
        } else {
            /* integer -> float through f32, as the CPU does */
            tr_st_dt(out, i, out_dt, (float)ld_any(in, i, in_dt));
        }
    }
}

extern "C" int tr_k_cast_any_cuda(void *out, int out_dt, const void *in, int in_dt, int64_t n, void *stream,
                                  tr_error *err)
{
    if (out_dt < 0 || out_dt >= TR_NDTYPES || in_dt < 0 || in_dt >= TR_NDTYPES)
        return tr_fail(err, TR_EUSER, "cast on CUDA: unknown dtype (%d -> %d).", in_dt, out_dt);
    if (n < 0) return tr_fail(err, TR_EUSER, "cast on CUDA: negative element count.");
    if (n == 0) return TR_OK;
    cudaStream_t s = (cudaStream_t)stream;
    if (out_dt == in_dt) {
        if (out != in)
            TR_CUDA_CHECK(err, cudaMemcpyAsync(out, in, (size_t)n * tr_dtype_size(in_dt), cudaMemcpyDeviceToDevice, s));
        return TR_OK;
    }
    const int fl_in = in_dt == TR_F32 || in_dt == TR_BF16 || in_dt == TR_F16;
    const int fl_out = out_dt == TR_F32 || out_dt == TR_BF16 || out_dt == TR_F16;
    if (fl_in && fl_out) return tr_k_cast_fwd_cuda(out, out_dt, in, in_dt, n, stream, err);
    cast_any_kernel<<<tr_cuda_grid(n, SUP_THREADS), SUP_THREADS, 0, s>>>(out, out_dt, in, in_dt, n);
    return tr_cuda_launched("cast", err);
}

/* ------------------------------------------------------------ masks */

/* out[i] (=) = mask[i] != 0 (any dtype; a float 0.5 is a kept token), or 1 with no mask. */
__global__ void mask_i32_kernel(int32_t *out, const void *mask, int mask_dt, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = mask ? ld_any(mask, i, mask_dt) != 0.0 : 1;
}

extern "C" int tr_k_mask_i32_cuda(int32_t *out, const void *mask, int mask_dt, int64_t n, void *stream, tr_error *err)
{
    if (mask && (mask_dt < 0 || mask_dt >= TR_NDTYPES))
        return tr_fail(err, TR_EUSER, "mask on CUDA: unknown dtype %d.", mask_dt);
    if (n < 0) return tr_fail(err, TR_EUSER, "mask on CUDA: negative element count.");
    if (n == 0) return TR_OK;
    mask_i32_kernel<<<tr_cuda_grid(n, SUP_THREADS), SUP_THREADS, 0, (cudaStream_t)stream>>>(out, mask, mask_dt, n);
    return tr_cuda_launched("mask", err);
}

/* ------------------------------------------------------------ small uploads */

/* A few host bytes (a multi-tensor list, a counter) reach the device as a kernel's
 * by-value argument: a launch never waits, where cudaMemcpyAsync from pageable memory may
 * synchronise with the stream to stage the bytes. */
enum { UPLOAD_CHUNK = 2048 };
struct upload_chunk {
    unsigned char b[UPLOAD_CHUNK];
};

__global__ void upload_kernel(unsigned char *dst, upload_chunk c, int n)
{
    for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = c.b[i];
}

extern "C" int tr_k_upload_cuda(void *dst, const void *src, size_t bytes, void *stream, tr_error *err)
{
    int rc;
    for (size_t off = 0; off < bytes; off += UPLOAD_CHUNK) {
        const size_t n = bytes - off < UPLOAD_CHUNK ? bytes - off : UPLOAD_CHUNK;
        upload_chunk c;
        memcpy(c.b, (const unsigned char *)src + off, n);
        upload_kernel<<<1, 256, 0, (cudaStream_t)stream>>>((unsigned char *)dst + off, c, (int)n);
        if ((rc = tr_cuda_launched("upload", err))) return rc;
    }
    return TR_OK;
}
