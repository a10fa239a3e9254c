/* layernorm.cu — layer normalisation over the last dim on the GPU, the twin of
 * kernels/cpu/layernorm.c: out = (x - mean) * rstd * weight + bias with the biased
 * variance, mean and rstd saved in f32.
 *
 * Forward and dx: one block per row, two deterministic block reductions in fp32.
 * dweight/dbias: rows are cut into chunks of LN_CHUNK; a thread owns one column of one
 * chunk and sums it in row order into the scratch, then one thread per column adds the
 * chunks in order to the gradient. No float atomics: the same inputs give the same bits. */
#include "cuda/layernorm.h"
#include "cuda/dtype.cuh"
#include "cuda/layernorm_row.cuh"

enum { LN_CHUNK = 256, LN_COL_THREADS = 256 };

__global__ void ln_fwd_kernel(void *out, int out_dt, float *mean, float *rstd, const void *x, int x_dt,
                              const void *w, const void *b, int w_dt, int64_t C, float eps)
{
    __shared__ float red[32];
    const int64_t row = blockIdx.x;
    const int64_t base = row * C;
    float s = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += tr_ld_dt(x, base + c, x_dt);
    tr_ln_row_normalise(s, red, x, x_dt, out, out_dt, w, b, w_dt, mean, rstd, row, C, eps);
}

/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * weight. */
__global__ void ln_dx_kernel(void *dx, int dx_dt, const void *dout, int dout_dt, const void *x, int x_dt,
                             const void *w, int w_dt, const float *mean, const float *rstd, int64_t C)
{
    __shared__ float red[32];
    const int64_t row = blockIdx.x;
    const int64_t base = row * C;
    const float mu = mean[row], rs = rstd[row];
    float sg = 0, sgx = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        const float g = tr_ld_dt(dout, base + c, dout_dt) * tr_ld_dt(w, c, w_dt);
        const float xh = (tr_ld_dt(x, base + c, x_dt) - mu) * rs;
        sg += g;
        sgx += g * xh;
    }
    const float mg = tr_block_sum(sg, red) / (float)C;
    const float mgx = tr_block_sum(sgx, red) / (float)C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        const float g = tr_ld_dt(dout, base + c, dout_dt) * tr_ld_dt(w, c, w_dt);
        const float xh = (tr_ld_dt(x, base + c, x_dt) - mu) * rs;
        tr_st_dt(dx, base + c, dx_dt, rs * (g - mg - xh * mgx));
    }
}

/* part[chunk, c] = sum over the chunk's rows of dout * xhat (dweight) and of dout (dbias). */
__global__ void ln_dwb_partial_kernel(float *part_w, float *part_b, const void *dout, int dout_dt, const void *x,
                                      int x_dt, const float *mean, const float *rstd, int64_t N, int64_t C)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t chunk = blockIdx.y;
    if (c >= C) return;
    const int64_t r0 = chunk * LN_CHUNK, r1 = r0 + LN_CHUNK < N ? r0 + LN_CHUNK : N;
    float sw = 0, sb = 0;
    for (int64_t r = r0; r < r1; r++) {
        const float d = tr_ld_dt(dout, r * C + c, dout_dt);
        sw += d * (tr_ld_dt(x, r * C + c, x_dt) - mean[r]) * rstd[r];
        sb += d;
    }
    part_w[chunk * C + c] = sw;
    part_b[chunk * C + c] = sb;
}

__global__ void ln_dwb_final_kernel(float *dweight, float *dbias, const float *part_w, const float *part_b,
                                    int64_t nchunks, int64_t C)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sw = 0, sb = 0;
    for (int64_t k = 0; k < nchunks; k++) {
        sw += part_w[k * C + c];
        sb += part_b[k * C + c];
    }
    if (dweight) dweight[c] += sw;
    if (dbias) dbias[c] += sb;
}

static int64_t ln_chunks(int64_t N) { return (N + LN_CHUNK - 1) / LN_CHUNK; }

extern "C" int64_t tr_k_layernorm_bwd_scratch_cuda(int64_t N, int64_t C) { return 2 * ln_chunks(N) * C; }

static int ln_check(const char *op, int64_t N, int64_t C, tr_error *err) { return tr_cuda_want_rows(op, N, C, err); }

extern "C" int tr_k_layernorm_fwd_cuda(void *out, int out_dt, float *mean, float *rstd, const void *x, int x_dt,
                                       const void *weight, const void *bias, int w_dt, int64_t N, int64_t C,
                                       float eps, void *stream, tr_error *err)
{
    int rc;
    if ((rc = ln_check("layernorm", N, C, err)) || (rc = tr_cuda_want_float("layernorm", out_dt, err)) ||
        (rc = tr_cuda_want_float("layernorm", x_dt, err)) || (rc = tr_cuda_want_float("layernorm", w_dt, err)))
        return rc;
    if (N == 0) return TR_OK;
    ln_fwd_kernel<<<(unsigned)N, tr_cuda_row_threads(C), 0, (cudaStream_t)stream>>>(out, out_dt, mean, rstd, x,
                                                                                    x_dt, weight, bias, w_dt, C,
                                                                                    eps);
    return tr_cuda_launched("layernorm", err);
}

extern "C" int tr_k_layernorm_bwd_cuda(void *dx, int dx_dt, float *dweight, float *dbias, const void *dout,
                                       int dout_dt, const void *x, int x_dt, const void *weight, int w_dt,
                                       const float *mean, const float *rstd, int64_t N, int64_t C, float *scratch,
                                       void *stream, tr_error *err)
{
    const char *op = "layernorm_backward";
    int rc;
    if ((rc = ln_check(op, N, C, err)) || (rc = tr_cuda_want_float(op, dout_dt, err)) ||
        (rc = tr_cuda_want_float(op, x_dt, err)) || (rc = tr_cuda_want_float(op, w_dt, err)) ||
        (dx && (rc = tr_cuda_want_float(op, dx_dt, err))))
        return rc;
    if ((dweight || dbias) && !scratch)
        return tr_fail(err, TR_EUSER, "%s on CUDA: scratch is NULL; pass tr_k_layernorm_bwd_scratch_cuda(N, C) "
                                      "floats.", op);
    if (N == 0) return TR_OK;
    cudaStream_t s = (cudaStream_t)stream;
    if (dx) {
        ln_dx_kernel<<<(unsigned)N, tr_cuda_row_threads(C), 0, s>>>(dx, dx_dt, dout, dout_dt, x, x_dt, weight,
                                                                    w_dt, mean, rstd, C);
        if ((rc = tr_cuda_launched(op, err))) return rc;
    }
    if (dweight || dbias) {
        const int64_t nch = ln_chunks(N);
        float *pw = scratch, *pb = scratch + nch * C;
        dim3 grid((unsigned)((C + LN_COL_THREADS - 1) / LN_COL_THREADS), (unsigned)nch);
        ln_dwb_partial_kernel<<<grid, LN_COL_THREADS, 0, s>>>(pw, pb, dout, dout_dt, x, x_dt, mean, rstd, N, C);
        if ((rc = tr_cuda_launched(op, err))) return rc;
        ln_dwb_final_kernel<<<(unsigned)((C + LN_COL_THREADS - 1) / LN_COL_THREADS), LN_COL_THREADS, 0, s>>>(
            dweight, dbias, pw, pb, nch, C);
        if ((rc = tr_cuda_launched(op, err))) return rc;
    }
    return TR_OK;
}
