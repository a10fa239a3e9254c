/* attention.c — the attention kernels (attention.h), written once over REAL and instantiated
 * here for float (attn_tile.h's micro-kernels on AVX-512 or AVX2, cblas_sgemm on other CPUs)
 * and double (cblas_dgemm: the tests' reference), and the thread/scratch helpers. GEMM
 * arguments here are derived from positive shape ints checked at entry (every ld >= 1), so BLAS
 * never rejects them; the tensor-level op checks that B*T*H*D fits before calling. */
#ifndef KFN
#include "cpu/attention.h"

#include <cblas.h>
#include <string.h>
#include <tgmath.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu/attn_bucket.h"
#include "cpu/bf16_bits.h"
#include "cpu/attn_short.h"
#include "cpu/attn_tile.h"
#include "cpu/fast_math.h"
#include "tr_base.h"

/* ------------------------------------------------------------ helpers */

static int omp_thread(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

int tr_k_attention_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

int64_t tr_k_attention_row_stride(int64_t T)
{
    return T > 0 ? (T + TR_ATTN_ROW_ALIGN - 1) / TR_ATTN_ROW_ALIGN * TR_ATTN_ROW_ALIGN : 0;
}

/* Per thread (the body below, attn_bufs_of): the block buffers S, G and the 32-bit keep
 * masks, TR_ATTN_BLOCK x Tp each; the packed k^T and v^T, D x Tp each; the key selects (Tp),
 * the output row scales (TR_ATTN_BLOCK), the head's relative-position biases (2 Tp) and the
 * buckets of the relative positions (2 Tp). */
size_t tr_k_attention_scratch_elems(int64_t T, int64_t D, int nthreads)
{
    size_t Tp = (size_t)tr_k_attention_row_stride(T), d = (size_t)(D > 0 ? D : 0);
    if (Tp == 0) return 0;
    size_t per = TR_ATTN_SCRATCH_BUFS * TR_ATTN_BLOCK * Tp + 2 * d * Tp + 5 * Tp + TR_ATTN_BLOCK;
    return (size_t)(nthreads > 0 ? nthreads : 1) * per;
}

/* The keep masks of rows [0, nb) of a block, stream elements offset .. offset + nb*T - 1,
 * laid out with the score rows' stride Tp and 0 in the padding columns: one draw into the
 * buffer's tail, then each row moved down to its place (row r's destination ends before row
 * r+1's source begins, since r+1 <= nb). */
static void attn_keep_block(uint32_t *keep, const tr_attn_dropout *drop, int64_t nb, int64_t T,
                            int64_t Tp, uint64_t offset)
{
    uint32_t *src = keep + nb * (Tp - T);
    drop->keep(src, (size_t)(nb * T), drop->p, drop->key, offset);
    if (Tp == T) return;
    for (int64_t r = 0; r < nb; r++) {
        memmove(keep + r * Tp, src + r * T, (size_t)T * sizeof *keep);
        memset(keep + r * Tp + T, 0, (size_t)(Tp - T) * sizeof *keep);
    }
}

/* OpenBLAS (pthread build) does not know it runs inside an OpenMP region and would
 * start its own threads for every block GEMM of every thread: measured 4x slower on 2
 * cores. The kernels run their GEMMs single-threaded inside their own parallel region and
 * restore the caller's BLAS thread count afterwards. This touches OpenBLAS's process-wide
 * setting, which is safe because ops run one at a time (the runtime calls them from one
 * thread). */
static int blas_single_begin(void)
{
    int prev = openblas_get_num_threads();
    if (prev != 1) openblas_set_num_threads(1);
    return prev;
}

static void blas_single_end(int prev)
{
    if (prev != 1) openblas_set_num_threads(prev);
}

/* The first key and the count of keys [j0, j0 + nk) that a block of queries [i0, i0 + nb) sees
 * through a window of w keys each side, and nkp: nk rounded up to TR_ATTN_ROW_ALIGN, the stride
 * of the block's score rows (nkp <= Tp). */
static void attn_win_range(int64_t i0, int64_t nb, int64_t w, int64_t T, int64_t *j0, int64_t *nk, int64_t *nkp)
{
    int64_t lo = i0 - w < 0 ? 0 : i0 - w, hi = i0 + nb + w < T ? i0 + nb + w : T;
    *j0 = lo;
    *nk = hi - lo;
    *nkp = tr_k_attention_row_stride(*nk);
}

/* Rows nq .. T-1 of each of B sequences of a [B, T, ld] tensor of esize-byte elements as 0:
 * the rows a call with query rows nq skips (nq >= T: none). */
static void attn_zero_rows(void *x, size_t esize, int64_t B, int64_t T, int64_t nq, int64_t ld)
{
    for (int64_t b = 0; nq < T && b < B; b++)
        memset((char *)x + (size_t)((b * T + nq) * ld) * esize, 0, (size_t)((T - nq) * ld) * esize);
}

/* ------------------------------------------------------------ instances */

/* the float instance's fast exp and branch-free cap (fast_math.h), the double's libm exp */
#define KEXP KPICK(tr_fast_expf, exp)
#define KCAP(x, c) KPICK(tr_fast_capf(x, c), ((x) < (c) ? (x) : (c)))
#define KTILE KPICK(1, 0)
#define KERNEL_IMPL "cpu/attention.c"
#include "cpu/instantiate.h"

/* ------------------------------------------------------------ bf16 tensors */

/* Per thread after the float kernels' scratch: a head's q, k, v, dout, dq, dk, dv as f32 [T, D]. */
enum { ATTN_HALF_BUFS = 7 };

size_t tr_k_attention_bf16_scratch_elems(int64_t T, int64_t D, int nthreads)
{
    size_t td = (size_t)(T > 0 ? T : 0) * (size_t)(D > 0 ? D : 0);
    return tr_k_attention_scratch_elems(T, D, nthreads) + (size_t)(nthreads > 0 ? nthreads : 1) * ATTN_HALF_BUFS * td;
}

int tr_k_attention_bf16_usable(int64_t T, int64_t D, int use_dropout, int has_table, int64_t window)
{
    int plain = !has_table && !(window > 0 && window < T - 1);
    return !(plain && tr_attn_short_usable(tr_attn_tile_isa(), T, D, use_dropout));
}

/* dst[r D + j] (=) src[r ld + j] for rows r < n, j < D: a head's rows into a thread's f32 copy. */
TR_SIMD_CLONES static void rows_from_bf16(float *dst, const uint16_t *src, int64_t ld, int64_t n, int64_t D)
{
    for (int64_t r = 0; r < n; r++) {
        const uint16_t *s = src + r * ld;
        float *d = dst + r * D;
#pragma omp simd
        for (int64_t j = 0; j < D; j++) d[j] = tr_f32_from_bf16_bits(s[j]);
    }
}

/* dst[r ld + j] (=) src[r D + j] rounded to bf16: a head's f32 rows back into the tensor. */
TR_SIMD_CLONES static void rows_to_bf16(uint16_t *dst, int64_t ld, const float *src, int64_t n, int64_t D)
{
    for (int64_t r = 0; r < n; r++) {
        uint16_t *d = dst + r * ld;
        const float *s = src + r * D;
#pragma omp simd
        for (int64_t j = 0; j < D; j++) d[j] = tr_bf16_from_f32_bits(tr_f32_bits(s[j]));
    }
}

/* The thread's head copies (ATTN_HALF_BUFS of T x D floats) in a bf16 call's scratch. */
static float *half_bufs(float *scratch, int64_t T, int64_t D, int nthreads)
{
    return scratch + tr_k_attention_scratch_elems(T, D, nthreads) + (size_t)omp_thread() * ATTN_HALF_BUFS * T * D;
}

void tr_k_attention_fwd_bf16(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                             const void *mask, int mask_dtype, const tr_attn_dropout *drop,
                             const tr_attn_relpos *rel, float scale, int64_t B, int64_t T, int64_t H, int64_t D,
                             float *scratch, int nthreads)
{
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0) return;
    const attn_call_f32 a = attn_call_of_f32(tr_attn_tile_isa(), mask, mask_dtype, drop, rel, scale, B, T, H, D);
    const int64_t ld = H * D, nblk = query_blocks_f32(&a);
    const int64_t per_task = fwd_blocks_per_task_f32(&a, nthreads);
    const int64_t runs = (nblk + per_task - 1) / per_task, ntask = B * H * runs;
    int blas_prev = blas_single_begin();
#pragma omp parallel num_threads(nthreads)
    {
        attn_bufs_f32 u = attn_bufs_of_f32(scratch, T, D);
        if (a.bias) rel_buckets_f32(u.bk, a.bias, T);
        float *hq = half_bufs(scratch, T, D, nthreads), *hk = hq + T * D, *hv = hk + T * D, *ho = hv + T * D;
#pragma omp for schedule(dynamic)
        for (int64_t task = 0; task < ntask; task++) {
            int64_t bh = task / runs, b = bh / H, h = bh % H;
            int64_t blk0 = (task % runs) * per_task;
            int64_t blk1 = blk0 + per_task < nblk ? blk0 + per_task : nblk;
            int64_t i0 = blk0 * TR_ATTN_BLOCK, i1 = blk1 * TR_ATTN_BLOCK < a.nq ? blk1 * TR_ATTN_BLOCK : a.nq;
            int64_t row0 = (b * T * H + h) * D;
            rows_from_bf16(hk, k + row0, ld, T, D);
            rows_from_bf16(hv, v + row0, ld, T, D);
            rows_from_bf16(hq + i0 * D, q + row0 + i0 * ld, ld, i1 - i0, D);
            fwd_run_f32(&a, &u, ho, lse + bh * T, hq, hk, hv, D, b, h, blk0, blk1);
            rows_to_bf16(out + row0 + i0 * ld, ld, ho + i0 * D, i1 - i0, D);
        }
    }
    blas_single_end(blas_prev);
    attn_zero_rows(out, sizeof *out, B, T, a.nq, ld);
    skipped_rows_f32(&a, NULL, lse);
}

void tr_k_attention_bwd_bf16(uint16_t *dq, uint16_t *dk, uint16_t *dv, const uint16_t *dout, const uint16_t *q,
                             const uint16_t *k, const uint16_t *v, const float *lse, const void *mask, int mask_dtype,
                             const tr_attn_dropout *drop, const tr_attn_relpos *rel, float scale, int64_t B,
                             int64_t T, int64_t H, int64_t D, float *scratch, int nthreads)
{
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0) return;
    const attn_call_f32 a = attn_call_of_f32(tr_attn_tile_isa(), mask, mask_dtype, drop, rel, scale, B, T, H, D);
    const int64_t ld = H * D, td = T * D;
    int blas_prev = blas_single_begin();
#pragma omp parallel num_threads(nthreads)
    {
        attn_bufs_f32 u = attn_bufs_of_f32(scratch, T, D);
        if (a.bias) rel_buckets_f32(u.bk, a.bias, T);
        float *hq = half_bufs(scratch, T, D, nthreads), *hk = hq + td, *hv = hk + td, *hdo = hv + td;
        float *hdq = hdo + td, *hdk = hdq + td, *hdv = hdk + td;
#pragma omp for schedule(dynamic)
        for (int64_t bh = 0; bh < B * H; bh++) {
            int64_t b = bh / H, h = bh % H, row0 = (b * T * H + h) * D;
            rows_from_bf16(hq, q + row0, ld, a.nq, D);   /* rows past nq are not read */
            rows_from_bf16(hk, k + row0, ld, T, D);
            rows_from_bf16(hv, v + row0, ld, T, D);
            rows_from_bf16(hdo, dout + row0, ld, a.nq, D);
            bwd_head_f32(&a, &u, hdq, hdk, hdv, hdo, hq, hk, hv, lse + bh * T, D, b, h);
            rows_to_bf16(dq + row0, ld, hdq, T, D);
            rows_to_bf16(dk + row0, ld, hdk, T, D);
            rows_to_bf16(dv + row0, ld, hdv, T, D);
        }
    }
    blas_single_end(blas_prev);
    if (a.bias && a.bias->dtable) rel_reduce_f32(a.bias, scratch, B, T, H, D);
}

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body over REAL, instantiated for float and double.
 * Expects REAL, KFN(name), KGEMM (cblas_sgemm or cblas_dgemm), KEXP (exp for the type), KCAP
 * (min(x, cap), branch-free for float) and KTILE (1: the products may run on attn_tile.h's
 * micro-kernels, float only; 0: always GEMM, the double reference). Leading dimension of
 * every q/k/v/out row is H*D: row t of head h in batch b starts at ((b*T + t)*H + h)*D.
 *
 * Score rows have a stride Tp = T rounded up to TR_ATTN_ROW_ALIGN: the key columns T..Tp-1
 * are padding, -inf before the softmax and 0 after (as padded keys are), so every row loop
 * runs whole vectors even for T < 16; the products that read P or dS as A run over the T
 * real columns only. */

/* ------------------------------------------------------------ shared row steps */

/* ck[j] = 1 where key j of batch row b is kept, 0 where it is padded (mask 0) and for the
 * padding columns T <= j < Tp: the select row of the row steps, once per (b, h). */
static void KFN(col_keep)(REAL *ck, const void *mask, int mask_dtype, int64_t b, int64_t T,
                          int64_t Tp)
{
    for (int64_t j = 0; j < Tp; j++) ck[j] = j < T ? 1 : 0;
    if (!mask) return;
    if (mask_dtype == TR_F32) {
        const float *m = (const float *)mask + b * T;
        for (int64_t j = 0; j < T; j++) ck[j] = m[j] != 0 ? 1 : 0;
    } else {
        const int32_t *m = (const int32_t *)mask + b * T;
        for (int64_t j = 0; j < T; j++) ck[j] = m[j] != 0 ? 1 : 0;
    }
}

/* row[j] = fill where ck[j] is 0 (a padded key or a padding column), else unchanged. Inlined
 * into each clone of its callers (a call per row was a call per 16 scores at T = 16). */
TR_FAST_INLINE void KFN(mask_fill)(REAL *row, REAL fill, const REAL *ck, int64_t n)
{
#pragma omp simd
    for (int64_t j = 0; j < n; j++) row[j] = ck[j] != 0 ? row[j] : fill;
}

/* P[j] = exp(S[j] - lse) for kept keys, 0 for padded keys and padding columns (n = Tp), or
 * when lse is -inf. The exp of a padded key is computed and then replaced (branch-free, so
 * the loop vectorises); its argument is capped at 80 because a padded key's score may exceed
 * the row's lse, which only kept keys made (for kept keys the argument is <= ~0, so the cap
 * never acts). */
TR_SIMD_CLONES static void KFN(probs_from_lse)(REAL *P, const REAL *S, REAL lse, const REAL *ck,
                                               int64_t n)
{
    if (lse == -INFINITY) {
        for (int64_t j = 0; j < n; j++) P[j] = 0;
        return;
    }
#pragma omp simd
    for (int64_t j = 0; j < n; j++) {
        REAL x = S[j] - lse;
        P[j] = KEXP(KCAP(x, 80));
    }
    KFN(mask_fill)(P, 0, ck, n);
}

/* The row reductions: attn_tile.h's in registers for float, `omp simd` for the double
 * reference. */
static REAL KFN(row_max)(int isa, const REAL *x, int64_t n)
{
#if KTILE
    return tr_attn_row_max(isa, x, n);
#else
    (void)isa;
    REAL m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
#endif
}

/* sum of x[j] * y[j], or of x[j] when y is NULL */
static REAL KFN(row_dot)(int isa, const REAL *x, const REAL *y, int64_t n)
{
#if KTILE
    return y ? tr_attn_row_dot(isa, x, y, n) : tr_attn_row_sum(isa, x, n);
#else
    (void)isa;
    REAL s = 0;
    if (y) {
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < n; j++) s += x[j] * y[j];
    } else {
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < n; j++) s += x[j];
    }
    return s;
#endif
}

/* Rows [0, nb) of S (stride and length Tp) become exp(S - rowmax) in place, with one exp per
 * score, NOT normalised: inv_out[r] = 1 / the row's sum, which the caller applies to the
 * row's 1 x D output instead of its Tp probabilities; lse_out[r] = the row's log-sum-exp.
 * A row whose keys are all padded becomes zeros, with lse -inf and inv 0. */
TR_SIMD_CLONES static void KFN(softmax_block)(REAL *S, REAL *lse_out, REAL *inv_out, int64_t nb,
                                              int64_t Tp, const REAL *ck, int isa)
{
    for (int64_t r = 0; r < nb; r++) {
        REAL *Sr = S + r * Tp;
        KFN(mask_fill)(Sr, -INFINITY, ck, Tp);
        REAL mx = KFN(row_max)(isa, Sr, Tp);
        REAL row_lse = -INFINITY, inv = 0;
        if (mx == -INFINITY) {
            for (int64_t j = 0; j < Tp; j++) Sr[j] = 0;
        } else {
#pragma omp simd
            for (int64_t j = 0; j < Tp; j++) Sr[j] = KEXP(Sr[j] - mx);    /* exp(-inf) = 0 for padded keys */
            REAL sum = KFN(row_dot)(isa, Sr, NULL, Tp);
            inv = 1 / sum;
            /* cppcheck-suppress invalidFunctionArg ; sum >= 1: the row's maximum contributes exp(0) */
            row_lse = mx + log(sum);
        }
        lse_out[r] = row_lse;
        inv_out[r] = inv;
    }
}

/* KFN(dropout_span): the keep mask applied to a span of scores or their gradients. */
#include "cpu/dropout_span.h"

/* The softmax backward of rows [0, nb) (stride and length Tp): P[r] = P[r] * (G[r] -
 * <P[r], G[r]>), G = dP. Padding columns have P = 0 and G = 0 and stay 0. */
TR_SIMD_CLONES static void KFN(dsoftmax_block)(REAL *P, const REAL *G, int64_t nb, int64_t Tp, int isa)
{
    for (int64_t r = 0; r < nb; r++) {
        REAL *Pr = P + r * Tp;
        const REAL *Gr = G + r * Tp;
        REAL dot = KFN(row_dot)(isa, Pr, Gr, Tp);
#pragma omp simd
        for (int64_t j = 0; j < Tp; j++) Pr[j] = Pr[j] * (Gr[j] - dot);
    }
}

/* ------------------------------------------------------------ the products */

/* S[nb, Tp] (=) alpha * A B^T over D: A is q's or dout's block (stride lda), B the head's k
 * or v ([T, D], stride ldb) and Bt its packed transpose [D, Tp] with zero padding columns
 * (tile paths only). The GEMM path writes the T real columns; the padding columns are then
 * whatever the row steps left there (the callers select them away or keep them 0). */
static void KFN(scores)(int isa, REAL *S, int64_t Tp, const REAL *A, int64_t lda, const REAL *B,
                        int64_t ldb, const REAL *Bt, int64_t nb, int64_t T, int64_t D, REAL alpha)
{
#if KTILE
    if (isa != TR_ATTN_ISA_BLAS) {
        tr_attn_tile_gemm(isa, 0, S, Tp, A, lda, Bt, Tp, nb, Tp, D, alpha, NULL, 0);
        return;
    }
#endif
    (void)isa; (void)Bt;
    KGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nb, (int)T, (int)D, alpha, A, (int)lda, B,
          (int)ldb, 0, S, (int)Tp);
}

/* C[M, N] (=, or += when accumulate) alpha * rs[i] * op(A) B, op(A)(i, k) = A[i*lda + k] or
 * (trans_a) A[k*lda + i]; rs NULL = 1, and rs only with accumulate 0. */
static void KFN(product)(int isa, int trans_a, REAL *C, int64_t ldc, const REAL *A, int64_t lda,
                         const REAL *B, int64_t ldb, int64_t M, int64_t N, int64_t K, REAL alpha,
                         const REAL *rs, int accumulate)
{
#if KTILE
    if (isa != TR_ATTN_ISA_BLAS) {
        tr_attn_tile_gemm(isa, trans_a, C, ldc, A, lda, B, ldb, M, N, K, alpha, rs, accumulate);
        return;
    }
#endif
    (void)isa;
    KGEMM(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K,
          alpha, A, (int)lda, B, (int)ldb, accumulate ? 1 : 0, C, (int)ldc);
    if (rs)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] *= rs[i];
}

/* S[nb, nkp] (=) alpha * A B^T for the window's keys [j0, j0 + nk): the scores of a windowed
 * block. The tile paths read the head's packed Bt ([D, Tp]) from column j0 on, nkp columns:
 * past key T - 1 that runs into the next packed row (or, from the last, the scratch buffer
 * after it), finite values in columns nk..nkp-1, which the callers overwrite (win_fill,
 * win_zero_tail). The GEMM path writes the nk real columns. */
static void KFN(win_scores)(int isa, REAL *S, int64_t nkp, const REAL *A, int64_t lda, const REAL *B,
                            int64_t ldb, const REAL *Bt, int64_t Tp, int64_t j0, int64_t nb, int64_t nk,
                            int64_t D, REAL alpha)
{
#if KTILE
    if (isa != TR_ATTN_ISA_BLAS) {
        tr_attn_tile_gemm(isa, 0, S, nkp, A, lda, Bt + j0, Tp, nb, nkp, D, alpha, NULL, 0);
        return;
    }
#endif
    (void)isa; (void)Bt; (void)Tp;
    KGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nb, (int)nk, (int)D, alpha, A, (int)lda, B + j0 * ldb,
          (int)ldb, 0, S, (int)nkp);
}

/* The packed transpose of a head's k or v, for the tile paths' score products. */
static void KFN(pack_t)(int isa, REAL *dst, const REAL *src, int64_t ld, int64_t T, int64_t D,
                        int64_t Tp)
{
#if KTILE
    if (isa != TR_ATTN_ISA_BLAS) tr_attn_tile_pack_t(dst, Tp, src, ld, T, D);
#else
    (void)dst; (void)src; (void)ld; (void)T; (void)D; (void)Tp;
#endif
    (void)isa;
}

/* ------------------------------------------------------------ per-thread scratch */

typedef struct KFN(attn_bufs) {
    REAL *S, *G;        /* [BLOCK, Tp] scores / probabilities and dP / dropped P */
    uint32_t *keep;     /* [BLOCK, Tp] the block's keep masks, 0 in the padding columns */
    REAL *kt, *vt;      /* [D, Tp] packed k^T and v^T of the current head (tile paths) */
    REAL *ck;           /* [Tp] the current batch row's key selects (col_keep) */
    REAL *rs;           /* [BLOCK] output row scales (forward) */
    REAL *rb;           /* [2T - 1] the head's bias of relative position j - i, at j - i + T - 1 */
    REAL *bk;           /* [2T - 1] the bucket of relative position j - i, at j - i + T - 1 (rel_buckets) */
} KFN(attn_bufs);

/* The thread's part of the scratch, zeroed once per call: the GEMM path never writes the
 * padding columns of G, which the row steps read (as 0). */
static KFN(attn_bufs) KFN(attn_bufs_of)(REAL *scratch, int64_t T, int64_t D)
{
    int64_t Tp = tr_k_attention_row_stride(T);
    size_t per = tr_k_attention_scratch_elems(T, D, 1);
    REAL *base = scratch + (size_t)omp_thread() * per;
    memset(base, 0, per * sizeof *base);
    KFN(attn_bufs) u;
    u.S = base;
    u.G = u.S + TR_ATTN_BLOCK * Tp;
    /* cppcheck-suppress invalidPointerCast ; the third buffer holds the block's keep masks */
    u.keep = (uint32_t *)(u.G + TR_ATTN_BLOCK * Tp);
    u.kt = u.G + 2 * TR_ATTN_BLOCK * Tp;
    u.vt = u.kt + D * Tp;
    u.ck = u.vt + D * Tp;
    u.rs = u.ck + Tp;
    u.rb = u.rs + TR_ATTN_BLOCK;
    u.bk = u.rb + 2 * Tp;
    return u;
}

/* ------------------------------------------------------------ relative-position bias */

/* bk[d] (=) the bucket of relative position d - (T - 1), d in [0, 2T - 1), as REAL (exact: a
 * bucket is a small integer): once per thread and call, since each takes two logs and a call
 * has B H heads. */
static void KFN(rel_buckets)(REAL *bk, const tr_attn_relpos *rel, int64_t T)
{
    for (int64_t d = 0; d < 2 * T - 1; d++)
        bk[d] = (REAL)tr_attn_rel_bucket(d - (T - 1), rel->nbuckets, rel->max_distance, rel->bidirectional);
}

/* rb[d] (=) = the table's bias of head h for relative position d - (T - 1), d in [0, 2T - 1),
 * through the buckets bk (rel_buckets). */
static void KFN(rel_row)(REAL *rb, const tr_attn_relpos *rel, const REAL *bk, int64_t h, int64_t H, int64_t T)
{
    const REAL *table = rel->table;
    for (int64_t d = 0; d < 2 * T - 1; d++) rb[d] = table[(int64_t)bk[d] * H + h];
}

/* Rows [0, nb) of a block of queries from i0 gain their biases: S[r][j] += rb[j - i + T - 1]
 * for the T real columns (the padding columns are masked after). */
static void KFN(rel_add)(REAL *S, int64_t Tp, const REAL *rb, int64_t i0, int64_t nb, int64_t T)
{
    for (int64_t r = 0; r < nb; r++) {
        REAL *Sr = S + r * Tp;
        const REAL *br = rb + (T - 1 - (i0 + r));
#pragma omp simd
        for (int64_t j = 0; j < T; j++) Sr[j] += br[j];
    }
}

/* dd[j - i + T - 1] (+=) the scores' gradient dS[r][j] of rows [0, nb) from query i0. */
static void KFN(rel_grad)(REAL *dd, const REAL *dS, int64_t Tp, int64_t i0, int64_t nb, int64_t T)
{
    for (int64_t r = 0; r < nb; r++) {
        const REAL *Gr = dS + r * Tp;
        REAL *dr = dd + (T - 1 - (i0 + r));
#pragma omp simd
        for (int64_t j = 0; j < T; j++) dr[j] += Gr[j];
    }
}

/* The table's gradient (+=) from the per-(b, h) sums by relative position, in one order: by
 * head, then batch element, then relative position. After the call's parallel region, on the
 * first thread's scratch for the buckets. */
static void KFN(rel_reduce)(const tr_attn_relpos *rel, REAL *scratch, int64_t B, int64_t T, int64_t H, int64_t D)
{
    REAL *dtable = rel->dtable;
    const REAL *dist = rel->dist;
    const int64_t nd = 2 * T - 1;
    KFN(attn_bufs) u = KFN(attn_bufs_of)(scratch, T, D);
    KFN(rel_buckets)(u.bk, rel, T);
    for (int64_t h = 0; h < H; h++)
        for (int64_t b = 0; b < B; b++) {
            const REAL *dd = dist + (b * H + h) * nd;
            for (int64_t d = 0; d < nd; d++) dtable[(int64_t)u.bk[d] * H + h] += dd[d];
        }
}

/* ------------------------------------------------------------ window */

/* Rows [0, nb) of a windowed block (stride nkp; column c is key j0 + c, c < nk real): fill where
 * the key is outside query i0 + r's window, padded (ck) or a padding column. */
static void KFN(win_fill)(REAL *S, int64_t nkp, const REAL *ck, int64_t i0, int64_t nb, int64_t j0, int64_t nk,
                          int64_t w, REAL fill)
{
    for (int64_t r = 0; r < nb; r++) {
        REAL *Sr = S + r * nkp;
        int64_t lo = i0 + r - w - j0, hi = i0 + r + w + 1 - j0;
        if (lo < 0) lo = 0;
        if (hi > nk) hi = nk;
        /* three runs: before the window, the window (its padded keys), after it */
        for (int64_t c = 0; c < lo; c++) Sr[c] = fill;
        if (hi > lo) KFN(mask_fill)(Sr + lo, fill, ck + j0 + lo, hi - lo);
        for (int64_t c = hi > lo ? hi : lo; c < nkp; c++) Sr[c] = fill;
    }
}

/* Columns [nk, nkp) of rows [0, nb) (stride nkp) set to 0: what a product over nk columns left there. */
static void KFN(win_zero_tail)(REAL *G, int64_t nkp, int64_t nb, int64_t nk)
{
    for (int64_t r = 0; r < nb; r++)
        for (int64_t c = nk; c < nkp; c++) G[r * nkp + c] = 0;
}

/* ------------------------------------------------------------ forward */

/* What every task of a call shares: the product path, the mask, dropout, bias and window,
 * the sizes (Tp the score rows' stride) and the scales. */
typedef struct KFN(attn_call) {
    int isa;
    const void *mask;
    int mask_dtype;
    const tr_attn_dropout *drop;   /* NULL: no dropout */
    const tr_attn_relpos *bias;    /* NULL: no relative-position table */
    int64_t win;                   /* 0: every key */
    REAL scale, keep_scale;
    int64_t B, T, H, D, Tp;
    int64_t nq;                    /* the query rows computed: T, or rel->query_rows */
} KFN(attn_call);

/* The call's constants from the entry point's arguments; isa falls back to BLAS where the tile
 * paths cannot run. */
static KFN(attn_call) KFN(attn_call_of)(int isa, const void *mask, int mask_dtype, const tr_attn_dropout *drop,
                                        const tr_attn_relpos *rel, REAL scale, int64_t B, int64_t T, int64_t H,
                                        int64_t D)
{
    KFN(attn_call) a;
    a.isa = !KTILE || !tr_attn_tile_usable(isa) ? TR_ATTN_ISA_BLAS : isa;
    a.mask = mask;
    a.mask_dtype = mask_dtype;
    a.drop = drop && drop->p > 0 ? drop : NULL;
    /* bias: a relative-position table; win: a window narrower than the keys (w >= T - 1 sees them all) */
    a.bias = rel && rel->table ? rel : NULL;
    a.win = rel && rel->window > 0 && rel->window < T - 1 ? rel->window : 0;
    a.scale = scale;
    a.keep_scale = a.drop ? (REAL)1 / (1 - (REAL)drop->p) : 1;
    a.B = B, a.T = T, a.H = H, a.D = D, a.Tp = tr_k_attention_row_stride(T);
    a.nq = rel && rel->query_rows > 0 && rel->query_rows < T ? rel->query_rows : T;
    return a;
}

/* Query blocks [blk0, blk1) of head h of batch row b (bh = b H + h): q, k, v and out point at
 * the head's row 0, rows ld apart (H D in the tensors, D in a thread's converted copy); lse at
 * the head's T values. */
static void KFN(fwd_run)(const KFN(attn_call) *a, KFN(attn_bufs) *u, REAL *out, REAL *lse, const REAL *q,
                         const REAL *k, const REAL *v, int64_t ld, int64_t b, int64_t h, int64_t blk0, int64_t blk1)
{
    const int isa = a->isa;
    const int64_t T = a->T, Tp = a->Tp, D = a->D, bh = b * a->H + h, win = a->win;
    KFN(pack_t)(isa, u->kt, k, ld, T, D, Tp);
    KFN(col_keep)(u->ck, a->mask, a->mask_dtype, b, T, Tp);
    if (a->bias) KFN(rel_row)(u->rb, a->bias, u->bk, h, a->H, T);
    if (win)   /* the windowed blocks' select row: win_fill did the masking */
        for (int64_t j = 0; j < Tp; j++) u->rb[j] = 1;
    for (int64_t blk = blk0; blk < blk1; blk++) {
        int64_t i0 = blk * TR_ATTN_BLOCK;
        int64_t full = T - i0 < TR_ATTN_BLOCK ? T - i0 : TR_ATTN_BLOCK;   /* the block's rows in a full call */
        int64_t nb = a->nq - i0 < full ? a->nq - i0 : full;
        const REAL *qb = q + i0 * ld;
        if (win) {
            int64_t j0, nk, nkp;
            attn_win_range(i0, full, win, T, &j0, &nk, &nkp);
            KFN(win_scores)(isa, u->S, nkp, qb, ld, k, ld, u->kt, Tp, j0, nb, nk, D, a->scale);
            KFN(win_fill)(u->S, nkp, u->ck, i0, nb, j0, nk, win, -INFINITY);
            KFN(softmax_block)(u->S, lse + i0, u->rs, nb, nkp, u->rb, isa);
            if (a->drop) {   /* whole rows drawn, the window's columns applied */
                attn_keep_block(u->keep, a->drop, nb, T, Tp, (uint64_t)((bh * T + i0) * T));
                for (int64_t r = 0; r < nb; r++)
                    KFN(dropout_span)(u->S + r * nkp, u->S + r * nkp, u->keep + r * Tp + j0, 1, nk);
                for (int64_t r = 0; r < nb; r++) u->rs[r] *= a->keep_scale;
            }
            KFN(product)(isa, 0, out + i0 * ld, ld, u->S, nkp, v + j0 * ld, ld, nb, D, nk, 1, u->rs, 0);
            continue;
        }
        KFN(scores)(isa, u->S, Tp, qb, ld, k, ld, u->kt, nb, T, D, a->scale);
        if (a->bias) KFN(rel_add)(u->S, Tp, u->rb, i0, nb, T);
        KFN(softmax_block)(u->S, lse + i0, u->rs, nb, Tp, u->ck, isa);
        if (a->drop) {   /* the block's rows are consecutive in the stream: one draw */
            attn_keep_block(u->keep, a->drop, nb, T, Tp, (uint64_t)((bh * T + i0) * T));
            KFN(dropout_span)(u->S, u->S, u->keep, 1, nb * Tp);
            for (int64_t r = 0; r < nb; r++) u->rs[r] *= a->keep_scale;
        }
        /* out = diag(1/rowsum) (P v): the normalisation on 1 x D rows, not on P */
        KFN(product)(isa, 0, out + i0 * ld, ld, u->S, Tp, v, ld, nb, D, T, 1, u->rs, 0);
    }
}

/* The query blocks of a head that hold computed rows. */
static int64_t KFN(query_blocks)(const KFN(attn_call) *a)
{
    return (a->nq + TR_ATTN_BLOCK - 1) / TR_ATTN_BLOCK;
}

/* The forward's rows nq .. T-1 of every head as rows with no keys: out 0 and lse -inf (either
 * NULL: not written). */
static void KFN(skipped_rows)(const KFN(attn_call) *a, REAL *out, REAL *lse)
{
    const int64_t T = a->T, nq = a->nq;
    if (out) attn_zero_rows(out, sizeof *out, a->B, T, nq, a->H * a->D);
    for (int64_t bh = 0; lse && nq < T && bh < a->B * a->H; bh++)
        for (int64_t t = nq; t < T; t++) lse[bh * T + t] = -INFINITY;
}

/* A task is a run of query blocks of one head, so that k^T is packed once per run: the whole
 * head when there are heads enough for every thread, else single blocks. */
static int64_t KFN(fwd_blocks_per_task)(const KFN(attn_call) *a, int nthreads)
{
    const int64_t nblk = KFN(query_blocks)(a);
    return a->B * a->H >= 4 * (int64_t)(nthreads > 0 ? nthreads : 1) ? nblk : 1;
}

static void KFN(attn_fwd)(int isa, REAL *out, REAL *lse, const REAL *q, const REAL *k,
                          const REAL *v, const void *mask, int mask_dtype,
                          const tr_attn_dropout *drop, const tr_attn_relpos *rel, REAL scale,
                          int64_t B, int64_t T, int64_t H, int64_t D, REAL *scratch, int nthreads)
{
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0) return;
    const KFN(attn_call) a = KFN(attn_call_of)(isa, mask, mask_dtype, drop, rel, scale, B, T, H, D);
#if KTILE
    /* short rows (T <= 32 on AVX-512, 8 on AVX2), heads of 32 or 64, no dropout: a head in
     * registers (attn_short.h) */
    if (!a.bias && !a.win && tr_attn_short_usable(a.isa, T, D, a.drop != NULL)) {
        /* every row (a few dozen), then the skipped ones cleared: the full call's bits */
        tr_attn_short_fwd_f32(a.isa, out, lse, q, k, v, mask, mask_dtype, scale, B, T, H, D, nthreads);
        KFN(skipped_rows)(&a, out, lse);
        return;
    }
#endif
    const int64_t ld = H * D, nblk = KFN(query_blocks)(&a);
    const int64_t per_task = KFN(fwd_blocks_per_task)(&a, nthreads);
    const int64_t runs = (nblk + per_task - 1) / per_task, ntask = B * H * runs;
    int blas_prev = blas_single_begin();
#pragma omp parallel num_threads(nthreads)
    {
        KFN(attn_bufs) u = KFN(attn_bufs_of)(scratch, T, D);
        if (a.bias) KFN(rel_buckets)(u.bk, a.bias, T);
#pragma omp for schedule(dynamic)
        for (int64_t task = 0; task < ntask; task++) {
            int64_t bh = task / runs, b = bh / H, h = bh % H;
            int64_t blk0 = (task % runs) * per_task;
            int64_t blk1 = blk0 + per_task < nblk ? blk0 + per_task : nblk;
            int64_t row0 = (b * T * H + h) * D;
            KFN(fwd_run)(&a, &u, out + row0, lse + bh * T, q + row0, k + row0, v + row0, ld, b, h, blk0, blk1);
        }
    }
    blas_single_end(blas_prev);
    KFN(skipped_rows)(&a, out, lse);
}

/* ------------------------------------------------------------ backward */

/* The backward of head h of batch row b: dq, dk, dv (all overwritten), dout, q, k, v point at
 * the head's row 0, rows ld apart; lse at the head's T values. dk and dv of a head are sums over
 * all its query blocks, and only this call writes them (the first block overwrites, the others
 * add). */
static void KFN(bwd_head)(const KFN(attn_call) *a, KFN(attn_bufs) *u, REAL *dq, REAL *dk, REAL *dv,
                          const REAL *dout, const REAL *q, const REAL *k, const REAL *v, const REAL *lse, int64_t ld,
                          int64_t b, int64_t h)
{
    const int isa = a->isa;
    const int64_t T = a->T, Tp = a->Tp, D = a->D, bh = b * a->H + h, win = a->win;
    const REAL scale = a->scale, keep_scale = a->keep_scale;
    const tr_attn_relpos *bias = a->bias;
    const tr_attn_dropout *drop = a->drop;
    REAL *P = u->S, *G = u->G;
    KFN(pack_t)(isa, u->kt, k, ld, T, D, Tp);
    KFN(pack_t)(isa, u->vt, v, ld, T, D, Tp);
    KFN(col_keep)(u->ck, a->mask, a->mask_dtype, b, T, Tp);
    REAL *dd = bias && bias->dtable ? (REAL *)bias->dist + bh * (2 * T - 1) : NULL;
    if (bias) KFN(rel_row)(u->rb, bias, u->bk, h, a->H, T);
    if (dd) memset(dd, 0, (size_t)(2 * T - 1) * sizeof *dd);
    if (win) {   /* each block adds into its key range's rows */
        for (int64_t j = 0; j < Tp; j++) u->rb[j] = 1;
        for (int64_t t = 0; t < T; t++) {
            memset(dk + t * ld, 0, (size_t)D * sizeof *dk);
            memset(dv + t * ld, 0, (size_t)D * sizeof *dv);
        }
    }
    for (int64_t i0 = 0; i0 < a->nq; i0 += TR_ATTN_BLOCK) {
        int64_t full = T - i0 < TR_ATTN_BLOCK ? T - i0 : TR_ATTN_BLOCK;   /* the block's rows in a full call */
        int64_t nb = a->nq - i0 < full ? a->nq - i0 : full;
        int acc = i0 > 0;
        const REAL *qb = q + i0 * ld, *dob = dout + i0 * ld;
        if (win) {
            int64_t j0, nk, nkp;
            attn_win_range(i0, full, win, T, &j0, &nk, &nkp);
            const REAL *kw = k + j0 * ld;
            KFN(win_scores)(isa, P, nkp, qb, ld, k, ld, u->kt, Tp, j0, nb, nk, D, scale);
            KFN(win_fill)(P, nkp, u->ck, i0, nb, j0, nk, win, -INFINITY);
            for (int64_t r = 0; r < nb; r++) KFN(probs_from_lse)(P + r * nkp, P + r * nkp, lse[i0 + r], u->rb, nkp);
            const REAL *Pd = P;
            if (drop) {
                attn_keep_block(u->keep, drop, nb, T, Tp, (uint64_t)((bh * T + i0) * T));
                for (int64_t r = 0; r < nb; r++)
                    KFN(dropout_span)(G + r * nkp, P + r * nkp, u->keep + r * Tp + j0, keep_scale, nk);
                Pd = G;
            }
            KFN(product)(isa, 1, dv + j0 * ld, ld, Pd, nkp, dob, ld, nk, D, nb, 1, NULL, 1);
            KFN(win_scores)(isa, G, nkp, dob, ld, v, ld, u->vt, Tp, j0, nb, nk, D, 1);
            KFN(win_zero_tail)(G, nkp, nb, nk);
            if (drop)
                for (int64_t r = 0; r < nb; r++)
                    KFN(dropout_span)(G + r * nkp, G + r * nkp, u->keep + r * Tp + j0, keep_scale, nk);
            KFN(dsoftmax_block)(P, G, nb, nkp, isa);
            KFN(product)(isa, 0, dq + i0 * ld, ld, P, nkp, kw, ld, nb, D, nk, scale, NULL, 0);
            KFN(product)(isa, 1, dk + j0 * ld, ld, P, nkp, qb, ld, nk, D, nb, scale, NULL, 1);
            continue;
        }
        /* P = softmax probabilities (before dropout) of the block, from lse */
        KFN(scores)(isa, P, Tp, qb, ld, k, ld, u->kt, nb, T, D, scale);
        if (bias) KFN(rel_add)(P, Tp, u->rb, i0, nb, T);
        for (int64_t r = 0; r < nb; r++) KFN(probs_from_lse)(P + r * Tp, P + r * Tp, lse[i0 + r], u->ck, Tp);
        /* dv (+)= Pd^T dout, Pd the dropped-out probabilities (built in G) */
        const REAL *Pd = P;
        if (drop) {
            attn_keep_block(u->keep, drop, nb, T, Tp, (uint64_t)((bh * T + i0) * T));
            KFN(dropout_span)(G, P, u->keep, keep_scale, nb * Tp);
            Pd = G;
        }
        KFN(product)(isa, 1, dv, ld, Pd, Tp, dob, ld, T, D, nb, 1, NULL, acc);
        /* G = dPd = dout v^T; dP = dPd * keep / (1-p); dS = P (dP - rowsum(P dP)) */
        KFN(scores)(isa, G, Tp, dob, ld, v, ld, u->vt, nb, T, D, 1);
        if (drop) KFN(dropout_span)(G, G, u->keep, keep_scale, nb * Tp);
        KFN(dsoftmax_block)(P, G, nb, Tp, isa);
        if (dd) KFN(rel_grad)(dd, P, Tp, i0, nb, T);
        /* dq = scale dS k; dk (+)= scale dS^T q */
        KFN(product)(isa, 0, dq + i0 * ld, ld, P, Tp, k, ld, nb, D, T, scale, NULL, 0);
        KFN(product)(isa, 1, dk, ld, P, Tp, qb, ld, T, D, nb, scale, NULL, acc);
    }
    for (int64_t t = a->nq; t < T; t++) memset(dq + t * ld, 0, (size_t)D * sizeof *dq);
}

static void KFN(attn_bwd)(int isa, REAL *dq, REAL *dk, REAL *dv, const REAL *dout,
                          const REAL *q, const REAL *k, const REAL *v, const REAL *lse,
                          const void *mask, int mask_dtype, const tr_attn_dropout *drop,
                          const tr_attn_relpos *rel, REAL scale, int64_t B, int64_t T, int64_t H,
                          int64_t D, REAL *scratch, int nthreads)
{
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0) return;
    const KFN(attn_call) a = KFN(attn_call_of)(isa, mask, mask_dtype, drop, rel, scale, B, T, H, D);
    const int64_t ld = H * D;
    /* one task per (b, h): a head's dk and dv are its task's alone */
    int blas_prev = blas_single_begin();
#pragma omp parallel num_threads(nthreads)
    {
        KFN(attn_bufs) u = KFN(attn_bufs_of)(scratch, T, D);
        if (a.bias) KFN(rel_buckets)(u.bk, a.bias, T);
#pragma omp for schedule(dynamic)
        for (int64_t bh = 0; bh < B * H; bh++) {
            int64_t b = bh / H, h = bh % H, row0 = (b * T * H + h) * D;
            KFN(bwd_head)(&a, &u, dq + row0, dk + row0, dv + row0, dout + row0, q + row0, k + row0, v + row0,
                          lse + bh * T, ld, b, h);
        }
    }
    blas_single_end(blas_prev);
    if (a.bias && a.bias->dtable) KFN(rel_reduce)(a.bias, scratch, B, T, H, D);
}

/* ------------------------------------------------------------ entry points */

void KFN(tr_k_attention_fwd_isa)(int isa, REAL *out, REAL *lse, const REAL *q, const REAL *k,
                                 const REAL *v, const void *mask, int mask_dtype,
                                 const tr_attn_dropout *drop, REAL scale, int64_t B, int64_t T,
                                 int64_t H, int64_t D, REAL *scratch, int nthreads)
{
    KFN(attn_fwd)(isa, out, lse, q, k, v, mask, mask_dtype, drop, NULL, scale, B, T, H, D, scratch, nthreads);
}

void KFN(tr_k_attention_bwd_isa)(int isa, REAL *dq, REAL *dk, REAL *dv, const REAL *dout,
                                 const REAL *q, const REAL *k, const REAL *v, const REAL *lse,
                                 const void *mask, int mask_dtype, const tr_attn_dropout *drop,
                                 REAL scale, int64_t B, int64_t T, int64_t H, int64_t D,
                                 REAL *scratch, int nthreads)
{
    KFN(attn_bwd)(isa, dq, dk, dv, dout, q, k, v, lse, mask, mask_dtype, drop, NULL, scale, B, T, H, D, scratch,
                  nthreads);
}

void KFN(tr_k_attention_fwd_rel)(REAL *out, REAL *lse, const REAL *q, const REAL *k, const REAL *v,
                                 const void *mask, int mask_dtype, const tr_attn_dropout *drop,
                                 const tr_attn_relpos *rel, REAL scale, int64_t B, int64_t T, int64_t H,
                                 int64_t D, REAL *scratch, int nthreads)
{
    KFN(attn_fwd)(KTILE ? tr_attn_tile_isa() : TR_ATTN_ISA_BLAS, out, lse, q, k, v, mask, mask_dtype, drop, rel,
                  scale, B, T, H, D, scratch, nthreads);
}

void KFN(tr_k_attention_bwd_rel)(REAL *dq, REAL *dk, REAL *dv, const REAL *dout, const REAL *q,
                                 const REAL *k, const REAL *v, const REAL *lse, const void *mask,
                                 int mask_dtype, const tr_attn_dropout *drop, const tr_attn_relpos *rel,
                                 REAL scale, int64_t B, int64_t T, int64_t H, int64_t D, REAL *scratch,
                                 int nthreads)
{
    KFN(attn_bwd)(KTILE ? tr_attn_tile_isa() : TR_ATTN_ISA_BLAS, dq, dk, dv, dout, q, k, v, lse, mask, mask_dtype,
                  drop, rel, scale, B, T, H, D, scratch, nthreads);
}

void KFN(tr_k_attention_fwd)(REAL *out, REAL *lse, const REAL *q, const REAL *k,
                               const REAL *v, const void *mask, int mask_dtype,
                               const tr_attn_dropout *drop, REAL scale, int64_t B, int64_t T,
                               int64_t H, int64_t D, REAL *scratch, int nthreads)
{
    KFN(tr_k_attention_fwd_isa)(KTILE ? tr_attn_tile_isa() : TR_ATTN_ISA_BLAS, out, lse, q, k, v, mask,
                           mask_dtype, drop, scale, B, T, H, D, scratch, nthreads);
}

void KFN(tr_k_attention_bwd)(REAL *dq, REAL *dk, REAL *dv, const REAL *dout,
                                const REAL *q, const REAL *k, const REAL *v,
                                const REAL *lse, const void *mask, int mask_dtype,
                                const tr_attn_dropout *drop, REAL scale, int64_t B, int64_t T,
                                int64_t H, int64_t D, REAL *scratch, int nthreads)
{
    KFN(tr_k_attention_bwd_isa)(KTILE ? tr_attn_tile_isa() : TR_ATTN_ISA_BLAS, dq, dk, dv, dout, q, k,
                           v, lse, mask, mask_dtype, drop, scale, B, T, H, D, scratch, nthreads);
}

#endif
