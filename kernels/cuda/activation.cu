/* activation.cu — GELU (erf and tanh forms, and ReLU as approx 2) and tanh on the GPU, forward and backward,
 * the twins of kernels/cpu/activation.c. One thread per element in a grid-stride
 * loop; fp32 math, one rounding to the output dtype. In-place (out == x, dx == dout) is
 * allowed: each element is read before it is written by the same thread. */
#include "cuda/activation.h"
#include "cuda/dtype.cuh"
#include "cuda/gelu.cuh"

enum { ACT_THREADS = 256 };

__global__ void gelu_fwd_kernel(void *out, int out_dt, const void *x, int x_dt, int64_t n, int approx)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        tr_st_dt(out, i, out_dt, gelu_f(tr_ld_dt(x, i, x_dt), approx));
}

__global__ void gelu_bwd_kernel(void *dx, int dx_dt, const void *dout, int dout_dt, const void *x, int x_dt,
                                int64_t n, int approx)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        tr_st_dt(dx, i, dx_dt, tr_ld_dt(dout, i, dout_dt) * gelu_grad(tr_ld_dt(x, i, x_dt), approx));
}

__global__ void tanh_fwd_kernel(void *out, int out_dt, const void *x, int x_dt, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        tr_st_dt(out, i, out_dt, tanhf(tr_ld_dt(x, i, x_dt)));
}

__global__ void tanh_bwd_kernel(void *dx, int dx_dt, const void *dout, int dout_dt, const void *y, int y_dt,
                                int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float t = tr_ld_dt(y, i, y_dt);
        tr_st_dt(dx, i, dx_dt, tr_ld_dt(dout, i, dout_dt) * (1.0f - t * t));
    }
}

static int want3(const char *op, int a, int b, int c, int64_t n, tr_error *err)
{
    int rc = tr_cuda_want_floats(op, a, b, c, err);
    if (rc) return rc;
    if (n < 0) return tr_fail(err, TR_EUSER, "%s on CUDA: negative element count %lld.", op, (long long)n);
    return TR_OK;
}

extern "C" int tr_k_gelu_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t n, int approx,
                                  void *stream, tr_error *err)
{
    int rc = want3("gelu", out_dt, x_dt, x_dt, n, err);
    if (rc || n == 0) return rc;
    gelu_fwd_kernel<<<tr_cuda_grid(n, ACT_THREADS), ACT_THREADS, 0, (cudaStream_t)stream>>>(out, out_dt, x, x_dt, n,
                                                                                           approx);
    return tr_cuda_launched("gelu", err);
}

extern "C" int tr_k_gelu_bwd_cuda(void *dx, int dx_dt, const void *dout, int dout_dt, const void *x, int x_dt,
                                  int64_t n, int approx, void *stream, tr_error *err)
{
    int rc = want3("gelu_backward", dx_dt, dout_dt, x_dt, n, err);
    if (rc || n == 0) return rc;
    gelu_bwd_kernel<<<tr_cuda_grid(n, ACT_THREADS), ACT_THREADS, 0, (cudaStream_t)stream>>>(
        dx, dx_dt, dout, dout_dt, x, x_dt, n, approx);
    return tr_cuda_launched("gelu_backward", err);
}

extern "C" int tr_k_tanh_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t n, void *stream,
                                  tr_error *err)
{
    int rc = want3("tanh", out_dt, x_dt, x_dt, n, err);
    if (rc || n == 0) return rc;
    tanh_fwd_kernel<<<tr_cuda_grid(n, ACT_THREADS), ACT_THREADS, 0, (cudaStream_t)stream>>>(out, out_dt, x, x_dt, n);
    return tr_cuda_launched("tanh", err);
}

extern "C" int tr_k_tanh_bwd_cuda(void *dx, int dx_dt, const void *dout, int dout_dt, const void *y, int y_dt,
                                  int64_t n, void *stream, tr_error *err)
{
    int rc = want3("tanh_backward", dx_dt, dout_dt, y_dt, n, err);
    if (rc || n == 0) return rc;
    tanh_bwd_kernel<<<tr_cuda_grid(n, ACT_THREADS), ACT_THREADS, 0, (cudaStream_t)stream>>>(dx, dx_dt, dout, dout_dt,
                                                                                           y, y_dt, n);
    return tr_cuda_launched("tanh_backward", err);
}
