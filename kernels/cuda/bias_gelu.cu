/* bias_gelu.cu — the FFN's up-projection bias and GELU fused on the GPU, the twin of
 * kernels/cpu/bias_gelu.c and core/ops/bias_gelu.c: h = h + bias (in place, rounded to h's
 * dtype), out = gelu of the fp32 pre-activation (as the CPU computes it, before h's
 * rounding); backward dx = dout * gelu'(h), and dbias += its column sums in fp32 before dx's
 * rounding, as the CPU sums them (one thread per column walking the rows in order:
 * deterministic). One thread per element in a grid-stride loop, fp32 math.
 * GELU itself is gelu.cuh's, activation.cu's. */
#include "cuda/bias_gelu.h"
#include "cuda/dtype.cuh"
#include "cuda/gelu.cuh"

enum { BG_THREADS = 256 };

__global__ void bias_gelu_fwd_kernel(void *out, int out_dt, void *h, int h_dt, const void *bias, int b_dt, int64_t n,
                                     int64_t I, int approx)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = tr_ld_dt(h, i, h_dt);
        if (bias) v += tr_ld_dt(bias, i % I, b_dt);
        tr_st_dt(h, i, h_dt, v);
        tr_st_dt(out, i, out_dt, gelu_f(v, approx));
    }
}

__global__ void bias_gelu_bwd_kernel(void *dx, int dx_dt, const void *dout, int dout_dt, const void *h, int h_dt,
                                     int64_t n, int approx)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        tr_st_dt(dx, i, dx_dt, tr_ld_dt(dout, i, dout_dt) * gelu_grad(tr_ld_dt(h, i, h_dt), approx));
}

/* dbias[c] += sum over rows of dout * gelu'(h), in fp32 before any rounding to dx's dtype (as
 * the CPU sums it); one thread per column walking the rows in order: deterministic. */
__global__ void bias_gelu_dbias_kernel(float *dbias, const void *dout, int dout_dt, const void *h, int h_dt, int64_t N,
                                       int64_t I, int approx)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= I) return;
    float s = 0;
    for (int64_t r = 0; r < N; r++)
        s += tr_ld_dt(dout, r * I + c, dout_dt) * gelu_grad(tr_ld_dt(h, r * I + c, h_dt), approx);
    dbias[c] += s;
}

extern "C" int tr_k_bias_gelu_fwd_cuda(void *out, int out_dt, void *h, int h_dt, const void *bias, int b_dt, int64_t N,
                                       int64_t I, int approx, void *stream, tr_error *err)
{
    const char *op = "bias_gelu";
    int rc;
    if ((rc = tr_cuda_want_rows(op, N, I, err)) || (rc = tr_cuda_want_floats(op, out_dt, h_dt, b_dt, err))) return rc;
    if (N == 0) return TR_OK;
    const int64_t n = N * I;
    bias_gelu_fwd_kernel<<<tr_cuda_grid(n, BG_THREADS), BG_THREADS, 0, (cudaStream_t)stream>>>(out, out_dt, h, h_dt,
                                                                                             bias, b_dt, n, I, approx);
    return tr_cuda_launched(op, err);
}

extern "C" int tr_k_bias_gelu_bwd_cuda(void *dx, int dx_dt, float *dbias, const void *dout, int dout_dt,
                                       const void *h, int h_dt, int64_t N, int64_t I, int approx, void *stream,
                                       tr_error *err)
{
    const char *op = "bias_gelu_backward";
    int rc;
    if ((rc = tr_cuda_want_rows(op, N, I, err)) || (rc = tr_cuda_want_floats(op, dx_dt, dout_dt, h_dt, err)))
        return rc;
    if (N == 0) return TR_OK;
    const int64_t n = N * I;
    bias_gelu_bwd_kernel<<<tr_cuda_grid(n, BG_THREADS), BG_THREADS, 0, (cudaStream_t)stream>>>(dx, dx_dt, dout, dout_dt,
                                                                                             h, h_dt, n, approx);
    if ((rc = tr_cuda_launched(op, err))) return rc;
    if (dbias) {
        bias_gelu_dbias_kernel<<<(unsigned)((I + BG_THREADS - 1) / BG_THREADS), BG_THREADS, 0, (cudaStream_t)stream>>>(
            dbias, dout, dout_dt, h, h_dt, N, I, approx);
        return tr_cuda_launched(op, err);
    }
    return TR_OK;
}
