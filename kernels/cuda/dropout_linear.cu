/* dropout_linear.cu — LoRA's down-projection a = dropout(x) A^T and its backward on the GPU,
 * the fused twin of core/cpu_ops/dropout_linear_cpu.c (dropout, then linear; linear_backward,
 * dropout_backward, then add). The rank R is small (LoRA's r: 4-64), so each product is one
 * pass over x (or dx) with R sums per element: the dropped-out copy of x is never written, and
 * each element's keep bit is drawn where it is read, from the keyed Philox stream exactly as
 * kernels/cuda/dropout.cu draws it. Intermediates are rounded where the unfused ops store
 * them (the dropped-out x to x's dtype; the input gradient's product and its mask to dout's).
 *
 * Each thread takes four consecutive elements, whose keep bits come from at most two Philox
 * blocks. The rank is taken in chunks of sums held in registers. Reductions are fixed trees
 * (dtype.cuh's block sums; the weight gradient's row chunks summed in chunk order), never
 * float atomics, so a run repeats bit for bit. */
#include "cuda/dropout_linear.h"
#include "cuda/dtype.cuh"
#include "cuda/philox.cuh"

#include <algorithm>

enum { RC = 16, DW_RC = 8, FWD_THREADS_MAX = 256, DX_THREADS = 256, DW_THREADS = 128, DW_ROWS = 256 };

__device__ __forceinline__ float dl_round(float v, int dt)
{
    switch (dt) {
    case TR_F32: return v;
    case TR_BF16: return tr_ld(tr_st<__nv_bfloat16>(v));
    default: return tr_ld(tr_st<__half>(v));
    }
}

/* The keep bits of the stream elements s .. s + 3: one Philox block gives four consecutive
 * elements, so a group of four needs at most two blocks (one when s is a multiple of 4), where
 * drawing element by element would run a block per element. */
__device__ __forceinline__ void dl_keep4(const tr_k_rng &rng, uint64_t s, float p, int keep[4])
{
    uint32_t w0[4], w1[4];
    const uint64_t b0 = s >> 2, b1 = (s + 3) >> 2;
    tr_k_philox_block(rng, (uint32_t)b0, w0);
    if (b1 != b0) tr_k_philox_block(rng, (uint32_t)b1, w1);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const uint64_t e = s + (uint64_t)k;
        keep[k] = tr_k_word_uniform(((e >> 2) == b0 ? w0 : w1)[e & 3]) >= p;
    }
}

/* d[k] = x's element e + k (k < cnt <= 4, stream position offset + e + k) after dropout, in
 * x's dtype's values; 0 for k >= cnt. */
__device__ __forceinline__ void dl_dropped4(const void *x, int x_dt, int64_t e, int cnt, float p, float scale,
                                            const tr_k_rng &rng, uint64_t offset, float d[4])
{
    int keep[4] = {1, 1, 1, 1};
    if (p > 0.0f) dl_keep4(rng, offset + (uint64_t)e, p, keep);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float v = k < cnt ? tr_ld_dt(x, e + k, x_dt) : 0.0f;
        d[k] = p > 0.0f ? dl_round(keep[k] ? v * scale : 0.0f, x_dt) : v;
    }
}

/* One block per row n: out[n, j] = sum_i xd[n, i] w[j, i], RC ranks at a time; each thread
 * takes four consecutive columns at a time. */
__global__ void dl_fwd_kernel(void *out, int out_dt, const void *x, int x_dt, const void *w, int w_dt, int64_t I,
                              int64_t R, float p, float scale, tr_k_rng rng, uint64_t offset)
{
    __shared__ float red[32];
    const int64_t n = blockIdx.x, base = n * I;
    for (int64_t j0 = 0; j0 < R; j0 += RC) {
        const int nj = (int)(R - j0 < RC ? R - j0 : RC);
        float acc[RC];
#pragma unroll
        for (int j = 0; j < RC; j++) acc[j] = 0.0f;
        for (int64_t i0 = 4 * (int64_t)threadIdx.x; i0 < I; i0 += 4 * (int64_t)blockDim.x) {
            const int cnt = (int)(I - i0 < 4 ? I - i0 : 4);
            float d[4];
            dl_dropped4(x, x_dt, base + i0, cnt, p, scale, rng, offset, d);
            for (int k = 0; k < cnt; k++) {
#pragma unroll
                for (int j = 0; j < RC; j++)
                    if (j < nj) acc[j] += d[k] * tr_ld_dt(w, (j0 + j) * I + i0 + k, w_dt);
            }
        }
#pragma unroll
        for (int j = 0; j < RC; j++) {
            if (j >= nj) break;
            const float s = tr_block_sum(acc[j], red);
            if (threadIdx.x == 0) tr_st_dt(out, n * R + j0 + j, out_dt, s);
        }
    }
}

/* dx[e] += mask(e) * round(sum_j dout[n, j] w[j, i]) for e = n I + i, four consecutive
 * elements a thread. */
__global__ void dl_dx_kernel(void *dx, int dx_dt, const void *dout, int dout_dt, const void *w, int w_dt, int64_t N,
                             int64_t I, int64_t R, float p, float scale, tr_k_rng rng, uint64_t offset)
{
    const int64_t total = N * I, groups = (total + 3) / 4;
    for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e0 = 4 * g;
        const int cnt = (int)(total - e0 < 4 ? total - e0 : 4);
        int keep[4] = {1, 1, 1, 1};
        if (p > 0.0f) dl_keep4(rng, offset + (uint64_t)e0, p, keep);
        for (int k = 0; k < cnt; k++) {
            const int64_t e = e0 + k, n = e / I, i = e - n * I;
            float s = 0.0f;
            for (int64_t j = 0; j < R; j++) s += tr_ld_dt(dout, n * R + j, dout_dt) * tr_ld_dt(w, j * I + i, w_dt);
            float v = dl_round(s, dout_dt);   /* linear_backward's dx, in dout's dtype */
            if (p > 0.0f) v = dl_round(keep[k] ? v * scale : 0.0f, dout_dt);
            tr_st_dt(dx, e, dx_dt, tr_ld_dt(dx, e, dx_dt) + v);
        }
    }
}

/* Block (column tile, row chunk c), each thread four consecutive columns i0 .. i0 + 3:
 * part[c][j][i] = sum over the chunk's rows of dout[n, j] xd[n, i], DW_RC ranks at a time. */
__global__ void dl_dw_part_kernel(float *part, const void *dout, int dout_dt, const void *x, int x_dt, int64_t N,
                                  int64_t I, int64_t R, float p, float scale, tr_k_rng rng, uint64_t offset)
{
    const int64_t i0 = 4 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x), c = blockIdx.y;
    if (i0 >= I) return;
    const int cnt = (int)(I - i0 < 4 ? I - i0 : 4);
    const int64_t n0 = c * DW_ROWS, n1 = n0 + DW_ROWS < N ? n0 + DW_ROWS : N;
    for (int64_t j0 = 0; j0 < R; j0 += DW_RC) {
        const int nj = (int)(R - j0 < DW_RC ? R - j0 : DW_RC);
        float acc[DW_RC][4];
#pragma unroll
        for (int j = 0; j < DW_RC; j++)
#pragma unroll
            for (int k = 0; k < 4; k++) acc[j][k] = 0.0f;
        for (int64_t n = n0; n < n1; n++) {
            float d[4];
            dl_dropped4(x, x_dt, n * I + i0, cnt, p, scale, rng, offset, d);
#pragma unroll
            for (int j = 0; j < DW_RC; j++) {
                if (j >= nj) break;
                const float g = tr_ld_dt(dout, n * R + j0 + j, dout_dt);
#pragma unroll
                for (int k = 0; k < 4; k++) acc[j][k] += g * d[k];
            }
        }
        for (int j = 0; j < nj; j++)
            for (int k = 0; k < cnt; k++) part[(c * R + j0 + j) * I + i0 + k] = acc[j][k];
    }
}

/* dw[j, i] += the chunks' partial sums, in chunk order. */
__global__ void dl_dw_sum_kernel(float *dw, const float *part, int64_t chunks, int64_t RI)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < RI; e += (int64_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int64_t c = 0; c < chunks; c++) s += part[c * RI + e];
        dw[e] += s;
    }
}

static int dl_check(const char *name, int64_t N, int64_t I, int64_t R, float p, tr_error *err)
{
    int rc;
    if ((rc = tr_cuda_want_rows(name, N, I, err))) return rc;
    if (R <= 0) return tr_fail(err, TR_EUSER, "%s on CUDA: rank %lld; it must be positive.", name, (long long)R);
    if (!(p >= 0.0f && p <= 1.0f))
        return tr_fail(err, TR_EUSER, "%s on CUDA: p = %g; the dropout probability must be in [0, 1].", name,
                       (double)p);
    return TR_OK;
}

static float dl_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

static int64_t dl_chunks(int64_t N) { return (N + DW_ROWS - 1) / DW_ROWS; }

extern "C" int tr_k_dropout_linear_fwd_cuda(void *out, int out_dt, const void *x, int x_dt, const void *w, int w_dt,
                                            int64_t N, int64_t I, int64_t R, float p, uint64_t seed, uint32_t step,
                                            uint32_t layer, uint32_t op, uint64_t offset, void *stream,
                                            tr_error *err)
{
    const char *name = "dropout_linear";
    int rc;
    if ((rc = dl_check(name, N, I, R, p, err)) || (rc = tr_cuda_want_floats(name, out_dt, x_dt, w_dt, err))) return rc;
    if (N == 0) return TR_OK;
    /* At most FWD_THREADS_MAX: the kernel's registers fit that block, not one of 1024, and a
     * cap written as std::min with a constant is one tests/cli/test_ptxas_resources.sh reads. */
    const int threads = std::min<int>(tr_cuda_row_threads((I + 3) / 4), FWD_THREADS_MAX);
    dl_fwd_kernel<<<(unsigned)N, threads, 0, (cudaStream_t)stream>>>(out, out_dt, x, x_dt, w, w_dt, I, R, p,
                                                                     dl_scale(p), tr_k_rng_make(seed, step, layer, op),
                                                                     offset);
    return tr_cuda_launched(name, err);
}

extern "C" int64_t tr_k_dropout_linear_bwd_scratch_cuda(int64_t N, int64_t I, int64_t R)
{
    return dl_chunks(N) * R * I;
}

extern "C" int tr_k_dropout_linear_bwd_cuda(void *dx, int dx_dt, float *dw, const void *dout, int dout_dt,
                                            const void *x, int x_dt, const void *w, int w_dt, int64_t N, int64_t I,
                                            int64_t R, float p, uint64_t seed, uint32_t step, uint32_t layer,
                                            uint32_t op, uint64_t offset, float *scratch, void *stream,
                                            tr_error *err)
{
    const char *name = "dropout_linear_backward";
    int rc;
    if ((rc = dl_check(name, N, I, R, p, err)) || (rc = tr_cuda_want_floats(name, dout_dt, x_dt, w_dt, err)) ||
        (dx && (rc = tr_cuda_want_float(name, dx_dt, err))))
        return rc;
    if (N == 0) return TR_OK;
    cudaStream_t s = (cudaStream_t)stream;
    const tr_k_rng rng = tr_k_rng_make(seed, step, layer, op);
    const float scale = dl_scale(p);
    if (dx) {
        dl_dx_kernel<<<tr_cuda_grid((N * I + 3) / 4, DX_THREADS), DX_THREADS, 0, s>>>(dx, dx_dt, dout, dout_dt, w, w_dt, N, I, R,
                                                                            p, scale, rng, offset);
        if ((rc = tr_cuda_launched(name, err))) return rc;
    }
    if (dw) {
        if (!scratch) return tr_fail(err, TR_EUSER, "%s on CUDA: the weight gradient needs scratch.", name);
        const int64_t chunks = dl_chunks(N);
        if (chunks > 65535)
            return tr_fail(err, TR_EUSER, "%s on CUDA: %lld rows are more than %d chunks of %d.", name, (long long)N,
                           65535, (int)DW_ROWS);
        const dim3 grid((unsigned)(((I + 3) / 4 + DW_THREADS - 1) / DW_THREADS), (unsigned)chunks);
        dl_dw_part_kernel<<<grid, DW_THREADS, 0, s>>>(scratch, dout, dout_dt, x, x_dt, N, I, R, p, scale, rng, offset);
        if ((rc = tr_cuda_launched(name, err))) return rc;
        dl_dw_sum_kernel<<<tr_cuda_grid(R * I, DX_THREADS), DX_THREADS, 0, s>>>(dw, scratch, chunks, R * I);
        if ((rc = tr_cuda_launched(name, err))) return rc;
    }
    return TR_OK;
}
