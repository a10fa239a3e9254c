/* softmax.cu — softmax over the last dim on the GPU (the twin of kernels/cpu/softmax.c):
 * one block per row, max-subtracted, deterministic fp32 block reductions. out may be x
 * and dx may be dout: every read of a row happens before the barrier that precedes its
 * writes. */
#include "cuda/softmax.h"
#include "cuda/dtype.cuh"

__global__ void softmax_fwd_kernel(void *out, int out_dt, const void *x, int x_dt, int64_t C)
{
    __shared__ float red[32];
    const int64_t base = (int64_t)blockIdx.x * C;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) m = fmaxf(m, tr_ld_dt(x, base + c, x_dt));
    m = tr_block_max(m, red);
    float s = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += expf(tr_ld_dt(x, base + c, x_dt) - m);
    s = tr_block_sum(s, red);
    const float inv = 1.0f / s;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        tr_st_dt(out, base + c, out_dt, expf(tr_ld_dt(x, base + c, x_dt) - m) * inv);
}

__global__ void softmax_bwd_kernel(void *dx, int dx_dt, const void *dout, int dout_dt, const void *y, int y_dt,
                                   int64_t C)
{
    __shared__ float red[32];
    const int64_t base = (int64_t)blockIdx.x * C;
    float s = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        s += tr_ld_dt(dout, base + c, dout_dt) * tr_ld_dt(y, base + c, y_dt);
    s = tr_block_sum(s, red);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        const float yv = tr_ld_dt(y, base + c, y_dt);
        tr_st_dt(dx, base + c, dx_dt, yv * (tr_ld_dt(dout, base + c, dout_dt) - s));
    }
}

static int sm_check(const char *op, int a, int b, int c, int64_t N, int64_t C, tr_error *err)
{
    int rc = tr_cuda_want_floats(op, a, b, c, err);
    return rc ? rc : tr_cuda_want_rows(op, N, C, err);
}

extern "C" int tr_k_softmax_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t N, int64_t C,
                                     void *stream, tr_error *err)
{
    int rc = sm_check("softmax", out_dt, x_dt, x_dt, N, C, err);
    if (rc || N == 0) return rc;
    softmax_fwd_kernel<<<(unsigned)N, tr_cuda_row_threads(C), 0, (cudaStream_t)stream>>>(out, out_dt, x, x_dt, C);
    return tr_cuda_launched("softmax", err);
}

extern "C" int tr_k_softmax_bwd_cuda(void *dx, int dx_dt, const void *dout, int dout_dt, const void *y, int y_dt,
                                     int64_t N, int64_t C, void *stream, tr_error *err)
{
    int rc = sm_check("softmax_backward", dx_dt, dout_dt, y_dt, N, C, err);
    if (rc || N == 0) return rc;
    softmax_bwd_kernel<<<(unsigned)N, tr_cuda_row_threads(C), 0, (cudaStream_t)stream>>>(dx, dx_dt, dout, dout_dt,
                                                                                         y, y_dt, C);
    return tr_cuda_launched("softmax_backward", err);
}
