/* geglu.cu — GeGLU's gate on the GPU, the twin of kernels/cpu/geglu.c: out = gelu(x) * g for
 * each row's halves h = [x | g], and its backward. One thread per element of out in a
 * grid-stride loop, fp32 math; GELU itself is gelu.cuh's. */
#include "cuda/geglu.h"
#include "cuda/dtype.cuh"
#include "cuda/gelu.cuh"

enum { GG_THREADS = 256 };

__global__ void geglu_fwd_kernel(void *out, int out_dt, const void *h, int h_dt, int64_t n, int64_t I, int approx)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / I, c = i - r * I, xi = r * 2 * I + c;
        const float x = tr_ld_dt(h, xi, h_dt), g = tr_ld_dt(h, xi + I, h_dt);
        tr_st_dt(out, i, out_dt, gelu_f(x, approx) * g);
    }
}

__global__ void geglu_bwd_kernel(void *dh, int dh_dt, const void *dout, int dout_dt, const void *h, int h_dt, int64_t n,
                                 int64_t I, int approx)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / I, c = i - r * I, xi = r * 2 * I + c;
        const float x = tr_ld_dt(h, xi, h_dt), g = tr_ld_dt(h, xi + I, h_dt), d = tr_ld_dt(dout, i, dout_dt);
        tr_st_dt(dh, xi, dh_dt, d * gelu_grad(x, approx) * g);
        tr_st_dt(dh, xi + I, dh_dt, gelu_f(x, approx) * d);
    }
}

extern "C" int tr_k_geglu_fwd_cuda(void *out, int out_dt, const void *h, int h_dt, int64_t N, int64_t I, int approx,
                                   void *stream, tr_error *err)
{
    const char *op = "geglu";
    int rc;
    if ((rc = tr_cuda_want_rows(op, N, I, err)) || (rc = tr_cuda_want_floats(op, out_dt, h_dt, h_dt, err))) return rc;
    if (N == 0) return TR_OK;
    const int64_t n = N * I;
    geglu_fwd_kernel<<<tr_cuda_grid(n, GG_THREADS), GG_THREADS, 0, (cudaStream_t)stream>>>(out, out_dt, h, h_dt, n, I,
                                                                                           approx);
    return tr_cuda_launched(op, err);
}

extern "C" int tr_k_geglu_bwd_cuda(void *dh, int dh_dt, const void *dout, int dout_dt, const void *h, int h_dt,
                                   int64_t N, int64_t I, int approx, void *stream, tr_error *err)
{
    const char *op = "geglu_backward";
    int rc;
    if ((rc = tr_cuda_want_rows(op, N, I, err)) || (rc = tr_cuda_want_floats(op, dh_dt, dout_dt, h_dt, err))) return rc;
    if (N == 0) return TR_OK;
    const int64_t n = N * I;
    geglu_bwd_kernel<<<tr_cuda_grid(n, GG_THREADS), GG_THREADS, 0, (cudaStream_t)stream>>>(dh, dh_dt, dout, dout_dt, h,
                                                                                           h_dt, n, I, approx);
    return tr_cuda_launched(op, err);
}
