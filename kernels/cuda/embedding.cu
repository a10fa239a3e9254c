/* embedding.cu — the embedding gather and its backward on the GPU, the twins of
 * kernels/cpu/embedding.c. The backward is deterministic without atomics: each thread
 * owns one column c of the table and walks the N tokens in order, adding dout[n, c] into
 * dtable[ids[n], c]; rows of one id are summed in token order, as on the CPU. An id of -1 is
 * a bad id the op's device check replaced (index_check.cu): its output row is 0 and its
 * gradient is dropped, so a bad id never reads or writes outside the table. */
#include "cuda/embedding.h"
#include "cuda/dtype.cuh"

enum { EMB_THREADS = 256 };

__global__ void embedding_fwd_kernel(void *out, int out_dt, const int64_t *ids, const void *table, int table_dt,
                                     int64_t N, int64_t C)
{
    const int64_t total = N * C;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t n = i / C, c = i % C, id = ids[n];
        tr_st_dt(out, i, out_dt, id < 0 ? 0.0f : tr_ld_dt(table, id * C + c, table_dt));
    }
}

__global__ void embedding_bwd_kernel(float *dtable, const void *dout, int dout_dt, const int64_t *ids, int64_t N,
                                     int64_t C, int64_t padding_idx)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int64_t n = 0; n < N; n++) {
        const int64_t id = ids[n];
        if (id == padding_idx || id < 0) continue;
        dtable[id * C + c] += tr_ld_dt(dout, n * C + c, dout_dt);
    }
}

extern "C" int tr_k_embedding_fwd_cuda(void *out, int out_dt, const int64_t *ids, const void *table, int table_dt,
                                       int64_t N, int64_t C, void *stream, tr_error *err)
{
    int rc;
    if ((rc = tr_cuda_want_float("embedding", out_dt, err)) || (rc = tr_cuda_want_float("embedding", table_dt, err)))
        return rc;
    if (N < 0 || C <= 0)
        return tr_fail(err, TR_EUSER, "embedding on CUDA: %lld ids of width %lld.", (long long)N, (long long)C);
    if (N == 0) return TR_OK;
    embedding_fwd_kernel<<<tr_cuda_grid(N * C, EMB_THREADS), EMB_THREADS, 0, (cudaStream_t)stream>>>(
        out, out_dt, ids, table, table_dt, N, C);
    return tr_cuda_launched("embedding", err);
}

extern "C" int tr_k_embedding_bwd_cuda(float *dtable, const void *dout, int dout_dt, const int64_t *ids, int64_t N,
                                       int64_t C, int64_t padding_idx, void *stream, tr_error *err)
{
    int rc = tr_cuda_want_float("embedding_backward", dout_dt, err);
    if (rc) return rc;
    if (N < 0 || C <= 0)
        return tr_fail(err, TR_EUSER, "embedding_backward on CUDA: %lld ids of width %lld.", (long long)N,
                       (long long)C);
    if (N == 0) return TR_OK;
    embedding_bwd_kernel<<<(unsigned)((C + EMB_THREADS - 1) / EMB_THREADS), EMB_THREADS, 0, (cudaStream_t)stream>>>(
        dtable, dout, dout_dt, ids, N, C, padding_idx);
    return tr_cuda_launched("embedding_backward", err);
}
