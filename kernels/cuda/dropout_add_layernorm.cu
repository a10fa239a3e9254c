/* dropout_add_layernorm.cu — the fused end of a post-LN block on the GPU, the twin of
 * kernels/cpu/dropout_add_layernorm.c and core/ops/dropout_add_layernorm.c:
 *   sum = residual + dropout(x),  out = layernorm(sum),
 * the keep bits drawn from the keyed Philox stream exactly as kernels/cuda/dropout.cu and
 * core/base/rng.c draw them (element i of the rows is stream element offset + i), so the
 * mask equals the unfused dropout's; the dropped-out x is rounded to x's dtype and the sum
 * to sum's dtype, where the unfused dropout and add round them.
 *
 * One block per row, fp32 accumulation, the deterministic block reductions of dtype.cuh.
 * A thread reads back only the sum elements it wrote itself (the same strided columns in
 * every pass), so no barrier is needed between the write and the read beyond the
 * reductions'. The backward's parameter gradients are layernorm.cu's column partials over
 * (dout, sum): the unfused op's bits. */
#include "cuda/dropout_add_layernorm.h"
#include "cuda/layernorm.h"
#include "cuda/dtype.cuh"
#include "cuda/layernorm_row.cuh"
#include "cuda/philox.cuh"

/* v rounded through the storage dtype dt (identity for f32). */
__device__ __forceinline__ float dal_round(float v, int dt)
{
    switch (dt) {
    case TR_F32: return v;
    case TR_BF16: return tr_ld(tr_st<__nv_bfloat16>(v));
    default: return tr_ld(tr_st<__half>(v));
    }
}

/* Is stream element e kept? (p == 0 keeps everything without drawing; p == 1 drops all.) */
__device__ __forceinline__ int dal_kept(const tr_k_rng &rng, uint64_t e, float p)
{
    if (p <= 0.0f) return 1;
    return tr_k_uniform(rng, e) >= p;
}

__global__ void dal_fwd_kernel(void *out, int out_dt, void *sum, int sum_dt, float *mean, float *rstd, const void *x,
                               int x_dt, const void *res, int res_dt, const void *w, const void *b, int w_dt,
                               int64_t C, float p, float scale, float eps, tr_k_rng rng, uint64_t offset)
{
    __shared__ float red[32];
    const int64_t row = blockIdx.x;
    const int64_t base = row * C;
    float s = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float d = tr_ld_dt(x, base + c, x_dt);
        if (p > 0.0f) d = dal_round(dal_kept(rng, offset + (uint64_t)(base + c), p) ? d * scale : 0.0f, x_dt);
        const float v = dal_round(d + tr_ld_dt(res, base + c, res_dt), sum_dt);
        tr_st_dt(sum, base + c, sum_dt, v);
        s += v;
    }
    tr_ln_row_normalise(s, red, sum, sum_dt, out, out_dt, w, b, w_dt, mean, rstd, row, C, eps);
}

/* d = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * weight: dres = d (rounded to
 * dres_dt), dx = dropout_backward(d rounded). dres or dx may be NULL. */
__global__ void dal_bwd_kernel(void *dx, int dx_dt, void *dres, int dres_dt, const void *dout, int dout_dt,
                               const void *sum, int sum_dt, const void *w, int w_dt, const float *mean,
                               const float *rstd, int64_t C, float p, float scale, tr_k_rng rng, uint64_t offset)
{
    __shared__ float red[32];
    const int64_t row = blockIdx.x;
    const int64_t base = row * C;
    const float mu = mean[row], rs = rstd[row];
    float sg = 0, sgx = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        const float g = tr_ld_dt(dout, base + c, dout_dt) * tr_ld_dt(w, c, w_dt);
        sg += g;
        sgx += g * (tr_ld_dt(sum, base + c, sum_dt) - mu) * rs;
    }
    const float mg = tr_block_sum(sg, red) / (float)C;
    const float mgx = tr_block_sum(sgx, red) / (float)C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        const float g = tr_ld_dt(dout, base + c, dout_dt) * tr_ld_dt(w, c, w_dt);
        const float xh = (tr_ld_dt(sum, base + c, sum_dt) - mu) * rs;
        const float d = dal_round(rs * (g - mg - xh * mgx), dres_dt);
        if (dres) tr_st_dt(dres, base + c, dres_dt, d);
        if (dx) {
            const int kept = dal_kept(rng, offset + (uint64_t)(base + c), p);
            tr_st_dt(dx, base + c, dx_dt, p > 0.0f ? (kept ? d * scale : 0.0f) : d);
        }
    }
}

static float dal_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

static int dal_check_p(const char *op, float p, tr_error *err)
{
    if (!(p >= 0.0f && p <= 1.0f))
        return tr_fail(err, TR_EUSER, "%s on CUDA: p = %g; the dropout probability must be in [0, 1].", op,
                       (double)p);
    return TR_OK;
}

extern "C" int tr_k_dropout_add_layernorm_fwd_cuda(void *out, int out_dt, void *sum, int sum_dt, float *mean,
                                                   float *rstd, const void *x, int x_dt, const void *residual,
                                                   int res_dt, const void *weight, const void *bias, int w_dt,
                                                   int64_t N, int64_t C, float p, float eps, uint64_t seed,
                                                   uint32_t step, uint32_t layer, uint32_t op, uint64_t offset,
                                                   void *stream, tr_error *err)
{
    const char *name = "dropout_add_layernorm";
    int rc;
    if ((rc = tr_cuda_want_rows(name, N, C, err)) || (rc = tr_cuda_want_floats(name, out_dt, sum_dt, x_dt, err)) ||
        (rc = tr_cuda_want_floats(name, res_dt, w_dt, TR_F32, err)) || (rc = dal_check_p(name, p, err)))
        return rc;
    if (N == 0) return TR_OK;
    dal_fwd_kernel<<<(unsigned)N, tr_cuda_row_threads(C), 0, (cudaStream_t)stream>>>(
        out, out_dt, sum, sum_dt, mean, rstd, x, x_dt, residual, res_dt, weight, bias, w_dt, C, p, dal_scale(p), eps,
        tr_k_rng_make(seed, step, layer, op), offset);
    return tr_cuda_launched(name, err);
}

extern "C" int tr_k_dropout_add_layernorm_bwd_cuda(void *dx, int dx_dt, void *dresidual, int dres_dt,
                                                   float *dweight, float *dbias, const void *dout, int dout_dt,
                                                   const void *sum, int sum_dt, const void *weight, int w_dt,
                                                   const float *mean, const float *rstd, int64_t N, int64_t C,
                                                   float p, uint64_t seed, uint32_t step, uint32_t layer,
                                                   uint32_t op, uint64_t offset, float *scratch, void *stream,
                                                   tr_error *err)
{
    const char *name = "dropout_add_layernorm_backward";
    int rc;
    if ((rc = tr_cuda_want_rows(name, N, C, err)) || (rc = tr_cuda_want_floats(name, dout_dt, sum_dt, w_dt, err)) ||
        (rc = tr_cuda_want_floats(name, dx ? dx_dt : TR_F32, dres_dt, TR_F32, err)) ||
        (rc = dal_check_p(name, p, err)))
        return rc;
    if (N == 0) return TR_OK;
    if (dx || dresidual) {
        dal_bwd_kernel<<<(unsigned)N, tr_cuda_row_threads(C), 0, (cudaStream_t)stream>>>(
            dx, dx_dt, dresidual, dres_dt, dout, dout_dt, sum, sum_dt, weight, w_dt, mean, rstd, C, p, dal_scale(p),
            tr_k_rng_make(seed, step, layer, op), offset);
        if ((rc = tr_cuda_launched(name, err))) return rc;
    }
    if (dweight || dbias)   /* layernorm's column partials over (dout, sum): no dx */
        return tr_k_layernorm_bwd_cuda(NULL, TR_F32, dweight, dbias, dout, dout_dt, sum, sum_dt, weight, w_dt, mean,
                                       rstd, N, C, scratch, stream, err);
    return TR_OK;
}
