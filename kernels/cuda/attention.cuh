/* attention.cuh — what the attention kernels share (attention.cu, the fp32-register kernels;
 * attention_tc.cu, the tensor-core ones): the shape and dropout key of a launch, the element
 * index of the [B, T, H, D] layout, the padding mask, the dropout factor drawn from the CPU's
 * Philox stream element ((b*H + h)*T + i)*T + j, and the launchers' argument checks. Private to
 * kernels/cuda. */
#ifndef TR_KERNELS_CUDA_ATTENTION_CUH
#define TR_KERNELS_CUDA_ATTENTION_CUH

#include "cuda/attention.h"
#include "cuda/dtype.cuh"
#include "cuda/philox.cuh"

struct attn_shape {
    int64_t B, T, H, D;
    float scale;
    float p, keep_scale;        /* dropout probability and 1 / (1 - p) */
    tr_k_rng rng;
    int window;                 /* 0: every key; w > 0: query i sees keys j with |i - j| <= w (T < 2^30) */
    int64_t nq;                 /* the query rows computed (T, or the call's query_rows): rows nq .. T-1
                                   get out 0 and lse -inf, dq 0, and give dk and dv nothing */
    const float *relrow;        /* NULL, or [H, 2T - 1]: head h's bias of relative position j - i at
                                   h*(2T - 1) + j - i + T - 1 (attention.cu fills it from the table) */
};

/* Whether query i sees key j through the launch's window. */
__device__ __forceinline__ bool attn_in_window(const attn_shape &s, int64_t i, int64_t j)
{
    const int d = (int)(i - j);
    return s.window <= 0 || (d <= s.window && -d <= s.window);
}

/* The tiles of `tile` rows from *t0 to *t1 (exclusive) that rows [r0, r0 + n) see through the
 * window (all T rows without one). */
__device__ __forceinline__ void attn_window_tiles(const attn_shape &s, int64_t r0, int64_t n, int tile, int64_t *t0,
                                                  int64_t *t1)
{
    *t0 = 0;
    *t1 = s.T;
    if (s.window <= 0) return;
    const int64_t lo = r0 - s.window, hi = r0 + n + s.window;
    *t0 = lo > 0 ? lo / tile * tile : 0;
    *t1 = hi < s.T ? hi : s.T;
}

__device__ __forceinline__ int64_t attn_idx(const attn_shape &s, int64_t b, int64_t t, int64_t h)
{
    return ((b * s.T + t) * s.H + h) * s.D;
}

__device__ __forceinline__ bool attn_keep_key(const void *mask, int mask_dt, int64_t b, int64_t T, int64_t j)
{
    if (j >= T) return false;
    if (!mask) return true;
    if (mask_dt == TR_I32) return ((const int32_t *)mask)[b * T + j] != 0;
    return ((const float *)mask)[b * T + j] != 0.0f;
}

/* The relative-position bias of query i and key j in head h, 0 without one. */
__device__ __forceinline__ float attn_bias(const attn_shape &s, int64_t h, int64_t i, int64_t j)
{
    return s.relrow ? s.relrow[h * (2 * s.T - 1) + j - i + s.T - 1] : 0.0f;
}

/* The dropout factor Z of (b, h, i, j): 0 or 1 / (1 - p), the CPU's stream element. */
__device__ __forceinline__ float attn_dropout(const attn_shape &s, int64_t b, int64_t h, int64_t i, int64_t j)
{
    if (s.p <= 0.0f) return 1.0f;
    const uint64_t e = (uint64_t)(((b * s.H + h) * s.T + i) * s.T + j);
    return tr_k_uniform(s.rng, e) >= s.p ? s.keep_scale : 0.0f;
}

static inline int attn_check(const char *op, int dt, const void *mask, int mask_dt, float p, int64_t B, int64_t T,
                      int64_t H, int64_t D, tr_error *err)
{
    int rc = tr_cuda_want_float(op, dt, err);
    if (rc) return rc;
    if (mask && mask_dt != TR_I32 && mask_dt != TR_F32)
        return tr_fail(err, TR_EUSER, "%s on CUDA: the padding mask must be i32 or f32.", op);
    if (!(p >= 0.0f && p < 1.0f))
        return tr_fail(err, TR_EUSER, "%s on CUDA: dropout p = %g must be in [0, 1).", op, (double)p);
    if (B < 0 || T < 0 || H <= 0 || D <= 0 || D > 128 || B > 65535 || H > 65535 || T > 2147483647 / 2)
        return tr_fail(err, TR_EUSER, "%s on CUDA: shape B=%lld T=%lld H=%lld D=%lld is not supported (head size "
                                      "D at most 128, B and H at most 65535).", op, (long long)B, (long long)T,
                       (long long)H, (long long)D);
    return TR_OK;
}

/* The query rows a launch computes: query_rows in (0, T), else all T (0 or T: every query). */
static inline int64_t attn_query_rows(int64_t query_rows, int64_t T)
{
    return query_rows > 0 && query_rows < T ? query_rows : T;
}

static inline attn_shape attn_make(int64_t B, int64_t T, int64_t H, int64_t D, float scale, float p, uint64_t seed,
                            uint32_t step, uint32_t layer, uint32_t op)
{
    attn_shape s;
    s.B = B;
    s.T = T;
    s.H = H;
    s.D = D;
    s.scale = scale;
    s.p = p;
    s.keep_scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
    s.rng = tr_k_rng_make(seed, step, layer, op);
    s.window = 0;
    s.nq = T;
    s.relrow = NULL;
    return s;
}

#endif
