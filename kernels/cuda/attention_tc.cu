/* attention_tc.cu — scaled-dot-product attention on the tensor cores (WMMA, 16 x 16 x 16
 * bf16/f16 products with f32 accumulation), forward and backward, FlashAttention-2's
 * formulation: nothing of size T x T is stored. Same contract as attention.cu (layout
 * [B, T, H, D], padding mask, dropout factor Z from the CPU's Philox stream element, lse =
 * m + log l per row), for bf16/f16 tensors and head sizes D, a multiple of 16 in 32..128.
 *
 * WMMA leaves the lane-to-element mapping of a fragment unspecified, so the kernels touch
 * fragment elements only uniformly, or through the row of each accumulator element, which
 * they learn legally at the start: rows_of() loads a matrix whose values are their own row
 * numbers. Row-wise work (the online softmax, the dropout, dS) runs on score tiles stored to
 * shared memory, each warp on its own 16 rows, so a warp needs only __syncwarp around it.
 *
 * Forward: a block of FWD_WARPS warps owns 16 query rows each; key and value tiles of BC keys
 * stream through shared memory. Per tile: S = Q K^T (Q fragments from shared memory, K as a
 * column-major B operand), the softmax row statistics and P (rounded to the input dtype, as
 * FlashAttention does, and multiplied by Z) in shared memory, O rescaled per row by
 * exp(m_old - m_new) and O += P V. Finally O / l.
 * Backward: delta_i = dout_i . out_i (attention.cu), then two kernels that each own their
 * gradient rows, so every sum runs in one fixed order and the gradients repeat bit for bit
 * (no atomics): dK/dV per key tile (S^T = K Q^T, dP^T = V dO^T, dV += (P Z)^T dO,
 * dK += dS^T Q over query tiles) and dQ per query tile (S, dP, dQ += dS K over key tiles).
 * That is 7 products against FlashAttention-2's 5 with an atomic dQ: the price of repeatable
 * gradients.
 * Shared memory is static (at most 48 KiB a block; the emulator does not run dynamic shared
 * memory), which sets the tile sizes; rows are padded by 8 elements (16 bytes) to spread the
 * banks, and every fragment pointer is 32-byte aligned. */
#include "cuda/attention.cuh"
#include "cuda/arch.cuh"
#include "cuda/attention_tc.h"
#include "cuda/card.h"

#include <mma.h>

using namespace nvcuda;

enum {
    TC_FWD_WARPS = 4, /* forward: 64 query rows a block */
    TC_BWD_WARPS = 2, /* backward: 32 key (dK/dV) or query (dQ) rows a block */
    TC_BC = 32,       /* keys (forward, dQ) or queries (dK/dV) a tile */
    TC_PAD = 8,       /* 16-bit elements of padding a row */
};

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> tc_acc;
template <class T> using tc_a_row = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <class T> using tc_b_row = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
template <class T> using tc_b_col = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;

template <class T> __device__ __forceinline__ T tc_zero()
{
    return tr_st<T>(0.0f);
}

/* rows[16][16] (=) r in row r, by the whole block; the caller synchronises before rows_of. */
__device__ __forceinline__ void tc_fill_rows(float (*rows)[16])
{
    for (int e = threadIdx.x; e < 256; e += blockDim.x) rows[e / 16][e % 16] = (float)(e / 16);
}

/* The row (0..15) of each element of an accumulator fragment, learned from rows[][] (the
 * mapping is the fragment type's, the same for every accumulator). */
__device__ __forceinline__ void tc_rows_of(int (&row)[tc_acc::num_elements], float (*rows)[16])
{
    tc_acc f;
    wmma::load_matrix_sync(f, &rows[0][0], 16, wmma::mem_row_major);
#pragma unroll
    for (int i = 0; i < tc_acc::num_elements; i++) row[i] = (int)f.x[i];
}

/* Rows [r0, r0 + R) of head h of x ([B,T,H,D], dtype T) into dst[R][LD], zeros past T; by
 * the whole block. Columns past D are never read. */
template <class T, int R, int LD>
__device__ __forceinline__ void tc_load_rows(T (*dst)[LD], const T *x, const attn_shape &s, int64_t b, int64_t h,
                                             int64_t r0)
{
    const int D = (int)s.D;
    for (int idx = threadIdx.x; idx < R * D; idx += blockDim.x) {
        const int r = idx / D, d = idx % D;
        const int64_t t = r0 + r;
        dst[r][d] = t < s.T ? x[attn_idx(s, b, t, h) + d] : tc_zero<T>();
    }
}

/* acc (16 x 16) of rows [r0, r0 + 16), columns [c0, c0 + 16) of head h of y (scaled by f)
 * through the warp's staging tile stage[16][LD] (f32); rows past T are not written. */
template <class T, int LD>
__device__ __forceinline__ void tc_store_tile(T *y, const tc_acc &acc, float (*stage)[LD], const attn_shape &s,
                                              int64_t b, int64_t h, int64_t r0, int c0, float f)
{
    const int lane = threadIdx.x & 31;
    wmma::store_matrix_sync(&stage[0][0], acc, LD, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
        const int r = e / 16, c = e % 16;
        if (r0 + r < s.T) y[attn_idx(s, b, r0 + r, h) + c0 + c] = tr_st<T>(stage[r][c] * f);
    }
    __syncwarp();
}

/* ------------------------------------------------------------ forward */

template <class T, int DMAX> struct tc_fwd_smem {
    enum { LD = DMAX + TC_PAD, LS = TC_BC + 4, LP = TC_BC + TC_PAD };
    union {
        T q[TC_FWD_WARPS * 16][LD]; /* the block's query rows, read before the key loop only */
        struct {
            float s[TC_FWD_WARPS][16][LS]; /* a warp's scores, then its staging tile */
            T p[TC_FWD_WARPS][16][LP];     /* a warp's P Z, in the input dtype */
        } t;
    } u __align__(32);
    T k[TC_BC][LD] __align__(32);
    T v[TC_BC][LD] __align__(32);
    float rows[16][16] __align__(32);
    float m[TC_FWD_WARPS][16], l[TC_FWD_WARPS][16], corr[TC_FWD_WARPS][16];
    int valid[TC_BC];
};

template <class T, int DMAX>
__device__ __forceinline__ void attn_tc_fwd_tiles(T *out, float *lse, const T *q, const T *k, const T *v,
                                                  const void *mask, int mask_dt, attn_shape s)
{
    typedef tc_fwd_smem<T, DMAX> smem_t;
    static_assert(sizeof(smem_t) <= 48 * 1024, "static shared memory is at most 48 KiB a block");
    enum { LD = smem_t::LD, LS = smem_t::LS, LP = smem_t::LP, NO = DMAX / 16 };
    __shared__ smem_t sm;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nd = (int)(s.D / 16);
    const int64_t b = blockIdx.z, h = blockIdx.y, i0 = (int64_t)blockIdx.x * (TC_FWD_WARPS * 16);
    const int64_t iw = i0 + warp * 16; /* the warp's first row */

    tc_fill_rows(sm.rows);
    tc_load_rows<T, TC_FWD_WARPS * 16, LD>(sm.u.q, q, s, b, h, i0);
    if (lane < 16) {
        sm.m[warp][lane] = -INFINITY;
        sm.l[warp][lane] = 0.0f;
    }
    __syncthreads();
    int row[tc_acc::num_elements];
    tc_rows_of(row, sm.rows);
    tc_a_row<T> qf[NO];
    for (int kk = 0; kk < nd; kk++) wmma::load_matrix_sync(qf[kk], &sm.u.q[warp * 16][kk * 16], LD);
    tc_acc o[NO];
    for (int f = 0; f < NO; f++) wmma::fill_fragment(o[f], 0.0f);

    /* the softmax's share of each lane: row r, keys [c0, c0 + 16) */
    const int r = lane >> 1, c0 = (lane & 1) * 16;
    const int64_t i = iw + r;
    for (int64_t j0 = 0; j0 < s.T; j0 += TC_BC) {
        __syncthreads(); /* q (first tile) or the previous tile's k and v are no longer read */
        tc_load_rows<T, TC_BC, LD>(sm.k, k, s, b, h, j0);
        tc_load_rows<T, TC_BC, LD>(sm.v, v, s, b, h, j0);
        if (threadIdx.x < TC_BC) sm.valid[threadIdx.x] = attn_keep_key(mask, mask_dt, b, s.T, j0 + threadIdx.x);
        __syncthreads();
        /* S = Q K^T, 16 x TC_BC */
        for (int n = 0; n < TC_BC / 16; n++) {
            tc_acc sc;
            wmma::fill_fragment(sc, 0.0f);
            for (int kk = 0; kk < nd; kk++) {
                tc_b_col<T> kf;
                wmma::load_matrix_sync(kf, &sm.k[n * 16][kk * 16], LD);
                wmma::mma_sync(sc, qf[kk], kf, sc);
            }
            wmma::store_matrix_sync(&sm.u.t.s[warp][0][n * 16], sc, LS, wmma::mem_row_major);
        }
        __syncwarp();
        /* the online softmax of row r over this tile, two lanes a row */
        float x[16], mx = -INFINITY;
#pragma unroll
        for (int c = 0; c < 16; c++) {
            const bool ok = i < s.nq && sm.valid[c0 + c];   /* a row past nq sees no key: out 0, lse -inf */
            x[c] = ok ? s.scale * sm.u.t.s[warp][r][c0 + c] : -INFINITY;
            mx = fmaxf(mx, x[c]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float m_old = sm.m[warp][r], m_new = fmaxf(m_old, mx);
        const float corr = m_new == -INFINITY ? 1.0f : expf(m_old - m_new); /* m_old == -inf gives 0 */
        float sum = 0.0f;
#pragma unroll
        for (int c = 0; c < 16; c++) {
            const float pj = x[c] == -INFINITY ? 0.0f : expf(x[c] - m_new);
            sum += pj;
            const float pd = pj == 0.0f ? 0.0f : pj * attn_dropout(s, b, h, i, j0 + c0 + c);
            sm.u.t.p[warp][r][c0 + c] = tr_st<T>(pd);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        if ((lane & 1) == 0) {
            sm.m[warp][r] = m_new;
            sm.l[warp][r] = sm.l[warp][r] * corr + sum;
            sm.corr[warp][r] = corr;
        }
        __syncwarp();
        /* O = diag(corr) O + (P Z) V */
        for (int f = 0; f < nd; f++)
#pragma unroll
            for (int e = 0; e < tc_acc::num_elements; e++) o[f].x[e] *= sm.corr[warp][row[e]];
        for (int kk = 0; kk < TC_BC / 16; kk++) {
            tc_a_row<T> pf;
            wmma::load_matrix_sync(pf, &sm.u.t.p[warp][0][kk * 16], LP);
            for (int f = 0; f < nd; f++) {
                tc_b_row<T> vf;
                wmma::load_matrix_sync(vf, &sm.v[kk * 16][f * 16], LD);
                wmma::mma_sync(o[f], pf, vf, o[f]);
            }
        }
    }
    /* out = O / l (0 for a row whose keys are all padding), lse = m + log l */
    if ((lane & 1) == 0) {
        const float l = sm.l[warp][r];
        sm.corr[warp][r] = l > 0.0f ? 1.0f / l : 0.0f;
        if (i < s.T) lse[(b * s.H + h) * s.T + i] = l > 0.0f ? sm.m[warp][r] + logf(l) : -INFINITY;
    }
    __syncwarp();
    for (int f = 0; f < nd; f++) {
#pragma unroll
        for (int e = 0; e < tc_acc::num_elements; e++) o[f].x[e] *= sm.corr[warp][row[e]];
        tc_store_tile<T, LS>(out, o[f], sm.u.t.s[warp], s, b, h, iw, f * 16, 1.0f);
    }
}

/* The kernel: the tiles where the target has WMMA for T, a trap elsewhere (arch.cuh). */
template <class T, int DMAX>
__global__ void __launch_bounds__(TC_FWD_WARPS * 32)
    attn_tc_fwd_kernel(T *out, float *lse, const T *q, const T *k, const T *v, const void *mask, int mask_dt,
                       attn_shape s)
{
    if constexpr (tr_arch_mma<T>::value)
        attn_tc_fwd_tiles<T, DMAX>(out, lse, q, k, v, mask, mask_dt, s);
    else
        tr_arch_unreachable();
}

/* ------------------------------------------------------------ backward: dK and dV */

/* The backward's two products of a 16 x 16 tile, over nd 16-wide slices of the head dim:
 * sc = A1 B1^T (the scores) and dp = A2 B2^T (dP), the rows of A1, B1, A2, B2 in shared memory
 * LD apart (the B rows read as a column-major matrix_b). The dK/dV kernel passes K, Q, V, dO
 * (S^T, dP^T); the dQ kernel Q, K, dO, V (S, dP). */
template <class T, int LD>
__device__ __forceinline__ void tc_score_products(tc_acc &sc, tc_acc &dp, const T *a1, const T *b1, const T *a2,
                                                  const T *b2, int nd)
{
    wmma::fill_fragment(sc, 0.0f);
    wmma::fill_fragment(dp, 0.0f);
    for (int kk = 0; kk < nd; kk++) {
        tc_a_row<T> f1, f2;
        tc_b_col<T> g1, g2;
        wmma::load_matrix_sync(f1, a1 + kk * 16, LD);
        wmma::load_matrix_sync(g1, b1 + kk * 16, LD);
        wmma::mma_sync(sc, f1, g1, sc);
        wmma::load_matrix_sync(f2, a2 + kk * 16, LD);
        wmma::load_matrix_sync(g2, b2 + kk * 16, LD);
        wmma::mma_sync(dp, f2, g2, dp);
    }
}

template <class T, int DMAX> struct tc_dkv_smem {
    enum { LD = DMAX + TC_PAD, LS = 16 + 4, LP = 16 + TC_PAD, QT = 16 };
    T k[TC_BWD_WARPS * 16][LD] __align__(32);
    T v[TC_BWD_WARPS * 16][LD] __align__(32);
    T q[QT][LD] __align__(32);
    T g[QT][LD] __align__(32);                     /* dout rows */
    float st[TC_BWD_WARPS][16][LS] __align__(32);  /* S^T, then the staging tile */
    float dpt[TC_BWD_WARPS][16][LS] __align__(32); /* dP^T */
    T pz[TC_BWD_WARPS][16][LP] __align__(32);      /* (P Z)^T */
    T ds[TC_BWD_WARPS][16][LP] __align__(32);      /* dS^T */
    float rows[16][16] __align__(32);
    float lse[QT], delta[QT];
    int key_ok[TC_BWD_WARPS * 16];
};

template <class T, int DMAX>
__device__ __forceinline__ void attn_tc_dkv_tiles(T *dk, T *dv, const T *dout, const T *q, const T *k, const T *v,
                                                  const float *lse, const float *delta, const void *mask, int mask_dt,
                                                  attn_shape s)
{
    typedef tc_dkv_smem<T, DMAX> smem_t;
    static_assert(sizeof(smem_t) <= 48 * 1024, "static shared memory is at most 48 KiB a block");
    enum { LD = smem_t::LD, LS = smem_t::LS, LP = smem_t::LP, QT = smem_t::QT, NO = DMAX / 16 };
    __shared__ smem_t sm;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nd = (int)(s.D / 16);
    const int64_t b = blockIdx.z, h = blockIdx.y, j0 = (int64_t)blockIdx.x * (TC_BWD_WARPS * 16);
    const int jw = warp * 16; /* the warp's first key in the block's tile */

    tc_fill_rows(sm.rows);
    tc_load_rows<T, TC_BWD_WARPS * 16, LD>(sm.k, k, s, b, h, j0);
    tc_load_rows<T, TC_BWD_WARPS * 16, LD>(sm.v, v, s, b, h, j0);
    if (threadIdx.x < TC_BWD_WARPS * 16)
        sm.key_ok[threadIdx.x] = attn_keep_key(mask, mask_dt, b, s.T, j0 + threadIdx.x);
    tc_acc gk[NO], gv[NO];
    for (int f = 0; f < NO; f++) wmma::fill_fragment(gk[f], 0.0f), wmma::fill_fragment(gv[f], 0.0f);

    for (int64_t i0 = 0; i0 < s.nq; i0 += QT) {
        __syncthreads(); /* the previous query tile is no longer read */
        tc_load_rows<T, QT, LD>(sm.q, q, s, b, h, i0);
        tc_load_rows<T, QT, LD>(sm.g, dout, s, b, h, i0);
        if (threadIdx.x < QT) {
            const int64_t i = i0 + threadIdx.x;
            sm.lse[threadIdx.x] = i < s.T ? lse[(b * s.H + h) * s.T + i] : -INFINITY;
            sm.delta[threadIdx.x] = i < s.T ? delta[(b * s.H + h) * s.T + i] : 0.0f;
        }
        __syncthreads();
        /* S^T = K Q^T and dP^T = V dO^T, 16 keys x QT queries */
        tc_acc sc, dp;
        tc_score_products<T, LD>(sc, dp, sm.k[jw], sm.q[0], sm.v[jw], sm.g[0], nd);
        wmma::store_matrix_sync(&sm.st[warp][0][0], sc, LS, wmma::mem_row_major);
        wmma::store_matrix_sync(&sm.dpt[warp][0][0], dp, LS, wmma::mem_row_major);
        __syncwarp();
        /* P = exp(scale s - lse_i), (P Z)^T and dS^T = P (Z dP - delta_i); a padded key or
         * query, or a query whose keys are all padding, gives 0 */
        for (int e = lane; e < 16 * QT; e += 32) {
            const int r = e / QT, c = e % QT;
            const int64_t j = j0 + jw + r, i = i0 + c;
            const float li = sm.lse[c];
            float pz = 0.0f, ds = 0.0f;
            if (sm.key_ok[jw + r] && i < s.nq && li != -INFINITY) {
                const float P = expf(s.scale * sm.st[warp][r][c] - li);
                const float z = attn_dropout(s, b, h, i, j);
                pz = P * z;
                ds = P * (z * sm.dpt[warp][r][c] - sm.delta[c]);
            }
            sm.pz[warp][r][c] = tr_st<T>(pz);
            sm.ds[warp][r][c] = tr_st<T>(ds);
        }
        __syncwarp();
        /* dV += (P Z)^T dO, dK += dS^T Q */
        tc_a_row<T> pf, df;
        wmma::load_matrix_sync(pf, &sm.pz[warp][0][0], LP);
        wmma::load_matrix_sync(df, &sm.ds[warp][0][0], LP);
        for (int f = 0; f < nd; f++) {
            tc_b_row<T> gf, qf;
            wmma::load_matrix_sync(gf, &sm.g[0][f * 16], LD);
            wmma::mma_sync(gv[f], pf, gf, gv[f]);
            wmma::load_matrix_sync(qf, &sm.q[0][f * 16], LD);
            wmma::mma_sync(gk[f], df, qf, gk[f]);
        }
    }
    for (int f = 0; f < nd; f++) {
        tc_store_tile<T, LS>(dk, gk[f], sm.st[warp], s, b, h, j0 + jw, f * 16, s.scale);
        tc_store_tile<T, LS>(dv, gv[f], sm.st[warp], s, b, h, j0 + jw, f * 16, 1.0f);
    }
}

/* The kernel: the tiles where the target has WMMA for T, a trap elsewhere (arch.cuh). */
template <class T, int DMAX>
__global__ void __launch_bounds__(TC_BWD_WARPS * 32)
    attn_tc_dkv_kernel(T *dk, T *dv, const T *dout, const T *q, const T *k, const T *v, const float *lse,
                       const float *delta, const void *mask, int mask_dt, attn_shape s)
{
    if constexpr (tr_arch_mma<T>::value)
        attn_tc_dkv_tiles<T, DMAX>(dk, dv, dout, q, k, v, lse, delta, mask, mask_dt, s);
    else
        tr_arch_unreachable();
}

/* ------------------------------------------------------------ backward: dQ */

template <class T, int DMAX> struct tc_dq_smem {
    enum { LD = DMAX + TC_PAD, LS = TC_BC + 4, LP = TC_BC + TC_PAD };
    T q[TC_BWD_WARPS * 16][LD] __align__(32);
    T g[TC_BWD_WARPS * 16][LD] __align__(32);
    T k[TC_BC][LD] __align__(32);
    T v[TC_BC][LD] __align__(32);
    float st[TC_BWD_WARPS][16][LS] __align__(32); /* S, then the staging tile */
    float dp[TC_BWD_WARPS][16][LS] __align__(32); /* dP */
    T ds[TC_BWD_WARPS][16][LP] __align__(32);
    float lse[TC_BWD_WARPS * 16], delta[TC_BWD_WARPS * 16];
    int valid[TC_BC];
};

template <class T, int DMAX>
__device__ __forceinline__ void attn_tc_dq_tiles(T *dq, const T *dout, const T *q, const T *k, const T *v,
                                                 const float *lse, const float *delta, const void *mask, int mask_dt,
                                                 attn_shape s)
{
    typedef tc_dq_smem<T, DMAX> smem_t;
    static_assert(sizeof(smem_t) <= 48 * 1024, "static shared memory is at most 48 KiB a block");
    enum { LD = smem_t::LD, LS = smem_t::LS, LP = smem_t::LP, NO = DMAX / 16 };
    __shared__ smem_t sm;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nd = (int)(s.D / 16);
    const int64_t b = blockIdx.z, h = blockIdx.y, i0 = (int64_t)blockIdx.x * (TC_BWD_WARPS * 16);
    const int iw = warp * 16;

    tc_load_rows<T, TC_BWD_WARPS * 16, LD>(sm.q, q, s, b, h, i0);
    tc_load_rows<T, TC_BWD_WARPS * 16, LD>(sm.g, dout, s, b, h, i0);
    if (threadIdx.x < TC_BWD_WARPS * 16) {
        const int64_t i = i0 + threadIdx.x;
        sm.lse[threadIdx.x] = i < s.T ? lse[(b * s.H + h) * s.T + i] : -INFINITY;
        sm.delta[threadIdx.x] = i < s.T ? delta[(b * s.H + h) * s.T + i] : 0.0f;
    }
    tc_acc g[NO];
    for (int f = 0; f < NO; f++) wmma::fill_fragment(g[f], 0.0f);

    for (int64_t j0 = 0; j0 < s.T; j0 += TC_BC) {
        __syncthreads();
        tc_load_rows<T, TC_BC, LD>(sm.k, k, s, b, h, j0);
        tc_load_rows<T, TC_BC, LD>(sm.v, v, s, b, h, j0);
        if (threadIdx.x < TC_BC) sm.valid[threadIdx.x] = attn_keep_key(mask, mask_dt, b, s.T, j0 + threadIdx.x);
        __syncthreads();
        /* S = Q K^T and dP = dO V^T, 16 queries x TC_BC keys */
        for (int n = 0; n < TC_BC / 16; n++) {
            tc_acc sc, dp;
            tc_score_products<T, LD>(sc, dp, sm.q[iw], sm.k[n * 16], sm.g[iw], sm.v[n * 16], nd);
            wmma::store_matrix_sync(&sm.st[warp][0][n * 16], sc, LS, wmma::mem_row_major);
            wmma::store_matrix_sync(&sm.dp[warp][0][n * 16], dp, LS, wmma::mem_row_major);
        }
        __syncwarp();
        for (int e = lane; e < 16 * TC_BC; e += 32) {
            const int r = e / TC_BC, c = e % TC_BC;
            const int64_t i = i0 + iw + r, j = j0 + c;
            const float li = sm.lse[iw + r];
            float ds = 0.0f;
            if (sm.valid[c] && i < s.nq && li != -INFINITY) {
                const float P = expf(s.scale * sm.st[warp][r][c] - li);
                ds = P * (attn_dropout(s, b, h, i, j) * sm.dp[warp][r][c] - sm.delta[iw + r]);
            }
            sm.ds[warp][r][c] = tr_st<T>(ds);
        }
        __syncwarp();
        /* dQ += dS K */
        for (int kk = 0; kk < TC_BC / 16; kk++) {
            tc_a_row<T> df;
            wmma::load_matrix_sync(df, &sm.ds[warp][0][kk * 16], LP);
            for (int f = 0; f < nd; f++) {
                tc_b_row<T> kf;
                wmma::load_matrix_sync(kf, &sm.k[kk * 16][f * 16], LD);
                wmma::mma_sync(g[f], df, kf, g[f]);
            }
        }
    }
    for (int f = 0; f < nd; f++) tc_store_tile<T, LS>(dq, g[f], sm.st[warp], s, b, h, i0 + iw, f * 16, s.scale);
}

/* The kernel: the tiles where the target has WMMA for T, a trap elsewhere (arch.cuh). */
template <class T, int DMAX>
__global__ void __launch_bounds__(TC_BWD_WARPS * 32)
    attn_tc_dq_kernel(T *dq, const T *dout, const T *q, const T *k, const T *v, const float *lse, const float *delta,
                      const void *mask, int mask_dt, attn_shape s)
{
    if constexpr (tr_arch_mma<T>::value)
        attn_tc_dq_tiles<T, DMAX>(dq, dout, q, k, v, lse, delta, mask, mask_dt, s);
    else
        tr_arch_unreachable();
}

/* ------------------------------------------------------------ launchers */

extern "C" int tr_k_attention_tc_fits(int dt, int64_t D)
{
    return tr_k_mma_takes(dt, tr_k_cuda_cc()) && D % 16 == 0 && D >= 32 && D <= 128;
}

template <class T, int DMAX>
static void tc_fwd_launch(void *out, float *lse, const void *q, const void *k, const void *v, const void *mask,
                          int mask_dt, const attn_shape &s, cudaStream_t st)
{
    const dim3 grid((unsigned)((s.T + TC_FWD_WARPS * 16 - 1) / (TC_FWD_WARPS * 16)), (unsigned)s.H, (unsigned)s.B);
    attn_tc_fwd_kernel<T, DMAX>
        <<<grid, TC_FWD_WARPS * 32, 0, st>>>((T *)out, lse, (const T *)q, (const T *)k, (const T *)v, mask, mask_dt, s);
}

template <class T, int DMAX>
static void tc_bwd_launch(void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k, const void *v,
                          const float *lse, const float *delta, const void *mask, int mask_dt, const attn_shape &s,
                          cudaStream_t st)
{
    const dim3 grid((unsigned)((s.T + TC_BWD_WARPS * 16 - 1) / (TC_BWD_WARPS * 16)), (unsigned)s.H, (unsigned)s.B);
    attn_tc_dkv_kernel<T, DMAX><<<grid, TC_BWD_WARPS * 32, 0, st>>>(
        (T *)dk, (T *)dv, (const T *)dout, (const T *)q, (const T *)k, (const T *)v, lse, delta, mask, mask_dt, s);
    attn_tc_dq_kernel<T, DMAX><<<grid, TC_BWD_WARPS * 32, 0, st>>>((T *)dq, (const T *)dout, (const T *)q, (const T *)k,
                                                                   (const T *)v, lse, delta, mask, mask_dt, s);
}

/* Runs BODY with DMAX the kernel's head-size bound for D (32, 64 or 128). */
#define TC_DISPATCH_D(D, BODY)                                                                                         \
    if ((D) <= 32) {                                                                                                   \
        enum { DMAX = 32 };                                                                                            \
        BODY;                                                                                                          \
    } else if ((D) <= 64) {                                                                                            \
        enum { DMAX = 64 };                                                                                            \
        BODY;                                                                                                          \
    } else {                                                                                                           \
        enum { DMAX = 128 };                                                                                           \
        BODY;                                                                                                          \
    }

/* Runs BODY with T the C++ type of dt (bf16 or f16) and DMAX the kernel's head-size bound. */
#define TC_DISPATCH(dt, D, BODY)                                                                                       \
    do {                                                                                                               \
        if ((dt) == TR_BF16) {                                                                                         \
            typedef __nv_bfloat16 T;                                                                                   \
            TC_DISPATCH_D(D, BODY);                                                                                    \
        } else {                                                                                                       \
            typedef __half T;                                                                                          \
            TC_DISPATCH_D(D, BODY);                                                                                    \
        }                                                                                                              \
    } while (0)

/* The launchers below are called by tr_k_attention_fwd_cuda / tr_k_attention_bwd_cuda after
 * their argument checks, for launches tr_k_attention_tc_fits takes, with B and T above 0. */
static int tc_refused(const char *op, int dt, int64_t D, tr_error *err)
{
    return tr_fail(err, TR_EINTERNAL,
                   "%s on CUDA: the tensor-core kernels take f16 (sm_70 and up), bf16 (sm_80 and up) "
                   "and head sizes that are a multiple of 16 in 32..128, not %s and D=%lld on a "
                   "card of compute capability %d.%d.",
                   op, tr_dtype_name(dt), (long long)D, tr_k_cuda_cc() / 10, tr_k_cuda_cc() % 10);
}

extern "C" int tr_k_attention_tc_fwd_cuda(void *out, float *lse, const void *q, const void *k, const void *v, int dt,
                                          const void *mask, int mask_dt, float p, uint64_t seed, uint32_t step,
                                          uint32_t layer, uint32_t op, float scale, int64_t B, int64_t T, int64_t H,
                                          int64_t D, int64_t query_rows, void *stream, tr_error *err)
{
    if (!tr_k_attention_tc_fits(dt, D)) return tc_refused("attention", dt, D, err);
    attn_shape s = attn_make(B, T, H, D, scale, p, seed, step, layer, op);
    s.nq = attn_query_rows(query_rows, T);
    TC_DISPATCH(dt, D, (tc_fwd_launch<T, DMAX>(out, lse, q, k, v, mask, mask_dt, s, (cudaStream_t)stream)));
    return tr_cuda_launched("attention", err);
}

extern "C" int tr_k_attention_tc_bwd_cuda(void *dq, void *dk, void *dv, const void *dout, const void *out,
                                          const void *q, const void *k, const void *v, int dt, const float *lse,
                                          const void *mask, int mask_dt, float p, uint64_t seed, uint32_t step,
                                          uint32_t layer, uint32_t op, float scale, int64_t B, int64_t T, int64_t H,
                                          int64_t D, int64_t query_rows, float *scratch, void *stream, tr_error *err)
{
    const char *name = "attention_backward";
    if (!tr_k_attention_tc_fits(dt, D)) return tc_refused(name, dt, D, err);
    int rc;
    if ((rc = tr_k_attention_delta_cuda(scratch, dout, out, dt, B, T, H, D, stream, err))) return rc;
    attn_shape s = attn_make(B, T, H, D, scale, p, seed, step, layer, op);
    s.nq = attn_query_rows(query_rows, T);
    TC_DISPATCH(
        dt, D,
        (tc_bwd_launch<T, DMAX>(dq, dk, dv, dout, q, k, v, lse, scratch, mask, mask_dt, s, (cudaStream_t)stream)));
    return tr_cuda_launched(name, err);
}
