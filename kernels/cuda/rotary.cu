/* rotary.cu — rotary position embedding on the GPU, the twin of kernels/cpu/rotary.c: one
 * thread per rotated pair (b, t, h, i) in a grid-stride loop; the angle t * inv_freq[i] in fp32
 * as the CPU's f32 kernel and transformers compute it (inv_freq = 1 / theta^(2i/D)). */
#include "cuda/rotary.h"
#include "cuda/dtype.cuh"

enum { ROT_THREADS = 256 };

__global__ void rotary_kernel(void *out, int out_dt, const void *x, int x_dt, int64_t n, int64_t T, int64_t H,
                              int64_t half, float theta, int inverse)
{
    const float D = (float)(2 * half);
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = k % half, row = k / half; /* row: (b, t, h) */
        const int64_t t = (row / H) % T;
        const float inv_freq = 1.0f / powf(theta, (float)(2 * i) / D);
        const float a = (float)t * inv_freq;
        const float c = cosf(a), s = inverse ? -sinf(a) : sinf(a);
        const int64_t j = row * 2 * half + i;
        const float x1 = tr_ld_dt(x, j, x_dt), x2 = tr_ld_dt(x, j + half, x_dt);
        tr_st_dt(out, j, out_dt, x1 * c - x2 * s);
        tr_st_dt(out, j + half, out_dt, x2 * c + x1 * s);
    }
}

extern "C" int tr_k_rotary_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t B, int64_t T, int64_t H,
                                int64_t D, float theta, int inverse, void *stream, tr_error *err)
{
    const char *op = inverse ? "rotary_backward" : "rotary";
    int rc;
    if ((rc = tr_cuda_want_rows(op, B * T * H, D, err)) || (rc = tr_cuda_want_floats(op, out_dt, x_dt, x_dt, err)))
        return rc;
    if (D % 2) return tr_fail(err, TR_EUSER, "%s on CUDA: head size %lld is odd.", op, (long long)D);
    const int64_t n = B * T * H * (D / 2);
    if (n == 0) return TR_OK;
    rotary_kernel<<<tr_cuda_grid(n, ROT_THREADS), ROT_THREADS, 0, (cudaStream_t)stream>>>(out, out_dt, x, x_dt, n, T, H,
                                                                                          D / 2, theta, inverse);
    return tr_cuda_launched(op, err);
}
