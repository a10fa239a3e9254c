/* pooling.cu — masked sentence pooling on the GPU (mean, cls, max, mean_sqrt_len), the
 * twin of kernels/cpu/pooling.c with the same semantics: a row with no kept token pools
 * to 0 and gets no gradient, max ties go to the first maximal token, cls takes token 0
 * whatever the mask says. Grid (B, column tiles); a thread owns one (b, c) and walks the
 * T tokens in order, so sums are in the CPU's order. */
#include "cuda/pooling.h"
#include "cuda/dtype.cuh"

enum { POOL_THREADS = 128 };

__device__ __forceinline__ int64_t pool_kept(const int32_t *m, int64_t T, int64_t *first)
{
    int64_t kept = 0, t0 = -1;
    for (int64_t t = 0; t < T; t++)
        if (m[t]) {
            kept++;
            if (t0 < 0) t0 = t;
        }
    *first = t0;
    return kept;
}

__global__ void pool_fwd_kernel(void *out, int out_dt, const void *hidden, int h_dt, const int32_t *mask,
                                int64_t T, int64_t C, int mode)
{
    const int64_t b = blockIdx.x, c = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int64_t hb = b * T * C;
    const int32_t *m = mask + b * T;
    if (mode == 1) {
        tr_st_dt(out, b * C + c, out_dt, tr_ld_dt(hidden, hb + c, h_dt));
        return;
    }
    int64_t t0;
    const int64_t kept = pool_kept(m, T, &t0);
    float r = 0.0f;
    if (kept > 0) {
        if (mode == 2) {
            r = tr_ld_dt(hidden, hb + t0 * C + c, h_dt);
            for (int64_t t = t0 + 1; t < T; t++)
                if (m[t]) r = fmaxf(r, tr_ld_dt(hidden, hb + t * C + c, h_dt));
        } else {
            for (int64_t t = 0; t < T; t++)
                if (m[t]) r += tr_ld_dt(hidden, hb + t * C + c, h_dt);
            r /= mode == 3 ? sqrtf((float)kept) : (float)kept;
        }
    }
    tr_st_dt(out, b * C + c, out_dt, r);
}

__global__ void pool_bwd_kernel(void *dh, int dh_dt, const void *dout, int dout_dt, const void *hidden, int h_dt,
                                const int32_t *mask, int64_t T, int64_t C, int mode)
{
    const int64_t b = blockIdx.x, c = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int64_t hb = b * T * C;
    const int32_t *m = mask + b * T;
    const float d = tr_ld_dt(dout, b * C + c, dout_dt);
    int64_t t0;
    const int64_t kept = mode == 1 ? 1 : pool_kept(m, T, &t0);
    int64_t arg = -1;
    if (mode == 2 && kept > 0) {
        arg = t0;
        float best = tr_ld_dt(hidden, hb + t0 * C + c, h_dt);
        for (int64_t t = t0 + 1; t < T; t++)
            if (m[t]) {
                const float v = tr_ld_dt(hidden, hb + t * C + c, h_dt);
                if (v > best) {
                    best = v;
                    arg = t;
                }
            }
    }
    const float div = mode == 3 ? sqrtf((float)kept) : (float)kept;
    for (int64_t t = 0; t < T; t++) {
        float g = 0.0f;
        if (mode == 1) g = t == 0 ? d : 0.0f;
        else if (kept == 0) g = 0.0f;
        else if (mode == 2) g = t == arg ? d : 0.0f;
        else if (m[t]) g = d / div;
        tr_st_dt(dh, hb + t * C + c, dh_dt, g);
    }
}

static int pool_check(const char *op, int a, int b, int64_t B, int64_t T, int64_t C, int mode, tr_error *err)
{
    int rc;
    if ((rc = tr_cuda_want_float(op, a, err)) || (rc = tr_cuda_want_float(op, b, err))) return rc;
    if (B < 0 || T <= 0 || C <= 0 || B > 2147483647 || mode < 0 || mode > 3)
        return tr_fail(err, TR_EUSER, "%s on CUDA: shape [%lld, %lld, %lld] or mode %d is not valid (modes 0 mean, "
                                      "1 cls, 2 max, 3 mean_sqrt_len).", op, (long long)B, (long long)T,
                       (long long)C, mode);
    return TR_OK;
}

extern "C" int tr_k_pool_fwd_cuda(void *out, int out_dt, const void *hidden, int hidden_dt, const int32_t *mask,
                                  int64_t B, int64_t T, int64_t C, int mode, void *stream, tr_error *err)
{
    int rc = pool_check("pool", out_dt, hidden_dt, B, T, C, mode, err);
    if (rc || B == 0) return rc;
    dim3 grid((unsigned)B, (unsigned)((C + POOL_THREADS - 1) / POOL_THREADS));
    pool_fwd_kernel<<<grid, POOL_THREADS, 0, (cudaStream_t)stream>>>(out, out_dt, hidden, hidden_dt, mask, T, C, mode);
    return tr_cuda_launched("pool", err);
}

extern "C" int tr_k_pool_bwd_cuda(void *dhidden, int dh_dt, const void *dout, int dout_dt, const void *hidden,
                                  int hidden_dt, const int32_t *mask, int64_t B, int64_t T, int64_t C, int mode,
                                  void *stream, tr_error *err)
{
    int rc = pool_check("pool_backward", dh_dt, dout_dt, B, T, C, mode, err);
    if (rc || B == 0) return rc;
    if (mode == 2 && (!hidden || (rc = tr_cuda_want_float("pool_backward", hidden_dt, err))))
        return rc ? rc : tr_fail(err, TR_EUSER, "pool_backward on CUDA: max pooling needs the forward's hidden.");
    dim3 grid((unsigned)B, (unsigned)((C + POOL_THREADS - 1) / POOL_THREADS));
    pool_bwd_kernel<<<grid, POOL_THREADS, 0, (cudaStream_t)stream>>>(dhidden, dh_dt, dout, dout_dt, hidden, hidden_dt,
                                                                     mask, T, C, mode);
    return tr_cuda_launched("pool_backward", err);
}
