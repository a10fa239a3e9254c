/* attention.cu — scaled-dot-product attention on the GPU, forward and backward, that never
 * stores a T x T matrix: the twin of kernels/cpu/attention.c (same layout, mask, dropout
 * stream and lse), written to be correct by construction first.
 *
 * Layout: q, k, v, out, dq, dk, dv are [B, T, H, D]; element (b, t, h, d) is at
 * ((b*T + t)*H + h)*D + d. lse and delta are [B, H, T].
 *
 * Forward: a block of ROWS warps per (query tile, h, b); each warp owns one query row and
 * each lane one key of the current tile of 32 keys (scores), then one slice of D (the
 * output accumulator, NV = DMAX/32 registers). Keys and values pass through shared memory,
 * rows padded by one float so that the lanes' column walks hit distinct banks. The
 * softmax is online (running max m and sum l, rescaled per tile); lse = m + log l.
 *
 * Backward (FlashAttention-2's formulation): delta_i = dout_i . out_i; with P recomputed
 * as exp(s - lse) and Z = keep / (1 - p) the dropout factor,
 *   dV_j = sum_i P_ij Z_ij dout_i,  dS_ij = P_ij (Z_ij dout_i . v_j - delta_i),
 *   dK_j = scale sum_i dS_ij q_i,   dQ_i = scale sum_j dS_ij k_j.
 * dK/dV run with one warp per key row, dQ with one warp per query row, so every gradient
 * row is summed by one warp in index order: no atomics, bit-for-bit repeatable.
 *
 * Window (the _win launchers, window w > 0): query i sees keys j with |i - j| <= w; each block
 * streams only the tiles its rows' windows reach, so a local layer costs O(T x w). The
 * tensor-core kernels take no window: a windowed launch runs here, in fp32 registers. */
#include "cuda/attention.h"
#include "cuda/attention.cuh"
#include "cuda/attention_tc.h"
#include "cpu/attn_bucket.h"

enum { ATTN_ROWS = 8, ATTN_TILE = 32 };

/* Loads rows [r0, r0 + ATTN_TILE) of head h of x ([B,T,H,D]) into dst[ATTN_TILE][DMAX + 1]
 * as fp32, zeros past T. Called by the whole block. */
template <int DMAX>
__device__ __forceinline__ void attn_load_tile(float (*dst)[DMAX + 1], const void *x, int dt, const attn_shape &s,
                                               int64_t b, int64_t h, int64_t r0)
{
    for (int idx = threadIdx.x; idx < ATTN_TILE * DMAX; idx += blockDim.x) {
        const int r = idx / DMAX, d = idx % DMAX;
        const int64_t t = r0 + r;
        dst[r][d] = (t < s.T && d < s.D) ? tr_ld_dt(x, attn_idx(s, b, t, h) + d, dt) : 0.0f;
    }
}

template <int DMAX>
__device__ __forceinline__ float attn_dot(const float *a, const float *b, int64_t D)
{
    float acc = 0.0f;
#pragma unroll 8
    for (int d = 0; d < DMAX; d++)
        if (d < D) acc += a[d] * b[d];
    return acc;
}

/* ------------------------------------------------------------ forward */

template <int DMAX>
__global__ void __launch_bounds__(ATTN_ROWS * 32)
attn_fwd_kernel(void *out, float *lse, const void *q, const void *k, const void *v, int dt, const void *mask,
                int mask_dt, attn_shape s)
{
    constexpr int NV = DMAX / 32;
    __shared__ float Ks[ATTN_TILE][DMAX + 1];
    __shared__ float Vs[ATTN_TILE][DMAX + 1];
    __shared__ float Qs[ATTN_ROWS][DMAX];
    __shared__ int valid[ATTN_TILE];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t b = blockIdx.z, h = blockIdx.y, i = (int64_t)blockIdx.x * ATTN_ROWS + warp;
    const bool active = i < s.T;
    const bool live = i < s.nq;   /* a row past nq sees no key: out 0, lse -inf */
    for (int d = lane; d < DMAX; d += 32)
        Qs[warp][d] = (live && d < s.D) ? tr_ld_dt(q, attn_idx(s, b, i, h) + d, dt) : 0.0f;
    float m = -INFINITY, l = 0.0f, o[NV];
#pragma unroll
    for (int t = 0; t < NV; t++) o[t] = 0.0f;

    int64_t jt0, jt1;   /* the key tiles the block's queries see (none when all are past nq) */
    attn_window_tiles(s, (int64_t)blockIdx.x * ATTN_ROWS, ATTN_ROWS, ATTN_TILE, &jt0, &jt1);
    if ((int64_t)blockIdx.x * ATTN_ROWS >= s.nq) jt1 = jt0;
    for (int64_t j0 = jt0; j0 < jt1; j0 += ATTN_TILE) {
        __syncthreads(); /* the previous tile is no longer read */
        attn_load_tile<DMAX>(Ks, k, dt, s, b, h, j0);
        attn_load_tile<DMAX>(Vs, v, dt, s, b, h, j0);
        if (threadIdx.x < ATTN_TILE) valid[threadIdx.x] = attn_keep_key(mask, mask_dt, b, s.T, j0 + threadIdx.x);
        __syncthreads();
        if (!live) continue;
        const int64_t j = j0 + lane;
        const bool ok = valid[lane] && attn_in_window(s, i, j);
        const float sc = ok ? s.scale * attn_dot<DMAX>(Qs[warp], Ks[lane], s.D) + attn_bias(s, h, i, j) : -INFINITY;
        const float m_new = fmaxf(m, tr_warp_max(sc));
        if (m_new == -INFINITY) continue; /* every key so far is padding: nothing to add */
        const float corr = expf(m - m_new); /* m == -inf gives 0: o and l are still 0 */
        const float pj = ok ? expf(sc - m_new) : 0.0f;
        l = l * corr + tr_warp_sum(pj);
        const float pd = ok ? pj * attn_dropout(s, b, h, i, j) : 0.0f;
#pragma unroll
        for (int t = 0; t < NV; t++) o[t] *= corr;
        for (int jj = 0; jj < ATTN_TILE; jj++) {
            const float w = __shfl_sync(0xffffffffu, pd, jj);
#pragma unroll
            for (int t = 0; t < NV; t++) o[t] += w * Vs[jj][lane + 32 * t];
        }
        m = m_new;
    }
    if (!active) return;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int t = 0; t < NV; t++) {
        const int d = lane + 32 * t;
        if (d < s.D) tr_st_dt(out, attn_idx(s, b, i, h) + d, dt, o[t] * inv);
    }
    if (lane == 0) lse[(b * s.H + h) * s.T + i] = l > 0.0f ? m + logf(l) : -INFINITY;
}

/* ------------------------------------------------------------ backward */

/* delta[b, h, i] = dout_i . out_i, one warp per row. */
__global__ void attn_delta_kernel(float *delta, const void *dout, const void *out, int dt, attn_shape s)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t b = blockIdx.z, h = blockIdx.y, i = (int64_t)blockIdx.x * ATTN_ROWS + warp;
    if (i >= s.T) return;
    const int64_t base = attn_idx(s, b, i, h);
    float acc = 0.0f;
    for (int64_t d = lane; d < s.D; d += 32) acc += tr_ld_dt(dout, base + d, dt) * tr_ld_dt(out, base + d, dt);
    acc = tr_warp_sum(acc);
    if (lane == 0) delta[(b * s.H + h) * s.T + i] = acc;
}

/* dK and dV: each warp owns key j; query tiles stream through shared memory. */
template <int DMAX>
__global__ void __launch_bounds__(ATTN_ROWS * 32)
attn_dkv_kernel(void *dk, void *dv, const void *dout, const void *q, const void *k, const void *v, int dt,
                const float *lse, const float *delta, const void *mask, int mask_dt, attn_shape s)
{
    constexpr int NV = DMAX / 32;
    __shared__ float Qs[ATTN_TILE][DMAX + 1];
    __shared__ float Gs[ATTN_TILE][DMAX + 1]; /* dout rows */
    __shared__ float Kw[ATTN_ROWS][DMAX];
    __shared__ float Vw[ATTN_ROWS][DMAX];
    __shared__ float Ls[ATTN_TILE], Ds[ATTN_TILE];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t b = blockIdx.z, h = blockIdx.y, j = (int64_t)blockIdx.x * ATTN_ROWS + warp;
    const bool active = j < s.T;
    const bool key_ok = active && attn_keep_key(mask, mask_dt, b, s.T, j);
    for (int d = lane; d < DMAX; d += 32) {
        Kw[warp][d] = (active && d < s.D) ? tr_ld_dt(k, attn_idx(s, b, j, h) + d, dt) : 0.0f;
        Vw[warp][d] = (active && d < s.D) ? tr_ld_dt(v, attn_idx(s, b, j, h) + d, dt) : 0.0f;
    }
    float gk[NV], gv[NV];
#pragma unroll
    for (int t = 0; t < NV; t++) gk[t] = gv[t] = 0.0f;

    int64_t it0, it1;   /* the query tiles that see the block's keys, up to row nq */
    attn_window_tiles(s, (int64_t)blockIdx.x * ATTN_ROWS, ATTN_ROWS, ATTN_TILE, &it0, &it1);
    if (it1 > s.nq) it1 = s.nq;
    for (int64_t i0 = it0; i0 < it1; i0 += ATTN_TILE) {
        __syncthreads();
        attn_load_tile<DMAX>(Qs, q, dt, s, b, h, i0);
        attn_load_tile<DMAX>(Gs, dout, dt, s, b, h, i0);
        if (threadIdx.x < ATTN_TILE) {
            const int64_t i = i0 + threadIdx.x;
            Ls[threadIdx.x] = i < s.T ? lse[(b * s.H + h) * s.T + i] : -INFINITY;
            Ds[threadIdx.x] = i < s.T ? delta[(b * s.H + h) * s.T + i] : 0.0f;
        }
        __syncthreads();
        if (!key_ok) continue; /* a padded key gets no gradient (it had probability 0) */
        const int64_t i = i0 + lane;
        const float li = Ls[lane];
        const bool ok = i < s.nq && li != -INFINITY && attn_in_window(s, i, j);
        float pz = 0.0f, ds = 0.0f;
        if (ok) {
            const float P = expf(s.scale * attn_dot<DMAX>(Qs[lane], Kw[warp], s.D) + attn_bias(s, h, i, j) - li);
            const float z = attn_dropout(s, b, h, i, j);
            pz = P * z;
            ds = P * (z * attn_dot<DMAX>(Gs[lane], Vw[warp], s.D) - Ds[lane]);
        }
        for (int ii = 0; ii < ATTN_TILE; ii++) {
            const float a = __shfl_sync(0xffffffffu, pz, ii);
            const float c = __shfl_sync(0xffffffffu, ds, ii);
#pragma unroll
            for (int t = 0; t < NV; t++) {
                gv[t] += a * Gs[ii][lane + 32 * t];
                gk[t] += c * Qs[ii][lane + 32 * t];
            }
        }
    }
    if (!active) return;
#pragma unroll
    for (int t = 0; t < NV; t++) {
        const int d = lane + 32 * t;
        if (d < s.D) {
            tr_st_dt(dk, attn_idx(s, b, j, h) + d, dt, gk[t] * s.scale);
            tr_st_dt(dv, attn_idx(s, b, j, h) + d, dt, gv[t]);
        }
    }
}

/* dQ: each warp owns query i; key tiles stream through shared memory. */
template <int DMAX>
__global__ void __launch_bounds__(ATTN_ROWS * 32)
attn_dq_kernel(void *dq, const void *dout, const void *q, const void *k, const void *v, int dt, const float *lse,
               const float *delta, const void *mask, int mask_dt, attn_shape s)
{
    constexpr int NV = DMAX / 32;
    __shared__ float Ks[ATTN_TILE][DMAX + 1];
    __shared__ float Vs[ATTN_TILE][DMAX + 1];
    __shared__ float Qw[ATTN_ROWS][DMAX];
    __shared__ float Gw[ATTN_ROWS][DMAX];
    __shared__ int valid[ATTN_TILE];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t b = blockIdx.z, h = blockIdx.y, i = (int64_t)blockIdx.x * ATTN_ROWS + warp;
    const bool active = i < s.T;
    for (int d = lane; d < DMAX; d += 32) {
        Qw[warp][d] = (active && d < s.D) ? tr_ld_dt(q, attn_idx(s, b, i, h) + d, dt) : 0.0f;
        Gw[warp][d] = (active && d < s.D) ? tr_ld_dt(dout, attn_idx(s, b, i, h) + d, dt) : 0.0f;
    }
    /* a row past nq gets dq 0, as a row that sees no key */
    const float li = i < s.nq ? lse[(b * s.H + h) * s.T + i] : -INFINITY;
    const float di = active ? delta[(b * s.H + h) * s.T + i] : 0.0f;
    float g[NV];
#pragma unroll
    for (int t = 0; t < NV; t++) g[t] = 0.0f;

    int64_t jt0, jt1;
    attn_window_tiles(s, (int64_t)blockIdx.x * ATTN_ROWS, ATTN_ROWS, ATTN_TILE, &jt0, &jt1);
    for (int64_t j0 = jt0; j0 < jt1; j0 += ATTN_TILE) {
        __syncthreads();
        attn_load_tile<DMAX>(Ks, k, dt, s, b, h, j0);
        attn_load_tile<DMAX>(Vs, v, dt, s, b, h, j0);
        if (threadIdx.x < ATTN_TILE) valid[threadIdx.x] = attn_keep_key(mask, mask_dt, b, s.T, j0 + threadIdx.x);
        __syncthreads();
        if (!active || li == -INFINITY) continue;
        const int64_t j = j0 + lane;
        float ds = 0.0f;
        if (valid[lane] && attn_in_window(s, i, j)) {
            const float P = expf(s.scale * attn_dot<DMAX>(Qw[warp], Ks[lane], s.D) + attn_bias(s, h, i, j) - li);
            const float z = attn_dropout(s, b, h, i, j);
            ds = P * (z * attn_dot<DMAX>(Gw[warp], Vs[lane], s.D) - di);
        }
        for (int jj = 0; jj < ATTN_TILE; jj++) {
            const float c = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
            for (int t = 0; t < NV; t++) g[t] += c * Ks[jj][lane + 32 * t];
        }
    }
    if (!active) return;
#pragma unroll
    for (int t = 0; t < NV; t++) {
        const int d = lane + 32 * t;
        if (d < s.D) tr_st_dt(dq, attn_idx(s, b, i, h) + d, dt, g[t] * s.scale);
    }
}

/* ------------------------------------------------------------ relative-position bias */

/* bucket[d] (=) the bucket of relative position d - (T - 1), and relrow[h, d] (=) head h's bias
 * for it, one thread per relative position. */
__global__ void attn_rel_fill_kernel(float *relrow, int *bucket, const float *table, int64_t nbuckets,
                                     int64_t max_distance, int bidirectional, int64_t T, int64_t H)
{
    const int64_t nd = 2 * T - 1, d = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= nd) return;
    const int bk = tr_attn_rel_bucket(d - (T - 1), nbuckets, max_distance, bidirectional);
    bucket[d] = bk;
    for (int64_t h = 0; h < H; h++) relrow[h * nd + d] = table[bk * H + h];
}

/* dist[b, h, d] (=) the sum over queries i (in order) of the scores' gradient dS_ij of key
 * j = i + d - (T - 1): one warp per (b, h, d), lanes over the head's D for the two dots. */
__global__ void __launch_bounds__(ATTN_ROWS * 32)
attn_rel_diag_kernel(float *dist, const void *dout, const void *q, const void *k, const void *v, int dt,
                     const float *lse, const float *delta, const void *mask, int mask_dt, attn_shape s)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t nd = 2 * s.T - 1, b = blockIdx.z, h = blockIdx.y, d = (int64_t)blockIdx.x * ATTN_ROWS + warp;
    if (d >= nd) return;
    const int64_t rel = d - (s.T - 1);
    const int64_t i0 = rel < 0 ? -rel : 0, i1 = rel > 0 ? s.T - rel : s.T;
    const int64_t iend = i1 < s.nq ? i1 : s.nq;   /* rows past nq add nothing */
    float acc = 0.0f;
    for (int64_t i = i0; i < iend; i++) {
        const int64_t j = i + rel;
        const float li = lse[(b * s.H + h) * s.T + i];
        if (li == -INFINITY || !attn_keep_key(mask, mask_dt, b, s.T, j) || !attn_in_window(s, i, j)) continue;
        const int64_t qi = attn_idx(s, b, i, h), kj = attn_idx(s, b, j, h);
        float qk = 0.0f, gv = 0.0f;
        for (int64_t e = lane; e < s.D; e += 32) {
            qk += tr_ld_dt(q, qi + e, dt) * tr_ld_dt(k, kj + e, dt);
            gv += tr_ld_dt(dout, qi + e, dt) * tr_ld_dt(v, kj + e, dt);
        }
        qk = tr_warp_sum(qk);
        gv = tr_warp_sum(gv);
        const float P = expf(s.scale * qk + attn_bias(s, h, i, j) - li);
        acc += P * (attn_dropout(s, b, h, i, j) * gv - delta[(b * s.H + h) * s.T + i]);
    }
    if (lane == 0) dist[(b * s.H + h) * nd + d] = acc;
}

/* dtable[bk, h] (+=) the sums of dist over the batch and the relative positions of bucket bk,
 * one thread per (bucket, head), in index order. */
__global__ void attn_rel_reduce_kernel(float *dtable, const float *dist, const int *bucket, int64_t nbuckets,
                                       int64_t B, int64_t T, int64_t H)
{
    const int64_t nd = 2 * T - 1, idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= nbuckets * H) return;
    const int64_t bk = idx / H, h = idx % H;
    float acc = 0.0f;
    for (int64_t b = 0; b < B; b++)
        for (int64_t d = 0; d < nd; d++)
            if (bucket[d] == bk) acc += dist[(b * H + h) * nd + d];
    dtable[idx] += acc;
}

extern "C" int64_t tr_k_attention_rel_scratch_cuda(int64_t B, int64_t T, int64_t H)
{
    return (B * H + H + 1) * (2 * T - 1);
}

/* With a bias: its rows by relative position filled into rel's scratch, and s pointed at them. */
static int attn_rel_prepare(const tr_k_attn_rel *rel, attn_shape *s, const char *name, cudaStream_t st,
                            tr_error *err)
{
    if (!rel || !rel->table) return TR_OK;
    if (!rel->scratch) return tr_fail(err, TR_EUSER, "%s on CUDA: a bias needs its scratch.", name);
    const int64_t nd = 2 * s->T - 1;
    float *relrow = rel->scratch;
    int *bucket = (int *)(rel->scratch + s->H * nd);
    attn_rel_fill_kernel<<<(unsigned)((nd + 127) / 128), 128, 0, st>>>(relrow, bucket, rel->table, rel->nbuckets,
                                                                      rel->max_distance, rel->bidirectional, s->T,
                                                                      s->H);
    s->relrow = relrow;
    return tr_cuda_launched(name, err);
}

/* ------------------------------------------------------------ launchers */

extern "C" int tr_k_attention_fwd_win_cuda(void *out, float *lse, const void *q, const void *k, const void *v,
                                           int dt, const void *mask, int mask_dt, float p, uint64_t seed,
                                           uint32_t step, uint32_t layer, uint32_t op, const tr_k_attn_rel *rel,
                                           float scale, int64_t B, int64_t T, int64_t H, int64_t D, int64_t window,
                                           int64_t query_rows, void *stream, tr_error *err)
{
    int rc = attn_check("attention", dt, mask, mask_dt, p, B, T, H, D, err);
    if (rc || B == 0 || T == 0) return rc;
    if (window < 0) return tr_fail(err, TR_EUSER, "attention on CUDA: window %lld < 0.", (long long)window);
    if (window >= T - 1) window = 0;   /* every key is within it */
    const bool biased = rel && rel->table;
    if (window == 0 && !biased && tr_k_attention_tc_fits(dt, D))
        return tr_k_attention_tc_fwd_cuda(out, lse, q, k, v, dt, mask, mask_dt, p, seed, step, layer, op, scale, B, T,
                                          H, D, query_rows, stream, err);
    attn_shape s = attn_make(B, T, H, D, scale, p, seed, step, layer, op);
    s.window = (int)window;
    s.nq = attn_query_rows(query_rows, T);
    const dim3 grid((unsigned)((T + ATTN_ROWS - 1) / ATTN_ROWS), (unsigned)H, (unsigned)B);
    cudaStream_t st = (cudaStream_t)stream;
    if ((rc = attn_rel_prepare(rel, &s, "attention", st, err))) return rc;
    if (D <= 32) attn_fwd_kernel<32><<<grid, ATTN_ROWS * 32, 0, st>>>(out, lse, q, k, v, dt, mask, mask_dt, s);
    else if (D <= 64) attn_fwd_kernel<64><<<grid, ATTN_ROWS * 32, 0, st>>>(out, lse, q, k, v, dt, mask, mask_dt, s);
    else attn_fwd_kernel<128><<<grid, ATTN_ROWS * 32, 0, st>>>(out, lse, q, k, v, dt, mask, mask_dt, s);
    return tr_cuda_launched("attention", err);
}

extern "C" int tr_k_attention_fwd_cuda(void *out, float *lse, const void *q, const void *k, const void *v, int dt,
                                       const void *mask, int mask_dt, float p, uint64_t seed, uint32_t step,
                                       uint32_t layer, uint32_t op, const tr_k_attn_rel *rel, float scale, int64_t B,
                                       int64_t T, int64_t H, int64_t D, void *stream, tr_error *err)
{
    return tr_k_attention_fwd_win_cuda(out, lse, q, k, v, dt, mask, mask_dt, p, seed, step, layer, op, rel, scale, B,
                                       T, H, D, 0, 0, stream, err);
}

extern "C" int tr_k_attention_delta_cuda(float *delta, const void *dout, const void *out, int dt, int64_t B,
                                         int64_t T, int64_t H, int64_t D, void *stream, tr_error *err)
{
    const attn_shape s = attn_make(B, T, H, D, 1.0f, 0.0f, 0, 0, 0, 0);
    const dim3 grid((unsigned)((T + ATTN_ROWS - 1) / ATTN_ROWS), (unsigned)H, (unsigned)B);
    attn_delta_kernel<<<grid, ATTN_ROWS * 32, 0, (cudaStream_t)stream>>>(delta, dout, out, dt, s);
    return tr_cuda_launched("attention_backward", err);
}

extern "C" int64_t tr_k_attention_bwd_scratch_cuda(int64_t B, int64_t T, int64_t H) { return B * H * T; }

extern "C" int tr_k_attention_bwd_win_cuda(void *dq, void *dk, void *dv, const void *dout, const void *out,
                                           const void *q, const void *k, const void *v, int dt, const float *lse,
                                           const void *mask, int mask_dt, float p, uint64_t seed, uint32_t step,
                                           uint32_t layer, uint32_t op, const tr_k_attn_rel *rel, float scale,
                                           int64_t B, int64_t T, int64_t H, int64_t D, int64_t window,
                                           int64_t query_rows, float *scratch, void *stream, tr_error *err)
{
    const char *name = "attention_backward";
    int rc = attn_check(name, dt, mask, mask_dt, p, B, T, H, D, err);
    if (rc || B == 0 || T == 0) return rc;
    if (!scratch || !out)
        return tr_fail(err, TR_EUSER, "%s on CUDA: needs the forward's out and a scratch of "
                                      "tr_k_attention_bwd_scratch_cuda(B, T, H) floats.", name);
    if (window < 0) return tr_fail(err, TR_EUSER, "%s on CUDA: window %lld < 0.", name, (long long)window);
    if (window >= T - 1) window = 0;
    const bool biased = rel && rel->table;
    if (window == 0 && !biased && tr_k_attention_tc_fits(dt, D))
        return tr_k_attention_tc_bwd_cuda(dq, dk, dv, dout, out, q, k, v, dt, lse, mask, mask_dt, p, seed, step, layer,
                                          op, scale, B, T, H, D, query_rows, scratch, stream, err);
    attn_shape s = attn_make(B, T, H, D, scale, p, seed, step, layer, op);
    s.window = (int)window;
    s.nq = attn_query_rows(query_rows, T);
    const dim3 grid((unsigned)((T + ATTN_ROWS - 1) / ATTN_ROWS), (unsigned)H, (unsigned)B);
    const int threads = ATTN_ROWS * 32;
    cudaStream_t st = (cudaStream_t)stream;
    float *delta = scratch;
    if ((rc = attn_rel_prepare(rel, &s, name, st, err))) return rc;
    if ((rc = tr_k_attention_delta_cuda(delta, dout, out, dt, B, T, H, D, stream, err))) return rc;
    if (D <= 32) {
        attn_dkv_kernel<32><<<grid, threads, 0, st>>>(dk, dv, dout, q, k, v, dt, lse, delta, mask, mask_dt, s);
        attn_dq_kernel<32><<<grid, threads, 0, st>>>(dq, dout, q, k, v, dt, lse, delta, mask, mask_dt, s);
    } else if (D <= 64) {
        attn_dkv_kernel<64><<<grid, threads, 0, st>>>(dk, dv, dout, q, k, v, dt, lse, delta, mask, mask_dt, s);
        attn_dq_kernel<64><<<grid, threads, 0, st>>>(dq, dout, q, k, v, dt, lse, delta, mask, mask_dt, s);
    } else {
        attn_dkv_kernel<128><<<grid, threads, 0, st>>>(dk, dv, dout, q, k, v, dt, lse, delta, mask, mask_dt, s);
        attn_dq_kernel<128><<<grid, threads, 0, st>>>(dq, dout, q, k, v, dt, lse, delta, mask, mask_dt, s);
    }
    if (biased && rel->dtable) {
        const int64_t nd = 2 * T - 1;
        float *dist = rel->scratch + (H + 1) * nd;
        const int *bucket = (const int *)(rel->scratch + H * nd);
        const dim3 dgrid((unsigned)((nd + ATTN_ROWS - 1) / ATTN_ROWS), (unsigned)H, (unsigned)B);
        attn_rel_diag_kernel<<<dgrid, threads, 0, st>>>(dist, dout, q, k, v, dt, lse, delta, mask, mask_dt, s);
        attn_rel_reduce_kernel<<<(unsigned)((rel->nbuckets * H + 127) / 128), 128, 0, st>>>(
            rel->dtable, dist, bucket, rel->nbuckets, B, T, H);
    }
    return tr_cuda_launched(name, err);
}

extern "C" int tr_k_attention_bwd_cuda(void *dq, void *dk, void *dv, const void *dout, const void *out,
                                       const void *q, const void *k, const void *v, int dt, const float *lse,
                                       const void *mask, int mask_dt, float p, uint64_t seed, uint32_t step,
                                       uint32_t layer, uint32_t op, const tr_k_attn_rel *rel, float scale, int64_t B,
                                       int64_t T, int64_t H, int64_t D, float *scratch, void *stream, tr_error *err)
{
    return tr_k_attention_bwd_win_cuda(dq, dk, dv, dout, out, q, k, v, dt, lse, mask, mask_dt, p, seed, step, layer, op,
                                       rel, scale, B, T, H, D, 0, 0, scratch, stream, err);
}
