/* dropout.cu — dropout on the GPU from the keyed counter-based RNG, bit-identical to the
 * CPU's masks (core/base/rng.h): element e of a launch is stream element offset + e, kept when
 * its uniform >= p and then scaled by 1 / (1 - p). No mask is stored: the backward is the
 * same call on dout, and a checkpoint recomputation regenerates the same bits.
 * One thread per Philox block (four stream elements). */
#include "cuda/dropout.h"
#include "cuda/dtype.cuh"
#include "cuda/philox.cuh"

enum { DROP_THREADS = 256 };

/* Thread t handles the stream block first_block + t, i.e. elements [4b, 4b + 4) of the
 * stream that fall inside [offset, offset + n). */
__global__ void dropout_kernel(void *out, int out_dt, const void *x, int x_dt, uint8_t *keep_out, int64_t n,
                               float p, float scale, tr_k_rng rng, uint64_t offset, int64_t nblocks)
{
    const uint64_t first_block = offset >> 2;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < nblocks;
         t += (int64_t)gridDim.x * blockDim.x) {
        const uint64_t blk = first_block + (uint64_t)t;
        uint32_t w[4];
        tr_k_philox_block(rng, (uint32_t)blk, w);
#pragma unroll
        for (int lane = 0; lane < 4; lane++) {
            const uint64_t e = blk * 4 + (uint64_t)lane;
            if (e < offset || e >= offset + (uint64_t)n) continue;
            const int64_t i = (int64_t)(e - offset);
            const int kept = tr_k_word_uniform(w[lane]) >= p;
            if (keep_out) keep_out[i] = (uint8_t)kept;
            if (out) tr_st_dt(out, i, out_dt, kept ? tr_ld_dt(x, i, x_dt) * scale : 0.0f);
        }
    }
}

static int64_t drop_blocks(int64_t n, uint64_t offset)
{
    return (int64_t)(((offset + (uint64_t)n - 1) >> 2) - (offset >> 2) + 1);
}

extern "C" int tr_k_dropout_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t n, float p, uint64_t seed,
                                 uint32_t step, uint32_t layer, uint32_t op, uint64_t offset, void *stream,
                                 tr_error *err)
{
    int rc;
    if ((rc = tr_cuda_want_float("dropout", out_dt, err)) || (rc = tr_cuda_want_float("dropout", x_dt, err)))
        return rc;
    if (!(p >= 0.0f && p <= 1.0f))
        return tr_fail(err, TR_EUSER, "dropout on CUDA: p = %g; the dropout probability must be in [0, 1].",
                       (double)p);
    if (n < 0) return tr_fail(err, TR_EUSER, "dropout on CUDA: negative element count %lld.", (long long)n);
    if (n == 0) return TR_OK;
    cudaStream_t s = (cudaStream_t)stream;
    if (p == 0.0f) {
        if (out == x) return TR_OK;
        if (out_dt == x_dt) {
            TR_CUDA_CHECK(err, cudaMemcpyAsync(out, x, (size_t)n * tr_dtype_size(x_dt), cudaMemcpyDeviceToDevice, s));
            return TR_OK;
        }
        /* p == 0 with a dtype change: every element is kept with scale 1 (uniform >= 0). */
    }
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    const int64_t nb = drop_blocks(n, offset);
    dropout_kernel<<<tr_cuda_grid(nb, DROP_THREADS), DROP_THREADS, 0, s>>>(
        out, out_dt, x, x_dt, NULL, n, p, scale, tr_k_rng_make(seed, step, layer, op), offset, nb);
    return tr_cuda_launched("dropout", err);
}

extern "C" int tr_k_dropout_mask_cuda(uint8_t *keep, int64_t n, float p, uint64_t seed, uint32_t step,
                                      uint32_t layer, uint32_t op, uint64_t offset, void *stream, tr_error *err)
{
    if (!(p >= 0.0f && p <= 1.0f))
        return tr_fail(err, TR_EUSER, "dropout_mask on CUDA: p = %g; the dropout probability must be in [0, 1].",
                       (double)p);
    if (n < 0) return tr_fail(err, TR_EUSER, "dropout_mask on CUDA: negative element count %lld.", (long long)n);
    if (n == 0) return TR_OK;
    const int64_t nb = drop_blocks(n, offset);
    dropout_kernel<<<tr_cuda_grid(nb, DROP_THREADS), DROP_THREADS, 0, (cudaStream_t)stream>>>(
        NULL, TR_F32, NULL, TR_F32, keep, n, p, 0.0f, tr_k_rng_make(seed, step, layer, op), offset, nb);
    return tr_cuda_launched("dropout_mask", err);
}
