/* similarity.cu — row L2 normalisation on the GPU (torch.nn.functional.normalize:
 * y = x / max(||x||, eps)), the twin of kernels/cpu/similarity.c. One block per row.
 * The cosine-similarity matrix itself is a GEMM of normalised rows (tr_cuda_gemm). */
#include "cuda/similarity.h"
#include "cuda/dtype.cuh"

__global__ void l2norm_fwd_kernel(void *out, int out_dt, const void *x, int x_dt, int64_t C, float eps)
{
    __shared__ float red[32];
    const int64_t base = (int64_t)blockIdx.x * C;
    float ss = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        const float v = tr_ld_dt(x, base + c, x_dt);
        ss += v * v;
    }
    const float norm = sqrtf(tr_block_sum(ss, red));
    const float inv = 1.0f / (norm > eps ? norm : eps);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        tr_st_dt(out, base + c, out_dt, tr_ld_dt(x, base + c, x_dt) * inv);
}

/* dx = (dout - y (y . dout)) / ||x|| when ||x|| > eps, else dout / eps. */
__global__ void l2norm_bwd_kernel(void *dx, int dx_dt, const void *dout, int dout_dt, const void *x, int x_dt,
                                  int64_t C, float eps)
{
    __shared__ float red[32];
    const int64_t base = (int64_t)blockIdx.x * C;
    float ss = 0, xd = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        const float v = tr_ld_dt(x, base + c, x_dt);
        ss += v * v;
        xd += v * tr_ld_dt(dout, base + c, dout_dt);
    }
    const float norm = sqrtf(tr_block_sum(ss, red));
    xd = tr_block_sum(xd, red);
    if (norm > eps) {
        const float inv = 1.0f / norm, k = xd * inv * inv * inv;
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
            tr_st_dt(dx, base + c, dx_dt, tr_ld_dt(dout, base + c, dout_dt) * inv - tr_ld_dt(x, base + c, x_dt) * k);
    } else {
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
            tr_st_dt(dx, base + c, dx_dt, tr_ld_dt(dout, base + c, dout_dt) / eps);
    }
}

static int l2_check(const char *op, int a, int b, int c, int64_t N, int64_t C, tr_error *err)
{
    int rc = tr_cuda_want_floats(op, a, b, c, err);
    return rc ? rc : tr_cuda_want_rows(op, N, C, err);
}

extern "C" int tr_k_l2norm_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t N, int64_t C,
                                    float eps, void *stream, tr_error *err)
{
    int rc = l2_check("l2norm", out_dt, x_dt, x_dt, N, C, err);
    if (rc || N == 0) return rc;
    l2norm_fwd_kernel<<<(unsigned)N, tr_cuda_row_threads(C), 0, (cudaStream_t)stream>>>(out, out_dt, x, x_dt, C,
                                                                                        eps);
    return tr_cuda_launched("l2norm", err);
}

extern "C" int tr_k_l2norm_bwd_cuda(void *dx, int dx_dt, const void *dout, int dout_dt, const void *x, int x_dt,
                                    int64_t N, int64_t C, float eps, void *stream, tr_error *err)
{
    int rc = l2_check("l2norm_backward", dx_dt, dout_dt, x_dt, N, C, err);
    if (rc || N == 0) return rc;
    if (dx == x)
        return tr_fail(err, TR_EUSER, "l2norm_backward on CUDA: dx may not be x (the norms are recomputed from "
                                      "x while dx is written).");
    l2norm_bwd_kernel<<<(unsigned)N, tr_cuda_row_threads(C), 0, (cudaStream_t)stream>>>(dx, dx_dt, dout, dout_dt,
                                                                                        x, x_dt, C, eps);
    return tr_cuda_launched("l2norm_backward", err);
}
