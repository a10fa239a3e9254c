/* pair_features.cu — the column-block copy between row-major matrices (concatenation along
 * the last dim, truncation to the first d dims, and their backwards) and |a - b| with its
 * backward, on the GPU: the twins of kernels/cpu/pair_features.c. One thread per element. */
#include "cuda/pair_features.h"
#include "cuda/dtype.cuh"

enum { FEAT_THREADS = 256 };

__global__ void copy_cols_kernel(void *dst, int dst_dt, const void *src, int src_dt, int64_t N, int64_t dst_C,
                                 int64_t dst_col, int64_t src_C, int64_t src_col, int64_t ncols, int accumulate)
{
    const int64_t total = N * ncols;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / ncols, c = i % ncols;
        const int64_t di = r * dst_C + dst_col + c;
        float v = tr_ld_dt(src, r * src_C + src_col + c, src_dt);
        if (accumulate) v += tr_ld_dt(dst, di, dst_dt);
        tr_st_dt(dst, di, dst_dt, v);
    }
}

__global__ void abs_diff_fwd_kernel(void *out, int out_dt, const void *a, int a_dt, const void *b, int b_dt,
                                    int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        tr_st_dt(out, i, out_dt, fabsf(tr_ld_dt(a, i, a_dt) - tr_ld_dt(b, i, b_dt)));
}

/* d|a-b|/da = sign(a - b) (0 where a == b, as torch's abs'(0) = 0). */
__global__ void abs_diff_bwd_kernel(void *da, int da_dt, void *db, int db_dt, const void *dout, int dout_dt,
                                    const void *a, int a_dt, const void *b, int b_dt, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float d = tr_ld_dt(a, i, a_dt) - tr_ld_dt(b, i, b_dt);
        const float g = tr_ld_dt(dout, i, dout_dt);
        const float ga = d > 0.0f ? g : (d < 0.0f ? -g : 0.0f);
        if (da) tr_st_dt(da, i, da_dt, ga);
        if (db) tr_st_dt(db, i, db_dt, -ga);
    }
}

extern "C" int tr_k_copy_cols_cuda(void *dst, int dst_dt, const void *src, int src_dt, int64_t N, int64_t dst_C,
                                   int64_t dst_col, int64_t src_C, int64_t src_col, int64_t ncols, int accumulate,
                                   void *stream, tr_error *err)
{
    int rc;
    if ((rc = tr_cuda_want_float("copy_cols", dst_dt, err)) || (rc = tr_cuda_want_float("copy_cols", src_dt, err)))
        return rc;
    if (N < 0 || ncols < 0 || dst_col < 0 || src_col < 0 || dst_col + ncols > dst_C || src_col + ncols > src_C)
        return tr_fail(err, TR_EUSER, "copy_cols on CUDA: columns [%lld, %lld) of %lld and [%lld, %lld) of %lld "
                                      "do not fit.", (long long)dst_col, (long long)(dst_col + ncols),
                       (long long)dst_C, (long long)src_col, (long long)(src_col + ncols), (long long)src_C);
    const int64_t total = N * ncols;
    if (total == 0) return TR_OK;
    copy_cols_kernel<<<tr_cuda_grid(total, FEAT_THREADS), FEAT_THREADS, 0, (cudaStream_t)stream>>>(
        dst, dst_dt, src, src_dt, N, dst_C, dst_col, src_C, src_col, ncols, accumulate != 0);
    return tr_cuda_launched("copy_cols", err);
}

extern "C" int tr_k_abs_diff_fwd_cuda(void *out, int out_dt, const void *a, int a_dt, const void *b, int b_dt,
                                      int64_t n, void *stream, tr_error *err)
{
    int rc;
    if ((rc = tr_cuda_want_float("abs_diff", out_dt, err)) || (rc = tr_cuda_want_float("abs_diff", a_dt, err)) ||
        (rc = tr_cuda_want_float("abs_diff", b_dt, err)))
        return rc;
    if (n <= 0) return n < 0 ? tr_fail(err, TR_EUSER, "abs_diff on CUDA: negative element count.") : TR_OK;
    abs_diff_fwd_kernel<<<tr_cuda_grid(n, FEAT_THREADS), FEAT_THREADS, 0, (cudaStream_t)stream>>>(out, out_dt, a, a_dt,
                                                                                                 b, b_dt, n);
    return tr_cuda_launched("abs_diff", err);
}

extern "C" int tr_k_abs_diff_bwd_cuda(void *da, int da_dt, void *db, int db_dt, const void *dout, int dout_dt,
                                      const void *a, int a_dt, const void *b, int b_dt, int64_t n, void *stream,
                                      tr_error *err)
{
    const char *op = "abs_diff_backward";
    int rc;
    if ((rc = tr_cuda_want_float(op, dout_dt, err)) || (rc = tr_cuda_want_float(op, a_dt, err)) ||
        (rc = tr_cuda_want_float(op, b_dt, err)) || (da && (rc = tr_cuda_want_float(op, da_dt, err))) ||
        (db && (rc = tr_cuda_want_float(op, db_dt, err))))
        return rc;
    if (n <= 0 || (!da && !db)) return n < 0 ? tr_fail(err, TR_EUSER, "%s on CUDA: negative element count.", op) : TR_OK;
    abs_diff_bwd_kernel<<<tr_cuda_grid(n, FEAT_THREADS), FEAT_THREADS, 0, (cudaStream_t)stream>>>(
        da, da_dt, db, db_dt, dout, dout_dt, a, a_dt, b, b_dt, n);
    return tr_cuda_launched(op, err);
}
