/* layernorm_row.cuh — the part of a LayerNorm forward row that layernorm.cu and the fused
 * dropout_add_layernorm.cu share: given the row's sum s (this thread's part), the mean, the
 * variance about it (a second pass, as the CPU kernel does), out = (x - mean) * rstd * w + b,
 * and mean/rstd stored by thread 0 (not when mean is NULL). x may be out itself (each thread
 * reads an element before it writes it). One block per row, fp32 math; x is read back by each
 * thread at the indices it wrote itself (the fused kernel's sum), so no barrier is needed
 * before the first read. */
#ifndef TR_CUDA_LAYERNORM_ROW_CUH
#define TR_CUDA_LAYERNORM_ROW_CUH

#include "cuda/dtype.cuh"

__device__ inline void tr_ln_row_normalise(float s, float *red, const void *x, int x_dt, void *out, int out_dt,
                                           const void *w, const void *b, int w_dt, float *mean, float *rstd,
                                           int64_t row, int64_t C, float eps)
{
    const int64_t base = row * C;
    const float mu = tr_block_sum(s, red) / (float)C;
    float q = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        const float d = tr_ld_dt(x, base + c, x_dt) - mu;
        q += d * d;
    }
    const float var = tr_block_sum(q, red) / (float)C;
    const float rs = 1.0f / sqrtf(var + eps);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float y = (tr_ld_dt(x, base + c, x_dt) - mu) * rs * tr_ld_dt(w, c, w_dt);
        if (b) y += tr_ld_dt(b, c, w_dt);
        tr_st_dt(out, base + c, out_dt, y);
    }
    if (threadIdx.x == 0 && mean) {
        mean[row] = mu;
        rstd[row] = rs;
    }
}

#endif
